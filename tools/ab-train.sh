#!/usr/bin/env bash
# Config (c) of python/tests/gpu_train.py in several variants, alternated on
# one machine (machines differ by 10-20% in (c)): ROUNDS rounds (default 2)
# of 20 steps each; a line per run with ms/step, GB moved and the manager's
# per-step figures. Logs and JSON under $OUT (or ./gpu-out). Needs
# build-gpu/libgpuheap.so and (a)'s peak (PEAK, bytes; gpu_train.py prints it).
# The variants of bench/NOTES.md, host side, rows 13 and 15:
#   v0  the defaults, no weights prefetched at unpack
#   v1  the defaults
#   v2  CLOCK with young-last (GPUHEAP_EVICT_YOUNG_LAST=1)
#   v3  young-last + mark_model(prefetch=True)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
peak=${PEAK:-1482845601}
one() {
  local name=$1 envv=$2
  shift 2
  env $envv timeout 100 python3 -u python/tests/gpu_train.py --only c --peak "$peak" --steps 20 \
    --out "$out/$name.json" "$@" > "$out/$name.log" 2>&1
  echo "$name $(grep -E 'ms/step' "$out/$name.log" | sed 's/.*steps, //') $(grep 'per step' "$out/$name.log" | sed 's/.*per step //')"
}
for r in $(seq 1 "${ROUNDS:-2}"); do
  one "v0-$r" GPUHEAP_EVICT_YOUNG_LAST=0 --no-unpack-weights
  one "v1-$r" GPUHEAP_EVICT_YOUNG_LAST=0
  one "v2-$r" GPUHEAP_EVICT_YOUNG_LAST=1
  one "v3-$r" GPUHEAP_EVICT_YOUNG_LAST=1 --model-prefetch
done
