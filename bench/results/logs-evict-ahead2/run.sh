#!/usr/bin/env bash
# Row 69: evicting ahead in forward, quiet units only, as a batch of its
# own after the allocation (GPUHEAP_EVICT_AHEAD=1: after an allocation that
# evicted; =2: after any allocation that leaves less room than its size),
# against the defaults, at widths 192 and 64, alternated.
set -u
. tools/alt-train.sh
one a-w192 "--only a --width 192 --phases"
peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
for r in 1 2; do
  one c-w192-ea0-$r "--only c --width 192 --phases"
  one c-w192-ea1-$r "--only c --width 192 --phases" GPUHEAP_EVICT_AHEAD=1
  one c-w192-ea2-$r "--only c --width 192 --phases" GPUHEAP_EVICT_AHEAD=2
done
peak=1482845601
one a "--only a --phases"
for r in 1 2; do
  one c-ea0-$r "--only c --phases"
  one c-ea1-$r "--only c --phases" GPUHEAP_EVICT_AHEAD=1
  one c-ea2-$r "--only c --phases" GPUHEAP_EVICT_AHEAD=2
done
python3 - "$OUT" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
for ref, pat in (("a-w192.json", "c-w192-*.json"), ("a.json", "c-ea*.json")):
    a = json.load(open(os.path.join(out, ref)))["losses"]
    for f in sorted(glob.glob(os.path.join(out, pat))):
        c = json.load(open(f))
        ps = c.get("per_step", {})
        print(os.path.basename(f), "losses", "bitwise equal to (a)" if c["losses"] == a else "DIFFER", "oom", c["oom"],
              "%.2f ms" % c["ms_per_step"], "%.3f GB" % (c["bytes_moved_per_step"] / 1e9),
              "drains %.1f in %.1f ms" % (ps.get("stream_waits", 0), ps.get("stream_wait_ns", 0)),
              "phases", c.get("phases_ms"))
PY
