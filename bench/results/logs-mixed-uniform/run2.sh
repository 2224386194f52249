#!/usr/bin/env bash
# After run.sh: the stress benchmark at this revision (tools/gpu-run.sh build
# stress: the full table, the fill sweep and the efficiency, 7 runs each),
# then the mixed workload's alloc kernel under Nsight Compute again, summed
# per source line (bench/ncu_lines.py), to see what the shuffles left.
# $OUT set by the device tool; GH_REV names the revision.
set -u
. tools/env.sh
bash tools/gpu-run.sh build stress
{ cmake -S . -B build-prof -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo \
    -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_PROOFS=OFF &&
  cmake --build build-prof --target gh_stress -j "$(nproc)"; } > "$OUT/build-prof.log" 2>&1
echo "build-prof rc=$?"
timeout 120 ncu --clock-control none -k regex:'alloc_kernel' --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  -o "$OUT/mixed" -f ./build-prof/bench/gh_stress --only mixed --threads 1048576 --reps 1 > "$OUT/ncu-mixed.log" 2>&1
echo "ncu rc=$?"
ncu -i "$OUT/mixed.ncu-rep" --page details > "$OUT/mixed-details.txt" 2>&1
grep -E "Duration|Executed Instructions  |Issued Instructions  |Avg. Active Threads|Warp Cycles Per Issued" "$OUT/mixed-details.txt"
timeout 120 python3 bench/ncu_lines.py "$OUT/mixed.ncu-rep" --top 30 > "$OUT/mixed-lines.txt" 2>&1
grep -v "^per-instruction" "$OUT/mixed-lines.txt" | head -34 | cut -c1-200
rm -f "$OUT/mixed.ncu-rep"
