#!/usr/bin/env bash
# Device visit 33, run 2 (call B, after tools/gpu-run.sh build tests on the
# same machine): probe.py, every probe, on build-gpu's library.
# $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
[ -f build-gpu/libgpuheap.so ] || GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 540 python3 -u bench/results/logs-compile/probe.py cudnn_benchmark_gpuheap ro_infer_torch ro_infer_gpuheap \
  ro_train_torch ro_train_gpuheap ro_train_eval_torch ro_train_eval_gpuheap ro_live_torch ro_live_gpuheap 2>&1 |
  tee "$out/probe2.log"
