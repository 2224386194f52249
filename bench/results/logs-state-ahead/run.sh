#!/usr/bin/env bash
# Row 107 (bench/NOTES.md, host side): offload_state with the state evicted
# ahead at the end of step() (gh_tensor_evict_ahead). First the GPU tests at
# this revision (the manager changed: evict_ahead, the advice factored);
# then, alternated after one (a) each, (c) at the defaults (d) and with
# --offload-state (o): two rounds at 512, then (second call, "$1" = 2) two
# at 384 and two at 64. expectation.txt was written before. $OUT set by the
# device tool; files under $OUT/r (packed at the end).
set -u
. tools/alt-begin.sh
part=${1:-1}
if [ "$part" = 1 ]; then
  OUT=$OUT bash tools/gpu-run.sh build tests > "$OUT/gpu-run.log" 2>&1
  grep -E "build rc|tests passed|Failed|\*\*\*" "$OUT/gpu-run.log"
  widths="512"
else
  widths="384 64"
fi
for w in $widths; do
  peak_run a$w "--width $w" || continue
  for r in 1 2; do
    one c$w-d-$r "--only c --width $w --phases"
    one c$w-o-$r "--only c --width $w --phases --offload-state"
  done
  summary a$w.json "c$w-*.json"
done > "$OUT/alt-$part.log" 2>&1
grep -E "ms/step|losses" "$OUT/alt-$part.log"
pack
