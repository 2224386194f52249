#!/usr/bin/env bash
# After the committed run (tools/gpu-run.sh build tests python, by the
# caller): row 75, eviction copies by the engine (GPUHEAP_COPY_KERNEL=0)
# against the default kernel at width 64, three alternated rounds (row 70
# had no verdict there); row 76, (a) and (c) under the profiler, the GPU's
# busy time a step from the trace (the profiler slows the host, not the
# GPU's work).
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
for r in 1 2 3; do
  one c-ck1-$r "--only c --phases"
  one c-ck0-$r "--only c --phases" GPUHEAP_COPY_KERNEL=0
done
summary a.json "c-ck*.json"
unset GPUHEAP_CALL_TIMES
one a-prof "--only a --steps 8 --profile --trace $OUT/prof.trace"
one c-prof "--only c --steps 8 --profile --trace $OUT/prof.trace"
grep -h "trace: a step" "$OUT"/a-prof.log "$OUT"/c-prof.log
rm -f "$OUT"/prof.trace*
