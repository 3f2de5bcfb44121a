set terminal pngcairo noenhanced size 1400,1000
set output '/work/main/notebooks/compare/compare-hello.png'
set datafile missing 'NaN'
set multiplot layout 2,2 title 'pp-bench compare: GET /hello by shape (workers x threads), medians of 3 rounds (bars: min..max), wrk -t1 -c10 for 5s'
set grid ytics
set key outside bottom center horizontal
set xrange [-0.5:2.5]
set xtics ("1x1" 0, "1x5" 1, "2x5" 2)
set yrange [0:*]
set ylabel 'requests/s (closed loop)'
plot '/work/main/notebooks/compare/compare-hello.png.dat' index 0 using ($1-0.225):2:3:4 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', '/work/main/notebooks/compare/compare-hello.png.dat' index 1 using ($1-0.075):2:3:4 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'puma', '/work/main/notebooks/compare/compare-hello.png.dat' index 2 using ($1+0.075):2:3:4 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma8', '/work/main/notebooks/compare/compare-hello.png.dat' index 3 using ($1+0.225):2:3:4 with yerrorbars pt 7 ps 1.5 lw 2 lc 4 title 'falcon'
set ylabel 'p50 (ms, closed loop)'
plot '/work/main/notebooks/compare/compare-hello.png.dat' index 0 using ($1-0.225):5:6:7 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', '/work/main/notebooks/compare/compare-hello.png.dat' index 1 using ($1-0.075):5:6:7 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'puma', '/work/main/notebooks/compare/compare-hello.png.dat' index 2 using ($1+0.075):5:6:7 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma8', '/work/main/notebooks/compare/compare-hello.png.dat' index 3 using ($1+0.225):5:6:7 with yerrorbars pt 7 ps 1.5 lw 2 lc 4 title 'falcon'
set ylabel 'p99 (ms, closed loop)'
plot '/work/main/notebooks/compare/compare-hello.png.dat' index 0 using ($1-0.225):8:9:10 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', '/work/main/notebooks/compare/compare-hello.png.dat' index 1 using ($1-0.075):8:9:10 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'puma', '/work/main/notebooks/compare/compare-hello.png.dat' index 2 using ($1+0.075):8:9:10 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma8', '/work/main/notebooks/compare/compare-hello.png.dat' index 3 using ($1+0.225):8:9:10 with yerrorbars pt 7 ps 1.5 lw 2 lc 4 title 'falcon'
set ylabel 'CPU per request (us, whole process tree)'
plot '/work/main/notebooks/compare/compare-hello.png.dat' index 0 using ($1-0.225):11:12:13 with yerrorbars pt 7 ps 1.5 lw 2 lc 1 title 'pumaplus', '/work/main/notebooks/compare/compare-hello.png.dat' index 1 using ($1-0.075):11:12:13 with yerrorbars pt 7 ps 1.5 lw 2 lc 2 title 'puma', '/work/main/notebooks/compare/compare-hello.png.dat' index 2 using ($1+0.075):11:12:13 with yerrorbars pt 7 ps 1.5 lw 2 lc 3 title 'puma8', '/work/main/notebooks/compare/compare-hello.png.dat' index 3 using ($1+0.225):11:12:13 with yerrorbars pt 7 ps 1.5 lw 2 lc 4 title 'falcon'
unset multiplot
