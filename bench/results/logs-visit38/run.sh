#!/usr/bin/env bash
# Device visit 38, one call, by priority within DEADLINE (seconds): the
# build (library, gh_stress, the C GPU tests), the stress table, CUDA
# graph trees' pools (bench/graph_pools.py trees on PyTorch's allocator,
# gpuheap logged, GPUHEAP_POOL_SHARE=0) and make_graphed_callables' on
# gpuheap, the log replayed (bench/pool_replay.py --check), then the
# Python GPU tests (edges first) and the C GPU tests.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
deadline=${DEADLINE:-420}
left() { echo $((deadline - SECONDS)); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh build 2>&1 | tail -3
echo "built at ${SECONDS}s"
timeout "$(cap 150)" stdbuf -oL ./build-gpu/bench/gh_stress --reps 7 --csv "$out/alloc.csv" > "$out/stress.log" 2>&1
echo "stress rc=$? at ${SECONDS}s"; cat "$out/alloc.csv"
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
pool() {  # label, env, allocator, program, extra args
  local label=$1 e=$2 a=$3 p=$4; shift 4
  [ "$(left)" -lt 40 ] && { echo "$p $label: no time left"; return; }
  env $e timeout "$(cap 120)" python3 -u bench/graph_pools.py "$a" "$p" "$@" > "$out/$p-$label.log" 2>&1
  local rc=$?
  echo "$p $label rc=$rc: $(grep '^{' "$out/$p-$label.log" | tail -1)"
  [ $rc = 0 ] && [ "$p-$label" != trees-share ] && rm -f "$out/$p-$label.log"
  [ $rc = 0 ] || tail -5 "$out/$p-$label.log"
}
pool torch GPUHEAP_POOL_SHARE=1 torch trees
pool share GPUHEAP_POOL_LOG=1 gpuheap trees
pool keep GPUHEAP_POOL_SHARE=0 gpuheap trees
pool share GPUHEAP_POOL_SHARE=1 gpuheap callables
[ -s "$out/trees-share.log" ] && python3 bench/pool_replay.py "$out/trees-share.log" --check
gzip -9 "$out/trees-share.log" 2>/dev/null
echo "pools done at ${SECONDS}s"
if [ "$(left)" -gt 60 ]; then
  timeout "$(cap 200)" ctest --test-dir build-gpu -L gpu -R "^python_gpu_edges" -LE sanitizer --output-on-failure \
    --timeout 190 > "$out/ctest-gpu-edges.log" 2>&1
  echo "ctest edges rc=$?"; grep -E "tests passed|Failed|\*\*\*|Passed|Skipped" "$out/ctest-gpu-edges.log" | head
fi
if [ "$(left)" -gt 60 ]; then
  timeout "$(cap 150)" ctest --test-dir build-gpu -L gpu -LE "sanitizer|python" --output-on-failure \
    --timeout 140 > "$out/ctest-gpu.log" 2>&1
  echo "ctest C rc=$?"; grep -E "tests passed|Failed|\*\*\*|Passed|Skipped" "$out/ctest-gpu.log" | head -20
fi
echo "done at ${SECONDS}s"
