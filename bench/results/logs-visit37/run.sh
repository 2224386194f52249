#!/usr/bin/env bash
# Device visit 37, one call, by priority, each step only while the call's
# time allows: the build, the C GPU tests, graph_pools.py's trees program on
# PyTorch's allocator, gpuheap and gpuheap with GPUHEAP_POOL_SHARE=0, the
# callables program dumped on both allocators, then the Python GPU tests.
# $OUT set by the device tool; DEADLINE (seconds, default 380) bounds the
# whole.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
deadline=${DEADLINE:-380}
left() { echo $((deadline - SECONDS)); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh build 2>&1 | tail -3
timeout "$(cap 200)" ctest --test-dir build-gpu -L gpu -LE "sanitizer|python" --output-on-failure \
  --timeout 150 > "$out/ctest-gpu.log" 2>&1
echo "ctest C rc=$?"; grep -E "tests passed|Failed|\*\*\*|Passed|Skipped" "$out/ctest-gpu.log" | head -30
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
pool() {  # label, env, allocator, program, extra args
  local label=$1 e=$2 a=$3 p=$4; shift 4
  [ "$(left)" -lt 40 ] && { echo "$p $label: no time left"; return; }
  env $e timeout "$(cap 120)" python3 -u bench/graph_pools.py "$a" "$p" "$@" > "$out/$p-$label.log" 2>&1
  local rc=$?
  echo "$p $label rc=$rc: $(grep '^{' "$out/$p-$label.log" | tail -1)"
  # the device returns 8 files: a log stays only where it failed or is wanted
  [ $rc = 0 ] && [ "$p-$label" != callables-share ] && rm -f "$out/$p-$label.log"
  [ $rc = 0 ] || tail -5 "$out/$p-$label.log"
}
pool torch GPUHEAP_POOL_SHARE=1 torch trees
pool share GPUHEAP_POOL_SHARE=1 gpuheap trees
pool keep GPUHEAP_POOL_SHARE=0 gpuheap trees
pool torch GPUHEAP_POOL_SHARE=1 torch callables --dump "$out/callables-torch.json"
pool share GPUHEAP_POOL_LOG=1 gpuheap callables --dump "$out/callables-share.json"
# the pool log replayed by gpuheap's rules (--check: as logged) and with
# splitting, beside PyTorch's pool bytes (bench/pool_replay.py)
td=(); [ -s "$out/callables-torch.json" ] && td=(--torch-dump "$out/callables-torch.json")
[ -s "$out/callables-share.log" ] && python3 bench/pool_replay.py "$out/callables-share.log" --check "${td[@]}"
gzip -9 "$out/callables-share.log" 2>/dev/null
if [ "$(left)" -gt 60 ]; then
  timeout "$(cap 400)" ctest --test-dir build-gpu -L gpu -R "^python_gpu" -LE sanitizer --output-on-failure \
    --timeout 240 > "$out/ctest-gpu-python.log" 2>&1
  echo "ctest Python rc=$?"; grep -E "tests passed|Failed|\*\*\*|Passed|Skipped" "$out/ctest-gpu-python.log" | head
fi
echo "done at ${SECONDS}s"
