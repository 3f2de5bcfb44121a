# frozen_string_literal: true

# The app class of config.ru, for not_shareable.ru.
class RactorApp
  MIX = %r{\A/mix/(\d+)/(\d+)\z}.freeze

  def call(env)
    # /echo: the request body back, and the class of rack.input (tests/e2e/test_spool.rb)
    if env["PATH_INFO"] == "/echo"
      input = env["rack.input"]
      return [200, { "content-type" => "application/octet-stream", "x-input-class" => input.class.to_s }, [input.read]]
    end
    if (m = MIX.match(env["PATH_INFO"]))
      spin(m[1].to_i)
      sleep(m[2].to_i / 1000.0)
    end
    body = "pid=#{Process.pid} slot=#{env['puma_plus.ractor'].inspect} ractor=#{Ractor.current.name}\n"
    [200, { "content-type" => "text/plain" }, [body]]
  end

  def spin(ms)
    stop = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + ms / 1000.0
    nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < stop
  end
end
