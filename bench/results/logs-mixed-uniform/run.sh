#!/usr/bin/env bash
# The group path with one shuffle mask for all groups (bench/NOTES.md,
# device visit 21) against the tree without it (this tree with
# uniform.patch reversed), on one machine: first the GPU tests and the
# sanitizer tests of the new tree, then the 2^20-thread rows 16, 256, 1024,
# 4096, mixed and churn alternated base / new three rounds (gh_stress
# --only ROW --reps 5 each), then the efficiency at the first NULL of each
# (--efficiency --reps 5). $OUT set by the device tool; GH_REV names the
# revision.
set -u
. tools/env.sh
here=$PWD
bash tools/gpu-run.sh build tests sanitizer
base=/tmp/gh-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-mixed-uniform/uniform.patch" &&
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF -DGPUHEAP_BUILD_PROOFS=OFF &&
  cmake --build build --target gh_stress -j "$(nproc)") > "$OUT/build-base.log" 2>&1
echo "base build rc=$?"
declare -A bin=([base]=$base/build/bench/gh_stress [new]=$here/build-gpu/bench/gh_stress)
for r in 1 2 3; do
  for t in base new; do
    for row in 16 256 1024 4096 mixed churn; do
      printf '%-5s r%d ' "$t" "$r"
      timeout 60 "${bin[$t]}" --only $row --threads 1048576 --reps 5 2>/dev/null | grep -E "^(fixed|mixed|churn) "
    done
  done
done | tee "$OUT/ab.log"
for t in base new; do
  echo "== $t efficiency"
  timeout 120 "${bin[$t]}" --efficiency --reps 5 2>&1 | grep -E "median"
done | tee "$OUT/efficiency.log"
