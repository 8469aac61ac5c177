#!/usr/bin/env bash
# delayq on Redis side by side with BullMQ (issue 4): one redis-server (no persistence, so
# disk does not blur the comparison), flushed before every run; each scenario runs REPEAT
# times (default 3) and the median is printed with every run's value.
#
#   enqueue   200 000 jobs, 100-byte payload, due in 1-2 h, batches of 100:
#             delayq in-process (the Redis store from C++), delayq over HTTP (`delayq serve
#             --store redis://` + `delayq bench`), BullMQ Queue.addBulk.
#             Also Redis used_memory growth per scheduled job.
#   lateness  100 000 jobs due uniformly over 10 s (10 000 due/s): delayq in-process with 4
#             consumer threads, delayq over HTTP with 4 long-polling consumers, one BullMQ
#             Worker with concurrency 100. Lateness = received - due.
#
# `make bench-redis`, or scripts/bench-redis.sh [build-dir]. Needs node + npm for BullMQ (apt
# packages nodejs npm, installed here when missing) and the npm registry once.
set -euo pipefail
build=${1:-build}
repeat=${REPEAT:-3}
jobs=${JOBS:-200000}
root=$(cd "$(dirname "$0")/.." && pwd)
delayq=$build/delayq
engine_bench=$build/bench/delayq-engine-bench
for b in "$delayq" "$engine_bench"; do [ -x "$b" ] || { echo "build first: $b is missing" >&2; exit 1; }; done

if ! command -v npm >/dev/null; then DELAYQ_EXTRA_PACKAGES="nodejs npm" "$root/scripts/install-deps.sh"; fi
peers=$root/bench/peers
peer=$peers/bullmq
if [ ! -d "$peers/node_modules/bullmq" ]; then
  (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error) || {
    echo "npm ci in $peers failed: BullMQ comes from the npm registry" >&2; exit 1; }
fi

redis_port=${REDIS_PORT:-17380}
http_port=${PORT:-17071}
work=$(mktemp -d /tmp/delayq-bench-redis.XXXX)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
server_pid=
stop_server() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; server_pid=; }
trap 'stop_server; kill $redis_pid 2>/dev/null; wait $redis_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do redis-cli -p "$redis_port" PING >/dev/null 2>&1 && break; sleep 0.1; done
store=redis://127.0.0.1:$redis_port
flush() { redis-cli -p "$redis_port" FLUSHALL >/dev/null; }

start_server() {
  stop_server
  "$delayq" serve --listen 127.0.0.1:$http_port --store "$store" --threads 16 >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do curl -fs http://127.0.0.1:$http_port/healthz >/dev/null 2>&1 && return; sleep 0.1; done
  echo "server did not start: $(cat "$work/server.log")" >&2; exit 1
}

run() {  # run NAME COMMAND... : one run, its JSON line appended to $work/NAME
  local name=$1; shift
  flush
  "$@" 2>>"$work/errors.log" | tail -1 >>"$work/$name" || echo "{}" >>"$work/$name"
}
http_bench() { start_server; "$delayq" --server http://127.0.0.1:$http_port --json bench --no-progress "$@"; stop_server; }
bullmq() { node "$peer/bench.js" "$@" --port "$redis_port"; }

. "$(dirname "$0")/bench-lib.sh"

echo "delayq vs BullMQ $(node -p "require('$peers/node_modules/bullmq/package.json').version") on redis-server" \
  "$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'): median of $repeat runs on $(nproc) cores;" \
  "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$repeat"); do
  echo "  run $i of $repeat" >&2
  run enqueue-inproc "$engine_bench" enqueue --store "$store" --jobs "$jobs" --batch 100 --threads 4
  run enqueue-http http_bench --jobs "$jobs" --batch 100 --producers 4 --consumers 4 --window 10s
  run enqueue-bullmq bullmq enqueue --jobs "$jobs" --batch 100
  run late-inproc "$engine_bench" lateness --store "$store" --rate 10000 --seconds 10 --consumers 4
  run late-http http_bench --jobs 100000 --batch 100 --producers 4 --consumers 4 --window 10s
  run late-bullmq bullmq lateness --rate 10000 --seconds 10 --concurrency 100
done

echo "enqueue, $jobs jobs in batches of 100:"
report "  delayq, in-process Redis store" enqueue-inproc jobs_per_s; d_in=$M
report "  delayq serve --store redis:// over HTTP" enqueue-http enqueue_jobs_per_s; d_http=$M
report "  BullMQ Queue.addBulk" enqueue-bullmq jobs_per_s; b=$M
echo "Redis memory per scheduled job (INFO used_memory growth / jobs):"
report "  delayq" enqueue-inproc redis_bytes_per_job; d_mem=$M
report "  BullMQ" enqueue-bullmq redis_bytes_per_job; b_mem=$M
echo "lateness at 10 000 jobs due per second (ms):"
for f in p50_ms p99_ms max_ms early; do report "  delayq, in-process, 4 consumers" late-inproc $f ; done
for f in p50 p99 max lost duplicates early; do report "  delayq over HTTP, 4 consumers" late-http $f ; done
for f in p50_ms p99_ms max_ms early; do report "  BullMQ Worker, concurrency 100" late-bullmq $f ; done
awk -v a="$d_in" -v h="$d_http" -v b="$b" -v dm="$d_mem" -v bm="$b_mem" 'BEGIN {
  if (b > 0) printf "ratios: enqueue in-process %.1fx BullMQ, over HTTP %.1fx; memory per job %.2fx BullMQ\n", a / b, h / b, (bm > 0 ? dm / bm : 0) }'
if [ -s "$work/errors.log" ]; then echo "errors during the runs:" >&2; tail -20 "$work/errors.log" >&2; fi
