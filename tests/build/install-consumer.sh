#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds every example against the installed sxe the
# way a user outside the tree would: with pkg-config (shared and static) and with CMake's
# find_package. Each resulting program must run.
# Usage: install-consumer.sh BUILD_DIR SOURCE_DIR C_COMPILER [FLAGS]
# FLAGS are what the build's own objects need at link time (sanitizers, coverage).
set -euo pipefail
build=$1
source=$2
cc=$3
read -r -a flags <<<"${4:-}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# On any failure, say which command failed and show what it printed.
log=$scratch/log
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND"; cat "$log" 2>/dev/null' ERR

cmake --install "$build" --prefix "$scratch/prefix" >"$log" 2>&1
pcdir=$(dirname "$(find "$scratch/prefix" -name sxe.pc | head -n 1)")
export PKG_CONFIG_PATH=$pcdir
libdir=$(realpath "$(pkg-config --variable=libdir sxe)")
pkg-config --exists --print-errors sxe

test -f "$libdir/libsxe.a" || { echo "FAIL: no libsxe.a in $libdir"; exit 1; }

# The programs run from any prefix (libsxe is linked in), and their manual pages say every option
# their --help does.
for program in sxe-httpd sxe-http sxe-httpctl; do
  binary=$scratch/prefix/bin/$program
  version=$(env -u LD_LIBRARY_PATH "$binary" --version | awk '{print $2}')
  page=$scratch/prefix/share/man/man1/$program.1
  test -f "$page" || { echo "FAIL: no manual page $page"; exit 1; }
  grep -qF ".TH ${program^^} 1 \"\" \"sxe $version\"" "$page" || {
    echo "FAIL: $page does not name version $version"; exit 1; }
  for option in $("$binary" --help | grep -oE -- '(^| )--?[a-z][a-z-]*' | sort -u); do
    grep -qF -- "$(sed 's/-/\\-/g' <<<"$option")" "$page" || {
      echo "FAIL: $program --help has $option, its manual page does not"; exit 1; }
  done
done
test -f "$scratch/prefix/share/doc/sxe/http.md" || { echo "FAIL: the docs are not installed"; exit 1; }
# The dictionary's programs, installed, explain themselves (sxe-dict carries its page inside).
for program in sxe-dict sxe-dict-build sxe-dict-update; do
  env -u LD_LIBRARY_PATH "$scratch/prefix/bin/$program" --help | grep -q "^usage: $program " || {
    echo "FAIL: $program is not installed, or its --help does not say how to use it"; exit 1; }
done

# A program linked against libsxe.so in a custom prefix finds it with the README's RPATH recipe,
# without LD_LIBRARY_PATH, and runs on the library it was built against.
cat > "$scratch/which.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <sxe/sxe.h>
int main(void)
{
    printf("%s\n", sxe_version());
    return strcmp(sxe_version(), SXE_VERSION) != 0;
}
C
# shellcheck disable=SC2046
"$cc" "${flags[@]}" -o "$scratch/which" "$scratch/which.c" $(pkg-config --cflags --libs sxe) \
  -Wl,-rpath,"$(pkg-config --variable=libdir sxe)"
[ "$(env -u LD_LIBRARY_PATH "$scratch/which")" = "$version" ] || {
  echo "FAIL: a program with the RPATH recipe does not run on the installed libsxe.so"; exit 1; }
test -f "$libdir/libsxe.so" || { echo "FAIL: no libsxe.so in $libdir"; exit 1; }

# The shared library exports the public API and hides the internals.
exported=$(nm -D --defined-only "$libdir/libsxe.so" | awk '{print $3}')
if grep -E '^sxe__(sys|clock|pool)' <<<"$exported"; then
  echo "FAIL: libsxe.so exports internal symbols"; exit 1
fi
grep -qx sxe_strerror <<<"$exported" || {
  echo "FAIL: libsxe.so does not export sxe_strerror"; exit 1; }

mkdir -p "$scratch/cmake-consumer"
cat > "$scratch/cmake-consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(sxe 0.1 REQUIRED)
file(GLOB examples "$source/examples/*.c")
foreach(example \${examples})
  get_filename_component(name \${example} NAME_WE)
  add_executable(\${name} \${example})
  target_link_libraries(\${name} PRIVATE sxe::sxe_static)
endforeach()
CMAKE

# Runs a server for a second, then stops it with SIGTERM alone and waits up to 10 s for a clean
# exit. Not coreutils' timeout: it follows SIGTERM with SIGCONT, and a SIGCONT that arrives after
# LeakSanitizer's exit-time tracer has attached (SIGSTOP pending) discards that SIGSTOP, so the
# tracer waits forever and the ASan build hangs (seen in CI under load).
run_and_stop() {
  "$@" >"$log" 2>&1 &
  local pid=$! waited=0
  # A server given IP:PORT may take a while to start under load (http-fiber maps and faults in
  # 10,000 fiber stacks first): give it up to 10 s to listen before the second it runs for, so
  # SIGTERM does not arrive before it can take it.
  if [[ ${2:-} == *:* ]] && command -v ss >/dev/null; then
    while kill -0 "$pid" 2>/dev/null && ! ss -Hltnp 2>/dev/null | grep -q "pid=$pid," &&
      [ $waited -lt 100 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    waited=0
  fi
  sleep 1
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt 100 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: $1 did not stop within 10 s of SIGTERM:"
    grep -E '^(State|Sig)' "/proc/$pid/status" || true
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    return 1
  fi
  wait "$pid"
}

count=0
for example in "$source"/examples/*.c; do
  name=$(basename "$example" .c)
  # shellcheck disable=SC2046
  "$cc" "${flags[@]}" -o "$scratch/$name-shared" "$example" $(pkg-config --cflags --libs sxe)
  # shellcheck disable=SC2046
  "$cc" "${flags[@]}" -o "$scratch/$name-static" "$example" $(pkg-config --cflags sxe) \
    "$libdir/libsxe.a" $(pkg-config --static --libs-only-other sxe) \
    $(pkg-config --static --libs-only-l sxe | sed 's/-lsxe\b//')
  # Servers get port 0 (any free port) and a SIGTERM after a second, and must stop cleanly.
  port=0
  case $name in echo | http-* | sse | upload | ws-*) port=127.0.0.1:0 ;; esac
  more=()
  [ "$name" != ws-chat ] || more=("$source/examples/ws-chat.html") # the page it serves
  LD_LIBRARY_PATH=$libdir SXE_LOG_LEVEL=4 run_and_stop "$scratch/$name-shared" "$port" "${more[@]}" || {
    echo "FAIL: $name built against libsxe.so did not run:"; cat "$log"; exit 1; }
  # Capture first: grep -q would stop reading early, and pipefail would count ldd's SIGPIPE.
  linked=$(LD_LIBRARY_PATH=$libdir ldd "$scratch/$name-shared")
  grep -q "$libdir/libsxe.so" <<<"$linked" || {
    echo "FAIL: $name-shared is not linked to the installed libsxe.so"; exit 1; }
  SXE_LOG_LEVEL=4 run_and_stop "$scratch/$name-static" "$port" "${more[@]}" || {
    echo "FAIL: $name built against libsxe.a did not run:"; cat "$log"; exit 1; }
  count=$((count + 1))
done

cmake -S "$scratch/cmake-consumer" -B "$scratch/cmake-consumer/build" -G Ninja \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${flags[*]}" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
  >"$log" 2>&1
cmake --build "$scratch/cmake-consumer/build" >"$log" 2>&1
echo "ok: $count examples built against the installed sxe with pkg-config (shared, static) and CMake"
