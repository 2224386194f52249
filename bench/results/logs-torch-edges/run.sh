#!/usr/bin/env bash
# Device visit 31, part 1: PyTorch on gpuheap at the edges (probe.py):
# both budgets spent, CUDA graph capture, torch.compile. Builds the library
# only. expectation.txt was written before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib  # machine.txt, then the library alone
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
python3 -c "import torch; print('torch', torch.__version__)" | tee "$out/probe.log"
timeout 400 python3 -u bench/results/logs-torch-edges/probe.py 2>&1 | tee -a "$out/probe.log"
