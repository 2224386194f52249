#!/usr/bin/env bash
# Interleaved A/B runs of the stress benchmark on the GPU machine: builds
# gh_stress in each source tree given (e.g. copies made with
# `git archive REV | tar -x -C DIR`), then runs them in turn, ROUNDS times,
# and the efficiency measurement of each, so that machine-to-machine spread
# (10-20%) does not enter the comparison. A tree may be given as DIR or as
# DIR:NAME=VALUE to run it with one GPUHEAP_* variable set.
#   usage: tools/ab-stress.sh [-r ROUNDS] TREE...
set -u
rounds=2
if [ "${1:-}" = "-r" ]; then rounds=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [-r ROUNDS] DIR[:NAME=VALUE]..." >&2; exit 2; }
dirs=$(for t in "$@"; do echo "${t%%:*}"; done | sort -u)  # a tree given twice is built once
for d in $dirs; do
  [ -f "$d/build/bench/gh_stress" ] && continue
  (cd "$d" && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF >/dev/null 2>&1 &&
     cmake --build build --target gh_stress -j "$(nproc)" >/dev/null 2>&1; echo "$d build rc=$?") &
done
wait
run() {  # TREE ARGS...: gh_stress of TREE with its variable, if any
  local t=$1 d=${1%%:*} v=
  shift
  [ "$t" != "$d" ] && v=${t#*:}
  env $v timeout 120 "$d/build/bench/gh_stress" "$@"
}
for r in $(seq "$rounds"); do
  for t in "$@"; do
    echo "=== $t round $r"
    run "$t" --reps 5 2>&1 | grep -E '^(fixed|mixed|churn) +1048576|efficiency at'
  done
done
for t in "$@"; do
  echo "=== $t efficiency"
  run "$t" --efficiency --reps 7 2>&1 | grep -E 'median|^ +[0-9] '
done
