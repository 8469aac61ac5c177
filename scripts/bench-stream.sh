#!/usr/bin/env bash
# Push delivery against long-poll, side by side (issue 30): one embedded `delayq serve` (its
# default durability, sync), REPEAT interleaved runs of each of `delayq bench --mode burst` (JOBS
# jobs of 100 bytes due over WINDOW, 4 producers, 4 consumers) with long-polling consumers and
# with push streams (--stream). For each run: the server's CPU per job (delayq_process_cpu_seconds
# _total before and after, over the jobs: enqueue, delivery and ack), and the lateness.
#
# `make bench-stream`, or scripts/bench-stream.sh [build-dir]. Environment: REPEAT (3), JOBS
# (100000), WINDOW (10s). ~2 minutes.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
delayq=$build/delayq
[ -x "$delayq" ] || { echo "build first: $delayq is missing (make build)" >&2; exit 1; }
repeat=${REPEAT:-3}
jobs=${JOBS:-100000}
window=${WINDOW:-10s}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-stream
port=$(free_port)
"$delayq" serve --listen "127.0.0.1:$port" --data "$work/data" >"$work/delayq.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$work/delayq.log" >&2; exit 1; }
cpu() { curl -fs "http://127.0.0.1:$port/metrics" | awk '/^delayq_process_cpu_seconds_total/ {print $2}'; }

for run in $(seq "$repeat"); do
  for mode in long-poll stream; do
    flag=()
    [ "$mode" = stream ] && flag=(--stream)
    before=$(cpu)
    out=$("$delayq" --json --server "http://127.0.0.1:$port" bench --mode burst --jobs "$jobs" --window "$window" \
      --no-progress --queue "bench-$mode-$run" "${flag[@]}")
    after=$(cpu)
    us=$(python3 -c "print(round(($after - $before) * 1e6 / $jobs, 1))")
    echo "$out" | tail -1 | sed "s/^{/{\"server_cpu_us_per_job\":$us,/" >>"$work/$mode"
    echo "$mode run $run: server CPU $us us/job" >&2
  done
done
echo "push delivery against long-poll: $jobs jobs due over $window, $repeat interleaved runs each, $(date -u +%F)"
for mode in long-poll stream; do
  report "$mode" "$mode" server_cpu_us_per_job
  report "$mode" "$mode" p50
  report "$mode" "$mode" p99
done
