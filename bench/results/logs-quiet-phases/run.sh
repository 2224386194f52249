#!/usr/bin/env bash
# Row 82: rows 72/74's quiet moves waited for on the GPU (the patch
# results/logs-evict-early2/evict-early.patch applied on 8f17ee0; early
# evictions off) by phase: GPUHEAP_QUIET_GPU=1 (the patch's default) against
# =0 (the committed behaviour), and =1 with GPUHEAP_WAIT_FREES=0 (room never
# waits for pending frees), two alternated rounds, --phases with
# GPUHEAP_CALL_TIMES=1.
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
for r in 1 2; do
  for v in "q1" "q0 GPUHEAP_QUIET_GPU=0" "q1wf0 GPUHEAP_WAIT_FREES=0"; do
    set -- $v
    n=$1; shift
    one c-$n-$r "--only c --phases" "$@"
    grep "host \|phases on" "$OUT/c-$n-$r.log"
  done
done
summary a.json "c-*.json"
