# frozen_string_literal: true

# `rackup -s puma_plus` and `rails server puma_plus` on Rack 2 (Rack::Handler requires this
# file by the server's name); with rackup 2 loaded, Rackup::Handler falls back to this path and
# gets the Rackup handler. See PumaPlus::RackHandler.
require_relative "../../puma_plus"
require_relative "../../puma_plus/rack_handler"

if defined?(::Rackup::Handler)
  require_relative "../../rackup/handler/puma_plus"
else
  require "rack/handler"

  module Rack
    module Handler
      module PumaPlus
        class << self
          include ::PumaPlus::RackHandler
        end
      end
      register :puma_plus, PumaPlus if ::Rack.release < "3"
    end
  end
end
