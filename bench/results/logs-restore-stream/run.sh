#!/usr/bin/env bash
# Row 109 (bench/NOTES.md, host side): restores on a copy stream of their
# own (GPUHEAP_RESTORE_STREAM=1, rs) against one copy stream (d), both with
# --offload-state at 512 (the setting of torch-h200-w512.csv), alternated
# after one (a) each: two rounds at 512, one at 384, two at 64 (defaults
# there). expectation.txt was written before. Run after
# `tools/gpu-run.sh build tests` (the GPU tests at this revision). $OUT set
# by the device tool; files under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
{
  peak_run a512 "--width 512" && for r in 1 2; do
    one c512-d-$r "--only c --width 512 --phases --offload-state"
    one c512-rs-$r "--only c --width 512 --phases --offload-state" GPUHEAP_RESTORE_STREAM=1
  done
  summary a512.json "c512-*.json"
  peak_run a384 "--width 384" && {
    one c384-d-1 "--only c --width 384 --phases --offload-state"
    one c384-rs-1 "--only c --width 384 --phases --offload-state" GPUHEAP_RESTORE_STREAM=1
  }
  summary a384.json "c384-*.json"
  peak_run a64 "--width 64" && for r in 1 2; do
    one c64-d-$r "--only c --width 64 --phases"
    one c64-rs-$r "--only c --width 64 --phases" GPUHEAP_RESTORE_STREAM=1
  done
  summary a64.json "c64-*.json"
} > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
