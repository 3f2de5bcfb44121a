# frozen_string_literal: true

# `rackup -s puma_plus` and `rails server -u puma_plus` (rackup 2 / Rack 3): Rackup::Handler
# requires this file by the server's name. See PumaPlus::RackHandler.
require_relative "../../puma_plus"
require_relative "../../puma_plus/rack_handler"
require "rackup/handler"

module Rackup
  module Handler
    module PumaPlus
      class << self
        include ::PumaPlus::RackHandler
      end
    end
    register :puma_plus, PumaPlus
  end
end
