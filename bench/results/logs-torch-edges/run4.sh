#!/usr/bin/env bash
# Device visit 31, part 4: the GPU tests (python_gpu_edges with its
# record_stream case) after record_stream reached the manager, and the
# probe's race_gpuheap again. expectation4.txt was written before. $OUT set
# by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh build tests
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 120 python3 -u bench/results/logs-torch-edges/probe.py race_gpuheap 2>&1 | tee "$out/probe4.log"
timeout 200 python3 -u python/tests/gpu_edges.py 2>&1 | tee "$out/gpu_edges.log" | tail -12
