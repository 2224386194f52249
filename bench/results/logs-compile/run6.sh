#!/usr/bin/env bash
# Device visit 34, run 6: probe.py's ro_mid on PyTorch's allocator with the
# trees' allocation history (what its live-allocation check found at step
# 4), and eager (the reference for gpuheap's losses past step 3), then
# gpuheap's again; the library built if it is not there. $OUT set by the
# device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
[ -f build-gpu/libgpuheap.so ] || GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 400 python3 -u bench/results/logs-compile/probe.py ro_mid_torch_history ro_mid_eager ro_mid_gpuheap 2>&1 |
  tee "$out/probe6.log"
