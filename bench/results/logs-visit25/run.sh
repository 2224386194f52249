#!/usr/bin/env bash
# Device visit 25 (bench/NOTES.md): the GPU tests at GH_REV (the manager's
# code since 44bbd6e had not run through them), then row 121 (the widths
# with the transfer floor (f), on the card that comes): 512 and 384 with
# --offload-state, then 256, each (a), (b), (c), (f), 12 steps; then (a)
# and two more (c) runs at 512 (20 steps) for the spread. expectation.txt
# was written before. GH_REV: the revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
GH_REV=$GH_REV bash tools/gpu-run.sh build tests 2>&1 | tail -20
tar czf "$R/r.tgz" -C "$R" r
for spec in "512 --offload-state" "384 --offload-state" "256"; do
  set -- $spec
  timeout 120 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 40 --width "$@" --floor \
    --csv "$OUT/torch-w$1.csv" > "$OUT/train-w$1.log" 2>&1
  echo "-- width $spec rc=$?"
  grep -E "ms/step|PASS|FAIL|floor" "$OUT/train-w$1.log"
  tar czf "$R/r.tgz" -C "$R" r  # what has run so far comes back if the limit is hit
done
peak_run a512 "--width 512 --offload-state" &&
  for r in 1 2; do one c512-$r "--only c --width 512 --offload-state"; done
summary a512.json "c512-*.json"
pack
