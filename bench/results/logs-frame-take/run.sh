#!/usr/bin/env bash
# Prepared for the next visit (bench/NOTES.md, device visit 22, "Frame runs
# take the hint slots' empty pages"; fc5d0b1 was made after the session's
# device time was spent): the GPU tests, compute-sanitizer and the stress
# table at GH_REV, then test_gpu_workloads' every-kind case on the
# workloads' 256 MiB heap (--small --shared, the configuration whose frame
# runs got NULL beside refills at 909355a) under memcheck, five rounds,
# alternating the tree with frame-take.patch reversed (base) and as it is
# (new). expectation.txt was written before. $OUT set by the device tool.
set -u
GH_REV=$GH_REV bash tools/gpu-run.sh build tests sanitizer stress
. tools/env.sh
here=$PWD
base=/tmp/gh-ft-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-frame-take/frame-take.patch" > /dev/null && echo "base: patch reversed")
(cd "$base" && cmake -S . -B build-ft -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON \
   -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-ft --target test_gpu_workloads -j 16 > /dev/null
 echo "base build rc=$?")
declare -A bin=([new]=$here/build-gpu/tests/gpu/test_gpu_workloads [base]=$base/build-ft/tests/gpu/test_gpu_workloads)
for r in 1 2 3 4 5; do
  for t in base new; do
    printf '%-4s r%d: ' "$t" "$r"
    timeout 120 compute-sanitizer --tool memcheck "${bin[$t]}" --small --shared 2>&1 |
      grep -E "every kind|ERROR SUMMARY" | tr '\n' ' '
    echo
  done
done | tee "$OUT/shared.log"
