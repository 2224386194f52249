#!/usr/bin/env bash
# Row 78: the mended early evictions (row 77's patch: quiet moves waited for
# on the GPU, GPUHEAP_EVICT_EARLY=1 with ordered moves) against the
# committed behaviour (GPUHEAP_QUIET_GPU=0), alternated: three rounds at
# width 64 (early evictions by the kernel and by the engine), one at width
# 192; then the GPU's time split (gpu_train.py --profile --trace) of (a),
# (c) committed and (c) with early evictions, 8 steps each.
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
for r in 1 2 3; do
  one c-ee1-$r "--only c --phases" GPUHEAP_EVICT_EARLY=1
  one c-ee0-$r "--only c --phases" GPUHEAP_QUIET_GPU=0
  one c-ee1k0-$r "--only c --phases" GPUHEAP_EVICT_EARLY=1 GPUHEAP_COPY_KERNEL=0
done
summary a.json "c-ee*.json"
one a-w192 "--only a --width 192 --phases"
peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
one c-w192-ee1-1 "--only c --width 192 --phases" GPUHEAP_EVICT_EARLY=1
one c-w192-ee0-1 "--only c --width 192 --phases" GPUHEAP_QUIET_GPU=0
summary a-w192.json "c-w192-*.json"
peak=1482845601
unset GPUHEAP_CALL_TIMES
for v in "a --only a" "c-ee0 --only c GPUHEAP_QUIET_GPU=0" "c-ee1 --only c GPUHEAP_EVICT_EARLY=1"; do
  set -- $v
  name=$1 opts="$2 $3"
  shift 3
  env "$@" timeout 150 python3 -u python/tests/gpu_train.py --steps 8 --peak "$peak" $opts --profile \
    --trace /tmp/trace.json > "$OUT/trace-$name.log" 2>&1
  echo "trace-$name: $(grep -E 'ms/step|trace:' "$OUT/trace-$name.log" | tail -4)"
  rm -f /tmp/trace.json*
done
