#!/usr/bin/env bash
# Row 64: after the GPU tests and the committed training run of this
# revision, (c) at the defaults against GPUHEAP_EVICT_AHEAD=1 and the low
# watermark 0.95, two alternated rounds; prefetch distance 2 once; every
# run's losses against (a)'s.
set -u
. tools/alt-train.sh
one a-ph "--only a --phases"
for r in 1 2; do
  one c-d-$r "--only c --phases"
  one c-ea-$r "--only c --phases" GPUHEAP_EVICT_AHEAD=1
  one c-lw95-$r "--only c --phases --low-watermark 0.95"
done
one c-pd2 "--only c --phases --prefetch-distance 2"
for f in "$OUT"/*.log; do echo "$(basename "$f" .log): $(grep -h 'phases' "$f" | tail -1 | sed 's/.*step: //')"; done
python3 - "$OUT" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
a = json.load(open(os.path.join(out, "a-ph.json")))["losses"]
for f in sorted(glob.glob(os.path.join(out, "c-*.json"))):
    c = json.load(open(f))
    print(os.path.basename(f), "losses", "bitwise equal to (a)" if c["losses"] == a else "DIFFER", "oom", c["oom"])
PY
