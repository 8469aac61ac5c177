#!/usr/bin/env bash
# Runs Prometheus' promtool (for `promtool check rules` / `promtool test rules` in the tests).
# Debian's prometheus package holds it, but installing that package starts a Prometheus server
# from its postinst; only the binary is needed, so it is taken out of the package (dpkg-deb -x)
# into a cache instead. `scripts/install-deps.sh` fetches it once; this runs it.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then exec promtool "$@"; fi
cache="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/delayq/prometheus"
bin="$cache/usr/bin/promtool"
if [ ! -x "$bin" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # A fresh machine has no package lists: refresh them once (as root) if the download fails.
  if ! (cd "$tmp" && apt-get download -q prometheus >"$tmp/log" 2>&1); then
    [ "$(id -u)" -eq 0 ] && apt-get update -q >>"$tmp/log" 2>&1
    (cd "$tmp" && apt-get download -q prometheus >>"$tmp/log" 2>&1) ||
      { cat "$tmp/log" >&2; echo "could not download Debian's prometheus package for promtool" >&2; exit 1; }
  fi
  mkdir -p "$cache"
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  mkdir -p "$cache/usr/bin"
  mv "$tmp/x/usr/bin/promtool" "$bin"
fi
exec "$bin" "$@"
