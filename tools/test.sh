#!/usr/bin/env bash
# Set up, build everything (CUDA sources included where nvcc is present) and
# run the tests: the default build (CPU tests, proofs, install test; GPU tests
# run on a GPU and are skipped without one), then the ThreadSanitizer flavour
# of the CPU core. GH_SANITIZERS="thread address undefined" runs the CPU
# core under each sanitizer named (default: thread, as CI).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
bash tools/setup.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
for san in ${GH_SANITIZERS:-thread}; do
  case $san in
    thread) dir=build-tsan ;;
    address|undefined) dir=build-$san ;;
    *) echo "GH_SANITIZERS: unknown sanitizer '$san' (thread, address, undefined)" >&2; exit 2 ;;
  esac
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUHEAP_CUDA=OFF -DGPUHEAP_SANITIZE="$san" \
    -DGPUHEAP_BUILD_BENCH=OFF -DGPUHEAP_BUILD_PROOFS=OFF
  cmake --build "$dir" -j "$jobs"
  echo "== $san sanitizer flavour (CPU core) =="
  ctest --test-dir "$dir" -L cpu -LE "slow|install" --output-on-failure -j "$jobs"
done
echo "== default build =="
ctest --test-dir build -LE slow --output-on-failure -j "$jobs"
