#!/usr/bin/env bash
# Device visit 31, part 6: gpu_edges.py with its stats case (torch.cuda's
# memory figures answered by gpuheap: enable(torch_stats=True)). Expected:
# every case ok, device skipped (one GPU); stats allocated == memory_stats'
# current >= 64 MiB, peak >= 64 MiB, the peak after a reset below it.
# $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 200 python3 -u python/tests/gpu_edges.py 2>&1 | tee "$out/gpu_edges.log" | grep -v Warning
