# frozen_string_literal: true

# Not shareable: the middleware counts requests under a Mutex, which no Ractor can share.
# tests/e2e/test_ractors.rb expects the boot to be refused naming `@lock (Thread::Mutex)`.
class CountingMiddleware
  def initialize(app)
    @app = app
    @lock = Mutex.new
    @count = 0
  end

  def call(env)
    @lock.synchronize { @count += 1 }
    @app.call(env)
  end
end

require_relative "config_app"
use CountingMiddleware
run RactorApp.new
