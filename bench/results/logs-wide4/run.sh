#!/usr/bin/env bash
# Row 104 (bench/NOTES.md, host side): homeless evictions by the copy
# engine (GPUHEAP_COPY_KERNEL=0, "e") and with room always waiting for
# pending frees too (GPUHEAP_WAIT_FREES=1, "ew") against the defaults ("d"),
# alternated: two rounds at widths 512 (d, ew), 384 and 64 (d, e, ew), each
# after one (a) for the budget, with --phases. expectation.txt was written
# before. $OUT set by the device tool; packed under $OUT/r.
set -u
. tools/env.sh
R=$OUT; export OUT=$R/r; mkdir -p "$OUT"
pack() { cd "$R" && tar czf r.tgz r && rm -rf r; }
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release &&
  cmake --build build-gpu -j16 --target gpuheap; } > "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; pack; exit 1; }
. tools/alt-train.sh
for w in 512 384 64; do
  peak=0
  one a$w "--only a --width $w"
  peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a$w.json") || continue
  for r in 1 2; do
    one c$w-d-$r "--only c --width $w --phases"
    [ $w = 512 ] || one c$w-e-$r "--only c --width $w --phases" GPUHEAP_COPY_KERNEL=0
    one c$w-ew-$r "--only c --width $w --phases" GPUHEAP_COPY_KERNEL=0 GPUHEAP_WAIT_FREES=1
  done
  summary a$w.json "c$w-*.json"
done > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
