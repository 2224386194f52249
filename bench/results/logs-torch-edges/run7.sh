#!/usr/bin/env bash
# Device visit 32, run 7: the GPU tests (python_gpu_edges with its graph
# cases) after CUDA graph pools, then run 1's probes of graphs and of
# torch.compile's reduce-overhead mode. expectation5.txt was written
# before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh build tests
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 150 python3 -u python/tests/gpu_edges.py 2>&1 | tee "$out/gpu_edges.log" | grep -v Warning | tail -14
timeout 150 python3 -u bench/results/logs-torch-edges/probe.py graph compile_reduce_overhead 2>&1 | tee "$out/probe7.log"
