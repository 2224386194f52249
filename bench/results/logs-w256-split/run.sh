#!/usr/bin/env bash
# Row 119 (bench/NOTES.md, host side): where (c)'s step goes at width 256,
# the width where the floor leaves room (row 118: (f) 1.52x, (c) 2.20x):
# (a) and (c) with --phases and GPUHEAP_CALL_TIMES=1 (the host's time by
# phase and the manager's calls), then (c) under the profiler with the
# GPU's activity only, split by phase (compute alone, copies alone, both,
# idle). The trace is deleted after its summary. expectation.txt was
# written before. GH_REV: the revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
{
  export GPUHEAP_CALL_TIMES=1
  peak_run a256 "--width 256 --phases" && {
    one c256-phases "--only c --width 256 --phases"
    unset GPUHEAP_CALL_TIMES
    one c256-prof "--only c --width 256 --profile --gpu-only --trace $OUT/trace.json"
  }
  grep -h "host \|phases on\|trace:" "$OUT"/a256.log "$OUT"/c256-*.log
  rm -f "$OUT"/trace*.json*
  summary a256.json "c256-*.json"
} > "$OUT/alt.log" 2>&1
cat "$OUT/alt.log" | grep -v '^$' | tail -40
pack
