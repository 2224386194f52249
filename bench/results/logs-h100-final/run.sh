#!/usr/bin/env bash
# The session's last visit (device visit 22): at the final allocator
# (logs-spread v4), the build, the GPU tests other than the Python ones
# (these ran at 071ebba, logs-floor/, and nothing they use changed since),
# compute-sanitizer and the stress table (alloc.csv). GH_REV: the revision.
set -u
GH_REV=$GH_REV bash tools/gpu-run.sh build sanitizer stress
timeout 200 ctest --test-dir build-gpu -L gpu -LE "sanitizer|python" --output-on-failure --timeout 150 2>&1 |
  tee "$OUT/ctest-gpu.log" | tail -4
