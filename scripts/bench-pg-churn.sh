#!/usr/bin/env bash
# delayq's tables on PostgreSQL as jobs churn (issue 29, item 4): LIVE jobs (100 000) scheduled a
# day ahead stay, while CHURN jobs (10 000 000) are enqueued, delivered and acked through the HTTP
# API in rounds of ROUND (`delayq bench --mode burst`: ROUND jobs handed in at once, due across
# WINDOW, so at most LIVE + ROUND jobs live at a time: 10 000 a second). After each round the size
# of delayq's tables and indexes (pg_total_relation_size) is printed beside the size with the live
# jobs alone; autovacuum runs with PostgreSQL's shipped settings, and the server's own VACUUM as
# it ships (docs/postgres.md).
# Writes bench/results/postgres/churn.md (and churn.jsonl, one line per round).
#
# `make bench-pg-churn`, or scripts/bench-pg-churn.sh [build-dir]. Environment: LIVE (100000),
# CHURN (10000000), ROUND (20000), WINDOW (2s), OUT (bench/results/postgres). ~30 minutes per
# 10 M on 2 cores.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
delayq=$build/delayq
[ -x "$delayq" ] || { echo "build first: $delayq is missing (make build)" >&2; exit 1; }
live=${LIVE:-100000}
churn=${CHURN:-10000000}
round=${ROUND:-20000}
window=${WINDOW:-2s}
out=${OUT:-$root/bench/results/postgres}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-pg-churn
# shellcheck source=scripts/pg-temp.sh
. "$root/scripts/pg-temp.sh"
start_temp_postgres

port=$(free_port)
"$delayq" serve --listen "127.0.0.1:$port" --store "$url" --data "$work/data" >"$work/delayq.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

size() { psql_ "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'delayq' AND c.relkind = 'r'"; }
psql_ "SELECT count(*) FROM generate_series(1, $live) g,
         LATERAL delayq.enqueue('live', to_json(repeat('x', 100) || g), delay_ms => 86400000)" >/dev/null
psql_ "VACUUM ANALYZE delayq.jobs"
base=$(size)
mkdir -p "$out"
lines=$out/churn.jsonl
: >"$lines"
echo "live $live jobs: $base bytes of tables and indexes" >&2
echo "{\"churned\":0,\"bytes\":$base,\"ratio\":1}" >>"$lines"
done_n=0
started=$(date +%s)
while [ "$done_n" -lt "$churn" ]; do
  "$delayq" --server "http://127.0.0.1:$port" bench --mode burst --queue churn --jobs "$round" --window "$window" \
    --lead 0ms --grace 30s --no-progress >"$work/round.txt" 2>&1 || { cat "$work/round.txt" >&2; exit 1; }
  done_n=$((done_n + round))
  bytes=$(size)
  ratio=$(python3 -c "print(round($bytes / $base, 2))")
  rate=$(sed -n 's/.*enqueue *\([0-9]*\) jobs\/s.*/\1/p' "$work/round.txt")
  echo "churned $done_n: $bytes bytes, ${ratio}x the live jobs alone (enqueue $rate jobs/s)" >&2
  echo "{\"churned\":$done_n,\"bytes\":$bytes,\"ratio\":$ratio,\"enqueue_per_s\":${rate:-null},\"seconds\":$(( $(date +%s) - started ))}" >>"$lines"
done
max=$(python3 -c "import json; print(max(json.loads(l)['ratio'] for l in open('$lines')))")
{
  echo "# delayq's tables on PostgreSQL through $churn churned jobs, $live live"
  echo
  echo "Measured by \`scripts/bench-pg-churn.sh\` (LIVE=$live CHURN=$churn ROUND=$round WINDOW=$window) on $(date -u +%Y-%m-%d),"
  echo "$(nproc) cores, PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') as it ships (autovacuum on), delayq $(git -C "$root" rev-parse --short HEAD)."
  echo "Tables and indexes with the live jobs alone: $base bytes. Largest since: ${max}x that."
  echo
  echo "| churned | bytes | × live alone | enqueue jobs/s |"
  echo "|--:|--:|--:|--:|"
  # About 20 rows: every k-th round, the last one and the largest (churn.jsonl has them all).
  python3 -c "
import json
rows = [json.loads(l) for l in open('$lines')]
k = max(1, len(rows) // 20)
top = max(range(len(rows)), key=lambda i: rows[i]['ratio'])
for i, r in enumerate(rows):
    if i % k == 0 or i == len(rows) - 1 or i == top:
        print(f\"| {r['churned']:,} | {r['bytes']:,} | {r['ratio']} | {r.get('enqueue_per_s') or '–'} |\")"
} >"$out/churn.md"
echo "wrote $out/churn.md" >&2
