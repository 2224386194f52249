#!/usr/bin/env bash
# Rows 79 and 80. Row 79: the GPU's time split by phase (forward, backward,
# optimizer) under a profiler that records the GPU's activity only
# (gpu_train.py --profile --gpu-only --trace, 8 steps), for (a) and (c) at
# the defaults. Row 80: chunks of 36 frames (a library built with
# -DGH_CHUNK_MAX_FRAMES=160, GPUHEAP_CHUNK_FRAMES=36) against the chunk
# following the tensors on the same build, two alternated rounds, and the
# default build once.
set -u
. tools/alt-train.sh
for v in "a --only a" "c --only c"; do
  set -- $v
  name=$1 opts="$2 $3"
  timeout 150 python3 -u python/tests/gpu_train.py --steps 8 --peak "$peak" $opts --profile --gpu-only \
    --trace /tmp/trace.json > "$OUT/trace-$name.log" 2>&1
  echo "trace-$name:"; grep -E 'ms/step|trace:' "$OUT/trace-$name.log" | tail -6
  rm -f /tmp/trace.json*
done
export GPUHEAP_CALL_TIMES=1
lib160=$PWD/build-c160/libgpuheap.so
one a "--only a --phases"
for r in 1 2; do
  one c-auto-$r "--only c --phases" GPUHEAP_LIBRARY=$lib160
  one c-36-$r "--only c --phases" GPUHEAP_LIBRARY=$lib160 GPUHEAP_CHUNK_FRAMES=36
done
one c-default "--only c --phases"
summary a.json "c-*.json"
