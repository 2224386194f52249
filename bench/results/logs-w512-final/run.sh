#!/usr/bin/env bash
# The width-512 figures again at the revision whose offload_state brings the
# state alone back before step() (row 108; logs-w512-csv ran 2fee5bd, where
# it also brought the parameters and gradients): python/tests/gpu_train.py
# --width 512 --offload-state with (a), (b), (c) and (d), written to
# torch-h200-w512.csv and torch-h200-w512-reference.csv. $OUT set by the
# device tool; files under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
timeout 400 python3 -u python/tests/gpu_train.py --steps 20 --time-limit 90 --width 512 --offload-state \
  --csv "$OUT/torch-h200-w512.csv" --reference-csv "$OUT/torch-h200-w512-reference.csv" > "$OUT/train-w512.log" 2>&1
echo "gpu_train rc=$?"
grep -E "ms/step|PASS|FAIL|wrote" "$OUT/train-w512.log"
pack
