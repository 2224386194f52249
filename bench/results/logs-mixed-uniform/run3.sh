#!/usr/bin/env bash
# The session's last call. On an H200: the GPU tests, the stress benchmark
# and the committed training run at this revision (tools/gpu-run.sh build
# tests stress python: alloc-h200.csv and torch-h200.csv, stale since
# 7b084d7 and ada0f38). On any other card: the churn kernel (8 rounds of
# malloc, write, check, free of 16-1024 B a thread, 2^20 threads) under
# Nsight Compute, summed per source line, for what to take on next after
# visit 21 (bench/NOTES.md). $OUT set by the device tool; GH_REV names the
# revision.
set -u
. tools/env.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $gpu"
case $gpu in
  *H200*) bash tools/gpu-run.sh build tests stress python; exit ;;
esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt"
{ cmake -S . -B build-prof -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo \
    -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_PROOFS=OFF &&
  cmake --build build-prof --target gh_stress -j "$(nproc)"; } > "$OUT/build-prof.log" 2>&1
echo "build-prof rc=$?"
timeout 120 ncu --clock-control none -k regex:'churn_kernel' --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  --section LaunchStats --section Occupancy \
  -o "$OUT/churn" -f ./build-prof/bench/gh_stress --only churn --threads 1048576 --reps 1 > "$OUT/ncu-churn.log" 2>&1
echo "ncu rc=$?"
ncu -i "$OUT/churn.ncu-rep" --page details > "$OUT/churn-details.txt" 2>&1
grep -E "Duration|Executed Instructions  |Avg. Active Threads|Warp Cycles Per Issued|Registers Per|Achieved Occ|Theoretical Occ" "$OUT/churn-details.txt"
timeout 120 python3 bench/ncu_lines.py "$OUT/churn.ncu-rep" --top 30 > "$OUT/churn-lines.txt" 2>&1
grep -v "^per-instruction" "$OUT/churn-lines.txt" | head -34 | cut -c1-200
rm -f "$OUT/churn.ncu-rep"
