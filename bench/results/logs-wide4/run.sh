#!/usr/bin/env bash
# Row 104 (bench/NOTES.md, host side): homeless evictions by the copy
# engine (GPUHEAP_COPY_KERNEL=0, "e") and with room always waiting for
# pending frees too (GPUHEAP_WAIT_FREES=1, "ew") against the defaults ("d"),
# alternated: two rounds at widths 512 (d, ew), 384 and 64 (d, e, ew), each
# after one (a) for the budget, with --phases. expectation.txt was written
# before. $OUT set by the device tool; packed under $OUT/r.
# Ran at the revision in machine.txt, where homeless units' eviction copies
# were made by a kernel by default (GPUHEAP_COPY_KERNEL=homeless since ada0f38).
set -u
. tools/alt-begin.sh
for w in 512 384 64; do
  peak_run a$w "--width $w" || continue
  for r in 1 2; do
    one c$w-d-$r "--only c --width $w --phases"
    [ $w = 512 ] || one c$w-e-$r "--only c --width $w --phases" GPUHEAP_COPY_KERNEL=0
    one c$w-ew-$r "--only c --width $w --phases" GPUHEAP_COPY_KERNEL=0 GPUHEAP_WAIT_FREES=1
  done
  summary a$w.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
