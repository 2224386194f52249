#!/usr/bin/env bash
# Row 67: what (c) costs against (a) as the model's compute per activation
# byte grows. Ran after `GH_REV=3acc96b bash tools/gpu-run.sh build python`
# (the committed width, 64: test_pure, the training run with the frame map's
# PNG, CuPy; its log and CSV are w64.*): gpu_train.py's three configs at
# widths 96, 128 and 192 (conv work grows with width squared, activations
# with width), each with the phases timed on the GPU so that each width's
# floor can be worked out.
set -u
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
for w in 96 128 192; do
  timeout 150 python3 -u python/tests/gpu_train.py --steps 20 --time-limit 100 --width $w --phases \
    --csv "$OUT/w$w.csv" > "$OUT/w$w.log" 2>&1
  echo "width $w rc=$?"
  grep -E "ms/step|phases|PASS|FAIL|peak" "$OUT/w$w.log"
done
