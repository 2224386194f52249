set -uo pipefail
. tools/env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=ON > $OUT/build.log 2>&1 && cmake --build build-gpu -j 16 --target gpuheap >> $OUT/build.log 2>&1; echo "build rc=$?"
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
for r in 1 2 3; do for v in qaw1 qaw0 d; do
  args=""; w=0; case $v in qa*) args="--quiet-auto"; w=${v: -1};; esac
  echo "== c $v round $r"
  GPUHEAP_WAIT_FREES=$w timeout 150 python3 -u python/tests/gpu_train.py --only c --steps 20 --peak 1482845601 $args --out $OUT/c-$v-$r.json > $OUT/c-$v-$r.log 2>&1
  grep -E "ms/step|Error" $OUT/c-$v-$r.log | cut -c1-300; grep -E "step 19 loss" $OUT/c-$v-$r.log | cut -c1-60
  grep -E "per step" $OUT/c-$v-$r.log | grep -oE '"move_ns": [0-9.]+|"map": [0-9.]+, "unmap' | tr '\n' ' '; echo
done; done
