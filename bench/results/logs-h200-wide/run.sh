#!/usr/bin/env bash
# Row 121 (bench/NOTES.md, host side): row 118's widths on an H200 at the
# same code, as far as the session's device time goes: 512 with
# --offload-state, then 256 and 384 (--offload-state), each (a), (b), (c)
# and (f) (gpu_train.py --floor), 12 steps. expectation.txt was written
# before. GH_REV: the revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
for spec in "512 --offload-state" "256" "384 --offload-state"; do
  set -- $spec
  timeout 110 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 40 --width "$@" --floor \
    --csv "$OUT/torch-w$1.csv" > "$OUT/train-w$1.log" 2>&1
  echo "-- width $spec rc=$?"
  grep -E "ms/step|PASS|FAIL|floor" "$OUT/train-w$1.log"
  tar czf "$R/r.tgz" -C "$R" r  # what has run so far comes back if the limit is hit
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
