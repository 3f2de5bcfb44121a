# frozen_string_literal: true

require_relative "lib/puma_plus"
require "fileutils"

# The C front end travels inside the gem: `gem install` compiles puma-plus-server from these
# sources (ext/puma_plus_server/extconf.rb). In a checkout they live in ../server and
# ../control, outside this folder, and a .gem can hold only files below it, so building the
# gem from a checkout first copies them into ext/puma_plus_server/src/ (ignored by git; a
# file is rewritten only when it changed). Outside a checkout (an installed or unpacked gem)
# src/ is already there and nothing is copied.
module PumaPlusGemSources
  HERE = File.expand_path(__dir__)
  ROOT = File.expand_path("..", HERE)
  DEST = File.join(HERE, "ext/puma_plus_server/src")

  def self.stage
    return unless File.file?(File.join(ROOT, "server/main.c"))

    %w[server control].each do |dir|
      # server/ is in layer folders (server/base, server/proto, ...); its tests/ and tools/ stay out.
      wanted = Dir.chdir(File.join(ROOT, dir)) { Dir["{,*/}*.{c,h,html}"] }.reject { |f| f.start_with?("tests/", "tools/") }
      FileUtils.mkdir_p(File.join(DEST, dir))
      have = Dir.chdir(File.join(DEST, dir)) { Dir["**/*"].select { |f| File.file?(f) } }
      (have - wanted).each { |f| File.delete(File.join(DEST, dir, f)) }
      wanted.each do |name|
        from = File.join(ROOT, dir, name)
        to = File.join(DEST, dir, name)
        FileUtils.mkdir_p(File.dirname(to))
        FileUtils.cp(from, to) unless File.file?(to) && FileUtils.identical?(from, to)
      end
    end
  end
end
PumaPlusGemSources.stage if defined?(Gem::Commands::BuildCommand)
# RubyGems 3.3 (Debian 12's) reads a spec's files relative to the current directory; 3.4 and
# later build from the gemspec's folder. Do what 3.4 does, so `gem build gem/puma-plus.gemspec`
# works from the repository root (the .gem is then written into gem/ unless -o says where).
Dir.chdir(PumaPlusGemSources::HERE) if defined?(Gem::Commands::BuildCommand) && Dir.pwd != PumaPlusGemSources::HERE

Gem::Specification.new do |s|
  s.name = "puma-plus"
  s.version = PumaPlus::VERSION
  s.summary = "Ruby workers for puma-plus-server: a C front end that measures queue time exactly"
  s.description = "The Ruby side of puma-plus: the wire codec, the shepherd that preloads a Rack " \
                  "app and forks workers, worker threads that dial in to puma-plus-server, and " \
                  "the puma-plus command that reads a puma-style config file. Installing the " \
                  "gem compiles puma-plus-server (C; needs libuv, jansson, libyaml, llhttp)."
  s.authors = ["puma-plus authors"]
  s.license = "MIT"
  s.required_ruby_version = ">= 3.1"
  Dir.chdir(PumaPlusGemSources::HERE) do
    s.files = Dir["lib/**/*.rb", "exe/*", "README.md", "ext/puma_plus_server/extconf.rb",
                  "ext/puma_plus_server/src/{server,control}/{,*/}*.{c,h,html}",
                  "ext/puma_plus/extconf.rb", "ext/puma_plus/*.c"]
  end
  # The server, and the hot codec (optional at run time: the Ruby codec is the fallback).
  s.extensions = ["ext/puma_plus_server/extconf.rb", "ext/puma_plus/extconf.rb"]
  s.bindir = "exe"
  s.executables = ["puma-plus", "puma-plus-shepherd"]
  s.add_dependency "rack", ">= 2.2", "< 4"
end
