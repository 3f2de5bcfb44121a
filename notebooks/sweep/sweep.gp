# Spawn cooldown x max_step sweeps (pp-sim) from sweep.db, one figure per scenario.
# Reads SQLite with the sqlite3 command. Output: sweep-step-mix.png, sweep-step-2core.png.
db = 'sweep.db'
q(scn, step, col) = sprintf("< sqlite3 -separator ' ' %s \"SELECT CAST(substr(c.variant, 16, instr(c.variant, 's max') - 16) AS REAL), %s FROM summary s JOIN configs c USING (config_id) JOIN runs r USING (run_id) WHERE r.scenario = '%s' AND r.run_id = (SELECT max(run_id) FROM runs WHERE scenario = '%s') AND CAST(substr(c.variant, instr(c.variant, 'max_step=') + 9) AS INTEGER) = %d ORDER BY 1\"", db, col, scn, scn, step)

set terminal pngcairo size 1200,900 font ',10' noenhanced
set grid
set key outside right
set xlabel 'spawn cooldown (s)'
do for [scn in "step-mix step-2core"] {
  set output sprintf('sweep-%s.png', scn)
  steps = scn eq 'step-mix' ? "1 2 4 8" : "1 2 3"
  set multiplot layout 3,1 title sprintf("pp-sim sweep on %s: autoscale spawn cooldown x max_step", scn)
  set logscale y
  set ylabel 'p99 (ms)'
  plot for [s in steps] q(scn, s+0, 's.p99_ms') using 1:2 with linespoints lw 2 title sprintf('max_step=%s', s)
  set ylabel 'excess latency (s, over SLO)'
  plot for [s in steps] q(scn, s+0, 's.excess_latency_ms / 1000.0') using 1:2 with linespoints lw 2 title sprintf('max_step=%s', s)
  unset logscale y
  set ylabel 'average workers'
  plot for [s in steps] q(scn, s+0, 's.avg_workers') using 1:2 with linespoints lw 2 title sprintf('max_step=%s', s)
  unset multiplot
}
