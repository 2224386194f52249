#!/usr/bin/env bash
# Device visit 31, part 3: record_stream under gpuheap (probe.py race_torch,
# race_gpuheap). Builds the library only. expectation3.txt was written
# before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "revision: ${GH_REV:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1; } | tee "$out/machine.txt"
{ timeout 300 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 &&
  timeout 300 cmake --build build-gpu -j "$(nproc)" --target gpuheap >> "$out/build.log" 2>&1; echo "build rc=$?"; }
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 200 python3 -u bench/results/logs-torch-edges/probe.py race_torch race_gpuheap 2>&1 | tee "$out/probe3.log"
