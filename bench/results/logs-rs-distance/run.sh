#!/usr/bin/env bash
# Row 111 (bench/NOTES.md, host side): with the restore stream (the default
# since 5420d6b), prefetch distance 2 (p2) against the default 1 (p1) at
# widths 512 and 384 (--offload-state), one round each, the distance-2 run
# under the profiler's trace too (the two copy streams at once). Options
# only. expectation.txt was written before. $OUT set by the device tool.
set -u
. tools/alt-begin.sh
{
  peak_run a512 "--width 512" && {
    one c512-p1 "--only c --width 512 --phases --offload-state"
    one c512-p2 "--only c --width 512 --phases --offload-state --prefetch-distance 2"
    one c512-p2-prof "--only c --width 512 --offload-state --prefetch-distance 2 --profile --gpu-only --trace $OUT/trace.json"
  }
  summary a512.json "c512-*.json"
  grep -h "trace:" "$OUT"/c512-p2-prof.log
  rm -f "$OUT"/trace.json
  peak_run a384 "--width 384" && {
    one c384-p1 "--only c --width 384 --phases --offload-state"
    one c384-p2 "--only c --width 384 --phases --offload-state --prefetch-distance 2"
  }
  summary a384.json "c384-*.json"
} > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses|trace:" "$OUT/alt.log"
pack
