set -uo pipefail
. tools/env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON > $OUT/build.log 2>&1 && cmake --build build-gpu -j 16 --target gpuheap replay_trace_cuda >> $OUT/build.log 2>&1; echo "build rc=$?"
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
tr=train-c-qa1-88bd402
xz -dc bench/results/traces/$tr.ghtrace.xz > /tmp/$tr.ghtrace
GH_SITES=1 timeout 120 ./build-gpu/bench/replay_trace_cuda /tmp/$tr.ghtrace --cuda --chunk auto --step-bytes 113541267 > $OUT/replay-$tr.log 2>&1
grep -E "host time|SITE" $OUT/replay-$tr.log
for v in qa d; do
  args=""; [ $v = qa ] && args="--quiet-auto"
  echo "== train c $v"
  GH_SITES=1 timeout 100 python3 -u python/tests/gpu_train.py --only c --steps 20 --peak 1482845601 $args > $OUT/train-$v.log 2>&1
  grep -E "ms/step|SITE" $OUT/train-$v.log
done
