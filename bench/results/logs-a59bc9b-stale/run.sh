#!/usr/bin/env bash
# Row 56 (bench/NOTES.md, host side): (c) with stale mappings (cached runs
# released for room unmapped in the host's waits: the default at this
# revision) against unmapping at once (GPUHEAP_STALE_UNMAPS=0), at the
# defaults and with quiet="auto", alternated three times on one machine;
# (a) once for the ratio. After `tools/gpu-run.sh build tests`, from the
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
  grep -o '"move_ns": [0-9.]*\|"stream_wait_ns": [0-9.]*' "$OUT/$name.log" | tail -2 | tr '\n' ' '; echo
}
one a "--only a"
for r in 1 2 3; do
  one c-d-stale-$r "--only c" GH_UNUSED=1
  one c-d-now-$r "--only c" GPUHEAP_STALE_UNMAPS=0
  one c-qa-stale-$r "--only c --quiet-auto" GH_UNUSED=1
  one c-qa-now-$r "--only c --quiet-auto" GPUHEAP_STALE_UNMAPS=0
done
