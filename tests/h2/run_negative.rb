# frozen_string_literal: true

# ctest e2e_h2_negative: starts the real server (-h2c, 8 streams per connection, 16 KiB header
# list, 1 MiB body) with the real gem workers and the mix app (tests/e2e/helper.rb), runs the
# malformed-input cases of tests/h2/negative.py against it, and fails unless every case
# passed, the server is still up afterwards, and it exits 0 on SIGTERM.
#
#   ruby tests/h2/run_negative.rb PATH/TO/puma-plus-server [CASE-SUBSTRING ...]
require_relative "../e2e/helper"

class TestH2Negative < Minitest::Test
  include E2E::Helpers

  PY = "/usr/bin/python3" # Debian's python3-h2 (hpack) loads only in this interpreter
  SCRIPT = File.join(__dir__, "negative.py")

  def test_negative_cases
    assert File.executable?(PY), "#{PY} missing (needed for tests/h2/negative.py)"
    out, st = Open3.capture2e(PY, "-c", "import hpack")
    assert st.success?, "python3-h2 (hpack) not importable by #{PY} (scripts/install-deps.sh): #{out}"

    with_server(workers: 1, threads: 4,
                extra: ["-h2c", "-h2-max-streams", "8", "-max-header-size", "16KiB",
                        "-max-body-size", "1MiB"]) do |srv|
      filters = ARGV.select { |a| !a.start_with?("-") && !File.executable?(a) }
      out, st = Timeout.timeout(400) do
        Open3.capture2e(PY, SCRIPT, "127.0.0.1", srv.port.to_s, *filters)
      end
      puts out
      summary = out.lines.map(&:strip).grep(/\A\d+ passed, \d+ failed\z/).last
      refute_nil summary, "negative.py printed no summary line"
      assert st.success?, "negative.py: #{summary}\n" + out.lines.grep(/\AFAIL/).join
      assert_equal 200, E2E.curl("-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
                                 "http://127.0.0.1:#{srv.port}/hello")[0].to_i
    end
  end
end
