# frozen_string_literal: true

# The benchmark app wrapped in Rack::Lint: every request and response is checked against the
# Rack SPEC; a violation raises Rack::Lint::LintError (the server then answers 500).
require "rack/lint"
require_relative "app"

use Rack::Lint
run MixApp
