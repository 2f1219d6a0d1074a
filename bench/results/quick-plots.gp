set terminal pngcairo size 1100,520 noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
set xtics rotate by -30
set output '/work/main/bench/results/quick-hits-throughput.png'
set multiplot layout 1,2 title 'cache-hit GET: shardgate vs nginx static (median of runs)'
set title 'requests/s (4 KiB)'
plot '/work/main/bench/results/quick-hits.dat' every ::0::2 using 4:xtic(1) title 'shardgate', '' every ::0::2 using 5 title 'nginx'
set title 'MB/s (1 MiB, 64 MiB)'
plot '/work/main/bench/results/quick-hits.dat' every ::3 using 2:xtic(1) title 'shardgate', '' every ::3 using 3 title 'nginx'
unset multiplot
set output '/work/main/bench/results/quick-hits-p99.png'
set logscale y
set title 'cache-hit GET: p99 latency (ms, log scale), shardgate vs nginx static'
plot '/work/main/bench/results/quick-hits.dat' using 6:xtic(1) title 'shardgate', '' using 7 title 'nginx'
unset logscale y
set output '/work/main/bench/results/quick-late-joiner.png'
set logscale y
set xtics norotate
set title 'late joiners on one cold 64 MiB object (100 MiB/s cold tier): time to first body byte per client (ms, log)'
set xlabel 'client (joins 50 ms after the previous one)'
plot '/work/main/bench/results/quick-late-joiner.dat' using 2:xtic(1) title 'shardgate', '' using 3 title 'nginx proxy_cache_lock'
unset logscale y
unset xlabel
set output '/work/main/bench/results/quick-hits-ratio.png'
set style histogram errorbars gap 1 lw 1
set xtics rotate by -30
set yrange [0:*]
set title 'cache-hit GET: shardgate / nginx static throughput, median and min-max of the run pairs (goal >= 1.0)'
plot '/work/main/bench/results/quick-hits-ratio.dat' using 2:3:4:xtic(1) title 'shardgate / nginx', 1 with lines lc rgb 'red' dt 2 title 'parity'
