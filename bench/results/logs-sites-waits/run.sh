#!/usr/bin/env bash
# Where the manager's ~10 ms a step of event syncs (row 63) wait: the tree
# with sites.patch (not committed: every provider call's time by source
# line of host/tensor.c, printed at exit under GPUHEAP_CALL_TIMES=1), (c)
# at the defaults twice.
set -u
. tools/alt-train.sh
for r in 1 2; do
  one c-sites-$r "--only c" GPUHEAP_CALL_TIMES=1
  grep "^SITE" "$OUT/c-sites-$r.log" | sort -t' ' -k5 -g -r | head -25
done
