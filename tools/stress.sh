#!/usr/bin/env bash
# Set up, build, and run the stress benchmark: on the GPU if there is one,
# else on the CPU build of the same allocator core. Arguments go to gh_stress
# (e.g. --quick, --reps 5, --csv out.csv).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
bash tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target gh_stress
exec ./build/bench/gh_stress "$@"
