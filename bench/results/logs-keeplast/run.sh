#!/usr/bin/env bash
# What ran on the H200 for these logs (bench/NOTES.md, host side, row 99):
# the offload context's keep_last (the newest saved tensors never advised
# cold) at 2 (the default), 4 and 8, three alternated rounds of (c) with
# --phases, after `tools/gpu-run.sh build` on the same machine (build-gpu/
# there); $OUT set by the device tool, everything packed under $OUT/r.
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
[ -f build-gpu/libgpuheap.so ] || { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j16 --target gpuheap >> "$OUT/build.log" 2>&1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt" 2>&1
. tools/alt-train.sh
one a "--only a" > "$OUT/alt-a.log" 2>&1
for r in 1 2 3; do
  for k in 2 4 8; do one k$k-$r "--only c --phases --keep-last $k"; done
done > "$OUT/alt.log" 2>&1
grep -E 'ms/step' "$OUT/alt-a.log" "$OUT/alt.log"
summary a.json "k*.json"
cd "$R" && tar czf r.tgz r && rm -rf r
