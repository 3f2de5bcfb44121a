# frozen_string_literal: true

module PumaPlus
  module Wire
    # Raised by the codec for a frame that breaks docs/PROTOCOL.md. The receiver logs the
    # message and closes that connection. `reason` is the corpus error class:
    # :reserved, :unknown_type, :too_large, :length_mismatch (or :truncated, which the
    # codec itself never raises: a short input is "need more").
    class ProtocolError < StandardError
      attr_reader :reason

      def initialize(reason, message)
        @reason = reason
        super("#{reason}: #{message}")
      end
    end
  end
end
