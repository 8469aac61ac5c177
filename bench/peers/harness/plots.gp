# The three plots of bench/results: gnuplot -e "data='DIR'; out='DIR'; memory=1" plots.gp (memory=0: no memory plot)
set terminal pngcairo size 960,600 font "DejaVu Sans,11" noenhanced
set key left top box opaque
set grid
load data.'/titles.gp'

set output out.'/peers-lateness.png'
set title 'Delivery lateness: '.burst_n.' jobs due over '.burst_s.' s, 4 consumers (the run with the median p99)'
set logscale x
set xrange [0.1:20000]
set yrange [0:1]
set xlabel 'received - due, ms (log scale; 0.1 or less shown at 0.1)'
set ylabel 'fraction of jobs delivered'
set bmargin 7
set key at screen 0.5, screen 0.02 center bottom horizontal maxrows 2 nobox
files = system('cut -f1 '.data.'/cdf-systems.txt')
plot for [i=1:words(files)] word(files, i) using 1:2 with lines lw 2 title system(sprintf("sed -n %dp %s/cdf-systems.txt | cut -f2", i, data))

unset logscale x
set xrange [*:*]
set yrange [0:*]
set key inside left top box opaque vertical maxrows 3
set xtics rotate by -20 scale 0
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set format y '%.0f'

set output out.'/peers-throughput.png'
set title 'Throughput (medians): enqueue in the burst ('.burst_n.') and the memory run ('.memory_n.'); delivery in the burst'
set ylabel 'jobs per second'
set xlabel ''
plot data.'/throughput.dat' using 2:xtic(1) title 'enqueue, burst', '' using 3 title 'enqueue, memory run (due in 1-2 h)', '' using 4 title 'delivered/s, burst with 4 consumers'

# No memory plot when no system ran the memory workload (the PostgreSQL subset: SYSTEMS=...).
if (memory) {
  set output out.'/peers-memory.png'
  set title 'Memory per scheduled job: '.memory_n.' jobs due 1-2 h ahead (medians)'
  set ylabel 'bytes per job (RSS or Redis used_memory growth)'
  set boxwidth 0.6
  unset key
  plot data.'/memory.dat' using 2:xtic(1) notitle lc rgb '#4477aa'
}
