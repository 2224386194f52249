#!/usr/bin/env bash
# Device visit 34, run 7: probe.py's ro_mid_twin (ro_mid with an eager copy
# trained beside it: each step's gradient differences) on gpuheap and on
# PyTorch's allocator; then gpu_edges.py's stats and memory_viz cases. $OUT set
# by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
[ -f build-gpu/libgpuheap.so ] || GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 300 python3 -u bench/results/logs-compile/probe.py ro_mid_twin_gpuheap ro_mid_twin_torch 2>&1 | tee "$out/probe7.log"
# and gpu_edges.py's stats case (reset_accumulated_memory_stats, new since run 3), memory_viz and oom (PyTorch's OOM observer)
timeout 200 python3 -u python/tests/gpu_edges.py --cases stats memory_viz oom 2>&1 | grep -v Warning | tee "$out/gpu_edges7.log"
