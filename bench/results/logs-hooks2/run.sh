#!/usr/bin/env bash
# What ran on the H200 for these logs (2026-12-02, revision 9e7da05), $OUT
# set by the device tool: the Python GPU tests, then (c) at 4x (a)'s peak
# and at the default budget with the package of 9e7da05 ("n": quiet scans
# over the cold candidates, one stream an unpack) and of 7fd3ed3 ("o"),
# alternated, two rounds; then a deeper model (--blocks 16: 8x the
# residual blocks) the same way at the default budget. .ab/new and .ab/old
# held the two python/gpuheap folders (not committed). Only the files in
# run1/ came back (the rest were over the device tool's count of files;
# run2.sh packs everything): the step times in run1/alt*.log.
. tools/env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j16 --target gpuheap >> "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
ctest --test-dir build-gpu -R python_gpu --output-on-failure > "$OUT/ctest-python.log" 2>&1
tail -3 "$OUT/ctest-python.log"
. tools/alt-train.sh
sw() { rm -rf python/gpuheap && cp -r .ab/$1/gpuheap python/gpuheap; }
for r in 1 2; do
  sw new; one c4n-$r "--only c --budget-fraction 4 --hook-times"
  sw old; one c4o-$r "--only c --budget-fraction 4 --hook-times"
  sw new; one cn-$r "--only c --hook-times"
  sw old; one co-$r "--only c --hook-times"
done 2>&1 | tee "$OUT/alt.log"
sw new
timeout 200 python3 -u python/tests/gpu_train.py --steps 10 --blocks 16 --only a --out "$OUT/a16.json" > "$OUT/a16.log" 2>&1
peak16=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a16.json")
echo "a16: $(grep ms/step "$OUT/a16.log" | tail -1) peak $peak16"
for r in 1 2; do
  sw new; peak=$peak16 one c16n-$r "--only c --blocks 16 --hook-times"
  sw old; peak=$peak16 one c16o-$r "--only c --blocks 16 --hook-times"
done 2>&1 | tee "$OUT/alt16.log"
sw new
