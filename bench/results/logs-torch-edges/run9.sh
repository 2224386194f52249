#!/usr/bin/env bash
# Device visit 32, run 9: gpu_edges.py with torch.cuda.memory_summary
# served, then the allocation latency from PyTorch (bench/torch_alloc.py
# --tensors) with graph pools (new) against the tree with pools.patch
# reversed (base: f27d001's library), two alternated rounds.
# expectation7.txt was written before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh lib
export PYTHONPATH=$PWD/python
GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so timeout 150 python3 -u python/tests/gpu_edges.py 2>&1 |
  tee "$out/gpu_edges.log" | grep -v Warning | tail -12
here=$PWD base=/tmp/gh-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-torch-edges/pools.patch" > /dev/null && echo "base: patch reversed" &&
 cmake -S . -B build-b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_BENCH=OFF \
   -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-b --target gpuheap -j 16 > /dev/null; echo "base build rc=$?")
declare -A lib=([new]=$here/build-gpu/libgpuheap.so [base]=$base/build-b/libgpuheap.so)
for r in 1 2; do
  for t in base new; do
    echo "== $t round $r"
    timeout 150 python3 -u bench/torch_alloc.py --lib "${lib[$t]}" --tensors --csv "$out/lat-$t-$r.csv" 2>&1 | tail -12
  done
done | tee "$out/latency.log"
