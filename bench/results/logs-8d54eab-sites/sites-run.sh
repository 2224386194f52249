#!/usr/bin/env bash
# Per-call-site timing of the physical-memory calls (temporary patch), GPU.
set -uo pipefail
. tools/env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON > $OUT/build.log 2>&1 && cmake --build build-gpu -j 16 --target gpuheap replay_trace_cuda >> $OUT/build.log 2>&1; echo "build rc=$?"; tail -2 $OUT/build.log
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
for tr in train-c-1618548 train-c-qa1-88bd402; do
  xz -dc bench/results/traces/$tr.ghtrace.xz > /tmp/$tr.ghtrace
  mark=$(awk '$1 == "a" && $3 >= 1048576 {print $3}' /tmp/$tr.ghtrace | sort | uniq -c | awk '$1 == 20 {print $2; exit}')
  echo "== replay $tr mark $mark"
  GH_SITES=1 timeout 120 ./build-gpu/bench/replay_trace_cuda /tmp/$tr.ghtrace --cuda --chunk auto ${mark:+--step-bytes $mark} > $OUT/replay-$tr.log 2>&1
  tail -25 $OUT/replay-$tr.log
done
for v in d qa; do
  args=""; [ $v = qa ] && args="--quiet-auto"
  echo "== train c $v"
  GH_SITES=1 timeout 150 python3 -u python/tests/gpu_train.py --only c --steps 20 --peak 1482845601 $args > $OUT/train-$v.log 2>&1
  grep -E "ms/step|per step|SITE" $OUT/train-$v.log | tail -20
done
