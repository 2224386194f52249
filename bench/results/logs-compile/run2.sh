#!/usr/bin/env bash
# Device visit 33, run 2: the library alone, python/tests/gpu_edges.py
# (its cases GH_CASES, default all: the two new ones, compile_graphs and
# cudnn_benchmark, first), then probe.py's run-2 probes in the time left
# under GH_LIMIT seconds (default 480; the device time left after failed
# starts was short). $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 300 python3 -u python/tests/gpu_edges.py --cases ${GH_CASES:-compile_graphs cudnn_benchmark oom graph \
  graph_evict graph_callables graph_refused compile record_stream stats fraction device cupy_oom} 2>&1 | tee "$out/gpu_edges.log" | grep -v Warning
echo "gpu_edges rc=${PIPESTATUS[0]}"
left=$((${GH_LIMIT:-480} - SECONDS)); echo "probe: ${left} s left"
[ "$left" -gt 30 ] && timeout "$left" python3 -u bench/results/logs-compile/probe.py cudnn_benchmark_gpuheap \
  ro_live_gpuheap ro_train_eval_gpuheap ro_live_torch ro_train_eval_torch ro_infer_gpuheap ro_train_gpuheap 2>&1 |
  tee "$out/probe2.log"
