# frozen_string_literal: true

require_relative "lib/puma_plus"

Gem::Specification.new do |s|
  s.name = "puma-plus"
  s.version = PumaPlus::VERSION
  s.summary = "Ruby workers for puma-plus-server: a C front end that measures queue time exactly"
  s.description = "The Ruby side of puma-plus: the wire codec, the shepherd that preloads a Rack " \
                  "app and forks workers, worker threads that dial in to puma-plus-server, and " \
                  "the puma-plus command that reads a puma-style config file."
  s.authors = ["puma-plus authors"]
  s.license = "MIT"
  s.required_ruby_version = ">= 3.1"
  s.files = Dir["lib/**/*.rb", "exe/*", "README.md"]
  s.bindir = "exe"
  s.executables = ["puma-plus", "puma-plus-shepherd"]
  s.add_dependency "rack", ">= 2.2", "< 4"
end
