#!/usr/bin/env bash
# The second call of the visit: run.sh's profile again (the first call's
# CLI printed no per-line figures), now summed per source line by
# bench/ncu_lines.py, for mixed and for fixed 1 KiB beside it (how many
# instructions a warp issues, and with how many threads, when all lanes ask
# for one class). On an H200 first the committed run (gpu-run.sh build tests
# python). $OUT set by the device tool; GH_REV names the revision.
set -u
. tools/env.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $gpu"
case $gpu in *H200*) bash tools/gpu-run.sh build tests python ;; esac
{ cmake -S . -B build-prof -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo \
    -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_PROOFS=OFF &&
  cmake --build build-prof --target gh_stress -j "$(nproc)"; } > "$OUT/build-prof.log" 2>&1
echo "build-prof rc=$?"
for row in mixed 1024; do
  timeout 120 ncu --clock-control none -k regex:'alloc_kernel|free_kernel' --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
    -o "$OUT/$row" -f ./build-prof/bench/gh_stress --only $row --threads 1048576 --reps 1 > "$OUT/ncu-$row.log" 2>&1
  echo "ncu $row rc=$?"
  ncu -i "$OUT/$row.ncu-rep" --page details > "$OUT/$row-details.txt" 2>&1
  grep -E "^  [a-z<]|Duration|Executed Instructions  |Issued Instructions  |Avg. Active Threads|Warp Cycles Per Issued" \
    "$OUT/$row-details.txt"
  timeout 120 python3 bench/ncu_lines.py "$OUT/$row.ncu-rep" --top 40 > "$OUT/$row-lines.txt" 2>&1
  echo "ncu_lines $row rc=$?"; head -60 "$OUT/$row-lines.txt" | cut -c1-220
done
# Fallback if the Python module failed: the SASS page's header and busiest rows.
if ! grep -q "^==" "$OUT/mixed-lines.txt"; then
  ncu -i "$OUT/mixed.ncu-rep" --page source --csv --print-source sass 2>&1 | head -3 | cut -c1-1500
fi
rm -f "$OUT"/*.ncu-rep.bak
