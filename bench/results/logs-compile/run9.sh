#!/usr/bin/env bash
# Device visit 35, run 9: diag8.py --plain (ro_mid with the twin as run 7
# ran it, the saved tensors untouched) on gpuheap with every graph-pool
# event logged, then on PyTorch's allocator. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
d=bench/results/logs-compile
GPUHEAP_POOL_LOG=1 timeout 240 python3 -u $d/diag8.py gpuheap --plain > "$out/diag9-gpuheap.jsonl" 2> "$out/diag9-gpuheap.log"
echo "gpuheap rc=$?"; cut -c1-900 "$out/diag9-gpuheap.jsonl"
timeout 150 python3 -u $d/diag8.py torch --plain > "$out/diag9-torch.jsonl" 2> "$out/diag9-torch.log"
echo "torch rc=$?"; cut -c1-600 "$out/diag9-torch.jsonl"
grep -n "diag:" "$out/diag9-gpuheap.log" | cut -c1-300 | head -80
