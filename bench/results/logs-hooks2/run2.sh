#!/usr/bin/env bash
# The second run on the H200 for these logs (2026-12-02), $OUT set by the
# device tool: (c) at 4x (a)'s peak and at the default budget, then the
# deeper model (--blocks 16, 8x the residual blocks; (a)'s peak from
# run1/a16.json), with the package of a8e2691 ("n": quiet scans over the cold
# candidates with doubling waits, one stream an unpack) and of 7fd3ed3
# ("o"), alternated, all with --hook-times. .ab/new and .ab/old held the two
# python/gpuheap folders (not committed). Everything under $OUT/r, packed.
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j16 --target gpuheap >> "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
. tools/alt-train.sh
sw() { rm -rf python/gpuheap && cp -r .ab/$1/gpuheap python/gpuheap; }
hooks() { grep -h 'hooks on the host' "$OUT/$1.log"; }
for r in 1 2; do
  for x in n o; do sw $([ $x = n ] && echo new || echo old); one c4$x-$r "--only c --budget-fraction 4 --hook-times"; hooks c4$x-$r; done
  for x in n o; do sw $([ $x = n ] && echo new || echo old); one c$x-$r "--only c --hook-times"; hooks c$x-$r; done
done 2>&1 | tee "$OUT/alt.log"
for r in 1 2; do
  for x in n o; do
    sw $([ $x = n ] && echo new || echo old)
    peak=9056211968 one c16$x-$r "--only c --blocks 16 --hook-times"; hooks c16$x-$r
  done
done 2>&1 | tee "$OUT/alt16.log"
sw new
cd "$R" && tar czf r.tgz r && rm -rf r
