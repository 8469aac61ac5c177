#!/usr/bin/env bash
# The Debian package as an administrator meets it (make check-deb; SPEC §11.5, issue 32):
#   1. `make deb` twice: revision 1, and revision 2 of the same version (a newer build);
#   2. a fresh Debian 12 root (debootstrap minbase, cached as fresh-debian-check caches it);
#   3. apt install ./delayq_…-1.deb: the delayq user, /etc/delayq/delayq.toml, the unit,
#      /var/lib/delayq owned by delayq and closed to others;
#   4. delayq serve --config /etc/delayq/delayq.toml as the delayq user: jobs enqueued, one
#      delivered and acked, others left (one ready, one due in an hour);
#   5. the config edited, then apt install ./delayq_…-2.deb (an upgrade): the edit kept, the jobs
#      still there, delivered by the new binary;
#   6. apt remove keeps the jobs and the user; apt purge deletes them;
#   7. lintian on the package: every finding is fixed or explained in packaging/deb/lintian-overrides.
# Root only (chroot). The server listens on the host's loopback (a chroot shares the network).
set -euo pipefail
root_dir="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root_dir"
[[ $(id -u) -eq 0 ]] || { echo "deb_test: needs root (chroot, apt in the fresh root)" >&2; exit 1; }
port=${DELAYQ_DEB_TEST_PORT:-7481}
url="http://127.0.0.1:$port"
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
step() { echo "deb_test: $*"; }

step "building revisions 1 and 2"
make --no-print-directory deb DEB_REVISION=1 >/dev/null
make --no-print-directory deb DEB_REVISION=2 >/dev/null
deb1=$(ls build-deb/delayq_*-1_*.deb)
deb2=$(ls build-deb/delayq_*-2_*.deb)

base=/tmp/fresh-debian-check-base.tar  # the root fresh-debian-check makes and caches
if [[ ! -f $base ]]; then
  step "debootstrap of a Debian 12 minbase root (cached in $base)"
  tmp=$(mktemp -d /tmp/dq-dbs.XXXX)
  debootstrap --variant=minbase --include=git,make,ca-certificates bookworm "$tmp" http://deb.debian.org/debian \
    >/tmp/dq-dbs.log 2>&1 || fail "debootstrap (/tmp/dq-dbs.log)"
  tar -C "$tmp" -cf "$base" . && rm -rf "$tmp"
fi
root=$(mktemp -d /tmp/delayq-deb-root.XXXX)
server=""
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null
  for m in dev/pts dev sys proc; do umount -l "$root/$m" 2>/dev/null || true; done
  grep -q " $root/" /proc/mounts || rm -rf --one-file-system "$root"
}
trap cleanup EXIT
tar -C "$root" -xf "$base"
chmod 0755 "$root"  # the cached root's / is 0700 (mktemp's): the delayq user could not reach /usr in it
cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
cp "$deb1" "$deb2" "$root/tmp/"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

step "apt install ./$(basename "$deb1") in a fresh Debian 12 root"
in_root apt-get update -q >/tmp/delayq-deb-apt.log 2>&1 || fail "apt-get update (/tmp/delayq-deb-apt.log)"
in_root apt-get install -y -q "/tmp/$(basename "$deb1")" >>/tmp/delayq-deb-apt.log 2>&1 || fail "install (/tmp/delayq-deb-apt.log)"
in_root getent passwd delayq >/dev/null || fail "no delayq user"
uid=$(in_root id -u delayq) gid=$(in_root id -g delayq)  # numeric: the host's names are not the root's
[[ $(stat -c '%u:%g %a' "$root/var/lib/delayq") == "$uid:$gid 700" ]] || fail "/var/lib/delayq is $(stat -c '%u:%g %a' "$root/var/lib/delayq"), not $uid:$gid 700"
[[ $(stat -c '%u:%g %a' "$root/etc/delayq/delayq.toml") == "0:$gid 640" ]] || fail "the config is $(stat -c '%u:%g %a' "$root/etc/delayq/delayq.toml"), not 0:$gid 640"
grep -q '^ExecStart=/usr/bin/delayq serve --config /etc/delayq/delayq.toml$' "$root/lib/systemd/system/delayq.service" \
  || fail "the unit does not run the config, or adds a flag that would win over /etc/default/delayq"
[[ -f $root/usr/share/delayq/clients/go/go.mod && -f $root/usr/share/java/delayq-client.jar ]] || fail "no Go or Java client"

