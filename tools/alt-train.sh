#!/usr/bin/env bash
# The helper of the alternation scripts in bench/results/logs-*/run.sh:
# source it, then call `one NAME "GPU_TRAIN OPTIONS" [VAR=VALUE ...]` for
# each run, alternating the settings compared. Each run is
# `python/tests/gpu_train.py --steps 20 --peak $peak OPTIONS` with the
# variables set, its log and JSON under $OUT as NAME.log / NAME.json, and a
# summary printed: the step time, the physical-memory calls' time a step,
# the host's time in moves and in stream waits a step.
#
#   . tools/alt-train.sh
#   one a "--only a"
#   for r in 1 2 3; do one c-d-$r "--only c"; one c-x-$r "--only c" GPUHEAP_SOMETHING=0; done
#   summary a.json "c-*.json"
#
# Needs build-gpu/ (tools/gpu-run.sh build) and OUT; peak defaults to (a)'s
# peak bytes on the training run of python/tests/gpu_train.py.
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
peak=${peak:-1482845601}
# The machine, once per $OUT: the date, the revision (GH_REV), the GPU and
# its driver, CUDA and torch.
[ -f "$OUT/machine.txt" ] || {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "revision: ${GH_REV:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  nvcc --version 2>/dev/null | tail -1
  python3 -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1
} > "$OUT/machine.txt"
one() {  # name, gpu_train options, environment...
  local name=$1 opts=$2
  shift 2
  env "$@" timeout 150 python3 -u python/tests/gpu_train.py --steps 20 --peak "$peak" $opts \
    --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "$name: $(grep -E 'ms/step' "$OUT/$name.log" | tail -1)"
  grep -o '"vmm_ns": {[^}]*}' "$OUT/$name.log" | tail -1
  grep -o '"move_ns": [0-9.]*\|"stream_wait_ns": [0-9.]*' "$OUT/$name.log" | tail -2 | tr '\n' ' '
  grep -o '"call_ms": {[^}]*}' "$OUT/$name.log" | tail -1  # with GPUHEAP_CALL_TIMES=1
  echo
}
# `rounds PREFIX N "GPU_TRAIN OPTIONS" LABEL "VAR=VALUE ..." [LABEL "..."]`:
# N alternated rounds of `one PREFIX-LABEL-ROUND` for each setting in
# turn (an empty string: the defaults), e.g.
#   rounds c256 3 "--only c --width 256" d "" cp "GPUHEAP_CLEAN=prefill"
rounds() {
  local prefix=$1 n=$2 opts=$3 r i
  shift 3
  local -a cfg=("$@")
  for ((r = 1; r <= n; r++)); do
    for ((i = 0; i < ${#cfg[@]}; i += 2)); do
      one "$prefix-${cfg[i]}-$r" "$opts" ${cfg[i + 1]}
    done
  done
}
# `peak_run NAME "GPU_TRAIN OPTIONS"`: one (a) run (`--only a` added), whose
# peak becomes $peak, the budget's base for the (c) runs after it. Fails
# when the run left no peak.
peak_run() {
  local name=$1 opts=$2
  peak=0
  one "$name" "--only a $opts"
  peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$OUT/$name.json" 2>/dev/null) ||
    { peak=0; return 1; }
}
# After the runs: `summary REF PATTERN [REF PATTERN ...]` prints, for each
# run's JSON under $OUT matching PATTERN, whether its losses equal those of
# REF (a JSON under $OUT, e.g. a.json) bit for bit, its out-of-memory flag,
# step time, bytes moved, drains (stream waits), the host's waits before
# moves (drains and quiet events: stream_wait_ns) and phases.
summary() {
  python3 - "$OUT" "$@" <<'PY'
import glob, json, os, sys
out, args = sys.argv[1], sys.argv[2:]
for ref, pat in zip(args[::2], args[1::2]):
    a = json.load(open(os.path.join(out, ref)))["losses"]
    for f in sorted(glob.glob(os.path.join(out, pat))):
        c = json.load(open(f))
        ps = c.get("per_step", {})
        print(os.path.basename(f), "losses", "bitwise equal to (a)" if c["losses"] == a else "DIFFER", "oom", c["oom"],
              "%.2f ms" % c["ms_per_step"], "%.3f GB" % (c["bytes_moved_per_step"] / 1e9),
              "drains %.1f, waits before moves %.1f ms" % (ps.get("stream_waits", 0), ps.get("stream_wait_ns", 0)),
              "phases", c.get("phases_ms"))
PY
}
# `widths "WIDTH [OPTIONS]" ...`: for each, gpu_train.py's four configs
# (a), (b), (c) and the transfer floor (f), 12 steps, its CSV and log under
# $OUT as torch-wWIDTH.csv / train-wWIDTH.log, the step lines printed, and
# $R/r.tgz refreshed after each (what ran comes back if the limit is hit).
widths() {
  local spec
  for spec in "$@"; do
    set -- $spec
    timeout 120 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 40 --width "$@" --floor \
      --csv "$OUT/torch-w$1.csv" > "$OUT/train-w$1.log" 2>&1
    echo "-- width $spec rc=$?"
    grep -E "ms/step|PASS|FAIL|floor" "$OUT/train-w$1.log"
    [ -n "${R:-}" ] && tar czf "$R/r.tgz" -C "$R" r
  done
}
