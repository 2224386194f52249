#!/usr/bin/env bash
# Device visit 38, second call: after 75c6a32's rule was taken out, the
# library alone, gpu_edges.py's graph and compile cases (compile_mid
# first: the case the rule broke), then the trees program's pool logged
# and replayed (--check: the library's rules again).
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib 2>&1 | tail -2
echo "built at ${SECONDS}s"
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 300 python3 -u python/tests/gpu_edges.py --cases compile_mid compile_graphs compile graph graph_evict \
  graph_callables > "$out/gpu_edges.log" 2>&1
echo "gpu_edges rc=$? at ${SECONDS}s"; grep -E '^gpu_edges' "$out/gpu_edges.log" | cut -c1-600
GPUHEAP_POOL_LOG=1 timeout 120 python3 -u bench/graph_pools.py gpuheap trees > "$out/trees-share.log" 2>&1
echo "trees rc=$?: $(grep '^{' "$out/trees-share.log" | tail -1)"
python3 bench/pool_replay.py "$out/trees-share.log" --check
gzip -9 "$out/trees-share.log"
echo "done at ${SECONDS}s"
