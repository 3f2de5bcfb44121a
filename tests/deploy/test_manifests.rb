# frozen_string_literal: true

# The deploy/ manifests against docs/SCALING.md. Kubernetes cannot run on this project's
# machines, so the manifests are checked for shape instead: every file parses (YAML, every
# document; HAProxy's config line by line), and every row of SCALING.md's "Settings checked"
# table holds: the field it names, in the file and document it names, has the value it states.
# The settings come from pp-sim (scenarios/cluster-*.yaml), and the test checks that too: the
# recommended cluster's targets and scale-down behaviour are the manifests' thresholds.
#
#   ruby tests/deploy/test_manifests.rb
require "minitest/autorun"
require "yaml"

module Manifests
  ROOT = File.expand_path("../..", __dir__)
  DOC = File.join(ROOT, "docs/SCALING.md")

  # Rows of the table under the heading "Settings checked" of doc: [file, kind, path, value].
  def self.rows(doc = DOC, heading = "## Settings checked")
    text = File.read(doc)
    level = heading[/^#+/]
    section = text[/^#{Regexp.escape(heading)}.*?(?=^#{level} |\z)/m] or raise "#{doc} has no \"#{heading}\" section"
    section.lines.grep(/^\| `deploy/).map do |l|
      cells = l.split("|").map(&:strip).reject(&:empty?)
      file, kind = cells[0].delete("`").split("#", 2)
      [file, kind, cells[1].delete("`"), cells[2].delete_prefix("`").delete_suffix("`")]
    end
  end

  def self.documents(file)
    YAML.load_stream(File.read(File.join(ROOT, file)))
  end

  # a.b[0].c over parsed YAML ({a.b} is one key with dots in it); nil when a step is missing.
  def self.dig(obj, path)
    path.scan(/\{[^}]*\}|[^.\[\]{}]+|\[\d+\]/).reduce(obj) do |o, step|
      return nil if o.nil?

      if step.start_with?("[")
        o.is_a?(Array) ? o[step[1..-2].to_i] : nil
      else
        o.is_a?(Hash) ? o[step.delete_prefix("{").delete_suffix("}")] : nil
      end
    end
  end

  # A Kubernetes quantity ("5m", "500m", "2", "0.005") as a number.
  def self.quantity(v)
    s = v.to_s
    return s[0..-2].to_f / 1000 if s.end_with?("m")

    Float(s)
  end
end

class TestManifests < Minitest::Test
  M = Manifests

  def test_every_file_parses
    files = Dir[File.join(M::ROOT, "deploy/k8s/*.yaml")]
    assert_operator files.size, :>=, 3, "deploy/k8s has the Deployment, the ScaledObject and the HPA"
    files.each do |f|
      docs = YAML.load_stream(File.read(f))
      refute_empty docs, f
      docs.each do |d|
        assert d.is_a?(Hash), "#{f}: a document is not a mapping"
        %w[apiVersion kind metadata].each { |k| assert d.key?(k), "#{f}: #{d['kind']} without #{k}" }
        assert d["metadata"]["name"], "#{f}: #{d['kind']} without metadata.name"
      end
    end
    # The adapter's rules are YAML inside a ConfigMap: they must parse too.
    cm = M.documents("deploy/k8s/hpa-prometheus-adapter.yaml").find { |d| d["kind"] == "ConfigMap" }
    rules = YAML.safe_load(cm["data"]["config.yaml"])
    assert_equal 2, rules["externalRules"].size
  end

  def test_documented_settings_hold
    rows = M.rows
    assert_operator rows.size, :>=, 15, "SCALING.md's Settings checked table is too short"
    check_rows(rows)
  end

  def check_rows(rows)
    rows.each do |file, kind, path, value|
      if file.end_with?(".cfg")
        lines = File.readlines(File.join(M::ROOT, file)).map(&:strip)
        assert_includes lines, value, "#{file}: line #{value.inspect}"
        next
      end
      doc = M.documents(file).find { |d| kind.nil? || d["kind"] == kind }
      refute_nil doc, "#{file}: no #{kind} document"
      got = if path.start_with?("config.yaml:")
              M.dig(YAML.safe_load(doc["data"]["config.yaml"]), path.delete_prefix("config.yaml:"))
            else
              M.dig(doc, path)
            end
      refute_nil got, "#{file}##{kind}: #{path} is missing"
      assert_equal value, got.to_s, "#{file}##{kind}: #{path}"
    end
  end

  # The two autoscaler manifests say the same thing, and say what the deployment serves.
  def test_keda_and_hpa_agree
    so = M.documents("deploy/k8s/keda-scaledobject.yaml").first
    hpa = M.documents("deploy/k8s/hpa-prometheus-adapter.yaml").find { |d| d["kind"] == "HorizontalPodAutoscaler" }
    cm = M.documents("deploy/k8s/hpa-prometheus-adapter.yaml").find { |d| d["kind"] == "ConfigMap" }
    dep = M.documents("deploy/k8s/deployment.yaml").find { |d| d["kind"] == "Deployment" }
    rules = YAML.safe_load(cm["data"]["config.yaml"])["externalRules"]
    assert_equal dep["metadata"]["name"], so["spec"]["scaleTargetRef"]["name"]
    assert_equal dep["metadata"]["name"], hpa["spec"]["scaleTargetRef"]["name"]
    assert_equal so["spec"]["minReplicaCount"], hpa["spec"]["minReplicas"]
    assert_equal so["spec"]["maxReplicaCount"], hpa["spec"]["maxReplicas"]
    assert_equal so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"], hpa["spec"]["behavior"]
    so["spec"]["triggers"].each_with_index do |t, i|
      assert_equal "prometheus", t["type"]
      assert_equal "Value", t["metricType"], "trigger #{t['name']}: a cluster-wide ratio is a Value metric"
      assert_equal t["metadata"]["query"], rules[i]["metricsQuery"]
      assert_equal rules[i]["name"]["as"], hpa["spec"]["metrics"][i]["external"]["metric"]["name"]
      assert_equal "Value", hpa["spec"]["metrics"][i]["external"]["target"]["type"]
      assert_in_delta M.quantity(t["metadata"]["threshold"]),
                      M.quantity(hpa["spec"]["metrics"][i]["external"]["target"]["value"]), 1e-12
    end
    # Probes use the control port, where /ready and /metrics live.
    c = dep["spec"]["template"]["spec"]["containers"][0]
    control = c["ports"].find { |p| p["name"] == "control" }["containerPort"]
    assert_equal control.to_s, dep["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"]
    assert_equal "/ready", c["readinessProbe"]["httpGet"]["path"]
    # The grace outlasts the server's drain plus the preStop pause.
    drain = c["args"][c["args"].index("-drain-timeout") + 1].to_i
    pause = c["lifecycle"]["preStop"]["exec"]["command"].last.to_i
    assert_operator dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], :>, drain + pause
  end

  # The thresholds are pp-sim's: the recommended cluster of scenarios/cluster-step.yaml (the
  # one SCALING.md names) has the same targets, bounds and scale-down behaviour.
  def test_thresholds_come_from_the_simulator
    name = File.read(M::DOC)[/recommended cluster: `([^`]+)`/, 1]
    refute_nil name, "SCALING.md names no \"recommended cluster: `NAME`\""
    so = M.documents("deploy/k8s/keda-scaledobject.yaml").first
    %w[scenarios/cluster-step.yaml scenarios/cluster-diurnal.yaml].each do |scn|
      cl = YAML.safe_load(File.read(File.join(M::ROOT, scn)), aliases: true)["clusters"].find { |c| c["name"] == name }
      refute_nil cl, "#{scn} has no cluster #{name}"
      a = cl["autoscale"]
      metrics = a["metrics"] || [{ "metric" => a["metric"], "target" => a["target"] }]
      assert_equal so["spec"]["triggers"].size, metrics.size, scn
      metrics.zip(so["spec"]["triggers"]).each do |m, t|
        target = m["target"].to_s
        want = if target.end_with?("ms") then target.to_f / 1000
               elsif target.end_with?("%") then target.to_f / 100
               else target.to_f
               end
        assert_in_delta want, M.quantity(t["metadata"]["threshold"]), 1e-12, "#{scn} #{m['metric']}"
      end
      down = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
      assert_equal a["scale_down"]["window"].to_i, down["stabilizationWindowSeconds"], scn
      p = a["scale_down"]["policies"][0]
      assert_equal p["percent"], down["policies"][0]["value"], scn
      assert_equal p["period"].to_i, down["policies"][0]["periodSeconds"], scn
      assert_equal a["min"], so["spec"]["minReplicaCount"], scn if scn.include?("diurnal")
      assert_equal a["max"], so["spec"]["maxReplicaCount"], scn if scn.include?("diurnal")
    end
  end

  # Issue 29's Indexed Job (deploy/k8s/sweep-job.yaml): what pp-sim launch k8s writes today,
  # with the settings docs/SIM.md states, and a shard task that covers 1..completions.
  SWEEP_JOB = "deploy/k8s/sweep-job.yaml"
  SWEEP_LAUNCH = %w[launch k8s --shards 48 --parallelism 16 --name step-mix-sweep
                    --image registry.example/puma-plus-sim:latest --workdir /opt/puma-plus
                    --claim sweep-results -- scenarios/step-mix.yaml
                    --set spawn_cooldown=1s,2s,3s,5s,8s,10s,15s,20s,30s,60s
                    --set max_step=1,2,3,4,5,6,7,8 --set target_queue_p95=20ms,50ms,100ms,200ms
                    --set retire_cooldown=10s,30s,60s --seeds 1-3].freeze

  def test_sweep_job_is_what_pp_sim_launch_writes
    bin = ENV["PP_SIM_BIN"] || File.join(M::ROOT, "build/sim/pp-sim")
    assert File.executable?(bin), "no pp-sim at #{bin} (build first, or set PP_SIM_BIN)"
    out = IO.popen([bin, *SWEEP_LAUNCH, err: File::NULL], chdir: M::ROOT, &:read)
    assert $?.success?, "pp-sim #{SWEEP_LAUNCH.join(' ')} failed"
    assert_equal File.read(File.join(M::ROOT, SWEEP_JOB)), out,
                 "#{SWEEP_JOB} is stale: regenerate it with the command in docs/SIM.md"
  end

  def test_sweep_job_shape
    rows = M.rows(File.join(M::ROOT, "docs/SIM.md"), "### Kubernetes: settings checked")
    assert_operator rows.size, :>=, 6, "docs/SIM.md's Kubernetes settings table is too short"
    check_rows(rows)
    job = M.documents(SWEEP_JOB).find { |d| d["kind"] == "Job" }
    n = job["spec"]["completions"]
    assert_operator job["spec"]["parallelism"], :<=, n
    c = job["spec"]["template"]["spec"]["containers"][0]
    script = c["args"][0]
    # Kubernetes' index counts from 0, shards from 1: shard i = index + 1 covers 1..n.
    assert_includes script, "i=$((JOB_COMPLETION_INDEX + 1))"
    assert_includes script, "--shard \"$i/#{n}\""
    mount = c["volumeMounts"].find { |v| v["name"] == "results" }["mountPath"]
    assert_includes script, "--db #{mount}/shard-\"$i\".db"
    vol = job["spec"]["template"]["spec"]["volumes"].find { |v| v["name"] == "results" }
    refute_nil vol["persistentVolumeClaim"]["claimName"]
    # The scenario the image runs is this repository's (workingDir is the checkout's root).
    scn = script[/ sweep (\S+)/, 1]
    assert File.exist?(File.join(M::ROOT, scn)), "#{SWEEP_JOB} runs #{scn}, not in the repository"
  end
end
