#!/usr/bin/env bash
# Row 51 (bench/NOTES.md, host side): (c) with quiet="auto", homeless
# evictions copied by a kernel (the default at b397261) against the copy
# engine (GPUHEAP_COPY_KERNEL=0), alternated on one machine; the defaults
# (no quiet tensor: nothing copied by kernel) and every eviction by kernel
# (GPUHEAP_COPY_KERNEL=1) once; (a) once for the ratio. After
# `tools/gpu-run.sh build tests`, from the repository root, OUT set.
set -u
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
peak=1482845601
one() {  # name, gpu_train options, environment...
  local name=$1 opts=$2
  shift 2
  env "$@" timeout 150 python3 -u python/tests/gpu_train.py --steps 20 --peak $peak $opts --out "$OUT/$name.json" \
    > "$OUT/$name.log" 2>&1
  echo "$name: $(grep -E 'ms/step' "$OUT/$name.log" | tail -1)"
  grep -o '"vmm_ns": {[^}]*}' "$OUT/$name.log" | tail -1
}
one a "--only a"
for r in 1 2; do
  one c-qa-kernel-$r "--only c --quiet-auto" GH_UNUSED=1
  one c-qa-engine-$r "--only c --quiet-auto" GPUHEAP_COPY_KERNEL=0
done
one c-d "--only c" GH_UNUSED=1
one c-qa-all-1 "--only c --quiet-auto" GPUHEAP_COPY_KERNEL=1
