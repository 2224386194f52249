#!/usr/bin/env bash
# Device visit 36, run 1: the C GPU tests at this session's code (the
# library's host allocations through _gh_malloc since 4be9b72's session),
# then gpu_edges.py's memory_viz (with a graph pool's snapshot, new) and
# graph cases. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh build tests 2>&1 | tail -22
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 150 python3 -u python/tests/gpu_edges.py --cases memory_viz graph graph_callables 2>&1 | grep -v Warning |
  cut -c1-900 | tee "$out/gpu_edges1.log"
