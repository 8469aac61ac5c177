#!/usr/bin/env bash
# delayq side by side with the delay queues users would pick instead (issue 6): the same
# workloads, the same harness (bench/peers/harness), the same machine, in one run.
#
#   burst   100 000 jobs due over 10 s, 4 consumers: every system, at each of its durability
#           settings; 1 consumer: every system without its fsync twins
#   single  one job per request, 16 connections, 5 s: delayq, beanstalkd and the sorted set at
#           the settings that sync before answering, and delayq and beanstalkd at the others
#   memory  1 000 000 jobs due 1-2 h ahead: one system per in-memory structure
#   crash   10 000 jobs due in 3 s, the consumer SIGKILLed and restarted: every system but
#           the fsync twins (a consumer's crash does not touch the server's disk)
# The PostgreSQL queues (delayq on PostgreSQL, by HTTP and by its SQL API; pg-boss;
# graphile-worker) each get a fresh PostgreSQL 15 with its shipped settings, in burst, single
# and crash; their memory is their tables', so they sit out the memory workload.
# Runs are interleaved (repetition 1 of everything, then 2, ...) so slow drift in the machine's
# load spreads over all systems. Writes bench/results/peers.{md,json} and peers-*.png.
#
# `make bench-peers`, or scripts/bench-peers.sh [build-dir]. Environment: REPEAT (3),
# BURST_N (100000), MEMORY_N (1000000), CRASH_N (10000), SINGLE_SECONDS (5), SYSTEMS (all; a space-separated
# subset), OUT (bench/results).
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=${REPEAT:-3}
burst_n=${BURST_N:-100000}
memory_n=${MEMORY_N:-1000000}
crash_n=${CRASH_N:-10000}
out=${OUT:-$root/bench/results}
delayq=$build/delayq
[ -x "$delayq" ] || { echo "build first: $delayq is missing (make build)" >&2; exit 1; }

extra="beanstalkd gnuplot-nox"
command -v npm >/dev/null || extra+=" nodejs npm"  # (a Node.js from elsewhere brings its own npm)
DELAYQ_EXTRA_PACKAGES="$extra" "$root/scripts/install-deps.sh"
peers=$root/bench/peers
missing=
for m in bullmq jackd undici pg pg-boss graphile-worker; do [ -d "$peers/node_modules/$m" ] || missing=1; done
if [ -n "$missing" ]; then
  (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error) || {
    echo "npm ci in $peers failed: BullMQ, ioredis, jackd, undici, pg, pg-boss and graphile-worker come from the npm registry" >&2; exit 1; }
fi
# beanstalkd's Debian package starts a system service on 11300; the harness runs its own.

all="delayq-none delayq-none-stream delayq-redis delayq-redis-stream bullmq beanstalkd zset-poll zset-stream"
all+=" delayq-interval beanstalkd-binlog delayq-redis-everysec zset-poll-everysec"
all+=" delayq-sync beanstalkd-binlog-sync delayq-redis-always zset-poll-always"
# On one PostgreSQL 15 as it ships (synchronous_commit on), started afresh for each run.
all+=" delayq-postgres delayq-postgres-sql pg-boss graphile-worker"
selected=${SYSTEMS:-$all}
burst1="delayq-none delayq-none-stream delayq-redis delayq-redis-stream bullmq beanstalkd zset-poll zset-stream"
single="delayq-sync beanstalkd-binlog-sync zset-poll-always delayq-interval beanstalkd-binlog delayq-none beanstalkd"
single+=" delayq-postgres delayq-postgres-sql pg-boss graphile-worker"
single_seconds=${SINGLE_SECONDS:-5}
crash="$burst1 delayq-postgres pg-boss graphile-worker"  # the stream consumers: a kill gives their jobs back at once
memory="delayq-none delayq-redis bullmq beanstalkd zset-poll"
has() { [[ " $1 " == *" $2 "* ]] && [[ " $selected " == *" $2 "* ]]; }

work=$(mktemp -d /tmp/delayq-bench-peers.XXXX)
trap 'rm -rf "$work"' EXIT
# Every run's line is kept (with its lateness CDF) so the report can be redrawn:
# node bench/peers/harness/report.js bench/results/tmp/peers-runs.jsonl ...
mkdir -p "$out/tmp"
runs=$out/tmp/peers-runs.jsonl
: >"$runs"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)

