set terminal pngcairo noenhanced size 1400,1000
set output 'notebooks/compare-ab/ab.png'
set datafile missing 'NaN'
set multiplot layout 2,2 title 'pp-bench compare: GET /hello by shape (workers x threads), medians of 3 rounds (bars: min..max), wrk -t1 -c10 for 5s'
set grid ytics
set key outside bottom center horizontal
set xrange [-0.5:1.5]
set xtics ("1x1" 0, "1x5" 1)
set yrange [0:*]
set ylabel 'requests/s (closed loop)'
plot 'notebooks/compare-ab/ab.png.dat' index 0 using ($1-0.200):2:3:4 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', 'notebooks/compare-ab/ab.png.dat' index 1 using ($1+0.000):2:3:4 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'pumaplus@base', 'notebooks/compare-ab/ab.png.dat' index 2 using ($1+0.200):2:3:4 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma'
set ylabel 'p50 (ms, closed loop)'
plot 'notebooks/compare-ab/ab.png.dat' index 0 using ($1-0.200):5:6:7 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', 'notebooks/compare-ab/ab.png.dat' index 1 using ($1+0.000):5:6:7 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'pumaplus@base', 'notebooks/compare-ab/ab.png.dat' index 2 using ($1+0.200):5:6:7 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma'
set ylabel 'p99 (ms, closed loop)'
plot 'notebooks/compare-ab/ab.png.dat' index 0 using ($1-0.200):8:9:10 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', 'notebooks/compare-ab/ab.png.dat' index 1 using ($1+0.000):8:9:10 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'pumaplus@base', 'notebooks/compare-ab/ab.png.dat' index 2 using ($1+0.200):8:9:10 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma'
set ylabel 'CPU per request (us, whole process tree)'
plot 'notebooks/compare-ab/ab.png.dat' index 0 using ($1-0.200):11:12:13 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', 'notebooks/compare-ab/ab.png.dat' index 1 using ($1+0.000):11:12:13 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'pumaplus@base', 'notebooks/compare-ab/ab.png.dat' index 2 using ($1+0.200):11:12:13 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma'
unset multiplot
