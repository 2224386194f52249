#!/usr/bin/env bash
# Row 127 (bench/NOTES.md): offload(prefetch_room=N) -- past the prefetch
# distance, up to N saved tensors prefetched ahead where the budget has
# room for them and a reserve (gh_tensor_prefetch_room) -- against the
# defaults. Width 256 (--phases): d, r4 (N=4, the default reserve: twice
# the largest saved tensor), r4h (N=4, reserve one largest tensor, 302 MB
# at 256), r16 (N=16), three alternated rounds of 12 steps; then width 512
# with --offload-state, d / r4, two rounds; then width 64, d / r4, two
# rounds. expectation.txt was written before. GH_REV: the revision,
# computed where the run is prepared; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
if peak_run a256 "--width 256 --steps 12 --phases"; then
  for r in 1 2 3; do
    one c256-d-$r "--only c --width 256 --steps 12 --phases"
    one c256-r4-$r "--only c --width 256 --steps 12 --phases --prefetch-room 4"
    one c256-r4h-$r "--only c --width 256 --steps 12 --phases --prefetch-room 4 --room-reserve 301989888"
    one c256-r16-$r "--only c --width 256 --steps 12 --phases --prefetch-room 16"
    tar czf "$R/r.tgz" -C "$R" r
  done
  summary a256.json "c256-*.json"
fi
if peak_run a512 "--width 512 --steps 12 --offload-state"; then
  for r in 1 2; do
    one c512-d-$r "--only c --width 512 --steps 12 --offload-state"
    one c512-r4-$r "--only c --width 512 --steps 12 --offload-state --prefetch-room 4"
    tar czf "$R/r.tgz" -C "$R" r
  done
  summary a512.json "c512-*.json"
fi
if peak_run a64 "--width 64 --steps 20"; then
  for r in 1 2; do
    one c64-d-$r "--only c --width 64 --steps 20"
    one c64-r4-$r "--only c --width 64 --steps 20 --prefetch-room 4"
  done
  summary a64.json "c64-*.json"
fi
pack
