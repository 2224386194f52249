#!/usr/bin/env bash
# Row 120 (bench/NOTES.md, host side): at width 256, after row 119's split
# (the optimizer phase 14.6 ms a step against (a)'s 0.9: SGD's momentum
# read and written in host memory), (c) with `--offload-state` (os) and
# with it and prefetch distance 2 (os-p2) against the defaults (d), two
# alternated rounds. expectation.txt (run2) was written before. GH_REV: the
# revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
{
  peak_run a256 "--width 256 --phases" && for r in 1 2; do
    one c256-d-$r "--only c --width 256 --phases"
    one c256-os-$r "--only c --width 256 --phases --offload-state"
    one c256-os-p2-$r "--only c --width 256 --phases --offload-state --prefetch-distance 2"
  done
  grep -h "phases on" "$OUT"/c256-*.log
  summary a256.json "c256-*.json"
} > "$OUT/alt.log" 2>&1
grep -E "ms/step|phases on|bitwise" "$OUT/alt.log"
pack
