#!/usr/bin/env bash
# Row 106 (bench/NOTES.md, host side): the optimizer's state between steps.
# At widths 384 and 512, (c)'s momentum is evicted once by the clock at the
# end of a backward and then stays on the host, where every step()'s SGD
# kernels read and write it over PCIe (the replay of logs-trace-wide's
# traces). Compared, alternated after one (a) each: the defaults (d);
# mark_model(offload_state=True) (o: the
# state advised quiet after step(), brought back before it);
# GPUHEAP_CLOCK_WAIT=1 (w: the clock takes no OPTIMIZER or WEIGHTS frame
# before waiting for pending frees). Two rounds at 384, one at 512, two at 64
# (d, o). (Dropped before it ran, for the device time left after a
# machine taken back mid-call and failed starts: the GPU tests, w, and
# width 64.) expectation.txt was written before. $OUT set by the device tool;
# files under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
{
  peak_run a384 "--width 384" && for r in 1 2; do
    one c384-d-$r "--only c --width 384 --phases"
    one c384-o-$r "--only c --width 384 --phases --offload-state"
  done
  summary a384.json "c384-*.json"
  peak_run a512 "--width 512" && {
    one c512-d-1 "--only c --width 512 --phases"
    one c512-o-1 "--only c --width 512 --phases --offload-state"
  }
  summary a512.json "c512-*.json"
} > "$OUT/alt.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt.log"
pack
