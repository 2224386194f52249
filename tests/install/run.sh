#!/usr/bin/env bash
# Install the build in $1 to a temporary prefix, build tests/install against
# it with find_package(gpuheap), and run the consumers (77: GPU part skipped).
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer_cpu"
if [ -x "$work/build/consumer_gpu" ]; then
  set +e
  LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer_gpu"
  rc=$?
  set -e
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || exit $rc
else
  echo "consumer_gpu: not built (package without CUDA)"
fi
