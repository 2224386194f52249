#!/usr/bin/env bash
# Device visit 35, run 10: after graph pools keep a graph's memory for that
# graph (host/adapters_torch.cc): diag8.py --plain on gpuheap (run 9's
# program), then gpu_edges.py's graph and compile cases with the new
# compile_mid. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
d=bench/results/logs-compile
timeout 200 python3 -u $d/diag8.py gpuheap --plain > "$out/diag10-gpuheap.jsonl" 2> "$out/diag10-gpuheap.log"
echo "gpuheap rc=$?"; cut -c1-420 "$out/diag10-gpuheap.jsonl"
timeout 240 python3 -u python/tests/gpu_edges.py --cases compile_mid compile_graphs graph graph_evict graph_callables \
  stats 2>&1 | grep -v Warning | cut -c1-700 | tee "$out/gpu_edges10.log"
