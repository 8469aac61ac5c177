#!/usr/bin/env bash
# A capacity model you can check (issue 30). For each layout, REPEAT runs of the burst (`delayq
# bench --mode burst`: JOBS jobs of 100 bytes due over WINDOW, 4 producers with batches of 100,
# 4 consumers on push streams; all enqueued before the first comes due), with every process pinned
# to a core by taskset. A sampler reads each process's CPU time (/proc/PID/stat) every 20 ms, so
# each run gives, per process, the CPU µs per job of the enqueue phase and of the delivery phase
# (delivery, ack and the scheduler's work). scripts/capacity_model.py turns the medians into jobs/s
# per delayq core and per Redis core, projects 1, 4 and 16 Redis Cluster masters, and checks the
# model against the last layout, where two masters are measured together.
#
# Layouts (this machine has 2 cores; the bench client gets the core the store's server has, and
# its CPU is not counted):
#   embedded   delayq serve --durability none on core 0; the client on core 1
#   redis      delayq on core 0; one redis-server (no persistence) on core 1, beside the client
#   cluster-2  delayq on core 0; a 2-master Redis Cluster, both masters on core 1, one queue over
#              2 shards (--redis-shards 2): the model's first step, with one Redis core to share
#              (the issue's layout, each master on a core of its own and the server on a third,
#              needs 3 cores)
#
# `make bench-capacity`, or scripts/bench-capacity.sh [build-dir]. Environment: REPEAT (3), JOBS
# (100000), WINDOW (10s), LEAD (20s), OUT (bench/results). ~5 minutes. Writes OUT/capacity.md and
# capacity.json.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
delayq=$(realpath "$build/delayq")
[ -x "$delayq" ] || { echo "build first: $delayq is missing (make build)" >&2; exit 1; }
repeat=${REPEAT:-3}
jobs=${JOBS:-100000}
window=${WINDOW:-10s}
lead=${LEAD:-20s}  # long enough to enqueue JOBS at 5 000 jobs/s
out=${OUT:-$root/bench/results}
[ "$(nproc)" -ge 2 ] || { echo "bench-capacity pins processes to 2 cores; this machine has $(nproc)" >&2; exit 1; }
command -v redis-server >/dev/null || "$root/scripts/install-deps.sh"

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-capacity
redis_pids=()
start_redis() {  # start_redis PORT [extra args]: a redis-server without persistence, on core 1
  local port=$1; shift
  mkdir -p "$work/redis-$port"
  taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/redis-$port" \
    --daemonize no "$@" >"$work/redis-$port/log" 2>&1 &
  pids+=($!)
  redis_pids+=($!)
  wait_redis "$port"
}
start_delayq() {  # start_delayq ARGS...: the server on core 0; sets port and delayq_pid
  port=$(free_port)
  rm -rf "$work/data"
  taskset -c 0 "$delayq" serve --listen "127.0.0.1:$port" --data "$work/data" "$@" >"$work/delayq.log" 2>&1 &
  delayq_pid=$!
  pids+=("$delayq_pid")
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$work/delayq.log" >&2; exit 1; }
}
stop_delayq() { kill "$delayq_pid"; wait "$delayq_pid" 2>/dev/null || true; }
# One burst; its JSON line, with the sampler's samples, appended to $work/runs.jsonl under LAYOUT.
# The enqueue runs alone first (--lead: the window starts LEAD after the bench does), so the
# phases are apart in time and the CPU between them is idle.
burst() {
  local layout=$1 run=$2 sampler bench_pid queue="capacity-$1-$2"
  [ "$layout" = cluster-2 ] && queue=capacity-cluster  # its shards are on both masters: form_cluster
  # The bench starts once the sampler has taken its first sample (exec keeps the waiting shell's
  # pid: the sampler watches the bench from before its first enqueue).
  rm -f "$work/go" "$work/samples"
  # shellcheck disable=SC2016  # expanded by the inner shell
  taskset -c 1 bash -c 'while [ ! -e "$1" ]; do sleep 0.01; done; shift; exec "$@"' _ "$work/go" \
    "$delayq" --json --server "http://127.0.0.1:$port" bench --mode burst --jobs "$jobs" \
    --window "$window" --lead "$lead" --no-progress --stream --queue "$queue" >"$work/bench.json" &
  bench_pid=$!
  local watched=("delayq=$delayq_pid" "client=$bench_pid") i
  for i in "${!redis_pids[@]}"; do watched+=("redis$i=${redis_pids[$i]}"); done
  python3 "$root/scripts/cpu_sampler.py" "$work/samples" "${watched[@]}" &
  sampler=$!
  until [ -s "$work/samples" ]; do sleep 0.01; done
  touch "$work/go"
  wait "$bench_pid" || { echo "the bench failed (layout $layout)" >&2; exit 1; }
  # The runs of cluster-2 share their queue: what is left of one (a delivery whose ack the bench
  # did not wait for) must not arrive in the next.
  "$delayq" --server "http://127.0.0.1:$port" delete-queue "$queue" --force >/dev/null
  kill "$sampler"
  wait "$sampler" 2>/dev/null || true
  python3 "$root/scripts/capacity_model.py" --run "$layout" "$run" "$lead" "$work/samples" "$work/bench.json" \
    >>"$work/runs.jsonl"
  echo "  $layout run $run: enqueue $(field enqueue_jobs_per_s <"$work/bench.json") jobs/s," \
    "lateness p50 $(field p50 <"$work/bench.json") ms" >&2
}

: >"$work/runs.jsonl"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "capacity: $jobs jobs due over $window, $repeat runs per layout, pinned; load before: $load_before" >&2

start_delayq --durability none
for run in $(seq "$repeat"); do burst embedded "$run"; done
stop_delayq

rport=$(free_port)
start_redis "$rport"
start_delayq --store "redis://127.0.0.1:$rport"
for run in $(seq "$repeat"); do burst redis "$run"; done
stop_delayq
redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
redis_pids=()

cluster_ports 2
for p in "${nodes[@]}"; do
  start_redis "$p" --cluster-enabled yes --cluster-config-file "$work/redis-$p/nodes.conf"
done
# One queue for the runs, its two shards' slots on different masters: the split between them.
s0=$(redis-cli -p "${nodes[0]}" cluster keyslot "{capacity-cluster#0}")
s1=$(redis-cli -p "${nodes[0]}" cluster keyslot "{capacity-cluster#1}")
form_cluster $((s0 > s1 ? s0 : s1))
start_delayq --store "redis-cluster://127.0.0.1:${nodes[0]}" --redis-shards 2
for run in $(seq "$repeat"); do burst cluster-2 "$run"; done
stop_delayq

mkdir -p "$out"
python3 "$root/scripts/capacity_model.py" "$work/runs.jsonl" "$out" "$(date -u +%F)" \
  "$(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(uname -sr)" "$load_before" \
  "delayq $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')"
