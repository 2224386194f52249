#!/usr/bin/env bash
# Device visit 32, run 12: the GPU tests, then the allocation latency from
# PyTorch with the capture check through the driver (new) against the
# runtime's (base: drv-capture.patch reversed), four alternated rounds.
# expectation10.txt was written before. $OUT set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh build tests
export PYTHONPATH=$PWD/python
here=$PWD base=/tmp/gh-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-torch-edges/drv-capture.patch" > /dev/null && echo "base: patch reversed" &&
 cmake -S . -B build-b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_BENCH=OFF \
   -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-b --target gpuheap -j 16 > /dev/null; echo "base build rc=$?")
declare -A lib=([new]=$here/build-gpu/libgpuheap.so [base]=$base/build-b/libgpuheap.so)
for r in 1 2 3 4; do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for t in $order; do
    echo "== $t round $r"
    timeout 150 python3 -u bench/torch_alloc.py --lib "${lib[$t]}" --tensors --csv "/tmp/lat-$t-$r.csv" 2>&1 | tail -14
  done
done > "$out/latency.log" 2>&1
tar czf "$out/lat-csv.tar.gz" -C /tmp $(cd /tmp && ls lat-*.csv)  # the device tool brings back 8 files at most
grep -E "==|gpuheap" "$out/latency.log"
