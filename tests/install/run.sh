#!/usr/bin/env bash
# Install the build in $1 to a temporary prefix, build tests/install against
# it with find_package(gpuheap), and run the consumers (77: GPU part skipped).
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each step's output is kept and shown only when the step fails.
quiet() {
  if ! "$@" >"$work/step.log" 2>&1; then
    cat "$work/step.log"
    echo "install test: failed: $*" >&2
    exit 1
  fi
}
quiet cmake --install "$build" --prefix "$work/prefix"
quiet cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$work/build"
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
