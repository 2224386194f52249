#!/usr/bin/env bash
# Row 130, run 2: the defaults (d) and GPUHEAP_CLEAN=prefill (cp) at
# width 256 under the profiler, the GPU's activity only, split by phase
# (compute alone, copies alone, both, idle), as row 119; the budget from
# run 1's (a) peak on an H100 (5843253760 bytes). The traces are deleted
# after their summaries. GH_REV: the revision; $OUT set by the device tool.
# Run 3 is this script again at 82b6b8f or later, whose gpu_train.py also
# cuts each phase at its first copy.
set -u
. tools/alt-begin.sh
peak=5843253760
{
  one c256-prof-d "--only c --width 256 --profile --gpu-only --trace $OUT/trace-d.json"
  one c256-prof-cp "--only c --width 256 --profile --gpu-only --trace $OUT/trace-cp.json" GPUHEAP_CLEAN=prefill
  grep -H "trace:" "$OUT"/c256-prof-*.log
  rm -f "$OUT"/trace*.json*
} > "$OUT/alt.log" 2>&1
grep -v '^$' "$OUT/alt.log" | grep "trace:"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pack
