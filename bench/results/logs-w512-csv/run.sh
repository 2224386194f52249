#!/usr/bin/env bash
# Row 107 (bench/NOTES.md, host side), the committed figures for a wide
# model: python/tests/gpu_train.py at width 512 with --offload-state,
# (a), (b), (c) and PyTorch's save_on_cpu (d), written to
# torch-h200-w512.csv and torch-h200-w512-reference.csv (the test's width,
# 64, stays bench/results/torch-h200.csv); then a third alternated round of
# (c) defaults (d) / --offload-state (o) at 512 and 384 after one (a) each
# (logs-state-ahead had two). expectation.txt was written before. $OUT set
# by the device tool; files under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
timeout 400 python3 -u python/tests/gpu_train.py --steps 20 --time-limit 90 --width 512 --offload-state \
  --csv "$OUT/torch-h200-w512.csv" --reference-csv "$OUT/torch-h200-w512-reference.csv" > "$OUT/train-w512.log" 2>&1
echo "gpu_train rc=$?"
grep -E "ms/step|PASS|FAIL|wrote" "$OUT/train-w512.log"
for w in 512 384; do
  peak_run a$w "--width $w" || continue
  one c$w-d-3 "--only c --width $w --phases"
  one c$w-o-3 "--only c --width $w --phases --offload-state"
  summary a$w.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
