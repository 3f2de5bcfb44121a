# frozen_string_literal: true

module PumaPlus
  # Turns a Rack response's status and headers into what RESPONSE_HEAD carries (docs/RACK.md).
  module Response
    INTERNAL_ERROR_HEADERS = ["content-type", "text/plain", "content-length", "22"].freeze
    INTERNAL_ERROR_BODY = "Internal Server Error\n"

    module_function

    # Returns the status as an Integer in 100..999, or raises ArgumentError.
    def status_code(status)
      code = status.is_a?(Integer) ? status : Integer(status) # the common case without Integer()
      raise ArgumentError, "status #{status.inspect} is not in 100..999" unless code >= 100 && code <= 999

      code
    end

    REASONS = {
      100 => "Continue", 101 => "Switching Protocols", 200 => "OK", 204 => "No Content",
      400 => "Bad Request", 404 => "Not Found", 426 => "Upgrade Required",
      500 => "Internal Server Error"
    }.freeze

    # The HTTP/1.1 status line and header block a response hijack writes on the client socket
    # itself (the server never sees this head). Header lines with CR, LF or NUL in the name
    # or value, or a name that is not a token, are dropped, so the app cannot split the head.
    def raw_head(code, flat)
      reason = (defined?(::Rack::Utils::HTTP_STATUS_CODES) && ::Rack::Utils::HTTP_STATUS_CODES[code]) ||
               REASONS.fetch(code, "Status #{code}")
      head = +"HTTP/1.1 #{code} #{reason}\r\n"
      flat.each_slice(2) do |key, value|
        value = value.delete_suffix("\r") # "\r\n" joins Rack 2 values too, as the server reads them
        next unless key.match?(/\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+\z/) && !value.match?(/[\r\n\0]/)

        head << key << ": " << value << "\r\n"
      end
      head << "\r\n"
      head.b
    end

    # Flattens Rack headers into [key, value, key, value, ...]. A Rack 3 Array value and a
    # Rack 2 "\n"-joined value both become repeated pairs with the same key, in order. Keys
    # starting with "rack." are for the server, never sent (Rack SPEC).
    def flatten_headers(headers)
      flat = []
      headers.each do |key, value|
        key = key.to_s
        next if key.start_with?("rack.")

        case value
        when String
          if value.include?("\n")
            value.split("\n").each { |v| flat << key << v }
          else
            flat << key << value
          end
        when Array
          value.each { |v| flat << key << v.to_s }
        when nil
          next
        else
          flat << key << value.to_s
        end
      end
      flat
    end
  end
end
