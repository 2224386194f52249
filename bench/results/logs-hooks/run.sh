#!/usr/bin/env bash
# What ran on the H200 for these logs (2026-12-02, revisions 8171481 for
# phases/ and c4bd689's gpu_train.py for hook-times/ and cprofile/, the
# library built there: `cmake --build build-gpu --target gpuheap`), $OUT set
# by the device tool. (c) at 4x (a)'s peak moves nothing: the offload hooks'
# own cost on the host.
. tools/alt-train.sh
# phases/: (a), (b), (c) at 4x with and without the offload context, (c).
for r in 1 2; do
  one a-$r "--only a --phases"
  one b-$r "--only b --phases" GPUHEAP_CALL_TIMES=1
  one c4-$r "--only c --phases --budget-fraction 4" GPUHEAP_CALL_TIMES=1
  one c4n-$r "--only c --phases --budget-fraction 4 --no-offload" GPUHEAP_CALL_TIMES=1
  one c-$r "--only c --phases" GPUHEAP_CALL_TIMES=1
done > "$OUT/alt.log" 2>&1
# hook-times/: the hooks timed by method (--hook-times, new).
for r in 1 2; do
  one c4h-$r "--only c --phases --budget-fraction 4 --hook-times"
  one c4-$r "--only c --phases --budget-fraction 4"
  one ch-$r "--only c --phases --hook-times" GPUHEAP_CALL_TIMES=1
done > "$OUT/alt.log" 2>&1
# cprofile/: (c) at 4x and at the default budget under cProfile; the .prof
# files are not kept (1.4 MB each): c*.top (the 35 costliest functions) and
# hooks.txt (the hooks' functions and what they call) were made from them.
for bf in 4 0.5; do
  python3 -m cProfile -o "$OUT/c$bf.prof" python/tests/gpu_train.py --only c --budget-fraction $bf \
    --peak 1482845601 --steps 20 > "$OUT/c$bf.log" 2>&1
done
