#!/usr/bin/env bash
# `cmake --install` into a fresh prefix, then what a user does with it: examples/ built out of the
# tree against find_package(delayq CONFIG) with warnings as errors, the client example built from
# pkg-config's flags alone, and both run against the installed `delayq serve`.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d /tmp/delayq-install-test.XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/delayq/client.h include/delayq/engine.h lib/libdelayq_client.a lib/cmake/delayq/delayqConfig.cmake \
         lib/pkgconfig/delayq.pc bin/delayq; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
if grep -rhoE '#include "[^"]+"' "$prefix/include" | grep -v '"delayq/'; then
  echo "an installed header includes something outside delayq/"; exit 1
fi
"$prefix/bin/delayq" --version | grep -q '^delayq [0-9]'

cmake -S "$src/examples" -B "$work/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/examples" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
g++ -Wall -Wextra -Wpedantic -Werror "$src/examples/client_worker.cc" -o "$work/client_worker_pc" \
    $(pkg-config --cflags --libs --static delayq)

"$prefix/bin/delayq" serve --listen 127.0.0.1:0 --port-file "$work/port" --data "$work/data" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 500); do [ -s "$work/port" ] && break; sleep 0.02; done  # the server writes the port once it listens
url="http://127.0.0.1:$(cat "$work/port")"
"$work/examples/client_worker" "$url" | tee "$work/out1" | grep -q 'cancelling unpaid order {"orderId":42}'
"$work/client_worker_pc" "$url" | grep -q 'cancelling unpaid order {"orderId":42}'
"$work/examples/demo" "$work/demo-data" >"$work/demo.log" || { cat "$work/demo.log"; exit 1; }
echo "installed, built against with CMake and pkg-config, and ran: ok"
