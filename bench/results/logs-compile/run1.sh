#!/usr/bin/env bash
# Device visit 33, run 1: the library alone, then probe.py (every probe).
# $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" 2>&1 | tee "$out/versions.txt"
timeout 520 python3 -u bench/results/logs-compile/probe.py 2>&1 | tee "$out/probe1.log"
