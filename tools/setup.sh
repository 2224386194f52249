#!/usr/bin/env bash
# Install what gpuheap's build and tests need from Debian's packages (only
# what is missing). The CUDA toolkit (nvcc 12.8+) is expected in
# /usr/local/cuda; without it the CPU build of the core is built and tested.
set -euo pipefail
need=()
for pkg in cmake ninja-build g++ libbenchmark-dev spin; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
