#!/usr/bin/env bash
# Row 121 at last, for the first visit that gets an H200 (bench/NOTES.md):
# the widths with the transfer floor (f) -- 512 and 384 with
# --offload-state, 256, 64 -- each (a), (b), (c), (f), 12 steps, then the
# GPU tests on the H200. On any other card it stops after the build.
# expectation.txt was written before. GH_REV: the revision, computed where
# the run is prepared; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; pack; exit 0; }
widths "512 --offload-state" "384 --offload-state" "256" "64"
GH_REV=$GH_REV bash tools/gpu-run.sh build tests 2>&1 | tail -6
pack
