#!/usr/bin/env bash
# Device visit 32, run 14: probe.py mem_pool (torch.cuda.MemPool and
# use_mem_pool under gpuheap). expectation12.txt was written before. $OUT
# set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 150 python3 -u bench/results/logs-torch-edges/probe.py mem_pool 2>&1 | tee "$out/probe14.log"
