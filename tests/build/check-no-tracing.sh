#!/usr/bin/env bash
# Release builds must carry no tracing: no object calls the functions behind SXE_LOG_TRACE,
# SXE_LOG_DUMP, SXE_LOG_ENTER, SXE_LOG_LEAVE, SXE_ASSERT or SXE_CHECK's assertion. The same sources
# compiled with SXE_DEBUG must call them, which shows that the check can see such calls.
# Usage: check-no-tracing.sh "release1.o;release2.o;..." "debug1.o;debug2.o;..."
set -euo pipefail

tracing='sxe__log_trace|sxe__log_dump|sxe__log_enter|sxe__log_leave|sxe__assert_fail'

references() {
  local list=$1 object
  IFS=';' read -r -a objects <<<"$list"
  for object in "${objects[@]}"; do
    nm -u "$object" | awk -v o="$(basename "$(dirname "$object")")/$(basename "$object")" '{print o ": " $2}'
  done | grep -E ": ($tracing)\$" || true
}

release=$(references "$1")
debug=$(references "$2")

if [ -z "$debug" ]; then
  echo "FAIL: the SXE_DEBUG objects call no tracing function; this check would see nothing"
  exit 1
fi
if [ -n "$release" ]; then
  echo "FAIL: release objects call tracing functions:"
  echo "$release"
  exit 1
fi
echo "ok: release objects call no tracing function; the SXE_DEBUG build calls $(echo "$debug" | wc -l):"
echo "$debug" | sed 's/^/  /'
