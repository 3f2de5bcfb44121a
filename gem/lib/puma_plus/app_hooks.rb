# frozen_string_literal: true

module PumaPlus
  # puma's `lowlevel_error_handler` and `out_of_band` (docs/CONFIG.md, docs/RACK.md), for the
  # worker process they are installed in. The shepherd installs them from the config file in
  # each worker it forks (AppHooks.install); a Connection asks for them per request.
  module AppHooks
    class << self
      # The handler (a callable) or nil; the OutOfBand of this process or nil.
      attr_reader :lowlevel_error_handler, :out_of_band

      def install(config, log: $stderr)
        @log = log
        @lowlevel_error_handler = config&.lowlevel_error_handler
        hooks = config ? config.hooks[:out_of_band] : []
        @out_of_band = hooks.empty? ? nil : OutOfBand.new(hooks, log)
      end

      def reset
        @lowlevel_error_handler = nil
        @out_of_band = nil
      end

      # Calls the handler as puma does: (error), (error, env) or (error, env, status) by its
      # arity. Returns its Rack response as [Integer status, headers, body], or nil (no
      # handler, or the handler failed or returned no response: logged; the default 500 goes).
      def lowlevel_response(error, env, status = 500)
        handler = @lowlevel_error_handler
        return nil unless handler

        result = case handler.arity
                 when 1 then handler.call(error)
                 when 2 then handler.call(error, env)
                 else handler.call(error, env, status)
                 end
        unless result.respond_to?(:to_ary) && (parts = result.to_ary).size == 3
          (@log || $stderr).puts("puma-plus worker #{Process.pid}: lowlevel_error_handler returned " \
                                 "#{result.inspect[0, 100]}, not [status, headers, body]; sending 500")
          return nil
        end
        parts
      rescue StandardError => e
        (@log || $stderr).puts("puma-plus worker #{Process.pid}: lowlevel_error_handler raised #{e.class}: " \
                               "#{e.message}; sending 500")
        nil
      end
    end

    # out_of_band hooks: run when the worker goes idle, i.e. after a request when no other
    # request is being processed by this worker process, as puma's thread pool runs them.
    # While they run, a request that reaches another thread of the worker waits for them
    # before it calls the app (puma's pool takes no work while they run).
    class OutOfBand
      attr_reader :runs

      def initialize(hooks, log)
        @hooks = hooks
        @log = log
        @lock = Mutex.new
        @idle = ConditionVariable.new
        @busy = 0
        @running = false
        @runs = 0
      end

      # A request starts on this worker.
      def enter
        @lock.synchronize do
          @idle.wait(@lock) while @running
          @busy += 1
        end
      end

      # A request ended (its response written); the last one running runs the hooks.
      def leave
        run = @lock.synchronize do
          @busy -= 1
          @busy.zero? && (@running = true)
        end
        return unless run

        begin
          @hooks.each(&:call)
        rescue StandardError => e
          @log.puts("puma-plus worker #{Process.pid}: out_of_band hook: #{e.class}: #{e.message}")
        ensure
          @lock.synchronize do
            @running = false
            @runs += 1
            @idle.broadcast
          end
        end
      end
    end
  end
end
