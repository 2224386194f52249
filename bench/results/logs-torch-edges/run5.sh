#!/usr/bin/env bash
# Device visit 31, part 5: gpu_edges.py and the probe's race after the race
# moved into gpu_edges.py's side_stream_race (the same steps; a check that
# the move broke nothing). $OUT set by the device tool.
set -u
bash bench/results/logs-torch-edges/edges.sh
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 120 python3 -u bench/results/logs-torch-edges/probe.py race_gpuheap 2>&1 | tee "${OUT:-$PWD/gpu-out}/probe5.log"
