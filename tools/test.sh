#!/usr/bin/env bash
# Set up, build everything (CUDA sources included where nvcc is present) and
# run the tests: the default build (CPU tests, proofs, install test; GPU tests
# run on a GPU and are skipped without one), then the ThreadSanitizer flavour
# of the CPU core.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
bash tools/setup.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUHEAP_CUDA=OFF -DGPUHEAP_SANITIZE=thread \
  -DGPUHEAP_BUILD_BENCH=OFF -DGPUHEAP_BUILD_PROOFS=OFF
cmake --build build-tsan -j "$jobs"
echo "== ThreadSanitizer flavour (CPU core) =="
ctest --test-dir build-tsan -L cpu -LE "slow|install" --output-on-failure -j "$jobs"
echo "== default build =="
ctest --test-dir build -LE slow --output-on-failure -j "$jobs"
