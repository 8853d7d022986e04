#!/bin/sh
# The build without jansson (-DSXE_JSON=OFF, or no libjansson-dev): src/base/json_parse_none.c
# compiles cleanly and defines every function json_parse.c defines, so that build links too.
#     tests/build/check-no-json.sh SOURCE_DIR [CC]
set -eu
root=$1
cc=${2:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set -- -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wmissing-prototypes -I"$root/include" \
  -I"$root/src" -c
"$cc" "$@" "$root/src/base/json_parse_none.c" -o "$tmp/none.o"
"$cc" "$@" "$root/src/base/json_parse.c" -o "$tmp/json.o"
nm -g --defined-only "$tmp/none.o" | awk '{print $3}' | sort > "$tmp/none"
nm -g --defined-only "$tmp/json.o" | awk 'NF == 3 {print $3}' | sort > "$tmp/json"
if ! diff -u "$tmp/json" "$tmp/none"; then
  echo "check-no-json: json_parse_none.c does not define what json_parse.c does"
  exit 1
fi
echo "check-no-json: ok, $(wc -l < "$tmp/none") names in both"
