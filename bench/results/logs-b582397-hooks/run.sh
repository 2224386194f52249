#!/usr/bin/env bash
# The host's cost of the offload hooks (bench/NOTES.md, host side, row 57):
# (c) with a budget of 4x (a)'s peak (nothing moves) with the offload
# context at its defaults, with quiet="auto", and without the context;
# (b) and (a) for reference; twice, alternated. After `tools/gpu-run.sh
# build`, from the repository root, OUT set.
set -u
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
peak=1482845601
one() {  # name, gpu_train options
  local name=$1 opts=$2
  timeout 150 python3 -u python/tests/gpu_train.py --steps 20 --peak $peak $opts --out "$OUT/$name.json" \
    > "$OUT/$name.log" 2>&1
  echo "$name: $(grep -E 'ms/step' "$OUT/$name.log" | tail -1)"
}
for r in 1 2; do
  one a-$r "--only a"
  one b-$r "--only b"
  one c4-off-$r "--only c --budget-fraction 4"
  one c4-qa-$r "--only c --budget-fraction 4 --quiet-auto"
  one c4-none-$r "--only c --budget-fraction 4 --no-offload"
done
# Where (c)'s host time goes with quiet="auto", by Python function
# (cProfile: its own overhead inflates Python-heavy parts).
timeout 200 python3 -m cProfile -o "$OUT/c-qa.prof" python/tests/gpu_train.py --steps 20 --peak $peak --only c \
  --quiet-auto --out "$OUT/c-qa-prof.json" > "$OUT/c-qa-prof.log" 2>&1
python3 -c "import pstats; pstats.Stats('$OUT/c-qa.prof').sort_stats('tottime').print_stats(35)" > "$OUT/c-qa-prof.txt" 2>&1
head -60 "$OUT/c-qa-prof.txt" | tail -45
