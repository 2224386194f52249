#!/usr/bin/env bash
# One visit (2026-12-06). On an H200 first the committed run at this
# revision (tools/gpu-run.sh build tests python: the GPU tests and
# torch-h200.csv); on any card then the mixed workload (2^20 threads,
# 16-4096 B) under Nsight Compute: its alloc and free kernels after one
# warm-up run, with the warps' stall reasons and the stall samples by SASS
# line (bench/NOTES.md, "Why mixed is slow": "profile before guessing
# further"), and the fixed 1 KiB and 4 KiB rows beside it for scale.
# expectation.txt was written before. $OUT set by the device tool;
# GH_REV names the revision.
set -u
. tools/env.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $gpu"
case $gpu in
  *H200*) bash tools/gpu-run.sh build tests python ;;
  *) bash tools/gpu-run.sh build ;;
esac
# A build of gh_stress with line information for the source view.
{ cmake -S . -B build-prof -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo \
    -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_PROOFS=OFF &&
  cmake --build build-prof --target gh_stress -j "$(nproc)"; } > "$OUT/build-prof.log" 2>&1
echo "build-prof rc=$?"
for row in mixed 1024 4096; do
  timeout 60 ./build-prof/bench/gh_stress --only $row --threads 1048576 --reps 7 2>/dev/null | grep -E "^(fixed|mixed) "
done | tee "$OUT/rows.log"
timeout 240 ncu --clock-control none -k regex:'alloc_kernel|free_kernel' --launch-skip 2 --launch-count 2 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters \
  --import-source yes -o "$OUT/mixed" -f \
  ./build-prof/bench/gh_stress --only mixed --threads 1048576 --reps 1 > "$OUT/ncu-run.log" 2>&1
echo "ncu rc=$?"; tail -3 "$OUT/ncu-run.log"
ncu -i "$OUT/mixed.ncu-rep" --page details > "$OUT/mixed-details.txt" 2>&1
ncu -i "$OUT/mixed.ncu-rep" --page source --csv --print-source sass > "$OUT/mixed-sass.csv" 2>&1
ncu -i "$OUT/mixed.ncu-rep" --page source --csv --print-source cuda > "$OUT/mixed-cuda.csv" 2>&1
ls -la "$OUT"
grep -E "Duration|Registers|Achieved Occupancy|Warp Cycles Per Issued|Stall|L2 Hit|Memory Throughput" "$OUT/mixed-details.txt" | head -60
