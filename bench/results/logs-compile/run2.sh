#!/usr/bin/env bash
# Device visit 33, run 2: the build and the GPU tests (tools/gpu-run.sh
# build tests), then probe.py's run-2 probes in the time left under the
# device's 600 s a call. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh build tests
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
left=$((575 - SECONDS)); echo "probe: ${left} s left"
[ "$left" -gt 30 ] && timeout "$left" python3 -u bench/results/logs-compile/probe.py cudnn_benchmark_gpuheap \
  ro_live_gpuheap ro_train_eval_gpuheap ro_live_torch ro_train_eval_torch ro_infer_gpuheap ro_train_gpuheap 2>&1 |
  tee "$out/probe2.log"
