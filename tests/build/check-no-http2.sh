#!/bin/sh
# The build without libnghttp2 (-DSXE_HTTP2=OFF, or no libnghttp2-dev): src/http/server/h2_none.c
# compiles cleanly against server.h and defines every function h2.c, h2_send.c and h2_body.c define
# for the rest of the server (not what they share between them, in h2.h), so that build links too.
#     tests/build/check-no-http2.sh SOURCE_DIR [CC]
set -eu
root=$1
cc=${2:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set -- -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wmissing-prototypes -I"$root/include" \
  -I"$root/src" -c
"$cc" "$@" "$root/src/http/server/h2_none.c" -o "$tmp/none.o"
"$cc" "$@" "$root/src/http/server/h2.c" -o "$tmp/h2.o"
"$cc" "$@" "$root/src/http/server/h2_send.c" -o "$tmp/send.o"
"$cc" "$@" "$root/src/http/server/h2_body.c" -o "$tmp/body.o"
shared=$(grep -o 'sxe__h2_[a-z_]*(' "$root/src/http/server/h2.h" | tr -d '(' | sort -u)
nm -g --defined-only "$tmp/none.o" | awk '{print $3}' | sort > "$tmp/none"
nm -g --defined-only "$tmp/h2.o" "$tmp/send.o" "$tmp/body.o" | awk 'NF == 3 {print $3}' | sort |
  grep -v -x -F "$shared" > "$tmp/h2"
if ! diff -u "$tmp/h2" "$tmp/none"; then
  echo "check-no-http2: h2_none.c does not define what h2.c, h2_send.c and h2_body.c do"
  exit 1
fi
echo "check-no-http2: ok, $(wc -l < "$tmp/none") names in both"
