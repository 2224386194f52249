#!/usr/bin/env bash
# Row 102 (bench/NOTES.md, host side): mark_model(prefetch=True) at widths
# 384 and 512 (gpu_train.py --model-prefetch) against the defaults, two
# alternated rounds of (c) each with --phases, after one (a) for the budget;
# then the GPU's time split by phase of (c) at 512. expectation.txt was
# written before. $OUT set by the device tool; packed under $OUT/r.
set -u
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
pack() { cd "$R" && tar czf r.tgz r && rm -rf r; }
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release &&
  cmake --build build-gpu -j16 --target gpuheap; } > "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; pack; exit 1; }
. tools/alt-train.sh
for w in 384 512; do
  peak=0
  one a$w "--only a --width $w --phases"
  peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a$w.json") || continue
  for r in 1 2; do
    one c$w-d-$r "--only c --width $w --phases"
    one c$w-p-$r "--only c --width $w --phases --model-prefetch"
  done
  summary a$w.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
timeout 150 python3 -u python/tests/gpu_train.py --only c --width 512 --steps 6 --peak "$peak" --profile --gpu-only \
  --trace /tmp/trace.json > "$OUT/trace-c512.log" 2>&1
grep -E "ms/step|trace:" "$OUT/trace-c512.log" | tail -8
rm -f /tmp/trace.json*
pack
