#!/usr/bin/env bash
# What ran on the H200 for these logs (2026-12-02, b1266c4's manager with
# unasked.patch applied: GPUHEAP_CACHE_RELEASE=unasked, the cached run of
# the least recently asked length released first), $OUT set by the device
# tool. The manager alone (bench/replay_trace_cuda) replays
# traces/train-c-f3cba52 on the GPU's frames, three rounds of each variant.
. tools/env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j16 --target replay_trace_cuda
xz -dc bench/results/traces/train-c-f3cba52.ghtrace.xz > /tmp/t.ghtrace
mark=113541267  # an allocation of this size comes once a step
for r in 1 2 3; do
  for v in "auto" "9" "auto GPUHEAP_CACHE_RELEASE=unasked" "9 GPUHEAP_CACHE_RELEASE=unasked" "auto GPUHEAP_CACHE_RELEASE=oldest"; do
    set -- $v; ch=$1; shift
    echo "-- r$r chunk $ch $*"
    env "$@" timeout 60 ./build-gpu/bench/replay_trace_cuda /tmp/t.ghtrace --cuda --chunk $ch --step-bytes $mark 2>&1
  done
done > "$OUT/replay-sweep.log"
# replay-sweep160b.log: a build with -DGH_CHUNK_MAX_FRAMES=160 (build-gpu160),
# GPUHEAP_CHUNK_FRAMES=36 / 72 / --chunk auto, three rounds. The replay
# sets the chunk from its trace (auto), so the variable was not used: all
# nine runs are the chunk following the tensors, a measure of the spread.
