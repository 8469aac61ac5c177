# shellcheck shell=bash
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

# scratch NAME: a scratch directory $work (/tmp/NAME.XXXX), a list pids of the processes a run
# starts and a list stops of commands that stop what a pid cannot (a server started under another
# user); all run, then the directory goes, when the script exits.
scratch() {
  work=$(mktemp -d "/tmp/$1.XXXX")
  pids=()
  stops=()
  # shellcheck disable=SC2154  # s and p are the trap's own loop variables
  trap 'for s in "${stops[@]}"; do eval "$s" || true; done
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        wait 2>/dev/null || true
        rm -rf "$work"' EXIT
}
