# frozen_string_literal: true

# The puma-plus gem: Ruby workers for puma-plus-server (see docs/PROTOCOL.md, docs/RACK.md).
module PumaPlus
  VERSION = "0.1.0"
end

# Rack 2.2's Rack::Lint uses URI without requiring it (puma happens to load it); load it so
# Lint-wrapped apps behave the same under puma-plus.
require "uri"

require_relative "puma_plus/wire"
require_relative "puma_plus/request_timeout"
require_relative "puma_plus/response"
require_relative "puma_plus/stream_input"
require_relative "puma_plus/websocket"
require_relative "puma_plus/connection"
require_relative "puma_plus/worker"
require_relative "puma_plus/config"
