#!/usr/bin/env bash
# Device visit 24 (bench/NOTES.md): c2dedb8, 0796f6e and 3632582 (every
# run takes the hint slots' empty pages, gh_run_take) on a GPU for the
# first time: the GPU tests, compute-sanitizer and the stress table at
# GH_REV, then test_gpu_workloads' every-kind case on the 256 MiB heap
# (--small --shared) under memcheck, five rounds. expectation.txt was
# written before. $OUT set by the device tool.
set -u
GH_REV=$GH_REV bash tools/gpu-run.sh build tests sanitizer stress
for r in 1 2 3 4 5; do
  printf 'r%d: ' "$r"
  timeout 120 compute-sanitizer --tool memcheck build-gpu/tests/gpu/test_gpu_workloads --small --shared 2>&1 |
    grep -E "every kind|ERROR SUMMARY" | tr '\n' ' '
  echo
done | tee "$OUT/shared.log"
