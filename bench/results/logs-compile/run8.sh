#!/usr/bin/env bash
# Device visit 35, run 8: diag8.py (ro_mid with the eager twin, the forward's
# saved tensors checked against copies after the second function and
# before the backward, every graph-pool event logged) on gpuheap, then on
# PyTorch's allocator. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
d=bench/results/logs-compile
GPUHEAP_POOL_LOG=1 timeout 240 python3 -u $d/diag8.py gpuheap > "$out/diag8-gpuheap.jsonl" 2> "$out/diag8-gpuheap.log"
echo "gpuheap rc=$?"; cat "$out/diag8-gpuheap.jsonl"
timeout 150 python3 -u $d/diag8.py torch > "$out/diag8-torch.jsonl" 2> "$out/diag8-torch.log"
echo "torch rc=$?"; cat "$out/diag8-torch.jsonl"
grep -c "gpuheap pool:" "$out/diag8-gpuheap.log"
xz -k -9 "$out/diag8-gpuheap.log" 2>/dev/null || true
