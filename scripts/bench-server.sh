#!/usr/bin/env bash
# The server's benchmark figures (issue 3 / SPEC section 9) with `delayq bench`: each scenario
# runs REPEAT times (default 3) against a fresh `delayq serve` on a loopback port, and the
# median of each figure is printed with every run's value.
set -euo pipefail
build=${1:-build}
repeat=${REPEAT:-3}
bin=$build/delayq
[ -x "$bin" ] || { echo "build first: $bin is missing" >&2; exit 1; }
port=${PORT:-17070}
url=http://127.0.0.1:$port
data=$(mktemp -d /tmp/delayq-bench-server.XXXX)
pid=

start() {  # start DURABILITY
  stop
  rm -rf "$data/d"
  "$bin" serve --listen 127.0.0.1:$port --data "$data/d" --durability "$1" --threads 16 \
    >"$data/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -fs $url/healthz >/dev/null 2>&1 && return; sleep 0.1; done
  echo "server did not start: $(cat "$data/server.log")" >&2; exit 1
}
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap 'stop; rm -rf "$data"' EXIT

field() { sed -n "s/.*\"$1\":\([-0-9.e]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
scenario() {  # scenario TITLE DURABILITY "FIELD..." BENCH-ARGS...
  local title=$1 durability=$2 fields=$3; shift 3
  local out=""
  for _ in $(seq "$repeat"); do
    start "$durability"
    out+=$("$bin" --server $url --json bench --no-progress "$@" 2>/dev/null || true)$'\n'
  done
  for f in $fields; do
    local values
    values=$(echo "$out" | field "$f" | tr '\n' ' ')
    printf '%-58s %-20s %12s   (runs: %s)\n' "$title" "$f" "$(echo "$values" | tr ' ' '\n' | grep . | median)" "$values"
  done
}

echo "delayq server benchmark: median of $repeat runs on $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
scenario "enqueue over HTTP, batches of 100 (interval)" interval "enqueue_jobs_per_s" \
  --jobs 200000 --batch 100 --producers 4 --consumers 4 --window 10s
scenario "burst 100k over 10 s = 10 000 due/s, 4 consumers (interval)" interval \
  "p50 p90 p99 p999 max delivered lost duplicates early server_rss_bytes" \
  --jobs 100000 --batch 100 --producers 4 --consumers 4 --window 10s
scenario "single-job requests, 16 connections (sync)" sync "requests_per_s" \
  --mode single --connections 16 --duration 5s
scenario "single-job requests, 16 connections (interval)" interval "requests_per_s" \
  --mode single --connections 16 --duration 5s
scenario "10 000 idle long-polls (interval)" interval "waiting rss_before_bytes rss_with_polls_bytes bytes_per_poll idle_cpu_percent" \
  --mode idle-polls --polls 10000 --duration 10s
