#!/usr/bin/env bash
# The database's side of a delivery on the PostgreSQL store: delayq._reserve and delayq._ack, as
# the server calls them (the ack as with keep_completed_ms 0), measured inside PostgreSQL 15 as Debian ships it (fsync and
# synchronous_commit on). A queue holds JOBS jobs, all due; a procedure takes ROUNDS rounds of
# "reserve BATCH, commit, ack them, commit" and reports the database time each call took, per job.
# With BASELINE=<git revision>, that revision's schema (its SQL files, in a database of its own on
# the same PostgreSQL: pg-temp.sh baseline_schema) runs the same rounds; runs are interleaved,
# each on a freshly loaded and vacuumed queue. Writes bench/results/postgres/reserve-ack.md.
#
# `make bench-pg-reserve`, or scripts/bench-pg-reserve.sh [build-dir]. Environment: REPEAT (5),
# JOBS (100000), ROUNDS (100), BATCH (60), BASELINE (none), OUT (bench/results/postgres). ~1 minute.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
delayq=$build/delayq
[ -x "$delayq" ] || { echo "build first: $delayq is missing (make build)" >&2; exit 1; }
repeat=${REPEAT:-5}
jobs=${JOBS:-100000}
rounds=${ROUNDS:-100}
batch=${BATCH:-60}
out=${OUT:-$root/bench/results/postgres}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
scratch delayq-pg-reserve
# shellcheck source=scripts/pg-temp.sh
. "$root/scripts/pg-temp.sh"
start_temp_postgres

schemas=(current)
psql_ "CREATE DATABASE current"
"$delayq" migrate "${url%/postgres}/current" >/dev/null
if [ -n "${BASELINE:-}" ]; then
  baseline_schema
  schemas+=(baseline)
fi

# The rounds, as a procedure (it commits between calls, as the server does). The tokens are drawn
# before the clock starts: the server draws them, not the database. A schema whose _reserve takes
# no tokens (before they came from the server) is called without them.
for s in "${schemas[@]}"; do
  if [ "$(psql -qtAX "${url%/postgres}/$s" -c "SELECT max(pronargs) FROM pg_proc WHERE proname = '_reserve'")" = 5 ]; then
    call="delayq._reserve('q', batch, NULL, 1000000000, tokens)"
  else
    call="delayq._reserve('q', batch, NULL, 1000000000)"
  fi
  # The ack as the server of that schema calls it with keep_completed_ms 0: from schema version 6
  # (the waits for an outcome) the five-argument _ack, which looks for waiters; before, the three.
  if [ "$(psql -qtAX "${url%/postgres}/$s" -c "SELECT to_regclass('delayq.waiting') IS NOT NULL")" = t ]; then
    ack="delayq._ack('q', ids, toks, 0, array_fill(''::text, ARRAY[coalesce(array_length(ids, 1), 0)]))"
  else
    ack="delayq._ack('q', ids, toks)"
  fi
  psql -qtAX -v ON_ERROR_STOP=1 "${url%/postgres}/$s" >/dev/null <<SQL
INSERT INTO delayq.queues (name, created_at_ms) VALUES ('q', delayq.now_ms());
CREATE PROCEDURE public.rounds(rounds int, batch int, INOUT reserve_us float8 DEFAULT 0, INOUT ack_us float8 DEFAULT 0)
LANGUAGE plpgsql AS \$\$
DECLARE ids text[]; toks text[]; tokens text[]; t0 timestamptz; tr float8 := 0; ta float8 := 0; n bigint := 0;
BEGIN
  FOR i IN 1..rounds LOOP
    SELECT array_agg(md5(random()::text)) INTO tokens FROM generate_series(1, batch);
    t0 := clock_timestamp();
    SELECT array_agg(r.id), array_agg(r.token) INTO ids, toks FROM $call r;
    COMMIT;
    tr := tr + extract(epoch FROM clock_timestamp() - t0);
    n := n + coalesce(array_length(ids, 1), 0);
    t0 := clock_timestamp();
    PERFORM count(*) FROM $ack;
    COMMIT;
    ta := ta + extract(epoch FROM clock_timestamp() - t0);
  END LOOP;
  reserve_us := tr * 1e6 / n;
  ack_us := ta * 1e6 / n;
END \$\$;
SQL
done

load() {  # a queue of $jobs jobs, all due, 100-byte payloads, vacuumed and analyzed
  psql -qtAX -v ON_ERROR_STOP=1 "${url%/postgres}/$1" >/dev/null <<SQL
DELETE FROM delayq.jobs;
INSERT INTO delayq.jobs (queue, id, state, due_at_ms, max_attempts, payload, created_at_ms)
SELECT 'q', delayq._ulid(delayq.now_ms() - $jobs + g), 's', delayq.now_ms() - $jobs + g, 5,
       convert_to(repeat('x', 100), 'UTF8'), delayq.now_ms()
  FROM generate_series(1, $jobs) g;
SQL
  psql -qtAX "${url%/postgres}/$1" -c "VACUUM ANALYZE delayq.jobs" >/dev/null
}
for run in $(seq "$repeat"); do
  for s in "${schemas[@]}"; do
    load "$s"
    line=$(psql -qtAX -F ' ' "${url%/postgres}/$s" -c "CALL rounds($rounds, $batch)")
    read -r reserve ack <<<"$line"
    echo "{\"reserve\":$reserve,\"ack\":$ack}" >>"$work/$s"
    printf 'run %s %-8s reserve %.1f us/job, ack %.1f us/job\n' "$run" "$s" "$reserve" "$ack" >&2
  done
done

mkdir -p "$out"
{
  echo "# A delivery's database time on the PostgreSQL store: delayq._reserve and delayq._ack"
  echo
  echo "Measured by \`scripts/bench-pg-reserve.sh\` (REPEAT=$repeat JOBS=$jobs ROUNDS=$rounds BATCH=$batch) on $(date -u +%Y-%m-%d),"
  echo "$(nproc) cores, PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') as it ships (fsync and synchronous_commit on)."
  echo "current: the schema of $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src/store/postgres/sql || echo ' with uncommitted SQL')."
  [ -n "${BASELINE:-}" ] && echo "baseline: the schema of $(git -C "$root" rev-parse --short "$BASELINE")."
  echo "Each run: $jobs jobs due, then $rounds rounds of a reserve of $batch and the ack of what it took, each"
  echo "committed; the time of each call with its commit, per job. Medians of the runs, which were interleaved."
  echo
  echo "| schema | reserve µs/job (median) | runs | ack µs/job (median) | runs |"
  echo "|---|--:|---|--:|---|"
  for s in "${schemas[@]}"; do
    report "$s" "$s" reserve >/dev/null
    r=$(printf %.1f "$M")
    report "$s" "$s" ack >/dev/null
    echo "| $s | $r | $(field reserve <"$work/$s" | xargs printf '%.1f ') | $(printf %.1f "$M") | $(field ack <"$work/$s" | xargs printf '%.1f ')|"
  done
} >"$out/reserve-ack.md"
cat "$out/reserve-ack.md"
