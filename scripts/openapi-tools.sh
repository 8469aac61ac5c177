#!/usr/bin/env bash
# Installs the npm packages tests/openapi uses (a third-party OpenAPI 3.1 validator, and Ajv for
# the answers' JSON Schemas) into a cache, once, and prints the node_modules directory. npm is
# reachable from this project's machines for development tools; nothing of it ships.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/openapi/package.json"
# Debian's nodejs has no npm of its own (a Node.js from elsewhere brings one).
command -v npm >/dev/null || DELAYQ_EXTRA_PACKAGES="npm" "$root/scripts/install-deps.sh" >&2
cache="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/delayq/openapi-tools"
stamp="$cache/package.json"
if ! cmp -s "$src" "$stamp" || [ ! -d "$cache/node_modules/ajv" ]; then
  mkdir -p "$cache"
  cp "$root/tests/openapi/package-lock.json" "$cache/package-lock.json"
  cp "$src" "$cache/package.json.new"
  mv "$cache/package.json.new" "$cache/package.json"
  if ! (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error >"$cache/npm.log" 2>&1); then
    # Behind a proxy whose CA this root does not trust (a fresh root made from a bare Debian, say),
    # TLS to the registry fails. The lockfile pins every package's sha512 and npm checks it
    # whatever the transport, so a second try without TLS verification cannot take in anything
    # but those exact packages.
    if grep -qE "SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_" "$cache/npm.log"; then
      echo "npm: the registry's TLS certificate is not trusted here; installing the lockfile's packages by their sha512" >&2
      (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error --strict-ssl=false >>"$cache/npm.log" 2>&1) ||
        { cat "$cache/npm.log" >&2; rm -f "$stamp"; echo "npm install of the OpenAPI test tools failed" >&2; exit 1; }
    else
      cat "$cache/npm.log" >&2; rm -f "$stamp"; echo "npm install of the OpenAPI test tools failed" >&2; exit 1
    fi
  fi
fi
echo "$cache/node_modules"
