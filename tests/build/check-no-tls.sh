#!/bin/sh
# The build without OpenSSL (-DSXE_TLS=OFF, or no libssl-dev): src/core/transport_tls_none.c
# compiles cleanly against transport.h and defines every function src/core/transport_tls.c,
# tls_context.c and tls_tickets.c define for the rest of the library (not what they share between
# them), so that build links too.
#     tests/build/check-no-tls.sh SOURCE_DIR [CC]
set -eu
root=$1
cc=${2:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set -- -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wmissing-prototypes -I"$root/include" \
  -I"$root/src" -I"$root/src/core" -c
"$cc" "$@" "$root/src/core/transport_tls_none.c" -o "$tmp/none.o"
"$cc" "$@" "$root/src/core/transport_tls.c" -o "$tmp/tls.o"
"$cc" "$@" "$root/src/core/tls_context.c" -o "$tmp/context.o"
"$cc" "$@" "$root/src/core/tls_tickets.c" -o "$tmp/tickets.o"
nm -g --defined-only "$tmp/none.o" | awk '{print $3}' | sort > "$tmp/none"
nm -g --defined-only "$tmp/tls.o" "$tmp/context.o" "$tmp/tickets.o" | awk 'NF == 3 {print $3}' |
  grep -v -e '^sxe__tls_log_openssl$' -e '^sxe__tls_tickets$' | sort > "$tmp/tls"
if ! diff -u "$tmp/tls" "$tmp/none"; then
  echo "check-no-tls: transport_tls_none.c does not define what transport_tls.c does"
  exit 1
fi
echo "check-no-tls: ok, $(wc -l < "$tmp/none") functions in both"
