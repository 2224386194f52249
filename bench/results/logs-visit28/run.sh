#!/usr/bin/env bash
# Device visit 28 (bench/NOTES.md): the GPU tests at fde1aed's code (not run
# on a GPU since b277f7d; python/tests/gpu_offload.py's third run, room, is
# new), then the call trace of (c) at width 256 (logs-trace256/run.sh's run,
# for replay_trace --phases), then, on an H200 only, row 121's widths.
# expectation.txt was written before. GH_REV: the revision; $OUT set by the
# device tool.
set -u
. tools/alt-begin.sh
GH_REV=$GH_REV bash tools/gpu-run.sh build tests 2>&1 | tail -20
tar czf "$R/r.tgz" -C "$R" r
peak=5843253760  # logs-visit27/a256.json, as in logs-trace256/run.sh
one c256-trace "--only c --width 256 --steps 12" GPUHEAP_TRACE=$OUT/c256.ghtrace
xz -9 "$OUT/c256.ghtrace"
tar czf "$R/r.tgz" -C "$R" r
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: widths skipped"; pack; exit 0; }
widths "512 --offload-state" "384 --offload-state" "256" "64"
pack
