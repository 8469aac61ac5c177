#!/usr/bin/env bash
# Batch enqueue on the Redis store from one server process, a queue spread over shards (issue 30:
# batch enqueue >= 100 000 jobs/s from one server; pipelined batches across shards). REPEAT
# interleaved rounds of `delayq-engine-bench enqueue` (batches of 100, JOBS jobs) per layout:
#   one Redis, 1 shard, 4 threads;  one Redis, 4 shards, 1 thread;
#   a 2-master Redis Cluster (slots split in half), 4 shards, 1 thread and 4 threads.
# Every process shares this machine's cores (no pinning: scripts/bench-capacity.sh pins).
#
# `make bench-shards`, or scripts/bench-shards.sh [build-dir]. Environment: REPEAT (5), JOBS
# (100000). Writes bench/results/shards.md. ~2 minutes.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$build/bench/delayq-engine-bench
[ -x "$bench" ] || { echo "build first: $bench is missing (make build)" >&2; exit 1; }
repeat=${REPEAT:-5}
jobs=${JOBS:-100000}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-shards
single=$(free_port)
plain_redis "$single"
cluster_ports 2
for p in "${nodes[@]}"; do plain_redis "$p" --cluster-enabled yes --cluster-config-file nodes.conf; done
form_cluster 8192  # slots split in half

layouts=(single-1x4 single-4x1 cluster-4x1 cluster-4x4)
declare -A label flags
label[single-1x4]="one Redis, 1 shard, 4 threads"
flags[single-1x4]="--store redis://127.0.0.1:$single --shards 1 --threads 4"
label[single-4x1]="one Redis, 4 shards, 1 thread"
flags[single-4x1]="--store redis://127.0.0.1:$single --shards 4 --threads 1"
label[cluster-4x1]="2-master cluster, 4 shards, 1 thread"
flags[cluster-4x1]="--store redis-cluster://127.0.0.1:${nodes[0]} --shards 4 --threads 1"
label[cluster-4x4]="2-master cluster, 4 shards, 4 threads"
flags[cluster-4x4]="--store redis-cluster://127.0.0.1:${nodes[0]} --shards 4 --threads 4"
for run in $(seq "$repeat"); do
  for l in "${layouts[@]}"; do
    for p in "$single" "${nodes[@]}"; do redis-cli -p "$p" flushall >/dev/null; done
    # shellcheck disable=SC2086  # the flags are words
    "$bench" enqueue --jobs "$jobs" --batch 100 ${flags[$l]} >>"$work/$l"
    echo "round $run: $l $(tail -1 "$work/$l" | field jobs_per_s) jobs/s" >&2
  done
done

out="$root/bench/results/shards.md"
{
  echo "# Batch enqueue on the Redis store, a queue over shards"
  echo
  echo "Measured by \`make bench-shards\` (scripts/bench-shards.sh) on $(date -u '+%F %H:%M') UTC, delayq $(git -C "$root" rev-parse --short HEAD), $(nproc) cores shared by every process, $repeat interleaved rounds of \`delayq-engine-bench enqueue --jobs $jobs --batch 100\` (in-process, no HTTP); jobs/s, median and runs."
  echo
  echo "| layout | jobs/s (median) | runs |"
  echo "|---|--:|---|"
  for l in "${layouts[@]}"; do
    echo "| ${label[$l]} | $(printf '%.0f' "$(field jobs_per_s <"$work/$l" | median)") | $(field jobs_per_s <"$work/$l" | tr '\n' ' ')|"
  done
} >"$out"
cat "$out"
