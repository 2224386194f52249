#!/usr/bin/env bash
# Row 108 (bench/NOTES.md, host side): offload_state's step pre-hook brings
# the state back alone (o), against the state with the parameters and
# gradients as at 36f200a (os: --offload-state --model-prefetch step) and
# the defaults (d). Alternated after one (a) each: two rounds at 64 (d, o,
# os), one at 512 (o, os). expectation.txt was written before. $OUT set by
# the device tool; files under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
{
  peak_run a64 "--width 64" && for r in 1 2; do
    one c64-d-$r "--only c --width 64 --phases"
    one c64-o-$r "--only c --width 64 --phases --offload-state"
    one c64-os-$r "--only c --width 64 --phases --offload-state --model-prefetch step"
  done
  summary a64.json "c64-*.json"
  peak_run a512 "--width 512" && {
    one c512-o-1 "--only c --width 512 --phases --offload-state"
    one c512-os-1 "--only c --width 512 --phases --offload-state --model-prefetch step"
  }
  summary a512.json "c512-*.json"
} > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
