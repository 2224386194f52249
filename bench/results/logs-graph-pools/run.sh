#!/usr/bin/env bash
# Device visit 36, one call (run1.sh and run2.sh in one, by priority, each
# step only while the call's time allows): the C GPU tests, gpu_edges'
# memory_viz (with a graph pool's snapshot), bench/graph_pools.py on
# PyTorch's allocator, gpuheap and gpuheap with GPUHEAP_POOL_SHARE=1, and
# the graph and compile cases with GPUHEAP_POOL_SHARE=1. $OUT set by the
# device tool; DEADLINE (seconds, default 560) bounds the whole.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
deadline=${DEADLINE:-560}
left() { echo $((deadline - SECONDS)); }
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh build 2>&1 | tail -3
timeout $(( $(left) < 200 ? $(left) : 200 )) ctest --test-dir build-gpu -L gpu -LE sanitizer --output-on-failure \
  --timeout 150 > "$out/ctest-gpu.log" 2>&1
echo "ctest rc=$?"; grep -E "tests passed|Failed|\*\*\*" "$out/ctest-gpu.log" | head -12
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
pools() {
  for cfg in torch gpuheap share; do
    [ "$(left)" -lt 40 ] && { echo "$1 $cfg: no time left"; continue; }
    a=gpuheap; e=GPUHEAP_POOL_SHARE=0
    [ $cfg = torch ] && a=torch
    [ $cfg = share ] && e=GPUHEAP_POOL_SHARE=1
    env $e timeout 90 python3 -u bench/graph_pools.py $a "$1" > "$out/$1-$cfg.log" 2>&1
    echo "$1 $cfg rc=$?: $(grep '^{' "$out/$1-$cfg.log" | tail -1)" | tee -a "$out/pools.txt"
  done
}
edges() {  # label, env, cases...
  local label=$1 e=$2; shift 2
  [ "$(left)" -lt 60 ] && { echo "edges $label: no time left"; return; }
  env $e timeout $(( $(left) - 10 )) python3 -u python/tests/gpu_edges.py --cases "$@" 2>&1 | grep -v Warning |
    cut -c1-700 | tee "$out/gpu_edges-$label.log" | grep -E "gpu_edges: (PASS|FAIL|[a-z_]+: \{)" | cut -c1-400
}
edges viz GPUHEAP_POOL_SHARE=0 memory_viz
pools shared
edges share GPUHEAP_POOL_SHARE=1 compile_mid graph_callables graph compile_graphs
pools trees
pools callables
echo "done at ${SECONDS}s"
