# frozen_string_literal: true

# The puma-plus gem: Ruby workers for puma-plus-server (see docs/PROTOCOL.md, docs/RACK.md).
module PumaPlus
  VERSION = "0.1.0"
end

require_relative "puma_plus/wire"
