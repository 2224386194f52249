#!/usr/bin/env bash
# NOTES row 117: the transfer floor (gpu_train.py --floor, config (f)) at
# the test's width, inside the usual visit (build, GPU tests, stress, the
# Python stage, which now runs (f) too), then at width 512 with
# --offload-state (no (d) there). GH_REV: the revision. $OUT: the device
# tool's output folder.
set -u
GH_REV=$GH_REV bash tools/gpu-run.sh build tests stress python
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
timeout 200 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 60 --width 512 --offload-state --floor \
  > "$OUT/w512.log" 2>&1
grep -E "ms/step|PASS|FAIL|floor" "$OUT/w512.log"
