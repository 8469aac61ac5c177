#!/usr/bin/env bash
# The SQL API's enqueue inside the application's own transactions (issue 29's target: one job per
# transaction on 8 connections, >= 5 000 jobs/s): pgbench, 8 clients on 2 threads, each
# transaction one `SELECT delayq.enqueue(...)`, against PostgreSQL 15 as Debian ships it (fsync and
# synchronous_commit on) with a `delayq serve` listening on it. Side by side, interleaved, REPEAT
# runs of SECONDS each:
#   insert          a one-row INSERT into a plain table: what this machine commits at most
#   enqueue-30min   an order's timeout: delayq.enqueue('orders', '{"order": n}', delay_ms => 1800000)
#   keyed-30min     the same with key => 'order-n' (so the order can cancel it by key)
#   enqueue-now     due at once: the job's NOTIFY wakes waiting reserves at commit, and PostgreSQL
#                   commits notifying transactions one at a time (docs/postgres.md)
#   baseline        with BASELINE=<git revision>: enqueue-30min on that revision's schema (its SQL
#                   files, in a database of its own on the same PostgreSQL): a change's side-by-side
# pgbench sends each statement prepared (-M prepared), as an application's driver does.
# Writes bench/results/postgres/sql-enqueue.md.
#
# `make bench-pg-sql`, or scripts/bench-pg-sql.sh [build-dir]. Environment: REPEAT (3), SECONDS_EACH
# (15), CLIENTS (8), BASELINE (none), OUT (bench/results/postgres). ~4 minutes.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
delayq=$build/delayq
[ -x "$delayq" ] || { echo "build first: $delayq is missing (make build)" >&2; exit 1; }
repeat=${REPEAT:-3}
seconds=${SECONDS_EACH:-15}
clients=${CLIENTS:-8}
out=${OUT:-$root/bench/results/postgres}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-pg-sql
# shellcheck source=scripts/pg-temp.sh
. "$root/scripts/pg-temp.sh"
start_temp_postgres

port=$(free_port)
"$delayq" serve --listen "127.0.0.1:$port" --store "$url" --data "$work/data" >"$work/delayq.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$work/delayq.log" >&2; exit 1; }
psql_ "CREATE TABLE bench_plain (id bigserial PRIMARY KEY, queue text NOT NULL, payload bytea NOT NULL, due_at_ms bigint NOT NULL)"

variants=(insert enqueue-30min keyed-30min enqueue-now)
if [ -n "${BASELINE:-}" ]; then
  baseline_schema
  variants+=(baseline)
fi
script() {
  echo '\set n random(1, 1000000000)'
  case $1 in
    insert) echo "INSERT INTO bench_plain (queue, payload, due_at_ms) VALUES ('orders', convert_to('{\"order\": ' || :n || '}', 'UTF8'), 0);" ;;
    enqueue-30min | baseline) echo "SELECT delayq.enqueue('orders', ('{\"order\": ' || :n || '}')::json, delay_ms => 1800000);" ;;
    keyed-30min) echo "SELECT delayq.enqueue('orders', ('{\"order\": ' || :n || '}')::json, delay_ms => 1800000, key => 'order-' || :n);" ;;
    enqueue-now) echo "SELECT delayq.enqueue('now', ('{\"order\": ' || :n || '}')::json);" ;;
  esac
}
for v in "${variants[@]}"; do script "$v" >"$work/$v.sql"; done
for run in $(seq "$repeat"); do
  for v in "${variants[@]}"; do
    db=postgres
    [ "$v" = baseline ] && db=baseline
    "$pgbin/pgbench" -h 127.0.0.1 -p "$pgport" -U postgres -M prepared -n -c "$clients" -j 2 -T "$seconds" \
      -f "$work/$v.sql" "$db" >"$work/pgbench.out" 2>&1 || true
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/pgbench.out")
    [ -n "$tps" ] || { echo "pgbench gave no figure for $v:" >&2; tail -5 "$work/pgbench.out" >&2; exit 1; }
    echo "{\"tps\":$tps}" >>"$work/$v"
    echo "run $run $v: $tps transactions/s" >&2
  done
done
mkdir -p "$out"
{
  echo "# The SQL API's enqueue, one job per transaction, $clients connections"
  echo
  echo "Measured by \`scripts/bench-pg-sql.sh\` (REPEAT=$repeat SECONDS_EACH=$seconds CLIENTS=$clients) on $(date -u +%Y-%m-%d),"
  echo "$(nproc) cores, PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') as it ships (fsync and synchronous_commit on),"
  echo "$("$delayq" --version 2>/dev/null | head -1) from $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src/store/postgres/sql || echo ' with uncommitted SQL') (its schema) serving (listening) on it. pgbench -M prepared -c $clients -j 2; each transaction is one statement."
  [ -n "${BASELINE:-}" ] && echo "baseline: enqueue-30min on the schema of $(git -C "$root" rev-parse --short "$BASELINE") (no server on its database)."
  echo "Medians of the runs, which were interleaved."
  echo
  echo "| transaction | jobs/s (median) | runs |"
  echo "|---|--:|---|"
  for v in "${variants[@]}"; do
    report "$v" "$v" tps >/dev/null
    echo "| $v | $M | $(field tps <"$work/$v" | tr '\n' ' ')|"
  done
  echo
  echo "The transactions (pgbench scripts):"
  echo
  echo '```sql'
  for v in "${variants[@]}"; do echo "-- $v"; sed -n 2p "$work/$v.sql"; done
  echo '```'
} >"$out/sql-enqueue.md"
cat "$out/sql-enqueue.md"
