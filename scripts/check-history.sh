#!/usr/bin/env bash
# `make check-history`: delayq-check (docs/reliability.md) in every mode for DURATION each, on
# the embedded store and on Redis. Prints each verdict, appends each result as a JSON line to
# BUILD/check-history.jsonl, and ends with a table; exits 1 if any mode failed.
# Needs root (FUSE for the disk faults), redis-server and PostgreSQL 15 (scripts/install-deps.sh installs
# them).
set -uo pipefail
build=${1:-build}
duration=${2:-60s}
check=$build/delayq-check
[ -x "$check" ] || { echo "build first: $check is missing" >&2; exit 1; }
out=$build/check-history.jsonl
: >"$out"
failed=0

run() {  # run ARGS...: one mode
  echo "== delayq-check --duration $duration $*"
  "$check" --duration "$duration" --json "$out" "$@" | tail -n 40 || failed=1
}

for f in none kill-server kill-consumers stop-server clock-step disk-full disk-error power-cut; do
  run --store embedded --durability sync --fault "$f"
done
for d in interval none; do
  run --store embedded --durability "$d" --fault kill-server
  run --store embedded --durability "$d" --fault power-cut
done
for f in none kill-server kill-consumers stop-server clock-step; do
  run --store redis --fault "$f"
done
run --store redis --servers 2 --fault kill-server
for a in always everysec; do
  run --store redis --fault redis-restart --redis-appendfsync "$a"
  run --store redis --fault power-cut --redis-appendfsync "$a"
done
run --store redis --fault redis-failover
run --store redis --fault redis-failover --redis-wait-replicas 1
run --store redis-cluster --fault kill-server
for f in none kill-server kill-consumers stop-server pg-restart pg-terminate pg-failover; do
  run --store postgres --fault "$f"
done
run --store postgres --servers 2 --fault kill-server

echo
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| mode | verdict | ops | acknowledged | deliveries | faults | anomalies | lost | lateness p50 / p99 ms |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
for r in rows:
    lost = str(r["lost"])
    if r["loss_expected"] and r["lost"]:
        lost += f' (within {r["lost_window_ms"]:.0f} ms of a fault, by design)'
    print(f'| {r["mode"]} | {"PASS" if r["pass"] else "FAIL"} | {r["ops"]} | {r["acknowledged"]} | {r["deliveries"]} '
          f'| {r["faults"]} | {r["anomalies"]} | {lost} | {r["lateness_p50_ms"]:.0f} / {r["lateness_p99_ms"]:.0f} |')
PY
exit $failed
