#!/usr/bin/env bash
# Row 72: quiet moves waited for on the GPU (the default now) against the
# host's waits for the quiet advices' events (GPUHEAP_QUIET_GPU=0),
# alternated: three rounds at the committed width (64), one at width 192
# (row 71: 2.9-3.4 and 13.9 ms a step of those waits).
# GPUHEAP_CALL_TIMES=1 in all, for the manager's calls and waits.
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
for r in 1 2 3; do
  one c-qg1-$r "--only c --phases"
  one c-qg0-$r "--only c --phases" GPUHEAP_QUIET_GPU=0
done
one a-w192 "--only a --width 192 --phases"
peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
one c-w192-qg1-1 "--only c --width 192 --phases"
one c-w192-qg0-1 "--only c --width 192 --phases" GPUHEAP_QUIET_GPU=0
summary a.json "c-q*.json" a-w192.json "c-w192-*.json"
