#!/usr/bin/env bash
# Device visit 34, run 4 (after run3.sh, on its build): what a graph pool
# holding blocks costs each release, bench/torch_alloc.py --tensors without
# (plain) and with --graph (a captured graph kept alive), alternated, in
# the time left under GH_LIMIT seconds (default 240). $OUT set by the
# device tool.
set -u
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
lib=build-gpu/libgpuheap.so
[ -f "$lib" ] || GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
for round in 1 2; do
  for v in plain graph; do
    left=$((${GH_LIMIT:-240} - SECONDS)); [ "$left" -gt 20 ] || { echo "stopped: ${left} s left"; exit 0; }
    echo "== round $round $v (${left} s left)"
    timeout "$left" python3 bench/torch_alloc.py --lib "$lib" --tensors $([ $v = graph ] && echo --graph) \
      --csv "$out/alloc-$v-$round.csv" 2>&1 | tee "$out/alloc-$v-$round.log" | tail -15
  done
done
