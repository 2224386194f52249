#!/usr/bin/env bash
# Row 63: runs placed on freed runs (GPUHEAP_TAKE_FREED) and covering
# (bench/results/logs-dc35972-replay-cache/cover.patch applied, not
# committed; GPUHEAP_COVER=0 turns it off), three alternated rounds: both,
# take only, neither. Then (a) and (c) with --phases (the GPU's time by
# phase, for the floor), and (c) with GPUHEAP_CALL_TIMES=1 (public calls
# and provider calls by kind). Every run's losses against (a)'s.
set -u
. tools/alt-train.sh
one a-ph "--only a --phases"
grep -h "phases" "$OUT/a-ph.log" | tail -1
for r in 1 2 3; do
  one c-both-$r "--only c"
  one c-take-$r "--only c" GPUHEAP_COVER=0
  one c-none-$r "--only c" GPUHEAP_COVER=0 GPUHEAP_TAKE_FREED=0
done
one c-ph "--only c --phases"
grep -h "phases" "$OUT/c-ph.log" | tail -1
one c-ct "--only c" GPUHEAP_CALL_TIMES=1
one c-take-ct "--only c" GPUHEAP_CALL_TIMES=1 GPUHEAP_COVER=0
python3 - "$OUT" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
a = json.load(open(os.path.join(out, "a-ph.json")))["losses"]
for f in sorted(glob.glob(os.path.join(out, "c-*.json"))):
    c = json.load(open(f))
    print(os.path.basename(f), "losses", "bitwise equal to (a)" if c["losses"] == a else "DIFFER", "oom", c["oom"])
PY
