#!/usr/bin/env bash
# Row 70 (options only): homeless units' eviction copies by the copy engine
# (GPUHEAP_COPY_KERNEL=0) against the default kernel of 8 blocks, at width
# 192 (the GPU is the bound there, row 68) and at width 64, alternated.
set -u
. tools/alt-train.sh
one a-w192 "--only a --width 192 --phases"
peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
for r in 1 2; do
  one c-w192-ck-$r "--only c --width 192 --phases"
  one c-w192-ce-$r "--only c --width 192 --phases" GPUHEAP_COPY_KERNEL=0
done
peak=1482845601
one a "--only a --phases"
for r in 1 2; do
  one c-ck-$r "--only c --phases"
  one c-ce-$r "--only c --phases" GPUHEAP_COPY_KERNEL=0
done
python3 - "$OUT" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
for ref, pat in (("a-w192.json", "c-w192-*.json"), ("a.json", "c-c[ek]-*.json")):
    a = json.load(open(os.path.join(out, ref)))["losses"]
    for f in sorted(glob.glob(os.path.join(out, pat))):
        c = json.load(open(f))
        ps = c.get("per_step", {})
        print(os.path.basename(f), "losses", "bitwise equal to (a)" if c["losses"] == a else "DIFFER", "oom", c["oom"],
              "%.2f ms" % c["ms_per_step"], "%.3f GB" % (c["bytes_moved_per_step"] / 1e9),
              "map %.1f ms" % ps.get("vmm_ns", {}).get("map", 0), "phases", c.get("phases_ms"))
PY
