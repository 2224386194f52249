#!/usr/bin/env bash
# Row 81: the host's time by phase (forward, backward, optimizer) and the
# manager's calls in each (gpu_train.py --phases with GPUHEAP_CALL_TIMES=1),
# for (a), (b) and (c) at the defaults, two runs of (c).
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
grep "host \|phases on" "$OUT/a.log"
one b "--only b --phases"
grep "host \|phases on" "$OUT/b.log"
for r in 1 2; do
  one c-$r "--only c --phases"
  grep "host \|phases on" "$OUT/c-$r.log"
done
summary a.json "c-*.json"
