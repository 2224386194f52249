#!/usr/bin/env bash
# Row 58 (bench/NOTES.md, host side): (c) with offload(quiet=True) (saved
# tensors advised quiet at the first unpack of a backward, so evictions in
# backward leave their homes unmapped) against the defaults and against
# quiet="auto" (quiet in forward as well), three alternated rounds on one
# machine; (a) once. After `tools/gpu-run.sh build`, from the repository
# root, OUT set.
set -u
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
peak=1482845601
one() {  # name, gpu_train options
  local name=$1 opts=$2
  timeout 150 python3 -u python/tests/gpu_train.py --steps 20 --peak $peak $opts --out "$OUT/$name.json" \
    > "$OUT/$name.log" 2>&1
  echo "$name: $(grep -E 'ms/step' "$OUT/$name.log" | tail -1)"
  grep -o '"vmm_ns": {[^}]*}' "$OUT/$name.log" | tail -1
  grep -o '"quiet_waits": [0-9.]*\|"stream_wait_ns": [0-9.]*\|"clock_victims": {[^}]*}' "$OUT/$name.log" | tail -3 | tr '\n' ' '; echo
  grep -o '"quieted[a-z_]*": [0-9]*' "$OUT/$name.log" | tail -2 | tr '\n' ' '; echo
}
one a "--only a"
for r in 1 2 3; do
  one c-d-$r "--only c"
  one c-q-$r "--only c --quiet"
  one c-qa-$r "--only c --quiet-auto"
done
