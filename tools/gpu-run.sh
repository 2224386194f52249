#!/usr/bin/env bash
# One visit to the GPU machine: build, GPU tests, stress, benchmarks, with
# logs and results under $OUT (or ./gpu-out). GH_REV names the revision
# where the copy has no git metadata. Stages: build tests sanitizer
# stress bench (default), and efficiency, evict, tensor, python, replay,
# lib (the library alone). Each
# stage is time-limited and logs per line.
set -uo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
stages=${*:-build tests sanitizer stress bench}
rev=${GH_REV:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "revision: $rev"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
  nvcc --version | tail -2
} | tee "$out/machine.txt"
for stage in $stages; do
  echo "== $stage =="
  case $stage in
    build)
      timeout 400 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_PROOFS=ON -DGPUHEAP_BUILD_TESTS=ON \
        > "$out/build.log" 2>&1 &&
        timeout 400 cmake --build build-gpu -j "$(nproc)" >> "$out/build.log" 2>&1
      echo "build rc=$?"; tail -3 "$out/build.log" ;;
    lib)
      # The library alone (what the Python package loads), in build-gpu.
      timeout 300 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 &&
        timeout 300 cmake --build build-gpu -j "$(nproc)" --target gpuheap >> "$out/build.log" 2>&1
      echo "build rc=$?" ;;
    tests)
      # The C tests first: ctest may order the long Python ones first, and a
      # visit cut short should still have run the library's own.
      timeout 200 ctest --test-dir build-gpu -L gpu -LE "sanitizer|python" --output-on-failure --timeout 180 2>&1 |
        tee "$out/ctest-gpu.log" | tail -16
      timeout 300 ctest --test-dir build-gpu -L gpu -R "^python_gpu" -LE sanitizer --output-on-failure --timeout 240 2>&1 |
        tee "$out/ctest-gpu-python.log" | tail -10 ;;
    cpu)
      timeout 300 ctest --test-dir build-gpu -L cpu -LE slow -j 8 --output-on-failure 2>&1 | tail -5 ;;
    sanitizer)
      timeout 240 ctest --test-dir build-gpu -L sanitizer --output-on-failure --timeout 220 2>&1 | tee "$out/ctest-sanitizer.log" | tail -15 ;;
    stress)
      timeout 300 stdbuf -oL ./build-gpu/bench/gh_stress --reps 7 --csv "$out/alloc.csv" 2>&1 | tee "$out/stress.log" ;;
    efficiency)
      # The efficiency at the first NULL and where the heap's bytes are then,
      # for the defaults and variants set through the environment
      # (GH_EFF_VARIANTS: a list of NAME=VALUE, one variant each).
      for v in "" ${GH_EFF_VARIANTS:-}; do
        echo "-- ${v:-defaults}"
        env $v timeout 120 stdbuf -oL ./build-gpu/bench/gh_stress --efficiency --reps 7
      done 2>&1 | tee "$out/efficiency.log" | grep -E "^--|median" ;;
    evict)
      timeout 240 stdbuf -oL ./build-gpu/bench/bench_evict --reps 7 --chunks 16 --csv "$out/evict.csv" --json "$out/evict.json" 2>&1 |
        tee "$out/evict.log" | tail -20 ;;
    tensor)
      timeout 240 stdbuf -oL ./build-gpu/bench/bench_tensor --csv "$out/tensor-latency.csv" \
        --loop-csv "$out/tensor-loop.csv" 2>&1 | tee "$out/tensor.log" | tail -30
      timeout 240 python3 bench/torch_alloc.py --lib build-gpu/libgpuheap.so --csv "$out/torch-latency.csv" 2>&1 |
        tee "$out/torch-latency.log" | tail -20
      timeout 240 python3 bench/torch_alloc.py --lib build-gpu/libgpuheap.so --tensors \
        --csv "$out/torch-tensor-latency.csv" 2>&1 | tee "$out/torch-tensor-latency.log" | tail -16 ;;
    python)
      # The Python package on PyTorch and CuPy (python/tests); the training
      # run with PyTorch's own offload (save_on_cpu) and the transfer floor
      # (f) beside it.
      export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
      timeout 60 python3 -m unittest discover -s python/tests -p 'test_pure*.py' 2>&1 | tail -3
      timeout 400 python3 -u python/tests/gpu_train.py --steps 20 --time-limit 90 --csv "$out/torch-h200.csv" \
        --reference-csv "$out/torch-h200-reference.csv" --floor --snapshot-dir "$out/frames" 2>&1 |
        tee "$out/gpu_train.log" | grep -E "ms/step|PASS|FAIL|peak|offload counters|floor"
      timeout 100 python3 -u python/tests/gpu_cupy.py --time-limit 80 2>&1 | tee "$out/gpu_cupy.log" | tail -2 ;;
    replay)
      # The manager alone: config (c) of gpu_train.py recorded (GPUHEAP_TRACE),
      # then its calls replayed on the GPU's frames with no kernels and no
      # framework (bench/replay_trace_cuda), the chunk following the tensors
      # and fixed at 16; a size asked for once a step marks the steps.
      export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
      GPUHEAP_TRACE=$out/c.ghtrace timeout 150 python3 -u python/tests/gpu_train.py --only c --steps 20 --peak "${PEAK:-1482845601}" \
        --out "$out/replay-train.json" > "$out/replay-train.log" 2>&1
      grep -E "ms/step" "$out/replay-train.log"
      mark=$(awk '$1 == "a" && $3 >= 1048576 {print $3}' "$out/c.ghtrace" | sort | uniq -c | awk '$1 == 20 {print $2; exit}')
      for v in ${REPLAY_VARIANTS:-auto 16}; do
        # A variant: a chunk (auto, or frames), or NAME=VALUE settings (comma
        # separated) with the chunk following the tensors.
        ch=auto env=
        case $v in *=*) env=${v//,/ } ;; *) ch=$v ;; esac
        echo "-- chunk $ch ${env:+($env) }step mark ${mark:-none}"
        env $env timeout 120 ./build-gpu/bench/replay_trace_cuda "$out/c.ghtrace" --cuda --chunk $ch ${mark:+--step-bytes $mark}
      done 2>&1 | tee "$out/replay.log"
      xz -f "$out/c.ghtrace" ;;
    bench)
      timeout 300 ./build-gpu/bench/gh_bench --benchmark_out="$out/bench.json" --benchmark_out_format=json \
        --benchmark_counters_tabular=true 2>&1 | tee "$out/bench.log" | grep -E "median|ERROR" | head -60 ;;
  esac
done
