#!/bin/sh
# An optional part's stand-in (the file built when its library is missing or turned off, such as
# src/store/sqlite_none.c without SQLite) compiles cleanly and defines every function the
# real files define, so the build without that library links too.
#     tests/build/check-stand-in.sh SOURCE_DIR CC STAND_IN REAL...      (paths under SOURCE_DIR)
set -eu
root=$1
cc=$2
stand_in=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags="-std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wmissing-prototypes -I$root/include -I$root/src -c"
# shellcheck disable=SC2086
"$cc" $flags "$root/$stand_in" -o "$tmp/stand-in.o"
nm -g --defined-only "$tmp/stand-in.o" | awk '{print $3}' | sort > "$tmp/stand-in"
: > "$tmp/real"
for real in "$@"; do
  # shellcheck disable=SC2086
  "$cc" $flags "$root/$real" -o "$tmp/real.o"
  nm -g --defined-only "$tmp/real.o" | awk 'NF == 3 && $3 !~ /^sxe__/ {print $3}' >> "$tmp/real"
done
sort -o "$tmp/real" "$tmp/real"
if ! diff -u "$tmp/real" "$tmp/stand-in"; then
  echo "check-stand-in: $stand_in does not define what $* define"
  exit 1
fi
echo "check-stand-in: ok, $(wc -l < "$tmp/stand-in") names in $stand_in and in $*"