one() {  # one SYSTEM WORKLOAD N CONSUMERS [run.js options]: a run, its JSON line (or error) appended to $runs
  local line err
  printf '  %-22s %-7s n=%-8s consumers=%s ... ' "$1" "$2" "$3" "$4" >&2
  if line=$(timeout 300 node "$peers/harness/run.js" --system "$1" --workload "$2" --n "$3" --consumers "$4" \
      --delayq "$delayq" "${@:5}" 2>"$work/stderr"); then
    echo "$line" >>"$runs"
    echo "$line" | node -e 'const r=JSON.parse(require("fs").readFileSync(0,"utf8"));
      console.error(r.workload==="memory" ? `${r.bytes_per_job} B/job, ${r.enqueue_per_s} enq/s`
        : r.workload==="single" ? `${r.enqueue_per_s} requests/s`
        : `p99 ${r.lateness_ms.p99} ms, lost ${r.lost}, dup ${r.duplicates}, early ${r.early}, ${r.enqueue_per_s} enq/s`)'
  else
    err=$(grep -v '^\s*at ' "$work/stderr" | tail -3 | tr '\n"' ' '"'"'')
    echo "FAILED: $err" >&2
    printf '{"system":"%s","workload":"%s","n":%s,"consumers":%s,"error":"%s"}\n' "$1" "$2" "$3" "$4" "$err" >>"$runs"
  fi
}

echo "delayq and its peers, $repeat repetitions on $(nproc) cores; load before: $load_before" >&2
for i in $(seq "$repeat"); do
  echo "repetition $i of $repeat ($(( $(date +%s) - started )) s so far)" >&2
  for s in $all; do has "$all" "$s" && one "$s" burst "$burst_n" 4; done
  for s in $burst1; do has "$burst1" "$s" && one "$s" burst "$burst_n" 1; done
  for s in $single; do has "$single" "$s" && one "$s" single 0 0 --seconds "$single_seconds"; done
  for s in $crash; do has "$crash" "$s" && one "$s" crash "$crash_n" 1; done
  for s in $memory; do has "$memory" "$s" && one "$s" memory "$memory_n" 0; done
done
elapsed=$(( $(date +%s) - started ))

versions="delayq $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'),"
versions+=" beanstalkd $(dpkg-query -W -f='${Version}' beanstalkd 2>/dev/null), node $(node --version),"
versions+=" bullmq $(node -p "require('$peers/node_modules/bullmq/package.json').version"),"
versions+=" ioredis $(node -p "require('$peers/node_modules/ioredis/package.json').version"),"
versions+=" jackd $(node -p "require('$peers/node_modules/jackd/package.json').version")"
versions+=", undici $(node -p "require('$peers/node_modules/undici/package.json').version")"
versions+=", PostgreSQL $(/usr/lib/postgresql/15/bin/postgres --version | awk '{print $3}'), pg $(node -p "require('$peers/node_modules/pg/package.json').version")"
versions+=", pg-boss $(node -p "require('$peers/node_modules/pg-boss/package.json').version")"
versions+=", graphile-worker $(node -p "require('$peers/node_modules/graphile-worker/package.json').version")"
machine="$(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr)"
meta=$(node -e 'console.log(JSON.stringify({date: process.argv[1], machine: process.argv[2], repeat: +process.argv[3],
  load_before: process.argv[4], load_after: process.argv[5], versions: process.argv[6], seconds: +process.argv[7]}))' \
  "$(date -u +%Y-%m-%d)" "$machine" "$repeat" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "$versions" "$elapsed")
echo "$meta" >"$out/tmp/peers-meta.json"
node "$peers/harness/report.js" "$runs" "$out" "$work/plot" "$meta"
memory=0
grep -q '^[^#]' "$work/plot/memory.dat" 2>/dev/null && memory=1  # a row below the header
gnuplot -e "data='$work/plot'; out='$out'; memory=$memory" "$peers/harness/plots.gp"
echo "wrote $out/peers.md, peers.json, peers-lateness.png, peers-throughput.png, peers-memory.png in $elapsed s" >&2
