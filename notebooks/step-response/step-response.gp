# Timelines of the latest measured step-2core run in results.db (gnuplot, reads SQLite with
# the sqlite3 command). Output: step-response-run<N>.png.
db = 'results.db'
# The run to draw: gnuplot -e "run='2'" step-response.gp; default the latest measured one.
if (!exists("run")) run = system("sqlite3 ".db." \"SELECT max(run_id) FROM runs WHERE kind='measured' AND scenario='step-2core'\"")
q(cfg, col) = sprintf("< sqlite3 -separator ' ' %s \"SELECT t.t_s, ifnull(%s,'NaN') FROM timeline t JOIN configs c USING (config_id) WHERE c.run_id=%s AND c.name='%s' ORDER BY t.t_s\"", db, col, run, cfg)
configs = "puma-avg-w1t4 puma-peak-w2t6 pumaplus-static-w1t4 pumaplus-auto-1to3"

set terminal pngcairo size 1200,1400 font ',10'
set output sprintf('step-response-run%s.png', run)
set multiplot layout 5,1 title sprintf("step-2core measured (run %s): 30 -> 320 -> 30 rps on /mix/2/20, 2 cores", run)
set grid
set key outside right
set xrange [0:*]
set arrow 1 from 20, graph 0 to 20, graph 1 nohead dt 2
set arrow 2 from 60, graph 0 to 60, graph 1 nohead dt 2

set logscale y
set ylabel 'p50 (ms)'
plot for [c in configs] q(c, 't.p50_ms') using 1:2 with lines lw 2 title c
set ylabel 'p99 (ms)'
plot for [c in configs] q(c, 't.p99_ms') using 1:2 with lines lw 2 title c
unset logscale y
set ylabel 'completed 2xx / s'
plot for [c in configs] q(c, 't.rps') using 1:2 with lines lw 2 title c, \
     q('puma-avg-w1t4', 't.arrivals') using 1:2 with lines dt 3 lc rgb 'black' title 'offered'
set ylabel 'workers'
set yrange [0:4]
plot for [c in configs] q(c, 't.workers') using 1:2 with steps lw 2 title c
set yrange [*:*]
set logscale y
set ylabel 'queue p95 (ms, /stats; floor 0.01)'
set xlabel 't (s)'
plot for [i=3:4] q(word(configs, i), 't.queue_p95_ms') using 1:($2 > 0.01 ? $2 : 0.01) with lines lw 2 lt i title word(configs, i)
unset multiplot
