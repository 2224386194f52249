#!/usr/bin/env bash
# Row 65: the offload context's prefetch distance 1 against 2 (row 64's
# one run of 2: 1.365 GB moved against 1.458), three alternated rounds, 3
# once; the tree carries offload()'s default changed to 2 (uncommitted),
# under which the GPU test of offload() and the training run (a), (b),
# (c) at the defaults run first. Every run's losses against (a)'s.
set -u
. tools/alt-train.sh
timeout 120 ctest --test-dir build-gpu -R python_gpu_offload --output-on-failure > "$OUT/ctest-offload.log" 2>&1
tail -3 "$OUT/ctest-offload.log"
timeout 200 python3 -u python/tests/gpu_train.py --steps 20 --time-limit 60 --csv "$OUT/torch-h200.csv" \
  > "$OUT/gpu_train.log" 2>&1
grep -E "ms/step|PASS|FAIL" "$OUT/gpu_train.log"
one a-ph "--only a --phases"
for r in 1 2 3; do
  one c-pd1-$r "--only c --phases --prefetch-distance 1"
  one c-pd2-$r "--only c --phases --prefetch-distance 2"
done
one c-pd3 "--only c --phases --prefetch-distance 3"
for f in "$OUT"/c-*.log; do echo "$(basename "$f" .log): $(grep -h 'phases' "$f" | tail -1 | sed 's/.*step: //')"; done
python3 - "$OUT" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
a = json.load(open(os.path.join(out, "a-ph.json")))["losses"]
for f in sorted(glob.glob(os.path.join(out, "c-*.json"))):
    c = json.load(open(f))
    print(os.path.basename(f), "losses", "bitwise equal to (a)" if c["losses"] == a else "DIFFER", "oom", c["oom"],
          "%.2f ms" % c["ms_per_step"], "%.3f GB" % (c["bytes_moved_per_step"] / 1e9))
PY
