#!/usr/bin/env bash
# Row 132 (bench/NOTES.md): the backward's head at width 256. Row 130's
# run 3 found the copy engine idle for the backward's first ~18 ms (the
# tail of the forward's activations still on the device; the restores
# start at the first evicted tensor, prefetch distance 1). Row 127's
# prefetch_room=4 filled that room with restores, then lost them to the
# backward's own gradients and workspaces (+30-40 ms a step) with its
# default reserve (twice the largest saved tensor, ~0.6 GB). Here the
# same with larger reserves, so that a restore comes early only where
# the room left after it is the size of what the backward still makes:
# d (the defaults), r4-1g2 (prefetch_room=4, reserve 1.2 GiB), r4-2g
# (reserve 2 GiB), two alternated rounds with --phases; then r4-1g2 under
# the profiler, the GPU's split by phase cut at its first copy (as row
# 130's run 3, whose d is the baseline). The budget from the H100's (a)
# peak of row 130 (5843253760 bytes). expectation.txt was written
# before. GH_REV: the revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
peak=5843253760
o="--only c --width 256 --steps 12 --phases"
for r in 1 2; do
  one c256-d-$r "$o"
  one c256-r4-1g2-$r "$o --prefetch-room 4 --room-reserve 1.2GiB"
  one c256-r4-2g-$r "$o --prefetch-room 4 --room-reserve 2GiB"
done
tar czf "$R/r.tgz" -C "$R" r
one c256-prof-r4-1g2 "--only c --width 256 --prefetch-room 4 --room-reserve 1.2GiB --profile --gpu-only --trace $OUT/trace.json"
grep -H "trace:" "$OUT"/c256-prof-*.log > "$OUT/prof.txt"
rm -f "$OUT"/trace*.json*
cat "$OUT/prof.txt"
grep -Ho '"prefetched_room": [0-9]*' "$OUT"/*.json
pack
