#!/usr/bin/env bash
# What ran on the H200 for these logs (bench/NOTES.md, host side, row 98):
# the sweeper (GPUHEAP_SWEEP=1) against the default, $OUT set by the device
# tool, everything packed under $OUT/r, three times: run1/ at 3da11e3 (the
# sweeper unmaps whenever it has something to unmap), run2/ at 243e51b (it
# unmaps under mu, between the callers' calls), run3/ at the revision
# named in run3/REV (it unmaps while a caller waits for the GPU). Not
# kept; 7279dc9's code is sweep.patch here, which applies on 565156f. First the manager alone
# (bench/replay_trace_cuda on traces/train-c-f3cba52, three alternated
# rounds), then the training run's (c), three alternated rounds with
# --phases and GPUHEAP_CALL_TIMES=1 (each phase's "vmm" is the calling
# thread's physical-memory time; "sweep_unmap" the sweeper's), then (a).
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON &&
  cmake --build build-gpu -j16 --target gpuheap replay_trace_cuda test_tensor_oversub test_tmgr_heap; } > "$OUT/build.log" 2>&1 ||
  { tail "$OUT/build.log"; cd "$R" && tar czf r.tgz r && rm -rf r; exit 1; }
xz -dc bench/results/traces/train-c-f3cba52.ghtrace.xz > /tmp/t.ghtrace
mark=113541267  # an allocation of this size comes once a step
for r in 1 2 3; do
  for v in "" "GPUHEAP_SWEEP=1"; do
    echo "-- r$r ${v:-default}"
    env $v timeout 60 ./build-gpu/bench/replay_trace_cuda /tmp/t.ghtrace --cuda --chunk auto --step-bytes $mark 2>&1
  done
done > "$OUT/replay.log"
grep -E '^--|ms a step|sweeper' "$OUT/replay.log" | head -40
. tools/alt-train.sh
for r in 1 2 3; do
  one d-$r "--only c --phases" GPUHEAP_CALL_TIMES=1
  one s-$r "--only c --phases" GPUHEAP_CALL_TIMES=1 GPUHEAP_SWEEP=1
done > "$OUT/alt.log" 2>&1
one a "--only a --phases" > "$OUT/alt-a.log" 2>&1
grep -E 'ms/step' "$OUT/alt.log" "$OUT/alt-a.log"
summary a.json "[ds]-*.json"
for f in "$OUT"/[ds]-*.log; do echo "-- $f"; grep -E 'host (forward|backward)' "$f" | grep -o 'host [a-z]*, ms a step: host [0-9.]*\|vmm [0-9.]*\|sweep_unmap [0-9.]*\|op_event_sync [0-9.]*' | tr '\n' ' '; echo; done
# The manager's GPU tests with the sweeper (its window, and at once).
for v in 1 2; do
  for t in test_tensor_oversub test_tmgr_heap; do
    b=$(find build-gpu -name $t -type f | head -1)
    [ -n "$b" ] && { GPUHEAP_SWEEP=$v timeout 120 "$b" > "$OUT/$t-sweep$v.log" 2>&1; echo "$t GPUHEAP_SWEEP=$v rc=$?"; tail -1 "$OUT/$t-sweep$v.log"; }
  done
done
cd "$R" && tar czf r.tgz r && rm -rf r
