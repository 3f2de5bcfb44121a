# frozen_string_literal: true

module PumaPlus
  # Turns a Rack response's status and headers into what RESPONSE_HEAD carries (docs/RACK.md).
  module Response
    INTERNAL_ERROR_HEADERS = ["content-type", "text/plain", "content-length", "22"].freeze
    INTERNAL_ERROR_BODY = "Internal Server Error\n"

    module_function

    # Returns the status as an Integer in 100..999, or raises ArgumentError.
    def status_code(status)
      code = Integer(status)
      raise ArgumentError, "status #{status.inspect} is not in 100..999" unless code >= 100 && code <= 999

      code
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
