# frozen_string_literal: true

module PumaPlus
  # Process titles (puma's `tag`; docs/CONFIG.md): what `ps` and /proc/PID/cmdline show for
  # the shepherd and each worker, e.g.
  #
  #   puma-plus 0.1.0 shepherd: 2 workers x 5 threads, app config.ru [myapp]
  #   puma-plus 0.1.0 worker 1: 5 threads, shepherd 4242 [myapp]
  #   puma-plus 0.1.0 worker 2: standby (parked), shepherd 4242 [myapp]
  #
  # The tag is `tag` of the config file (the command passes it as PUMA_PLUS_TAG), else the
  # name of the directory the server runs in, as puma's default; an empty tag shows none.
  module ProcTitle
    module_function

    def tag(config = nil)
      t = ENV["PUMA_PLUS_TAG"]
      t = config.settings[:tag] if t.nil? && config
      t = File.basename(Dir.pwd) if t.nil?
      t.to_s
    end

    def suffix(tag) = tag.empty? ? "" : " [#{tag}]"

    def shepherd(workers:, threads:, app:, tag:)
      "puma-plus #{PumaPlus::VERSION} shepherd: #{workers} worker#{workers == 1 ? '' : 's'} x #{threads} " \
        "thread#{threads == 1 ? '' : 's'}, app #{File.basename(app.to_s)}#{suffix(tag)}"
    end

    def worker(index:, threads:, shepherd_pid:, tag:, standby: false)
      what = standby ? "standby (parked)" : "#{threads} thread#{threads == 1 ? '' : 's'}"
      "puma-plus #{PumaPlus::VERSION} worker #{index}: #{what}, shepherd #{shepherd_pid}#{suffix(tag)}"
    end

    def set(title)
      Process.setproctitle(title)
    rescue StandardError
      nil # a title is a convenience: never a reason to fail
    end
  end
end
