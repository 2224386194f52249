#!/usr/bin/env bash
# Where (c)'s step goes: the GPU tests first (the changes of 08c5325-8011c73
# were CPU-tested only), then (c) at the defaults against (c) with
# GPUHEAP_CALL_TIMES=1 (every public call of the manager timed by kind),
# alternated twice; (a) once; (c) with nothing to move (budget 4x the peak)
# with the call times; (c) under the profiler for the GPU's busy time.
set -u
. tools/alt-train.sh
timeout 60 python3 -m unittest discover -s python/tests -p 'test_pure*.py' > "$OUT/test_pure.log" 2>&1
tail -3 "$OUT/test_pure.log"
one a "--only a"
for r in 1 2; do
  one c-d-$r "--only c"
  one c-ct-$r "--only c" GPUHEAP_CALL_TIMES=1
done
one c-nomove-ct "--only c --budget-fraction 4" GPUHEAP_CALL_TIMES=1
one c-prof "--only c --steps 8 --profile --trace $OUT/c.trace" GPUHEAP_CALL_TIMES=1
grep -E "busy|device time|trace" "$OUT/c-prof.log" | tail -5
rm -f "$OUT"/c.trace*
