#!/usr/bin/env bash
# Row 68: cold victims quiet first (the default now) against the mark order
# alone (GPUHEAP_QUIET_FIRST=0), alternated: three rounds at the committed
# width (64), two at width 192 (row 67: its drains took 22 ms a step).
# GPUHEAP_CALL_TIMES=1 in all, for the manager's calls and waits; then one
# (c) run at the defaults recorded (GPUHEAP_TRACE) for the replay.
set -u
. tools/alt-train.sh
export GPUHEAP_CALL_TIMES=1
one a "--only a --phases"
for r in 1 2 3; do
  one c-qf1-$r "--only c --phases"
  one c-qf0-$r "--only c --phases" GPUHEAP_QUIET_FIRST=0
done
one a-w192 "--only a --width 192 --phases"
peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/a-w192.json")
for r in 1 2; do
  one c-w192-qf1-$r "--only c --width 192 --phases"
  one c-w192-qf0-$r "--only c --width 192 --phases" GPUHEAP_QUIET_FIRST=0
done
unset GPUHEAP_CALL_TIMES
peak=1482845601
GPUHEAP_TRACE=$OUT/train-c.ghtrace one c-trace "--only c"
xz -9 "$OUT/train-c.ghtrace"
python3 - "$OUT" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
for ref, pat in (("a.json", "c-q*.json"), ("a.json", "c-trace.json"), ("a-w192.json", "c-w192-*.json")):
    a = json.load(open(os.path.join(out, ref)))["losses"]
    for f in sorted(glob.glob(os.path.join(out, pat))):
        c = json.load(open(f))
        ps = c.get("per_step", {})
        print(os.path.basename(f), "losses", "bitwise equal to (a)" if c["losses"] == a else "DIFFER", "oom", c["oom"],
              "%.2f ms" % c["ms_per_step"], "%.3f GB" % (c["bytes_moved_per_step"] / 1e9),
              "drains %.1f in %.1f ms" % (ps.get("stream_waits", 0), ps.get("stream_wait_ns", 0)),
              "phases", c.get("phases_ms"))
PY
