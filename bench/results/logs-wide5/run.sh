#!/usr/bin/env bash
# Row 105 (bench/NOTES.md, host side), at the revision where the engine
# makes every eviction copy by default: (c) with mark_model(prefetch="step")
# (gpu_train.py --model-prefetch step, spelt --step-prefetch at ada0f38, "s")
# against without ("d"), two alternated rounds at width 384 and one at 512
# after one (a) each, with --phases; then
# the three configs at width 64 with --csv (torch-h200.csv's form).
# expectation.txt was written before. $OUT set by the device tool; files
# under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
for w in 384 512; do
  peak_run a$w "--width $w" || continue
  for r in 1 2; do
    [ $w = 512 ] && [ $r = 2 ] && break
    one c$w-d-$r "--only c --width $w --phases"
    one c$w-s-$r "--only c --width $w --phases --model-prefetch step"
  done
  summary a$w.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
timeout 150 python3 -u python/tests/gpu_train.py --steps 20 --time-limit 60 --csv "$OUT/torch-h200.csv" \
  > "$OUT/w64.log" 2>&1
echo "width 64 rc=$?"; grep -E "ms/step|PASS|FAIL" "$OUT/w64.log"
pack
