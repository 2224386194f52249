#!/usr/bin/env bash
# Row 74: quiet moves waited for on the GPU with row 72's mends (the
# default) against the host's waits for the quiet advices' events
# (GPUHEAP_QUIET_GPU=0), alternated: three rounds at the committed width
# (64); then the committed run's python stage (by the caller), then one
# round at width 192 (run.sh w192). GPUHEAP_CALL_TIMES=1 in all.
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
if [ "${1:-}" = w192 ]; then
  one a-w192 "--only a --width 192 --phases"
  peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
  one c-w192-qg1-1 "--only c --width 192 --phases"
  one c-w192-qg0-1 "--only c --width 192 --phases" GPUHEAP_QUIET_GPU=0
  summary a-w192.json "c-w192-*.json"
  exit 0
fi
one a "--only a --phases"
for r in 1 2 3; do
  one c-qg1-$r "--only c --phases"
  one c-qg0-$r "--only c --phases" GPUHEAP_QUIET_GPU=0
done
summary a.json "c-q*.json"
