# The step of notebooks/two-loops: hosts ready and workers alive (left), per-second p99 (right)
# for the cluster loop alone, the worker loop alone, and both. Reads two-loops.db.
set terminal pngcairo size 1400,520 font "sans,10"
set output "two-loops-step.png"
set datafile separator "|"
set multiplot layout 1,2 title "600 -> 2,400 -> 600 rps step, 4-core hosts (pp-sim cluster)"
set xlabel "t (s)"
set ylabel "workers alive (all hosts)"
set key top left
q(s, c, col) = sprintf("< sqlite3 two-loops.db \"SELECT t, %s FROM timeline WHERE scenario='%s' AND cluster='%s' ORDER BY t\"", col, s, c)
plot q("step-static-hosts", "hosts-only", "workers") using 1:2 with lines lw 2 title "cluster loop only (hosts of 4 workers)", \
     q("step-auto-hosts", "workers-only", "workers") using 1:2 with lines lw 2 title "worker loop only (10 hosts)", \
     q("step-auto-hosts", "both-loops", "workers") using 1:2 with lines lw 2 title "both loops"
set ylabel "p99 of the second's responses (ms)"
set logscale y
plot q("step-static-hosts", "hosts-only", "p99_ms") using 1:2 with lines lw 2 title "cluster loop only", \
     q("step-auto-hosts", "workers-only", "p99_ms") using 1:2 with lines lw 2 title "worker loop only", \
     q("step-auto-hosts", "both-loops", "p99_ms") using 1:2 with lines lw 2 title "both loops"
unset multiplot
