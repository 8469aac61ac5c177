#!/usr/bin/env bash
# PostgreSQL's tests run as the `postgres` user when the suite runs as root (initdb refuses root),
# and that user must reach /usr through /. A root directory without search permission for others
# (mode 0700: a chroot unpacked from a mktemp directory, as ../shared/tools/fresh-debian-check
# makes one) keeps it out: every PostgreSQL test then failed with "initdb: error while loading
# shared libraries: libpq.so.5: cannot open shared object file: Permission denied". Run as root,
# this gives / the mode Debian ships it with (0755) and says so. `make test` runs it first.
set -euo pipefail
mode=$(stat -c %a /)
if (((8#$mode & 8#005) == 8#005)) || [ "$(id -u)" != 0 ]; then exit 0; fi
echo "note: / has mode $mode, which keeps the postgres user (PostgreSQL's tests) out of /usr; setting 0755, as Debian ships it"
chmod 0755 /
