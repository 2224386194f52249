#!/usr/bin/env bash
# Row 52 (bench/NOTES.md, host side): (c) with the unmapper (the default)
# against GPUHEAP_UNMAPPER=0, alternated on one machine, with quiet="auto"
# and at the defaults. After `tools/gpu-run.sh build tests python`, from the
# repository root, OUT set.
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
for r in 1 2; do
  one c-qa-um-$r "--only c --quiet-auto" GH_UNUSED=1
  one c-qa-off-$r "--only c --quiet-auto" GPUHEAP_UNMAPPER=0
  one c-d-um-$r "--only c" GH_UNUSED=1
  one c-d-off-$r "--only c" GPUHEAP_UNMAPPER=0
done
