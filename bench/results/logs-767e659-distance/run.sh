#!/usr/bin/env bash
# Row 61 (bench/NOTES.md, host side): (c) with the offload context's
# prefetch distance 1 (the default) / 2 / 3, now that prefetches ahead do
# not make the stream wait until the tensor's own unpack (row 37), three
# alternated rounds on one machine; (a) once. After `tools/gpu-run.sh
# build`, from the repository root, OUT set.
set -u
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
peak=1482845601
one() {  # name, gpu_train options
  local name=$1 opts=$2
  timeout 150 python3 -u python/tests/gpu_train.py --steps 20 --peak $peak $opts --out "$OUT/$name.json" \
    > "$OUT/$name.log" 2>&1
  echo "$name: $(grep -E 'ms/step' "$OUT/$name.log" | tail -1)"
  grep -o '"vmm_ns": {[^}]*}' "$OUT/$name.log" | tail -1
}
one a "--only a"
for r in 1 2 3; do
  for d in 1 2 3; do one c-d$d-$r "--only c --prefetch-distance $d"; done
done
