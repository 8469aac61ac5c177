# shellcheck shell=bash
# Shared by the bench-pg-*.sh scripts: PostgreSQL 15 as Debian ships it (fsync and
# synchronous_commit on, autovacuum on) in $work/pg, on a free loopback port, as the postgres user
# when root (initdb refuses root). Sets pgport, url and pgbin, adds the server's stop to stops, and
# defines as_pg (run as postgres when root) and psql_ (one statement on url). Needs root (the
# checkout), work and stops (bench-lib.sh's scratch) set, and bench-lib.sh's free_port.
: "${root:?the checkout directory}" "${work:?a scratch directory}"
pgbin=/usr/lib/postgresql/15/bin
[ -x "$pgbin/postgres" ] || "$root/scripts/install-deps.sh"
as_pg() { if [ "$(id -u)" = 0 ]; then setpriv --reuid postgres --regid postgres --clear-groups "$@"; else "$@"; fi; }
start_temp_postgres() {
  if [ "$(id -u)" = 0 ]; then
    chmod 711 "$work"
    mkdir "$work/pg"
    chown postgres: "$work/pg"
  else
    mkdir "$work/pg"
  fi
  as_pg "$pgbin/initdb" -D "$work/pg/data" -A trust -U postgres --no-sync -E UTF8 --locale=C >/dev/null
  pgport=$(free_port)
  as_pg "$pgbin/postgres" -D "$work/pg/data" -p "$pgport" -k "$work/pg" -c listen_addresses=127.0.0.1 \
    >"$work/pg/log" 2>&1 &
  # $! is the shell that runs as_pg, not PostgreSQL (killing it left the server running): pg_ctl
  # stops the server by its data directory.
  stops+=("as_pg '$pgbin/pg_ctl' -D '$work/pg/data' -m fast -w stop >/dev/null 2>&1")
  url="postgres://postgres@127.0.0.1:$pgport/postgres"
  for _ in $(seq 100); do "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport" && break; sleep 0.1; done
  "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport" || { echo "PostgreSQL did not start:" >&2; tail -5 "$work/pg/log" >&2; exit 1; }
}
psql_() { psql -qtAX "$url" -c "$1"; }
# The database `baseline` with the schema of git revision $BASELINE: its sql/*.sql files in name
# order, as delayq migrate runs them, in one transaction (no server uses it, so no meta row).
baseline_schema() {
  local files
  psql_ "CREATE DATABASE baseline"
  files=$(git -C "$root" ls-tree --name-only "$BASELINE" src/store/postgres/sql/ | grep '\.sql$' | sort)
  for f in $files; do git -C "$root" show "$BASELINE:$f"; done |
    psql -qtAX -v ON_ERROR_STOP=1 -1 "${url%/postgres}/baseline" >/dev/null
}
