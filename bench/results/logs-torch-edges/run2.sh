#!/usr/bin/env bash
# Device visit 31, part 2: the GPU tests with python_gpu_edges (new), the
# probe's graph and oom cases again, then the allocation latency from
# PyTorch (bench/torch_alloc.py --tensors) with the capture check
# (new) against the same tree with capture-check.patch reversed (base),
# two alternated rounds. expectation2.txt was written before. $OUT set by
# the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh build tests
export PYTHONPATH=$PWD/python
GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so timeout 200 python3 -u bench/results/logs-torch-edges/probe.py graph oom_once \
  2>&1 | tee "$out/probe.log"
here=$PWD base=/tmp/gh-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-torch-edges/capture-check.patch" > /dev/null && echo "base: patch reversed" &&
 cmake -S . -B build-b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_BENCH=OFF \
   -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-b --target gpuheap -j 16 > /dev/null; echo "base build rc=$?")
declare -A lib=([new]=$here/build-gpu/libgpuheap.so [base]=$base/build-b/libgpuheap.so)
for r in 1 2; do
  for t in base new; do
    echo "== $t round $r"
    timeout 150 python3 -u bench/torch_alloc.py --lib "${lib[$t]}" --tensors --csv "$out/lat-$t-$r.csv" 2>&1 | tail -12
  done
done | tee "$out/latency.log"
