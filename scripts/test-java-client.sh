#!/usr/bin/env bash
# The Java client's build and tests, as CTest's JavaClient runs them: javac (warnings are errors)
# of the client into a jar, then its JUnit 5 tests against real servers ($DELAYQ_BIN) with
# Debian's junit5 console launcher. There is no Maven Central here: clients/java/pom.xml is for
# users and is not used. Output goes to $DELAYQ_JAVA_BUILD (default build/java).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${DELAYQ_JAVA_BUILD:-$root/build/java}"
junit=/usr/share/java/junit-platform-console-standalone.jar
[[ -f $junit ]] || { echo "no $junit: install Debian's junit5 (scripts/install-deps.sh does)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/classes" "$out/test-classes"
cd "$root/clients/java"  # the tests run examples/ from here
mapfile -t main < <(find "$root/clients/java/src/main/java" -name '*.java' | sort)
mapfile -t tests < <(find "$root/clients/java/src/test/java" -name '*.java' | sort)
javac --release 17 -Xlint:all -Werror -d "$out/classes" "${main[@]}"
jar --create --file "$out/delayq-client.jar" -C "$out/classes" .
javac --release 17 -Xlint:all -Xlint:-processing -Werror -cp "$out/delayq-client.jar:$junit" -d "$out/test-classes" "${tests[@]}"
DELAYQ_CLIENT_JAR="$out/delayq-client.jar" java -jar "$junit" --disable-banner --disable-ansi-colors --fail-if-no-tests \
  --class-path "$out/delayq-client.jar:$out/test-classes" --scan-class-path --details=tree --details-theme=ascii "$@"
