#!/usr/bin/env bash
# Where the manager's host time goes after row 68 (quiet victims first),
# by call site: the tree with sites.patch (not committed: every provider
# call's time by source line of host/tensor.c, printed at exit under
# GPUHEAP_CALL_TIMES=1; lines after 397 are 10 more than in the tree),
# (c) at widths 64 (twice) and 192 (once), after (a) at each width.
set -u
git apply bench/results/logs-sites2/sites.patch && cmake --build build-gpu -j "$(nproc)" > "$OUT/build-sites.log" 2>&1
echo "sites build rc=$?"
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
for r in 1 2; do
  one c-sites-$r "--only c --phases"
  grep "^SITE" "$OUT/c-sites-$r.log" | sort -t' ' -k5 -g -r | head -30
done
one a-w192 "--only a --width 192 --phases"
peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
one c-w192-sites-1 "--only c --width 192 --phases"
grep "^SITE" "$OUT/c-w192-sites-1.log" | sort -t' ' -k5 -g -r | head -30
summary a.json "c-sites-*.json" a-w192.json "c-w192-*.json"
