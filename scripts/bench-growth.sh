#!/usr/bin/env bash
# How delayq's cost grows with what is already scheduled (issue 16, item 6), in-process
# (delayq-engine-bench growth):
#   - the embedded store and one redis-server with 0, 1 M and 10 M jobs already scheduled: the
#     enqueue rate (batches of 100), the delivery lateness of 20 000 due/s (embedded; SPEC 9's
#     in-process figure) or 10 000 due/s (Redis: about what one Redis core carries, see
#     docs/operations.md) with 4 consumers, and the memory held (RSS; on Redis plus used_memory);
#   - the Redis store with --redis-shards 1, 2 and 4 on a local 4-master Redis Cluster, at 0
#     and 1 M scheduled.
# Writes bench/results/growth.{md,json} and growth.png (the runs' lines: bench/results/tmp).
#
# `make bench-growth`, or scripts/bench-growth.sh [build-dir]. Environment: LEVELS
# (0,1000000,10000000), SHARD_LEVELS (0,1000000), SHARDS ("1 2 4"), OUT (bench/results).
# Needs ~6 GiB of RAM for Redis at 10 M jobs; takes ~10 minutes on 2 cores.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$build/bench/delayq-engine-bench
[ -x "$bin" ] || { echo "build first: $bin is missing (make build)" >&2; exit 1; }
levels=${LEVELS:-0,1000000,10000000}
shard_levels=${SHARD_LEVELS:-0,1000000}
shards=${SHARDS:-1 2 4}
out=${OUT:-$root/bench/results}
DELAYQ_EXTRA_PACKAGES="gnuplot-nox" "$root/scripts/install-deps.sh"

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-bench-growth
mkdir -p "$out/tmp"
runs=$out/tmp/growth-runs.jsonl
: >"$runs"
started=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

start_redis() {  # start_redis PORT DIR [extra args]: a redis-server without persistence
  local port=$1 dir=$2; shift 2
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --daemonize no "$@" \
    >"$dir/redis.log" 2>&1 &
  pids+=($!)
  wait_redis "$port"
}
run() {  # run LABEL ARGS...: one growth run; its lines (tagged with LABEL) appended to $runs
  local label=$1; shift
  echo "  $label: $*" >&2
  # The result lines are JSON; anything else on stdout (the store's own log, e.g. RocksDB's write
  # stalls during a large fill) goes to stderr, not into the runs.
  "$bin" growth --dir "$work/engine" "$@" 2>"$work/stderr" |
    awk -v label="$label" '/^\{/ { sub(/^\{/, "{\"run\":\"" label "\","); print; fflush(); next } { print > "/dev/stderr" }' |
    tee -a "$runs" >&2 || {
    tail -5 "$work/stderr" >&2; exit 1; }
  rm -rf "$work/engine"
}

echo "delayq cost growth on $(nproc) cores; load before: $load_before" >&2
run embedded --levels "$levels"

port=$(free_port)
start_redis "$port" "$work/redis"
run redis --levels "$levels" --rate 10000 --store "redis://127.0.0.1:$port"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true

# A 4-master cluster (no replicas).
cluster_ports 4
for p in "${nodes[@]}"; do
  start_redis "$p" "$work/cluster-$p" --cluster-enabled yes --cluster-config-file "$work/cluster-$p/nodes.conf"
done
form_cluster
for n in $shards; do
  for p in "${nodes[@]}"; do redis-cli -p "$p" flushall >/dev/null; done
  run "cluster-shards-$n" --levels "$shard_levels" --rate 10000 --store "redis-cluster://127.0.0.1:${nodes[0]}" --shards "$n"
done
elapsed=$(( $(date +%s) - started ))

machine="$(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr)"
python3 "$root/bench/growth_report.py" "$runs" "$out" "$work/plot" \
  "$(date -u +%Y-%m-%d)" "$machine" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "delayq $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')" \
  "$elapsed"
gnuplot -e "data='$work/plot'; out='$out'" "$root/bench/growth.gp"
echo "wrote $out/growth.md, growth.json, growth.png in $elapsed s" >&2
