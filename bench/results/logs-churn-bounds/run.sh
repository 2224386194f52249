#!/usr/bin/env bash
# What occupancy buys a kernel that allocates in a loop: the churn kernel as
# committed (96 registers) against the same kernel with
# __launch_bounds__(256, 3) (80 registers, some spills), alternated three
# rounds on one machine, churn and mixed rows at 2^20 threads, medians of
# 5. expectation.txt was written before. $OUT set by the device tool.
set -u
. tools/env.sh
here=$PWD
lb=/tmp/gh-lb
rm -rf "$lb" && mkdir -p "$lb"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$lb"
sed -i 's/^__global__ void churn_kernel/__global__ void __launch_bounds__(256, 3) churn_kernel/' "$lb/bench/workloads.cu"
grep -c "__launch_bounds__(256, 3) churn_kernel" "$lb/bench/workloads.cu"
for d in "$here" "$lb"; do
  (cd "$d" && cmake -S . -B build-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF \
     -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-ab --target gh_stress -j 8 > /dev/null; echo "$d build rc=$?") &
done
wait
declare -A bin=([d]=$here/build-ab/bench/gh_stress [lb]=$lb/build-ab/bench/gh_stress)
for r in 1 2 3; do
  for t in d lb; do
    for row in churn mixed; do
      printf '%-3s r%d ' "$t" "$r"
      timeout 60 "${bin[$t]}" --only $row --threads 1048576 --reps 5 2>/dev/null | grep -E "^(mixed|churn) "
    done
  done
done | tee "$OUT/ab.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt"
