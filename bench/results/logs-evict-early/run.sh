#!/usr/bin/env bash
# Row 77: early evictions with quiet moves on the GPU
# (GPUHEAP_EVICT_EARLY=1) against the committed behaviour
# (GPUHEAP_QUIET_GPU=0), alternated: three rounds at width 64, then one
# at width 192. GPUHEAP_CALL_TIMES=1 in all.
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
for r in 1 2 3; do
  one c-ee1-$r "--only c --phases" GPUHEAP_EVICT_EARLY=1
  one c-ee0-$r "--only c --phases" GPUHEAP_QUIET_GPU=0
done
summary a.json "c-ee*.json"
one a-w192 "--only a --width 192 --phases"
peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
one c-w192-ee1-1 "--only c --width 192 --phases" GPUHEAP_EVICT_EARLY=1
one c-w192-ee0-1 "--only c --width 192 --phases" GPUHEAP_QUIET_GPU=0
summary a-w192.json "c-w192-*.json"
