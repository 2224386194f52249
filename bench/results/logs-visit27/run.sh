#!/usr/bin/env bash
# Device visit 27 (bench/NOTES.md): on an H200 first, row 121 (the widths
# with the transfer floor (f): 512 and 384 with --offload-state, 256, 64,
# each (a), (b), (c), (f), 12 steps) and the GPU tests; then, on any card,
# row 126: the manager's switches at width 256, where the defaults chosen
# at width 64 were never checked: (c) at the defaults (d), never waiting
# for frees before evicting (wf0), always waiting (wf1), offload(keep_last=1)
# and (keep_last=4), and a low watermark of 0.9 (lw9), two alternated
# rounds of 12 steps. expectation.txt was written before. GH_REV: the
# revision, computed where the run is prepared; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  for spec in "512 --offload-state" "384 --offload-state" "256" "64"; do
    set -- $spec
    timeout 120 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 40 --width "$@" --floor \
      --csv "$OUT/torch-w$1.csv" > "$OUT/train-w$1.log" 2>&1
    echo "-- width $spec rc=$?"
    grep -E "ms/step|PASS|FAIL|floor" "$OUT/train-w$1.log"
    tar czf "$R/r.tgz" -C "$R" r  # what has run so far comes back if the limit is hit
  done
  GH_REV=$GH_REV bash tools/gpu-run.sh build tests 2>&1 | tail -6
  tar czf "$R/r.tgz" -C "$R" r
fi
if peak_run a256 "--width 256 --steps 12"; then
  for r in 1 2; do
    one c256-d-$r "--only c --width 256 --steps 12"
    one c256-wf0-$r "--only c --width 256 --steps 12" GPUHEAP_WAIT_FREES=0
    one c256-wf1-$r "--only c --width 256 --steps 12" GPUHEAP_WAIT_FREES=1
    one c256-kl1-$r "--only c --width 256 --steps 12 --keep-last 1"
    one c256-kl4-$r "--only c --width 256 --steps 12 --keep-last 4"
    one c256-lw9-$r "--only c --width 256 --steps 12 --low-watermark 0.9"
    tar czf "$R/r.tgz" -C "$R" r
  done
  summary a256.json "c256-*.json"
fi
pack
