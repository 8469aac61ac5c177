#!/usr/bin/env bash
# CPU per request of a server and of its load generator, for docs/performance.md:
#   scripts/cpu-per-request.sh DURABILITY [delayq bench args...]
# e.g. scripts/cpu-per-request.sh sync --mode single --connections 16 --duration 5s
# Starts `build/delayq serve` on a fresh directory (127.0.0.1:17171), runs `delayq bench` against
# it, and prints requests (or jobs) per second, the server's and the load generator's CPU per
# request (utime + stime from /proc and from time(1)), and how busy the whole machine was.
set -euo pipefail
bin=${DELAYQ:-build/delayq}
durability=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" serve --listen 127.0.0.1:17171 --data "$dir/data" --durability "$durability" ${SERVE_ARGS:-} >"$dir/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -fs http://127.0.0.1:17171/healthz >/dev/null 2>&1 && break; sleep 0.1; done
server_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
machine() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $5 + $6}' /proc/stat; }
t0=$(server_ticks)
m0=$(machine)
out=$(/usr/bin/time -f '%U %S' -o "$dir/client" "$bin" --server http://127.0.0.1:17171 --json bench --no-progress "$@")
t1=$(server_ticks)
m1=$(machine)
kill "$pid"
wait "$pid" 2>/dev/null || true
python3 - "$out" "$t0" "$t1" "$m0" "$m1" "$(tail -1 "$dir/client")" <<'PY'
import json, os, sys
d = json.loads(sys.argv[1])
hz = os.sysconf("SC_CLK_TCK")
n = d.get("requests") or d["jobs"]
rate = d.get("requests_per_s") or d["enqueue_jobs_per_s"]
server = (int(sys.argv[3]) - int(sys.argv[2])) / hz
busy0, idle0 = map(int, sys.argv[4].split())
busy1, idle1 = map(int, sys.argv[5].split())
user, system = map(float, sys.argv[6].split())
busy = busy1 - busy0
print(f"{rate:.0f}/s  server {server / n * 1e6:.1f} us/request  load generator {(user + system) / n * 1e6:.1f} us/request  "
      f"machine {busy / (busy + idle1 - idle0) * 100:.0f}% busy ({busy / hz / n * 1e6:.1f} us of all CPUs per request)")
PY
