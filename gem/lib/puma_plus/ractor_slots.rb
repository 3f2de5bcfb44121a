# frozen_string_literal: true

require "fcntl"
require "socket"
require_relative "worker"

module PumaPlus
  # Ractor slots (experimental; docs/RACK.md "Ractor slots", issue 28): a worker process whose
  # slots are Ractors instead of threads. Each Ractor dials the server's worker socket on its
  # own connection, says HELLO and serves requests with the same Connection code a thread
  # runs; the server sees N connections as it sees N threads. The process keeps its monitor
  # connection (heartbeats, TIMEOUT) in the main Ractor, which relays stop and TIMEOUT to a
  # slot by Ractor#send.
  #
  # Turned on by `ractors N` in the config file or `--ractors N` (docs/CONFIG.md), which reach
  # the shepherd as PUMA_PLUS_RACTORS=N. The app is shared by every Ractor, so it must be
  # shareable: RactorSlots.prepare checks it in the shepherd before any worker is forked and
  # refuses, naming the object that cannot be shared, instead of failing at the first request.
  module RactorSlots
    ENV_NAME = "PUMA_PLUS_RACTORS"
    CONNECT_ATTEMPTS = 50
    CONNECT_DELAY = 0.1

    # The app cannot be shared between Ractors; the message names the object and its path.
    class NotShareable < StandardError; end

    # Objects Ractor.make_shareable cannot share, or would share by freezing them in place
    # while something else still writes to them (an IO frozen is an IO no one can write).
    UNSHAREABLE = [IO, Thread, Thread::Mutex, Thread::Queue, Thread::ConditionVariable, Method,
                   UnboundMethod, Enumerator, Binding].freeze
    MONITOR = "Monitor" # not loaded unless the app loaded it

    # The Ractor count from the environment or the config (nil: threads as usual).
    def self.count(config = nil)
      raw = ENV.fetch(ENV_NAME, nil)
      raw = config.settings[:ractors]&.to_s if (raw.nil? || raw.empty?) && config
      return nil if raw.nil? || raw.empty?

      n = Integer(raw, exception: false)
      raise ArgumentError, "#{ENV_NAME}=#{raw.inspect}: expected a whole number >= 1" unless n && n >= 1

      n
    end

    # Makes `app` shareable (deep freeze, Ractor.make_shareable) and returns it, or raises
    # NotShareable naming the first object on the way that cannot be shared. The walk runs
    # first and freezes nothing, so a refused app is left as it was.
    def self.prepare(app)
      if (found = find_unshareable(app))
        path, obj, why = found
        raise NotShareable, "the app cannot run in Ractors: #{path} is #{describe(obj)}: #{why}"
      end
      begin
        Ractor.make_shareable(app)
      rescue Ractor::Error => e
        # Something the walk does not look into (a Proc's captured variable): Ruby's own words.
        raise NotShareable, "the app cannot run in Ractors: Ractor.make_shareable(app) raised " \
                            "#{e.class}: #{e.message}"
      end
      app
    end

    # The config's lowlevel_error_handler and out_of_band hooks run inside a slot, on the
    # Connection's path; a Proc of a config file is not shareable (its self is the DSL), so
    # they are refused rather than failing at the first error or the first idle moment.
    def self.check_hooks(config)
      return unless config

      names = []
      names << "lowlevel_error_handler" if config.lowlevel_error_handler
      names << "out_of_band" unless Array(config.hooks[:out_of_band]).empty?
      return if names.empty?

      raise NotShareable, "the app cannot run in Ractors: #{names.join(' and ')} in the config " \
                          "would run inside a Ractor slot, and a config block is not shareable"
    end

    # [path, object, reason] of the first object reachable from `root` that cannot be shared,
    # or nil. Follows instance variables, Array/Hash/Struct members and a Proc's self.
    def self.find_unshareable(root)
      seen = {}.compare_by_identity
      stack = [[root, "app (#{root.class})"]]
      until stack.empty?
        obj, path = stack.pop
        next if seen[obj] || Ractor.shareable?(obj)

        seen[obj] = true
        if unshareable_kind?(obj)
          return [path, obj, "Ractor.make_shareable cannot share a #{obj.class} " \
                             "#{obj.is_a?(IO) ? '(it would freeze the IO, and a frozen IO cannot be written)' : ''}".rstrip]
        end
        children(obj, path).reverse_each { |c| stack.push(c) }
        next unless obj.is_a?(Proc)

        recv = proc_self(obj)
        next if Ractor.shareable?(recv)

        return [path, obj, "its self is #{recv.inspect[0, 60]} (#{recv.class}), not shareable; Ruby 3.1's " \
                           "Ractor.make_shareable shares a Proc only if its self already is " \
                           "(make it with Ractor.make_shareable(proc), or inside an object that is)"]
      end
      nil
    end

    def self.proc_self(pr)
      pr.binding.receiver
    rescue ArgumentError
      nil # a Proc made from a method or a C function has no Ruby binding
    end

    def self.unshareable_kind?(obj)
      return true if UNSHAREABLE.any? { |k| obj.is_a?(k) }

      defined?(::Monitor) && obj.is_a?(::Monitor)
    end

    def self.children(obj, path)
      out = obj.instance_variables.map { |iv| [obj.instance_variable_get(iv), "#{path} → #{iv} (#{obj.instance_variable_get(iv).class})"] }
      case obj
      when Array then obj.each_with_index { |v, i| out << [v, "#{path} → [#{i}] (#{v.class})"] }
      when Hash
        obj.each do |k, v|
          out << [k, "#{path} → key #{k.inspect[0, 40]}"]
          out << [v, "#{path} → [#{k.inspect[0, 40]}] (#{v.class})"]
        end
        out << [obj.default_proc, "#{path} → default_proc"] if obj.default_proc
      when Struct then obj.each_pair { |k, v| out << [v, "#{path} → .#{k} (#{v.class})"] }
      end
      out
    end

    def self.describe(obj)
      where = obj.respond_to?(:source_location) && obj.source_location
      where ? "#{obj.class} defined at #{where.join(':')}" : "a #{obj.class}"
    end

    # ---- inside a slot Ractor ----------------------------------------------------------------

    # A slot Ractor's body: slot_main, its death logged, its end told on done_fd.
    def self.slot_run(app, socket_path, worker_index, slot_index, rack_version, slots, done_fd)
      slot_main(app, socket_path, worker_index, slot_index, rack_version, slots)
    rescue Exception => e # rubocop:disable Lint/RescueException
      $stderr.puts("puma-plus worker #{Process.pid}: Ractor slot #{slot_index} died: #{e.class}: #{e.message}\n  " +
                   Array(e.backtrace).join("\n  "))
    ensure
      IO.for_fd(done_fd, autoclose: false).write("#{slot_index}\n")
    end

    # The body of one slot Ractor: its connection, reconnecting after an aborted response, and
    # a thread that takes the main Ractor's messages (:stop, [:timeout, request_id]).
    def self.slot_main(app, socket_path, worker_index, slot_index, rack_version, slots)
      proto = {
        "rack.version" => rack_version, "rack.errors" => $stderr, "rack.multithread" => slots > 1,
        "rack.multiprocess" => true, "rack.run_once" => false, "rack.hijack?" => false,
        "SCRIPT_NAME" => "", "SERVER_SOFTWARE" => "puma-plus #{PumaPlus::VERSION}",
        "puma_plus.worker_index" => worker_index, "puma_plus.ractor" => slot_index
      }.freeze
      lock = Mutex.new
      state = { conn: nil, stopping: false }
      inbox = Thread.new do
        loop do
          msg = Ractor.receive
          lock.synchronize do
            if msg == :stop
              state[:stopping] = true
              state[:conn]&.stop
            elsif msg.is_a?(Array) && msg[0] == :timeout
              conn = state[:conn]
              unless conn&.interrupt(msg[1])
                $stderr.puts("puma-plus worker #{Process.pid}: TIMEOUT for request #{msg[1]}: " \
                             "not running in Ractor slot #{slot_index} any more")
              end
            end
          end
        end
      end
      loop do
        sock = slot_connect(socket_path, state)
        break unless sock

        conn = Connection.new(app, sock, proto, worker_index: worker_index, thread_index: slot_index, log: $stderr,
                              ractor: true)
        lock.synchronize do
          conn.stop if state[:stopping]
          state[:conn] = conn
        end
        result = begin
          conn.run
        rescue Connection::StopRequested
          :eof
        end
        lock.synchronize { state[:conn] = nil }
        sock.close
        break unless result == :aborted && !state[:stopping] # :closed (SLOT_CLOSE), :eof: the slot ends
      end
      nil
    ensure
      inbox&.kill
    end

    def self.slot_connect(path, state)
      attempts = 0
      begin
        return nil if state[:stopping]

        blocking(UNIXSocket.new(path))
      rescue Errno::ENOENT, Errno::ECONNREFUSED, Errno::EAGAIN => e
        attempts += 1
        if attempts >= CONNECT_ATTEMPTS
          $stderr.puts("puma-plus worker #{Process.pid}: cannot connect to #{path}: #{e.message}")
          return nil
        end
        sleep CONNECT_DELAY
        retry
      end
    end

    # Blocking mode, as Connection sets it for a thread, but with fcntl(2): Ruby 3.1's
    # io/nonblock (IO#nonblock=, IO#nonblock?) is not marked Ractor-safe and raises
    # "Ractor::UnsafeError: ractor unsafe method called from not main ractor" in a slot. The
    # socket then stops answering nonblock=, so Connection leaves the mode as set here.
    def self.blocking(sock)
      sock.fcntl(Fcntl::F_SETFL, sock.fcntl(Fcntl::F_GETFL) & ~Fcntl::O_NONBLOCK)
      sock.singleton_class.send(:undef_method, :nonblock=)
      sock
    end

    # A worker process whose slots are Ractors: Worker's run loop, monitor connection and
    # SLOTS handling, with each slot started as a Ractor instead of a thread. SLOTS on the
    # monitor connection (the controller's run-time slot actuator) thus starts Ractors too;
    # SLOT_CLOSE ends one (its Connection returns :closed and the Ractor ends). Per-thread hooks
    # (before_thread_start, before_thread_exit) do not run: the config is not shareable.
    class Worker < PumaPlus::Worker
      def initialize(*, **)
        super
        @ractors = {} # slot index => Ractor
        # A slot Ractor writes "INDEX\n" here as it ends (by descriptor: an IO is not
        # shareable), not Ractor#take: in Ruby 3.1 two threads of one Ractor each in #take wait
        # as one and one never wakes, and Ractor.select over ended Ractors raised
        # Ractor::ClosedError ("The outgoing-port is already closed").
        @ended_r, @ended_w = IO.pipe
        @rack_version = Ractor.make_shareable((defined?(::Rack::VERSION) ? ::Rack::VERSION : [1, 3]).dup)
        @reaper = nil
      end

      def run
        @reaper = Thread.new { reap_slots }
        super
      ensure
        @reaper&.kill
      end

      def stop
        rs = @lock.synchronize do
          @stopping = true
          @ractors.values
        end
        rs.each do |r|
          r.send(:stop)
        rescue Ractor::ClosedError
          nil
        end
      end

      private

      def start_slot(index)
        r = Ractor.new(@app, @socket_path, @worker_index, index, @rack_version, [@target, 2].max,
                       @ended_w.fileno, name: "slot-#{index}") do |*args|
          PumaPlus::RactorSlots.slot_run(*args)
        end
        @lock.synchronize { @ractors[index] = r }
      end

      def reap_slots
        buf = +""
        loop do
          buf << @ended_r.readpartial(256)
          while (nl = buf.index("\n"))
            index = Integer(buf.slice!(0, nl + 1).chomp)
            @lock.synchronize { @ractors.delete(index) }
            slot_ended(index)
          end
        end
      rescue IOError
        nil
      end

      def interrupt(frame)
        r = @lock.synchronize { @ractors[frame.thread_index] }
        r&.send([:timeout, frame.request_id])
      rescue Ractor::ClosedError
        nil
      end
    end
  end
end
