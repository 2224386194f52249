#!/usr/bin/env bash
# Device visit 26 (bench/NOTES.md): the GPU tests after the split of
# host/tensor.c into tensor.c, tensor_sync.c, tensor_mem.c, tensor_move.c
# and tensor_test.c (1f3f377; no change of behaviour meant); then row 125
# on any card (width 256: (c) with the optimizer's state pinned on the
# device, --pin-state, alternated with the defaults, 3 rounds of 12 steps);
# then, on an H200 only, row 121 (the widths with the transfer floor (f)):
# 512 and 384 with --offload-state, 256, then 64, each (a), (b), (c), (f),
# 12 steps. expectation.txt was written before. GH_REV: the revision; $OUT
# set by the device tool.
set -u
. tools/alt-begin.sh
GH_REV=$GH_REV bash tools/gpu-run.sh build tests 2>&1 | tail -20
tar czf "$R/r.tgz" -C "$R" r
if peak_run a256 "--width 256 --steps 12"; then
  for r in 1 2 3; do
    one c256-d-$r "--only c --width 256 --steps 12"
    one c256-p-$r "--only c --width 256 --steps 12 --pin-state"
  done
  summary a256.json "c256-*.json"
fi
tar czf "$R/r.tgz" -C "$R" r
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: widths skipped"; pack; exit 0; }
for spec in "512 --offload-state" "384 --offload-state" "256" "64"; do
  set -- $spec
  timeout 120 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 40 --width "$@" --floor \
    --csv "$OUT/torch-w$1.csv" > "$OUT/train-w$1.log" 2>&1
  echo "-- width $spec rc=$?"
  grep -E "ms/step|PASS|FAIL|floor" "$OUT/train-w$1.log"
  tar czf "$R/r.tgz" -C "$R" r  # what has run so far comes back if the limit is hit
done
pack
