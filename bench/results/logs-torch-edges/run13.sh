#!/usr/bin/env bash
# Device visit 32, run 13: the training run at width 64 with this
# session's library (new) against f27d001's (base: since-f27d001.patch
# reversed), alternated twice. expectation11.txt was written before. $OUT
# set by the device tool.
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
GH_REV=$GH_REV bash tools/gpu-run.sh lib
export PYTHONPATH=$PWD/python
here=$PWD base=/tmp/gh-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-torch-edges/since-f27d001.patch" > /dev/null && echo "base: patch reversed" &&
 cmake -S . -B build-b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_BENCH=OFF \
   -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-b --target gpuheap -j 16 > /dev/null; echo "base build rc=$?")
declare -A lib=([new]=$here/build-gpu/libgpuheap.so [base]=$base/build-b/libgpuheap.so)
for r in 1 2; do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for t in $order; do
    echo "== $t round $r"
    GPUHEAP_LIBRARY=${lib[$t]} timeout 200 python3 -u python/tests/gpu_train.py --steps 20 2>&1 | tee "$out/train-$t-$r.log" |
      grep -E "ms/step|PASS|FAIL" | cut -c1-220
  done
done
