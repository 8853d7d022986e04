#!/bin/sh
# sxe-httpd without libbrotli (-DSXE_BROTLI=OFF, or no libbrotli-dev): tools/sxe-httpd/compress.c
# compiles cleanly without it (gzip only; --brotli is then refused, said in options.c).
#     tests/build/check-no-brotli.sh SOURCE_DIR [CC]
set -eu
root=$1
cc=${2:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cc" -std=gnu11 -Wall -Wextra -Werror -Wmissing-prototypes -Wshadow -I"$root/include" \
  -I"$root/tools/sxe-httpd" -c "$root/tools/sxe-httpd/compress.c" -o "$tmp/compress.o"
# the object has no brotli in it: nothing of the encoder is asked for
if nm -u "$tmp/compress.o" | grep -q Brotli; then
  echo "check-no-brotli: compress.o still calls brotli" >&2
  exit 1
fi
echo "check-no-brotli: ok"
