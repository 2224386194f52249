#!/usr/bin/env bash
# Row 110 (bench/NOTES.md, host side): where row 109's restore stream gave
# its ~10 ms a step at width 512 (--offload-state), on the GPU's timeline:
# one (c) run each with the restore stream (rs, the default now) and
# without (d: GPUHEAP_RESTORE_STREAM=0), under the profiler with the GPU's
# activity only, split by phase, and the time the two copy streams' copies
# run at once. The traces are deleted after their summary. expectation.txt
# was written before. $OUT set by the device tool; files under $OUT/r.
set -u
. tools/alt-begin.sh
{
  peak_run a512 "--width 512" && {
    one c512-rs-prof "--only c --width 512 --offload-state --profile --gpu-only --trace $OUT/trace-rs.json"
    one c512-d-prof "--only c --width 512 --offload-state --profile --gpu-only --trace $OUT/trace-d.json" \
      GPUHEAP_RESTORE_STREAM=0
  }
  grep -h "trace:" "$OUT"/c512-*-prof.log
  rm -f "$OUT"/trace-*.json
} > "$OUT/alt.log" 2>&1
grep -E "ms/step|trace:" "$OUT/alt.log"
pack
