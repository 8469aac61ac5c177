#!/usr/bin/env bash
# Installs the Debian packages delayq builds and tests with, when any is missing.
# Idempotent and quiet: with everything present it only runs dpkg-query.
set -euo pipefail
packages=(
  g++ cmake ninja-build ccache pkg-config make git ca-certificates curl procps
  librocksdb-dev libhiredis-dev librdkafka-dev libboost-dev libboost-system-dev
  nlohmann-json3-dev libsimdjson-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libtomlplusplus-dev libhowardhinnant-date-dev tzdata redis-server nodejs
  chromium chromium-driver fuse3 libfuse3-dev faketime libssl-dev openssl
  python3 python3-pytest python3-venv python3-setuptools python3-wheel python3-yaml lua-check
  postgresql-15 libpq-dev python3-psycopg golang-go
  openjdk-17-jdk-headless junit5
)
# Extra packages for one target (e.g. the fuzz build's clang), from the environment.
read -r -a extra <<< "${DELAYQ_EXTRA_PACKAGES:-}"
packages+=("${extra[@]}")
# chromedriver reaches Chromium's DevTools at "localhost"; a bare root made by
# debootstrap (or a minimal container) has no /etc/hosts, so the name does not resolve there.
if ! getent hosts localhost >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >>/etc/hosts
    echo "added localhost to /etc/hosts (it did not resolve)"
  else
    echo "warning: \"localhost\" does not resolve; add \"127.0.0.1 localhost\" to /etc/hosts" >&2
  fi
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to apt-get install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists; refresh them once if the install cannot find a package.
if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/delayq-apt.log 2>&1; then
  $sudo apt-get update -q >>/tmp/delayq-apt.log 2>&1
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/delayq-apt.log 2>&1 \
    || { tail -20 /tmp/delayq-apt.log >&2; echo "apt-get install failed; full log in /tmp/delayq-apt.log" >&2; exit 1; }
fi
