#!/usr/bin/env bash
# What ran on the H200 for these logs (bench/NOTES.md, host side, row 100):
# the host's own work and its waits taken away together, as far as patches
# can: together.patch (on the revision in machine.txt) is
# ../logs-overdraft/overdraft.patch's host parts (row 74's quiet moves
# ordered on the GPU, GPUHEAP_QUIET_GPU, on by default in it; and
# GPUHEAP_OVERDRAFT) plus ../logs-sweep/sweep.patch (row 98's sweeper,
# GPUHEAP_SWEEP=1: unmaps while the caller waits for the GPU), merged.
# Variants, two alternated rounds of (c) with --phases and
# GPUHEAP_CALL_TIMES=1: c0 the committed behaviour (GPUHEAP_QUIET_GPU=0);
# sw the sweeper alone; qo row 74 + an overdraft of 64 frames; all the
# three together. $OUT set by the device tool, packed under $OUT/r.
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
patch -p1 < bench/results/logs-together/together.patch > "$OUT/patch.log" 2>&1 || { cat "$OUT/patch.log"; exit 1; }
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release &&
  cmake --build build-gpu -j16 --target gpuheap; } > "$OUT/build.log" 2>&1 ||
  { tail "$OUT/build.log"; cd "$R" && tar czf r.tgz r && rm -rf r; exit 1; }
. tools/alt-train.sh
one a "--only a" > "$OUT/alt-a.log" 2>&1
for r in 1 2; do
  one c0-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=0
  one sw-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=0 GPUHEAP_SWEEP=1
  one qo-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=1 GPUHEAP_OVERDRAFT=64
  one all-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_QUIET_GPU=1 GPUHEAP_OVERDRAFT=64 GPUHEAP_SWEEP=1
done > "$OUT/alt.log" 2>&1
grep -E 'ms/step' "$OUT/alt-a.log" "$OUT/alt.log"
summary a.json "c0-*.json" a.json "sw-*.json" a.json "qo-*.json" a.json "all-*.json"
for f in "$OUT"/c0-*.log "$OUT"/sw-*.log "$OUT"/qo-*.log "$OUT"/all-*.log; do echo "-- $f"; grep -E 'host (forward|backward)' "$f" | grep -o 'host [a-z]*, ms a step: host [0-9.]*\|vmm [0-9.]*\|sweep_unmap [0-9.]*\|op_event_sync [0-9.]*' | tr '\n' ' '; echo; done
cd "$R" && tar czf r.tgz r && rm -rf r
