#!/usr/bin/env bash
# Device visit 31, part 1: PyTorch on gpuheap at the edges (probe.py):
# both budgets spent, CUDA graph capture, torch.compile. Builds the library
# only. expectation.txt was written before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "revision: ${GH_REV:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1; } | tee "$out/machine.txt"
{ timeout 300 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 &&
  timeout 300 cmake --build build-gpu -j "$(nproc)" --target gpuheap >> "$out/build.log" 2>&1; echo "build rc=$?"; }
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
python3 -c "import torch; print('torch', torch.__version__)" | tee "$out/probe.log"
timeout 400 python3 -u bench/results/logs-torch-edges/probe.py 2>&1 | tee -a "$out/probe.log"
