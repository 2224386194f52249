#!/usr/bin/env bash
# Row 123 (bench/NOTES.md, host side): after row 122, cleaning whose copies
# are queued at the end of an allocation (after its maps), once the
# advice's events are complete (cr: GPUHEAP_CLEAN=ready) against the defaults (d) and row 122's cleaning
# (c1: GPUHEAP_CLEAN=1), at width 256 with --phases, two alternated rounds,
# then one round of d / cr at 512 with --offload-state; all with
# GPUHEAP_CALL_TIMES=1 and the clean counts a step. expectation.txt was
# written before. GH_REV: the revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
export GPUHEAP_CALL_TIMES=1
{
  peak_run a256 "--width 256 --phases" && for r in 1 2; do
    one c256-d-$r "--only c --width 256 --phases"
    one c256-cr-$r "--only c --width 256 --phases" GPUHEAP_CLEAN=ready
    one c256-c1-$r "--only c --width 256 --phases" GPUHEAP_CLEAN=1
  done
  grep -h "phases on\|cleaning, frames" "$OUT"/c256-*.log
  summary a256.json "c256-*.json"
} > "$OUT/alt256.log" 2>&1
grep -E "ms/step|bitwise|DIFFER|cleaning, frames" "$OUT/alt256.log"
tar czf "$R/r.tgz" -C "$R" r
{
  peak_run a512 "--width 512 --offload-state" && {
    one c512-d-1 "--only c --width 512 --offload-state"
    one c512-cr-1 "--only c --width 512 --offload-state" GPUHEAP_CLEAN=ready
  }
  grep -h "cleaning, frames" "$OUT"/c512-*.log
  summary a512.json "c512-*.json"
} > "$OUT/alt512.log" 2>&1
grep -E "ms/step|bitwise|DIFFER|cleaning, frames" "$OUT/alt512.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pack
