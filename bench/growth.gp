# bench/results/growth.png: gnuplot -e "data='DIR'; out='DIR'" growth.gp (scripts/bench-growth.sh)
set terminal pngcairo size 1200,420 font "DejaVu Sans,11" noenhanced
set output out.'/growth.png'
set multiplot layout 1,3 title 'delayq with 0, 1 M and 10 M jobs already scheduled (in-process, one run each)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid y
set key outside bottom center horizontal
set yrange [0:*]
set xlabel 'jobs already scheduled'
set title 'enqueue, batches of 100'
set ylabel 'jobs per second'
plot data.'/levels.dat' using 2:xtic(1) title 'embedded', '' using 3 title 'Redis'
set title 'lateness p99: 20 000 due/s (Redis 10 000)'
set ylabel 'ms'
plot data.'/levels.dat' using 4:xtic(1) title 'embedded', '' using 5 title 'Redis'
set title 'memory held'
set ylabel 'MiB (RSS; Redis: + used_memory)'
plot data.'/levels.dat' using 6:xtic(1) title 'embedded', '' using 7 title 'Redis'
unset multiplot
