# frozen_string_literal: true

module PumaPlus
  # rack.input of a request whose body the server spooled (REQUEST flag BODY_FILE,
  # docs/RACK.md "rack.input"): the anonymous file whose descriptor came with the REQUEST,
  # opened "rb". A File in every respect but one: read(length, buffer) leaves the buffer
  # binary, as StringIO and StreamInput do (IO#read keeps the buffer's own encoding), so an app
  # sees the same rack.input whatever the body's size.
  class SpooledInput < File
    def read(length = nil, outbuf = nil)
      data = super
      outbuf&.force_encoding(Encoding::BINARY)
      data
    end
  end
end
