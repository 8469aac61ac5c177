# Shared by the bench-*.sh scripts: each run appends one JSON line to $work/NAME; these print
# the median of a field over the runs, with every run's value.
field() { sed -n "s/.*\"$1\":\([-0-9.e]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
report() {  # report TITLE NAME FIELD: prints the median and every run's value; sets M
  local values
  values=$(field "$3" <"$work/$2" | tr '\n' ' ')
  M=$(echo "$values" | tr ' ' '\n' | grep . | median)
  printf '%-46s %-20s %12s   (runs: %s)\n' "$1" "$3" "$M" "$values"
}
