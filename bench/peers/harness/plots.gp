# The three plots of bench/results: gnuplot -e "data='DIR'; out='DIR'" plots.gp
set terminal pngcairo size 960,540 font "DejaVu Sans,11" noenhanced
set key left top box opaque
set grid

set output out.'/peers-lateness.png'
set title 'Delivery lateness, burst of 100 000 jobs due over 10 s, 4 consumers (the median run)'
set logscale x
set xrange [0.1:20000]
set yrange [0:1]
set xlabel 'received - due (ms, log scale; early or on time shown at 0.01)'
set ylabel 'fraction of jobs delivered'
set key right bottom
files = system('cut -f1 '.data.'/cdf-systems.txt')
plot for [i=1:words(files)] word(files, i) using 1:2 with lines lw 2 title system(sprintf("sed -n %dp %s/cdf-systems.txt | cut -f2", i, data))

unset logscale x
set xrange [*:*]
set yrange [0:*]
set key left top
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -25 scale 0
set format y '%.0f'

set output out.'/peers-throughput.png'
set title 'Throughput (medians): enqueue in the burst and in the 1 M memory run; delivery in the burst'
set ylabel 'jobs per second'
set xlabel ''
plot data.'/bars.dat' using 2:xtic(1) title 'enqueue (burst, 100 k)', '' using 3 title 'enqueue (1 M due in 1-2 h)', '' using 4 title 'delivered/s (burst, 4 consumers)'

set output out.'/peers-memory.png'
set title 'Memory per scheduled job, 1 000 000 jobs due 1-2 h ahead (medians)'
set ylabel 'bytes per job (RSS or Redis used_memory growth)'
plot data.'/bars.dat' using 5:xtic(1) title 'bytes per job' lc rgb '#4477aa'
