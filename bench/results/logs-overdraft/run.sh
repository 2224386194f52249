#!/usr/bin/env bash
# What ran on the H200 for these logs (2026-12-02, a8e2691's manager +
# overdraft.patch: row 74's quiet-gpu.patch (host parts) and the
# experimental GPUHEAP_OVERDRAFT), $OUT set by the device tool, everything
# packed under $OUT/r.
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j16 --target gpuheap >> "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
. tools/alt-train.sh
for r in 1 2; do
  one q0-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=0
  one q1-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=1
  one q1od-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=1 GPUHEAP_OVERDRAFT=64
  one b59-$r "--only c --phases --budget-fraction 0.59" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=0
done > "$OUT/alt.log" 2>&1
one a "--only a --phases" >> "$OUT/alt.log" 2>&1
summary a.json "*-[12].json" >> "$OUT/alt.log" 2>&1
grep -E 'ms/step|bitwise|DIFFER' "$OUT/alt.log"
for f in "$OUT"/*-1.log; do echo "-- $f"; grep -E 'host (forward|backward|optimizer)' "$f"; done
cd "$R" && tar czf r.tgz r && rm -rf r
