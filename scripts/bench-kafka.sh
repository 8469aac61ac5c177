#!/usr/bin/env bash
# The Kafka forwarder against librdkafka's mock cluster (issue 5), each scenario REPEAT times
# (default 3), medians printed with every run's value. Brokers, forwarder and load generator run
# in one process on the same cores in every scenario, so the ratios are fair; the absolute
# figures are the mock's, not a real cluster's.
#
#   raw        consume level topics and produce each message to a target (idempotent, acks=all),
#              no delay logic: the mock's own consume-then-produce rate
#   forward    the forwarder on level topics preloaded with due messages, at-least-once and
#              exactly-once; 10-byte and 2 KB messages
#   lateness   5 000 messages/s for 10 s with delays uniform in 0-3 s over levels
#              100ms,500ms,1s,2s (most messages cascade); lateness = confirmed (forwarder) or
#              received (a reader of the target topic) - due
#
# `make bench-kafka`, or scripts/bench-kafka.sh [build-dir].
set -euo pipefail
build=${1:-build}
repeat=${REPEAT:-3}
bench=$build/bench/delayq-kafka-bench
[ -x "$bench" ] || { echo "build first: $bench is missing" >&2; exit 1; }
work=$(mktemp -d /tmp/delayq-bench-kafka.XXXX)
trap 'rm -rf "$work"' EXIT

run() {  # run NAME ARGS... : one run, its JSON line appended to $work/NAME
  local name=$1; shift
  timeout 300 "$bench" "$@" 2>>"$work/errors.log" | tail -1 >>"$work/$name" || echo "{}" >>"$work/$name"
}
. "$(dirname "$0")/bench-lib.sh"

echo "delayq forward on librdkafka $(dpkg-query -W -f='${Version}' librdkafka1 2>/dev/null)'s mock cluster" \
  "(3 brokers): median of $repeat runs on $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$repeat"); do
  echo "  run $i of $repeat" >&2
  run raw-10 raw --messages 400000 --size 10 --partitions 32
  run alo-10 forward --messages 400000 --size 10 --partitions 32
  run eos-10 forward --messages 400000 --size 10 --partitions 32 --exactly-once
  run raw-2k raw --messages 100000 --size 2048 --partitions 64
  run alo-2k forward --messages 100000 --size 2048 --partitions 64
  run eos-2k forward --messages 100000 --size 2048 --partitions 64 --exactly-once
  run late-alo lateness --rate 5000 --seconds 10 --size 10
  run late-eos lateness --rate 5000 --seconds 10 --size 10 --exactly-once
done

echo "throughput, messages/s (first to last confirmation):"
report "  raw consume-produce, 10 B" raw-10 msgs_per_s; r10=$M
report "  forward at-least-once, 10 B" alo-10 msgs_per_s; a10=$M
report "  forward exactly-once, 10 B" eos-10 msgs_per_s; e10=$M
report "  raw consume-produce, 2 KB" raw-2k msgs_per_s; r2=$M
report "  forward at-least-once, 2 KB" alo-2k msgs_per_s; a2=$M
report "  forward exactly-once, 2 KB" eos-2k msgs_per_s; e2=$M
echo "lateness at 5 000 messages/s, delays 0-3 s (ms):"
for f in forward_p50_ms forward_p99_ms reader_p50_ms reader_p99_ms reader_max_ms early cascaded; do
  report "  at-least-once" late-alo $f
done
for f in forward_p50_ms forward_p99_ms reader_p50_ms reader_p99_ms reader_max_ms early; do
  report "  exactly-once" late-eos $f
done
awk -v r10="$r10" -v a10="$a10" -v e10="$e10" -v r2="$r2" -v a2="$a2" -v e2="$e2" 'BEGIN {
  printf "forwarder / raw: 10 B %.2f (at-least-once) %.2f (exactly-once); 2 KB %.2f / %.2f\n",
    a10 / r10, e10 / r10, a2 / r2, e2 / r2 }'
if [ -s "$work/errors.log" ]; then echo "errors during the runs:" >&2; grep -v '^%' "$work/errors.log" | tail -20 >&2 || true; fi
