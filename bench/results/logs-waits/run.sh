#!/usr/bin/env bash
# What ran on the H200 for these logs (2026-12-02): 5de4a81 (the host's
# waits by rule, _gh_tmgr_wait_times) + ../logs-overdraft/overdraft.patch
# applied (row 74's quiet moves on the GPU, on by default in it, and
# GPUHEAP_OVERDRAFT), $OUT set by the device tool, everything packed under
# $OUT/r. q0: GPUHEAP_QUIET_GPU=0 (the committed manager's behaviour);
# q1od: row 74 + an overdraft of 64 frames; two alternated rounds, with
# --phases and GPUHEAP_CALL_TIMES=1, so that each phase's line gives the
# host's waits by rule (wait_*).
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j16 --target gpuheap >> "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
. tools/alt-train.sh
for r in 1 2; do
  one q0-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=0
  one q1od-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=1 GPUHEAP_OVERDRAFT=64
done > "$OUT/alt.log" 2>&1
grep -E 'ms/step' "$OUT/alt.log"
for f in "$OUT"/*.log; do echo "-- $f"; grep -E 'host (forward|backward)' "$f" | grep -o 'host [a-z]*, ms a step: host [0-9.]*\|wait_[a-z]* [0-9.]*\|op_event_sync [0-9.]*' | tr '\n' ' '; echo; done
cd "$R" && tar czf r.tgz r && rm -rf r
