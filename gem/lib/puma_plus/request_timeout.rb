# frozen_string_literal: true

module PumaPlus
  # Raised in the app's thread (on a fiber slot, in the request's fiber) when its request ran
  # past the server's `-request-timeout` (DSL `request_timeout`; docs/PROTOCOL.md "Monitor
  # connection", docs/RACK.md). By then the client already has its 504 from the server; the
  # exception is there to free the slot for the next request, as rack-timeout's is. Code in `ensure` blocks runs as usual.
  #
  # Like rack-timeout's RequestTimeoutException it descends from Exception, not
  # StandardError, so an app's `rescue => e` does not swallow it by accident; rescue it by
  # name to clean up. A thread that has not let go within `-worker-kill-grace` (say, it
  # rescued this and went on) gets its whole worker process killed and replaced.
  #
  # It is raised only while the app's code runs (app.call and iterating or calling the
  # body), never while the worker writes a frame to the server.
  class RequestTimeout < Exception # rubocop:disable Lint/InheritException
  end

  # Whether the server may interrupt requests (it says so in HEARTBEAT_INTERVAL's flags on the
  # worker's monitor connection). True until it has said: the interrupt machinery around app
  # code (a mutex, Thread.handle_interrupt: about a dozen allocations per request) runs only
  # while it is true.
  @request_timeouts = true
  class << self
    attr_writer :request_timeouts

    def request_timeouts? = @request_timeouts
  end
end