serve() {  # as systemd would run it: the delayq user, the config; the port from the environment
  chroot --userspec="$uid:$gid" "$root" /usr/bin/env -i PATH=/usr/bin:/bin DELAYQ_LISTEN="127.0.0.1:$port" \
    /usr/bin/delayq serve --config /etc/delayq/delayq.toml >>"$root.serve.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do curl -fsS "$url/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "delayq serve did not get ready ($root.serve.log)"
}
stop() { kill -TERM "$server"; wait "$server" || true; server=""; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

step "serving with /etc/delayq/delayq.toml as the delayq user"
serve
ready=$(curl -fsS --json '{"payload": {"order": 1}}' "$url/v1/queues/orders/jobs" | json_field '["id"]')
later=$(curl -fsS --json '{"payload": {"order": 2}, "delay": "1h", "key": "order-2"}' "$url/v1/queues/orders/jobs" | json_field '["id"]')
done_=$(curl -fsS --json '{"payload": {"order": 3}}' "$url/v1/queues/orders/jobs" | json_field '["id"]')
got=$(curl -fsS --json '{"max": 2}' "$url/v1/queues/orders/reserve")
receipt=$(echo "$got" | python3 -c "import json,sys; print([j['receipt'] for j in json.load(sys.stdin)['jobs'] if j['id']=='$done_'][0])")
other=$(echo "$got" | python3 -c "import json,sys; print([j['receipt'] for j in json.load(sys.stdin)['jobs'] if j['id']!='$done_'][0])")
curl -fsS --json "{\"receipt\": \"$receipt\"}" "$url/v1/queues/orders/ack" >/dev/null
curl -fsS --json "{\"receipt\": \"$other\"}" "$url/v1/queues/orders/release" >/dev/null

# The clients the package ships, as their READMEs use them: an application module whose replace
# directive names /usr/share/delayq/clients/go, and the jar with the Java example (queue "shop").
step "the packaged Go and Java clients deliver a job"
if command -v go >/dev/null; then
  app=$(mktemp -d /tmp/delayq-deb-go.XXXX)
  cp "$root/usr/share/delayq/clients/go/examples/ordertimeout/main.go" "$app/"
  sed -i 's/"orders"/"shop"/' "$app/main.go"
  (cd "$app" && go mod init example.com/app >/dev/null 2>&1 &&
    go mod edit -require=github.com/delayq/delayq/clients/go@v0.0.0 \
      -replace=github.com/delayq/delayq/clients/go="$root/usr/share/delayq/clients/go" &&
    GOFLAGS=-mod=mod GOPROXY=off go run . "$url") >"$app.log" 2>&1 || fail "the Go example ($app.log)"
  grep -q "order 42: completed" "$app.log" || fail "the Go example delivered nothing ($app.log)"
  rm -rf "$app" "$app.log"
fi
if command -v java >/dev/null; then
  sed 's/"orders"/"shop-java"/' "$root/usr/share/doc/delayq/examples/java/OrderTimeout.java" >/tmp/OrderTimeout.java
  java -cp "$root/usr/share/java/delayq-client.jar" /tmp/OrderTimeout.java "$url" >/tmp/delayq-deb-java.log 2>&1 \
    || fail "the Java example (/tmp/delayq-deb-java.log)"
  grep -q "order 42: completed" /tmp/delayq-deb-java.log || fail "the Java example delivered nothing (/tmp/delayq-deb-java.log)"
fi
stop

step "an edited config, then apt install ./$(basename "$deb2") (an upgrade)"
echo '# kept across upgrades' >>"$root/etc/delayq/delayq.toml"
in_root apt-get install -y -q -o Dpkg::Options::=--force-confold "/tmp/$(basename "$deb2")" >>/tmp/delayq-deb-apt.log 2>&1 \
  || fail "upgrade (/tmp/delayq-deb-apt.log)"
# shellcheck disable=SC2016 # dpkg's field, not the shell's
in_root dpkg-query -W -f='${Version}' delayq | grep -q -- '-2$' || fail "the upgrade did not install revision 2"
grep -q '^# kept across upgrades' "$root/etc/delayq/delayq.toml" || fail "the upgrade lost the edited config"
serve
[[ $(curl -fsS "$url/v1/queues/orders/jobs/$ready" | json_field '["state"]') == ready ]] || fail "the ready job is gone"
[[ $(curl -fsS "$url/v1/queues/orders/jobs?key=order-2" | json_field '["id"]') == "$later" ]] || fail "the later job is gone"
curl -fsS "$url/v1/queues/orders/jobs/$done_" >/dev/null 2>&1 && fail "the acked job came back"
again=$(curl -fsS --json '{"max": 10}' "$url/v1/queues/orders/reserve" | json_field '["jobs"][0]["id"]')
[[ $again == "$ready" ]] || fail "the new binary delivered $again, not $ready"
stop

step "apt remove keeps the jobs; apt purge deletes them"
in_root apt-get remove -y -q delayq >>/tmp/delayq-deb-apt.log 2>&1 || fail "remove"
[[ -n $(ls -A "$root/var/lib/delayq") ]] || fail "remove deleted the jobs"
in_root getent passwd delayq >/dev/null || fail "remove deleted the user"
in_root apt-get purge -y -q delayq >>/tmp/delayq-deb-apt.log 2>&1 || fail "purge"
[[ ! -e $root/var/lib/delayq ]] || fail "purge left /var/lib/delayq"
[[ ! -e $root/etc/delayq ]] || fail "purge left /etc/delayq"
in_root getent passwd delayq >/dev/null && fail "purge left the user"

if command -v lintian >/dev/null; then
  step "lintian $(basename "$deb2")"
  # Findings are fixed, or explained in the package's own override file (packaging/deb/lintian-overrides).
  if lintian --fail-on error,warning "$deb2"; then :; else fail "lintian findings above (fix them, or explain them in packaging/deb/lintian-overrides)"; fi
fi
step "PASS: installed, served, delivered, upgraded with the jobs kept, removed and purged"
