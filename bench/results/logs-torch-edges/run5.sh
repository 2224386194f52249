#!/usr/bin/env bash
# Device visit 31, part 5: gpu_edges.py and the probe's race after the race
# moved into gpu_edges.py's side_stream_race (the same steps; a check that
# the move broke nothing). $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 200 python3 -u python/tests/gpu_edges.py 2>&1 | tee "$out/gpu_edges.log" | grep -v Warning
timeout 120 python3 -u bench/results/logs-torch-edges/probe.py race_gpuheap 2>&1 | tee "$out/probe5.log"
