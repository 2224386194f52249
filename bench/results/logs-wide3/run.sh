#!/usr/bin/env bash
# Row 103 (bench/NOTES.md, host side): options at width 512, one run of (c)
# each with --phases after one (a) for the budget. expectation.txt was
# written before. $OUT set by the device tool; packed under $OUT/r.
# Ran at the revision in machine.txt, where homeless units' eviction copies
# were made by a kernel by default (GPUHEAP_COPY_KERNEL=homeless since ada0f38).
set -u
. tools/alt-begin.sh
w=512
{
peak_run a$w "--width $w"
one c$w-default "--only c --width $w --phases"
one c$w-pd2 "--only c --width $w --phases --prefetch-distance 2"
one c$w-wf1 "--only c --width $w --phases" GPUHEAP_WAIT_FREES=1
one c$w-ck0 "--only c --width $w --phases" GPUHEAP_COPY_KERNEL=0
one c$w-pd3 "--only c --width $w --phases --prefetch-distance 3"
one c$w-mover "--only c --width $w --phases" GPUHEAP_MOVER=1
one c$w-lw90 "--only c --width $w --phases --low-watermark 0.9"
one c$w-kl8 "--only c --width $w --phases --keep-last 8"
summary a$w.json "c$w-*.json"
} > "$OUT/alt512.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt512.log"
pack
