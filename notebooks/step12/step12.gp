# Figures of notebooks/step12 from results.db (gnuplot, reads SQLite with the sqlite3 command):
#   step12-timelines.png  measured (left) and simulated (right) step12-2core, second by second:
#                         p99, completed vs offered, workers serving (+ parked, measured), memory
#   step12-memory.png     measured memory per second: sum of PSS against sum of RSS, per config
# The runs: the latest measured and simulated step12-2core runs, or -e "mrun='3'; srun='4'".
db = 'results.db'
if (!exists("mrun")) mrun = system("sqlite3 ".db." \"SELECT max(run_id) FROM runs WHERE kind='measured' AND scenario='step12-2core'\"")
if (!exists("srun")) srun = system("sqlite3 ".db." \"SELECT max(run_id) FROM runs WHERE kind='simulated' AND scenario='step12-2core'\"")
q(run, cfg, col) = sprintf("< sqlite3 -separator ' ' %s \"SELECT t.t_s, ifnull(%s,'NaN') FROM timeline t JOIN configs c USING (config_id) WHERE c.run_id=%s AND c.name='%s' ORDER BY t.t_s\"", db, col, run, cfg)
qm(cfg, col) = sprintf("< sqlite3 -separator ' ' %s \"SELECT m.t_s, ifnull(%s,'NaN') FROM bench_memory m JOIN configs c USING (config_id) WHERE c.run_id=%s AND c.name='%s' ORDER BY m.t_s\"", db, col, mrun, cfg)
configs = "puma-peak-w3t4 pumaplus-peak-w3t4 auto-k0 auto-k1 auto-k2"

set terminal pngcairo size 1500,1500 font ',10'
set output 'step12-timelines.png'
set multiplot layout 4,2 title sprintf("step12-2core: 30 -> 240 -> 30 rps on /mix/2/20, 2 cores; measured run %s (left), simulated run %s (right)", mrun, srun)
set grid
set key top right font ',8'
set xrange [0:75]
set arrow 1 from 20, graph 0 to 20, graph 1 nohead dt 2
set arrow 2 from 50, graph 0 to 50, graph 1 nohead dt 2
set logscale y
set yrange [5:5000]
set ylabel 'p99 by arrival second (ms)'
set title 'measured'
plot for [c in configs] q(mrun, c, 't.p99_ms') using 1:2 with lines lw 2 title c
set title 'simulated (pp-sim)'
plot for [c in configs] q(srun, c, 't.p99_ms') using 1:2 with lines lw 2 title c
unset logscale y
set yrange [0:*]
unset title
set ylabel 'completed 2xx / s'
plot for [c in configs] q(mrun, c, 't.rps') using 1:2 with lines lw 1.5 title c, \
     q(mrun, 'auto-k0', 't.arrivals') using 1:2 with lines dt 3 lw 2 lc rgb 'black' title 'offered'
plot for [c in configs] q(srun, c, 't.rps') using 1:2 with lines lw 1.5 title c, \
     q(srun, 'auto-k0', 't.arrivals') using 1:2 with lines dt 3 lw 2 lc rgb 'black' title 'offered'
set yrange [0:4.5]
set ylabel 'workers (dashed: parked standby)'
plot for [i=1:5] q(mrun, word(configs, i), 't.workers') using 1:2 with steps lw 2 lt i title word(configs, i), \
     for [i=4:5] qm(word(configs, i), 'm.workers_parked') using 1:2 with steps dt 2 lw 2 lt i notitle
plot for [i=1:5] q(srun, word(configs, i), 't.workers') using 1:2 with steps lw 2 lt i title word(configs, i)
set yrange [0:*]
set ylabel 'memory, sum of PSS (MB)'
set xlabel 't (s)'
plot for [c in configs] q(mrun, c, 't.memory_bytes/1e6') using 1:2 with lines lw 2 title c
plot for [c in configs] q(srun, c, 't.memory_bytes/1e6') using 1:2 with lines lw 2 title c
unset multiplot

set terminal pngcairo size 1200,500 font ',10'
set output 'step12-memory.png'
set title sprintf("step12-2core measured (run %s): process-tree memory per second, sum of PSS (solid) vs sum of RSS (dotted)", mrun)
set ylabel 'MB'
set yrange [0:*]
set key outside right
plot for [i=1:5] qm(word(configs, i), 'm.pss_bytes/1e6') using 1:2 with lines lw 2 lt i title word(configs, i).' PSS', \
     for [i=1:5] qm(word(configs, i), 'm.rss_bytes/1e6') using 1:2 with lines dt 3 lw 1.5 lt i title word(configs, i).' RSS'
