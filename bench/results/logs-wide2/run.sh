#!/usr/bin/env bash
# Row 102 (bench/NOTES.md, host side): mark_model(prefetch=True) at widths
# 384 and 512 (gpu_train.py --model-prefetch) against the defaults, two
# alternated rounds of (c) each with --phases, after one (a) for the budget;
# then the GPU's time split by phase of (c) at 512. expectation.txt was
# written before. $OUT set by the device tool; packed under $OUT/r.
# Ran at the revision in machine.txt, where homeless units' eviction copies
# were made by a kernel by default (GPUHEAP_COPY_KERNEL=homeless since ada0f38).
set -u
. tools/alt-begin.sh
for w in 384 512; do
  peak_run a$w "--width $w --phases" || continue
  for r in 1 2; do
    one c$w-d-$r "--only c --width $w --phases"
    one c$w-p-$r "--only c --width $w --phases --model-prefetch"
  done
  summary a$w.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
timeout 150 python3 -u python/tests/gpu_train.py --only c --width 512 --steps 6 --peak "$peak" --profile --gpu-only \
  --trace /tmp/trace.json > "$OUT/trace-c512.log" 2>&1
grep -E "ms/step|trace:" "$OUT/trace-c512.log" | tail -8
rm -f /tmp/trace.json*
pack
