#!/usr/bin/env bash
# Device visit 29 (bench/NOTES.md): row 121 at last, on an H200 only (the
# GPU tests ran at this code on an H100 in visit 28): the widths with the
# transfer floor (f), 256 first (where the manager, not the floor, misses
# 2x on the H100s), then 384 and 512 with --offload-state, then 64; each
# (a), (b), (c), (f), 12 steps, the results so far packed after each width.
# On any other card only width 256 runs (the same four configs: the code
# of now at the width where (c) misses 2x on the H100s). expectation.txt
# was written before. GH_REV: the revision; $OUT set by the device tool.
set -u
. tools/alt-begin.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: width 256 only"; widths "256"; pack; exit 0; }
widths "256" "384 --offload-state" "512 --offload-state" "64"
pack
