#!/usr/bin/env bash
# The start of an alternation script on the GPU machine
# (bench/results/logs-*/run.sh): source it first, with OUT set by the device
# tool. It moves OUT to $OUT/r (so that pack, at the end, leaves one
# archive, $OUT/r.tgz, while what a run killed at its time limit had
# written still comes back), builds the library (build-gpu/, Release;
# build.log), and sources tools/alt-train.sh (one, peak_run, summary).
#
#   set -u
#   . tools/alt-begin.sh
#   peak_run a384 "--width 384" || exit 1
#   one c384-1 "--only c --width 384"
#   summary a384.json "c384-*.json"
#   pack
. tools/env.sh
R=$OUT
export OUT=$R/r
mkdir -p "$OUT"
pack() { cd "$R" && tar czf r.tgz r && rm -rf r; }
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release &&
  cmake --build build-gpu -j16 --target gpuheap; } > "$OUT/build.log" 2>&1 ||
  { tail "$OUT/build.log"; pack; exit 1; }
. tools/alt-train.sh
