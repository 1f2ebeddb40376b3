# sweep.gp -- bench/results/sweep.png from the sweep table run.sh writes.
# gnuplot -e "data='sweep.dat'; out='sweep.png'; title='...'" bench/sweep.gp
# Columns: connections  requests/s  p50_ms  p99_ms  errors  gateway CPU µs/request
if (!exists("data")) data = 'bench/results/sweep.dat'
if (!exists("out")) out = 'bench/results/sweep.png'
if (!exists("title")) title = 'lockgate: acquire+release on random names'
set terminal pngcairo size 900,520 font ",10"
set output out
set title title
set logscale x
set xtics ("1" 1, "10" 10, "50" 50, "200" 200, "1000" 1000, "10000" 10000)
set xlabel "concurrent connections (wrk)"
set ylabel "requests/s (a cycle = 2 requests)"
set y2label "latency (ms, log); gateway CPU per request (µs, log)"
set logscale y2
set ytics nomirror
set y2tics
set yrange [0:*]
set grid xtics ytics
set key top left
plot data using 1:2 with linespoints lw 2 pt 7 title "requests/s", \
     data using 1:4 axes x1y2 with linespoints lw 2 pt 5 dt 2 title "p99 latency", \
     data using 1:3 axes x1y2 with linespoints lw 1 pt 4 dt 3 title "p50 latency", \
     data using 1:6 axes x1y2 with linespoints lw 1 pt 6 dt 4 title "gateway CPU µs/request"
