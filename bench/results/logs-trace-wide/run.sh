#!/usr/bin/env bash
# The GPU tests at 1e113c6 (not run since ada0f38), then (c) recorded
# (GPUHEAP_TRACE) at widths 384 and 512 after one (a) each, for the CPU
# replay of the clock's choices in backward (bench/NOTES.md, host side,
# "Where (c) stands after row 105", item 1). expectation.txt was written
# before. $OUT set by the device tool; files under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
OUT=$OUT bash tools/gpu-run.sh build tests > "$OUT/gpu-run.log" 2>&1
grep -E "build rc|tests passed|Failed|\*\*\*" "$OUT/gpu-run.log"
for w in 384 512; do
  peak_run a$w "--width $w" || continue
  one c$w-t "--only c --width $w --phases" GPUHEAP_TRACE=$OUT/c$w.ghtrace GPUHEAP_CALL_TIMES=1
  xz -9 "$OUT/c$w.ghtrace"
  summary a$w.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
