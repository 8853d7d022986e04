#!/usr/bin/env bash
# In a release build the traced and untraced loops of bench/trace-cost must compile to the same
# machine code: the tracing macros leave nothing behind. Compares the two functions' instructions
# with addresses and names taken out.
# Usage: check-identical-code.sh PROGRAM
set -euo pipefail
program=$1

body() {
  objdump -d --no-show-raw-insn "$program" |
    awk -v f="<$1>:" '$2 == f {inside = 1; next} inside && /^$/ {inside = 0} inside {print}' |
    sed -E 's/^ *[0-9a-f]+:\s*//; s/[0-9a-f]+ <[^>]*>//'
}

plain=$(body step_plain)
traced=$(body step_traced)
[ -n "$plain" ] || { echo "FAIL: step_plain not found in $program"; exit 1; }
if [ "$plain" != "$traced" ]; then
  echo "FAIL: the traced loop compiles to different code:"
  diff <(echo "$plain") <(echo "$traced") || true
  exit 1
fi
echo "ok: step_plain and step_traced are the same $(echo "$plain" | wc -l) instructions"
