#!/usr/bin/env bash
# Row 101 (bench/NOTES.md, host side): (c) against (a) as the model widens.
# gpu_train.py's three configs (a, b, c, with the losses checked bit for bit)
# at widths 256, 384 and 512 with the phases timed on the GPU, then two more
# alternated rounds of (a) and (c) at 384 and 512 (tools/alt-train.sh, the
# budget from (a)'s peak of the same run). The manager as committed;
# expectation.txt was written before. $OUT set by the device tool; packed
# under $OUT/r.
# Ran at the revision in machine.txt, where homeless units' eviction copies
# were made by a kernel by default (GPUHEAP_COPY_KERNEL=homeless since ada0f38).
set -u
. tools/alt-begin.sh
for w in 256 384 512; do
  timeout 240 python3 -u python/tests/gpu_train.py --steps 20 --time-limit 100 --width $w --phases \
    --csv "$OUT/w$w.csv" > "$OUT/w$w.log" 2>&1
  echo "width $w rc=$?"
  grep -E "ms/step|phases on|PASS|FAIL|peak" "$OUT/w$w.log" | tail -8
done
for w in 512 384; do
  peak_run a$w-0 "--width $w" || continue
  for r in 1 2; do
    one c$w-$r "--only c --width $w --phases"
    one a$w-$r "--only a --width $w"
  done
  summary a$w-0.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
