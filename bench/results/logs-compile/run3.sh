#!/usr/bin/env bash
# Device visit 34 (prepared in visit 33): the build and the GPU tests, then
# probe.py's ro_mid probes. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh build tests
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
left=$((575 - SECONDS)); echo "probe: ${left} s left"
[ "$left" -gt 30 ] && timeout "$left" python3 -u bench/results/logs-compile/probe.py ro_mid_torch ro_mid_gpuheap 2>&1 |
  tee "$out/probe3.log"
