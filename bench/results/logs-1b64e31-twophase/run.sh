#!/usr/bin/env bash
# Row 55 (bench/NOTES.md, host side): (c) with two-phase eviction batches
# (GPUHEAP_HOLD_COPIES=3: a batch's copies queued after all its remaps)
# against the default (=1), at the defaults and with quiet="auto",
# alternated on one machine; two-phase with every eviction by kernel
# (GPUHEAP_COPY_KERNEL=1) in each round too. After `tools/gpu-run.sh
# build`, from the repository root, OUT set.
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
  grep -o '"move_ns": [0-9.]*\|"stream_wait_ns": [0-9.]*' "$OUT/$name.log" | tail -2 | tr '\n' ' '; echo
}
one a "--only a"
for r in 1 2; do
  one c-d-hold1-$r "--only c" GPUHEAP_HOLD_COPIES=1
  one c-d-hold3-$r "--only c" GPUHEAP_HOLD_COPIES=3
  one c-d-hold3-ck1-$r "--only c" GPUHEAP_HOLD_COPIES=3 GPUHEAP_COPY_KERNEL=1
  one c-qa-hold1-$r "--only c --quiet-auto" GPUHEAP_HOLD_COPIES=1
  one c-qa-hold3-$r "--only c --quiet-auto" GPUHEAP_HOLD_COPIES=3
done
