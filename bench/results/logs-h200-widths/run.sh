#!/usr/bin/env bash
# The training comparison across the network's width on one H200, at
# GH_REV (after tools/gpu-run.sh build on the same machine): (a), (b), (c)
# and the transfer floor (f) at width 512 with --offload-state (and (d),
# save_on_cpu, for the reference CSV, as torch-h200-w512.csv), two more
# rounds of (a) and (c) there for the spread, then widths 384
# (--offload-state), 256 and 128 (the defaults). Everything lands in one
# tarball (the device tool brings back only a few files). $OUT: the device
# tool's output folder.
set -u
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
w=$OUT/widths && mkdir -p "$w"
{ date -u +%FT%TZ; echo "revision: ${GH_REV:-unknown}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$w/machine.txt"
run_width() {  # width, steps, extra options
  timeout 200 python3 -u python/tests/gpu_train.py --steps "$2" --time-limit 90 --width "$1" --floor "${@:3}" \
    --csv "$w/torch-w$1.csv" > "$w/train-w$1.log" 2>&1
  echo "-- width $1 ${*:3} rc=$?"
  grep -E "ms/step|PASS|FAIL|floor" "$w/train-w$1.log"
}
run_width 512 20 --offload-state --reference-csv "$w/torch-w512-reference.csv"
for r in 2 3; do
  timeout 120 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 60 --width 512 --offload-state \
    --only a --out "$w/round$r-a.json" > "$w/round$r-a.log" 2>&1
  peak=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['peak'])" "$w/round$r-a.json")
  timeout 120 python3 -u python/tests/gpu_train.py --steps 12 --time-limit 60 --width 512 --offload-state \
    --only c --peak "$peak" > "$w/round$r-c.log" 2>&1
  for cfg in a c; do printf 'round %d %s: ' $r $cfg; grep -E "ms/step" "$w/round$r-$cfg.log" | head -1; done
done
run_width 384 12 --offload-state
run_width 256 12
run_width 128 12
tar -czf "$OUT/widths.tgz" -C "$OUT" widths && rm -rf "$w"
