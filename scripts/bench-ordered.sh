#!/usr/bin/env bash
# Priorities and fair groups against the plain path, on the embedded store and on Redis (issue
# 30: the ordered path at >= 0.9x the plain one on both stores). REPEAT interleaved rounds of
# `delayq-engine-bench reserve-ack` per store and variant: plain, priorities 0-9, 10 groups,
# 1 000 groups with priorities. Each run enqueues JOBS ready jobs, then times their reserve +
# ack in batches of 100; on Redis it also prints the commands Redis ran per job.
#
# `make bench-ordered`, or scripts/bench-ordered.sh [build-dir]. Environment: REPEAT (3), JOBS
# (100000 embedded; Redis takes a quarter). Writes bench/results/ordered.md. ~6 minutes.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$build/bench/delayq-engine-bench
[ -x "$bench" ] || { echo "build first: $bench is missing (make build)" >&2; exit 1; }
repeat=${REPEAT:-3}
jobs=${JOBS:-100000}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-ordered
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
wait_redis "$port"

variants=(plain prio g10 g1000p)
flags() {
  case $1 in
    plain) ;;
    prio) echo "--priorities 1" ;;
    g10) echo "--groups 10" ;;
    g1000p) echo "--groups 1000 --priorities 1" ;;
  esac
}
for run in $(seq "$repeat"); do
  for store in embedded redis; do
    for v in "${variants[@]}"; do
      # shellcheck disable=SC2046  # the flags are words
      if [ "$store" = redis ]; then
        redis-cli -p "$port" flushall >/dev/null
        "$bench" reserve-ack --store "redis://127.0.0.1:$port" --jobs $((jobs / 4)) --batch 100 $(flags "$v") >>"$work/$store-$v"
      else
        "$bench" reserve-ack --jobs "$jobs" --batch 100 $(flags "$v") >>"$work/$store-$v"
      fi
      echo "round $run: $store $v $(tail -1 "$work/$store-$v" | field jobs_per_s) jobs/s" >&2
    done
  done
done

out="$root/bench/results/ordered.md"
{
  echo "# Priorities and fair groups against the plain path"
  echo
  echo "Measured by \`make bench-ordered\` (scripts/bench-ordered.sh) on $(date -u '+%F %H:%M') UTC, delayq $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, $repeat interleaved rounds; medians of reserve + ack jobs/s (batches of 100), the ratio to the same store's plain path, and on Redis the commands it ran per job (\`INFO commandstats\`)."
  echo
  echo "| store | plain | priorities 0-9 | 10 groups | 1 000 groups + priorities |"
  echo "|---|--:|--:|--:|--:|"
  for store in embedded redis; do
    row="| $store"
    plain=$(field jobs_per_s <"$work/$store-plain" | median)
    for v in "${variants[@]}"; do
      m=$(field jobs_per_s <"$work/$store-$v" | median)
      cell=$(printf '%.0f' "$m")
      [ "$v" != plain ] && cell="$cell ($(python3 -c "print(f'{$m / $plain:.2f}')")x)"
      if [ "$store" = redis ]; then
        calls=$(field redis_calls_per_job <"$work/$store-$v" | median)
        cell="$cell, $calls calls/job"
      fi
      row="$row | $cell"
    done
    echo "$row |"
  done
  echo
  echo "Runs (jobs/s):"
  echo
  for store in embedded redis; do
    for v in "${variants[@]}"; do
      echo "- $store $v: $(field jobs_per_s <"$work/$store-$v" | tr '\n' ' ')"
    done
  done
} >"$out"
cat "$out"
