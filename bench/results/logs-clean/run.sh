#!/usr/bin/env bash
# Row 122 (bench/NOTES.md, host side): cleaning (GPUHEAP_CLEAN; tensor.c,
# "cleaning": quiet tensors copied to the host at their advice, evictions
# of clean units remap only) against the defaults (d), alternated: width
# 256 (c1: the copy engine, ck: the copy kernel), then 64, then 512 with
# --offload-state, two rounds each. expectation.txt was written before.
# GH_REV: the revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
{
  peak_run a256 "--width 256 --phases" && for r in 1 2; do
    one c256-d-$r "--only c --width 256 --phases"
    one c256-c1-$r "--only c --width 256 --phases" GPUHEAP_CLEAN=1
    one c256-ck-$r "--only c --width 256 --phases" GPUHEAP_CLEAN=kernel
  done
  grep -h "phases on" "$OUT"/c256-*.log
  summary a256.json "c256-*.json"
} > "$OUT/alt256.log" 2>&1
grep -E "ms/step|bitwise|DIFFER" "$OUT/alt256.log"
tar czf "$R/r.tgz" -C "$R" r
{
  peak_run a64 "" && for r in 1 2; do
    one c64-d-$r "--only c"
    one c64-c1-$r "--only c" GPUHEAP_CLEAN=1
  done
  summary a64.json "c64-*.json"
} > "$OUT/alt64.log" 2>&1
grep -E "ms/step|bitwise|DIFFER" "$OUT/alt64.log"
tar czf "$R/r.tgz" -C "$R" r
{
  peak_run a512 "--width 512 --offload-state" && for r in 1 2; do
    one c512-d-$r "--only c --width 512 --offload-state"
    one c512-c1-$r "--only c --width 512 --offload-state" GPUHEAP_CLEAN=1
  done
  summary a512.json "c512-*.json"
} > "$OUT/alt512.log" 2>&1
grep -E "ms/step|bitwise|DIFFER" "$OUT/alt512.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pack
