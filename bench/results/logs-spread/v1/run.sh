#!/usr/bin/env bash
# Device visit 22: the GPU tests and compute-sanitizer at the tree as it
# is (GH_REV), then the tree against itself with v1/spread.patch reversed
# (the pick before f43727f), alternated three rounds, rows churn,
# mixed, 16, 256, 1024 at 2^20 threads, medians of 5; the kernels'
# registers of each build. expectation.txt was written before. $OUT set by
# the device tool.
set -u
GH_REV=$GH_REV bash tools/gpu-run.sh build tests sanitizer
. tools/env.sh
here=$PWD
base=/tmp/gh-base
rm -rf "$base" && mkdir -p "$base"
tar --exclude='./build*' --exclude=./bench/results -cf - . | tar -xf - -C "$base"
(cd "$base" && patch -R -p1 < "$here/bench/results/logs-spread/v1/spread.patch" > /dev/null && echo "base: patch reversed")
for d in "$here" "$base"; do
  (cd "$d" && cmake -S . -B build-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUHEAP_BUILD_TESTS=OFF \
     -DGPUHEAP_BUILD_PROOFS=OFF > /dev/null && cmake --build build-ab --target gh_stress -j 8 > /dev/null; echo "$d build rc=$?") &
done
wait
declare -A bin=([new]=$here/build-ab/bench/gh_stress [base]=$base/build-ab/bench/gh_stress)
for t in new base; do
  echo "== $t registers"
  cuobjdump -res-usage "${bin[$t]}" 2>/dev/null | grep -A1 -E "Function .*(churn|alloc)" | grep -oE "Function [^:]*|REG:[0-9]+|STACK:[0-9]+" | paste - - - | head -8
done | tee "$OUT/registers.txt"
for r in 1 2 3; do
  for t in base new; do
    for row in churn mixed 16 256 1024; do
      printf '%-4s r%d ' "$t" "$r"
      timeout 60 "${bin[$t]}" --only $row --threads 1048576 --reps 5 2>/dev/null | grep -E "^(mixed|churn|fixed) "
    done
  done
done | tee "$OUT/ab.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine-ab.txt"
