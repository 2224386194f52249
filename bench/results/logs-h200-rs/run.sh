#!/usr/bin/env bash
# For the next visit with an H200 (rows 109-111 ran on H100s only): first,
# in a call of its own, `GH_REV=<rev> bash tools/gpu-run.sh build tests
# python` (the GPU tests, and the committed run of the test's width:
# torch-h200.csv and torch-h200-reference.csv, to replace ada0f38's if it
# passes); then this script: the restore stream (rs, the default) against
# one copy stream (d: GPUHEAP_RESTORE_STREAM=0), alternated after one (a)
# each, two rounds at 512 (--offload-state) and two at 64 (defaults).
# expectation.txt was written before. $OUT set by the device tool; files
# under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
{
  peak_run a512 "--width 512" && for r in 1 2; do
    one c512-d-$r "--only c --width 512 --phases --offload-state" GPUHEAP_RESTORE_STREAM=0
    one c512-rs-$r "--only c --width 512 --phases --offload-state"
  done
  summary a512.json "c512-*.json"
  peak_run a64 "--width 64" && for r in 1 2; do
    one c64-d-$r "--only c --width 64 --phases" GPUHEAP_RESTORE_STREAM=0
    one c64-rs-$r "--only c --width 64 --phases"
  done
  summary a64.json "c64-*.json"
} > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
