# frozen_string_literal: true

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "minitest/autorun"
require "json"
require "puma_plus"

CORPUS_DIR = File.expand_path("../../docs/protocol-corpus", __dir__)
