#!/usr/bin/env bash
# test_tmgr_heap's small-block phase against a mutant: gh_offline_tail with
# the steal of hint pages taken out must fail it (heap left above 32 MiB),
# the real one pass it; each prints its counts. $OUT set by the device
# tool; run after `tools/gpu-run.sh build`.
set -u
t=$(find build-gpu -name test_tmgr_heap -type f -perm -u+x | head -1)
run() { echo "-- $1"; "$t" 2>&1 | grep -E "small blocks|CHECK|passed|failed"; echo "rc=${PIPESTATUS[0]}"; }
{
  run "e0e13b7's gh_offline_tail"
  sed -i 's/if (!retried \&\& gh_steal_pinned_in/if (false \&\& gh_steal_pinned_in/' include/gpuheap/run.h
  grep -c "false && gh_steal_pinned_in" include/gpuheap/run.h
  cmake --build build-gpu --target test_tmgr_heap > /dev/null 2>&1 && run "mutant: no steal"
  sed -i 's/if (false \&\& gh_steal_pinned_in/if (!retried \&\& gh_steal_pinned_in/' include/gpuheap/run.h
  cmake --build build-gpu --target test_tmgr_heap > /dev/null 2>&1 && run "restored"
} 2>&1 | tee "$OUT/trim.log"
