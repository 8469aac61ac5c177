#!/usr/bin/env bash
# The Go client's checks, as CTest's GoClient runs them: gofmt, go vet, then go test against real
# servers ($DELAYQ_BIN). No module proxy here (GOPROXY=off): the client needs the standard library
# only. The build cache goes where the caller says (GOCACHE), or Go's default.
set -euo pipefail
cd "$(dirname "$0")/../clients/go"
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
  echo "gofmt would change: $unformatted (run gofmt -w clients/go)" >&2
  exit 1
fi
go vet ./...
go test -count=1 "$@" ./...
