#!/bin/sh
# Makes this notebook's data: pp-sim cluster mode on the four scenarios here (step and day,
# hosts with a fixed 4 workers or sizing their own 1..4), every cluster's summary and
# per-second timeline, into two-loops.db (tables summary and timeline), then the figure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
cd "$here"
rm -f two-loops.db summary.csv timeline.csv
for scn in step-static-hosts step-auto-hosts diurnal-static-hosts diurnal-auto-hosts; do
  "$build/sim/pp-sim" cluster "$scn.yaml" --timeline -q 2>/dev/null | awk -v scn="$scn" '
    # summary rows: name balancer scaler target offered achieved p50 p99 p99.9 excess avg_h peak_h host_s up/dn
    !intl && NF == 14 && $1 != "cluster" && $5 + 0 > 0 {
      printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", scn, $1, $3, $6, $7, $8, $11, $12, $13 >> "summary.csv"
    }
    /^# .*: cluster timeline/ { name = $2; sub(":", "", name); intl = 1; next }
    intl && $1 == "t" { next }
    intl && NF == 14 {
      p99 = ($5 == "-") ? "" : $5
      printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", scn, name, $1, $3, p99, $6, $7, $8, $11 >> "timeline.csv"
    }'
done
sqlite3 two-loops.db <<'SQL'
CREATE TABLE summary(scenario TEXT, cluster TEXT, scaler TEXT, achieved_rps REAL, p50_ms REAL,
                     p99_ms REAL, avg_hosts REAL, peak_hosts INTEGER, host_s REAL);
CREATE TABLE timeline(scenario TEXT, cluster TEXT, t INTEGER, completed INTEGER, p99_ms REAL,
                      queue_p95_ms REAL, hosts_ready INTEGER, hosts_booting INTEGER, workers INTEGER);
.mode csv
.import summary.csv summary
.import timeline.csv timeline
SQL
rm -f summary.csv timeline.csv
sqlite3 -header -column two-loops.db "
  SELECT s.scenario, s.cluster, s.p99_ms, s.host_s,
         (SELECT sum(workers) FROM timeline t WHERE t.scenario = s.scenario AND t.cluster = s.cluster
            AND t.t < (SELECT CASE WHEN s.scenario LIKE 'step%' THEN 720 ELSE 1200 END)) AS worker_s
  FROM summary s ORDER BY s.scenario, s.cluster" | tee summary.txt
gnuplot two-loops.gp
