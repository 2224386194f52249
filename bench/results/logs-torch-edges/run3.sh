#!/usr/bin/env bash
# Device visit 31, part 3: record_stream under gpuheap (probe.py race_torch,
# race_gpuheap). Builds the library only. expectation3.txt was written
# before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib  # machine.txt, then the library alone
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 200 python3 -u bench/results/logs-torch-edges/probe.py race_torch race_gpuheap 2>&1 | tee "$out/probe3.log"
