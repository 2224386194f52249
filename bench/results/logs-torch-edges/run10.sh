#!/usr/bin/env bash
# Device visit 32, run 10: run 9's latency comparison again with four
# rounds, the order alternating (base new, new base, ...), since run 9's
# two rounds met the interpreter in different latency states.
# expectation8.txt was written before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh lib
export PYTHONPATH=$PWD/python
here=$PWD base=/tmp/gh-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-torch-edges/pools.patch" > /dev/null && echo "base: patch reversed" &&
 cmake -S . -B build-b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_BENCH=OFF \
   -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-b --target gpuheap -j 16 > /dev/null; echo "base build rc=$?")
declare -A lib=([new]=$here/build-gpu/libgpuheap.so [base]=$base/build-b/libgpuheap.so)
for r in 1 2 3 4; do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for t in $order; do
    echo "== $t round $r"
    timeout 150 python3 -u bench/torch_alloc.py --lib "${lib[$t]}" --tensors --csv "$out/lat-$t-$r.csv" 2>&1 | tail -12
  done
done | tee "$out/latency.log"
