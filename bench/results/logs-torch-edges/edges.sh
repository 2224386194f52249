#!/usr/bin/env bash
# Runs 5 and 6 of device visit 31: the library alone, then
# python/tests/gpu_edges.py (its log in $OUT/gpu_edges.log).
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 200 python3 -u python/tests/gpu_edges.py 2>&1 | tee "$out/gpu_edges.log" | grep -v Warning
