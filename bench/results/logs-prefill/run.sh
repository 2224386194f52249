#!/usr/bin/env bash
# Row 130 (bench/NOTES.md, host side): cleaning before the budget fills
# only (cp: GPUHEAP_CLEAN=prefill) against the defaults (d): width 256
# with --phases, three alternated rounds; 512 with --offload-state, one
# round; 64, two rounds; all with GPUHEAP_CALL_TIMES=1 and the clean
# counts a step. expectation.txt was written before. GH_REV: the
# revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
export GPUHEAP_CALL_TIMES=1
cp="GPUHEAP_CLEAN=prefill"
{
  peak_run a256 "--width 256 --phases" && rounds c256 3 "--only c --width 256 --phases" d "" cp "$cp"
  grep -h "phases on\|cleaning, frames" "$OUT"/c256-*.log
  summary a256.json "c256-*.json"
} > "$OUT/alt256.log" 2>&1
grep -E "ms/step|bitwise|DIFFER|cleaning, frames" "$OUT/alt256.log"
tar czf "$R/r.tgz" -C "$R" r
{
  peak_run a512 "--width 512 --offload-state" && rounds c512 1 "--only c --width 512 --offload-state" d "" cp "$cp"
  summary a512.json "c512-*.json"
} > "$OUT/alt512.log" 2>&1
grep -E "ms/step|bitwise|DIFFER" "$OUT/alt512.log"
tar czf "$R/r.tgz" -C "$R" r
{
  peak_run a64 "" && rounds c64 2 "--only c" d "" cp "$cp"
  summary a64.json "c64-*.json"
} > "$OUT/alt64.log" 2>&1
grep -E "ms/step|bitwise|DIFFER" "$OUT/alt64.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pack
