set terminal pngcairo size 1100,520 noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
set xtics rotate by -30
set output '/tmp/fills-ns/fills-hits-throughput.png'
set title 'cache-hit GET 4 KiB req/s'
plot '/tmp/fills-ns/fills-hits.dat' using 4:xtic(1) title 'shardgate', '' using 5 title 'nginx'
set output '/tmp/fills-ns/fills-hits-p99.png'
set title 'p99 ms'
plot '/tmp/fills-ns/fills-hits.dat' using 6:xtic(1) title 'shardgate', '' using 7 title 'nginx'
unset logscale y
unset xlabel
set output '/tmp/fills-ns/fills-hits-ratio.png'
set style histogram errorbars gap 1 lw 1
set xtics rotate by -30
set yrange [0:*]
set title 'cache-hit GET: shardgate / nginx static throughput, median and min-max of the run pairs (goal >= 1.0)'
plot '/tmp/fills-ns/fills-hits-ratio.dat' using 2:3:4:xtic(1) title 'shardgate / nginx', 1 with lines lc rgb 'red' dt 2 title 'parity'
