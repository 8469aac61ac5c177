#!/usr/bin/env bash
# The embedded engine's benchmark figures (issue 2 / SPEC section 9): each scenario runs
# REPEAT times (default 5) and the median of each figure is printed with every run's value.
# `make bench`, or scripts/bench-engine.sh [build-dir]. MEMORY=0 skips the 10 M-job run.
set -euo pipefail
build=${1:-build}
repeat=${REPEAT:-5}
bin=$build/bench/delayq-engine-bench
[ -x "$bin" ] || { echo "build first: $bin is missing" >&2; exit 1; }

field() { sed -n "s/.*\"$1\":\([-0-9.e]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

scenario() {  # scenario TITLE "FIELD..." ARGS...
  local title=$1 fields=$2; shift 2
  local out
  out=$(for _ in $(seq "$repeat"); do "$bin" "$@" 2>/dev/null; done)
  for f in $fields; do
    local values
    values=$(echo "$out" | field "$f" | tr '\n' ' ')
    printf '%-52s %-14s %10s   (runs: %s)\n' "$title" "$f" "$(echo "$values" | tr ' ' '\n' | grep . | median)" "$values"
  done
}

echo "delayq engine benchmark: median of $repeat runs on $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
scenario "enqueue, batches of 100, interval" jobs_per_s enqueue --durability interval --batch 100 --jobs 1000000
scenario "enqueue, single jobs, sync, 1 thread" jobs_per_s enqueue --durability sync --batch 1 --threads 1 --jobs 10000
scenario "enqueue, single jobs, sync, 16 threads" jobs_per_s enqueue --durability sync --batch 1 --threads 16 --jobs 40000
scenario "reserve+ack, batches of 100, interval" jobs_per_s reserve-ack --jobs 500000 --batch 100
scenario "lateness at 20 000 due/s, 4 consumers" "p50_ms p99_ms p999_ms max_ms engine_p99_ms early" \
  lateness --rate 20000 --seconds 10 --consumers 4
if [ "${MEMORY:-1}" = 1 ]; then
  echo "memory with ${MEMORY_JOBS:-10000000} scheduled jobs due over the next week (one run):"
  "$bin" memory --jobs "${MEMORY_JOBS:-10000000}" 2>/dev/null
fi
