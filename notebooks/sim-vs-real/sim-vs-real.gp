# Simulated vs measured timelines of step-2core, one panel per configuration (p50, log scale)
# and workers. Reads results.db (both runs) with the sqlite3 command. Output: sim-vs-real.png.
db = 'results.db'
m = system("sqlite3 ".db." \"SELECT max(run_id) FROM runs WHERE kind='measured' AND scenario='step-2core'\"")
s = system("sqlite3 ".db." \"SELECT max(run_id) FROM runs WHERE kind='simulated' AND scenario='step-2core'\"")
q(run, cfg, col) = sprintf("< sqlite3 -separator ' ' %s \"SELECT t.t_s, ifnull(%s,'NaN') FROM timeline t JOIN configs c USING (config_id) WHERE c.run_id=%s AND c.name='%s' ORDER BY t.t_s\"", db, col, run, cfg)
configs = "puma-avg-w1t4 puma-peak-w2t6 pumaplus-static-w1t4 pumaplus-auto-1to3"

set terminal pngcairo size 1400,1000 font ',10'
set output 'sim-vs-real.png'
set multiplot layout 4,2 title sprintf("step-2core: simulated (run %s) vs measured (run %s)", s, m)
set grid
set key top left
set xrange [0:120]
do for [i=1:4] {
  cname = word(configs, i)
  set logscale y
  set ylabel 'p50 (ms)'
  set key top left title cname
  plot q(s, cname, 't.p50_ms') using 1:2 with lines lw 2 title 'simulated', \
       q(m, cname, 't.p50_ms') using 1:2 with lines lw 2 title 'measured'
  unset logscale y
  set ylabel 'workers'
  set yrange [0:4]
  plot q(s, cname, 't.workers') using 1:2 with steps lw 2 title 'simulated', \
       q(m, cname, 't.workers') using 1:2 with steps lw 2 title 'measured'
  set yrange [*:*]
}
unset multiplot
