#!/usr/bin/env bash
# The call trace of (c) at width 256 (GPUHEAP_TRACE), for the CPU replay
# of item (1) after row 127 (bench/NOTES.md): how many of a step's maps
# fall after the budget fills in the forward. 12 steps at the defaults,
# the budget half of (a)'s peak at 256 measured in row 126
# (logs-visit27/a256.json: 5843253760 bytes). GH_REV: the revision,
# computed where the run is prepared; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
peak=5843253760
one c256-trace "--only c --width 256 --steps 12" GPUHEAP_TRACE=$OUT/c256.ghtrace
xz -9 "$OUT/c256.ghtrace"
ls -la "$OUT"
pack
