#!/usr/bin/env bash
# Device visit 30 (bench/NOTES.md): the GPU tests at this code (last run at
# fde1aed's, visit 28; GPUHEAP_CLEAN=prefill is new since), then row 130's
# run 3 (the defaults and prefill at width 256 under the profiler, each
# phase cut at its first copy: logs-prefill/run2.sh's runs), then, on an
# H200 only, tools/gpu-run.sh's python stage (width 64: (a), (b), (c), (f),
# PyTorch's own offload, CuPy) for torch-h200.csv at this code.
# SKIP_PY=1 stops before it (little device time left). expectation.txt
# was written before. GH_REV: the revision; $OUT set by the
# device tool.
set -u
. tools/alt-begin.sh
GH_REV=$GH_REV bash tools/gpu-run.sh build tests 2>&1 | tail -20
tar czf "$R/r.tgz" -C "$R" r
peak=5843253760  # logs-visit27/a256.json, as in logs-prefill/run2.sh
one c256-prof-d "--only c --width 256 --profile --gpu-only --trace $OUT/trace-d.json"
one c256-prof-cp "--only c --width 256 --profile --gpu-only --trace $OUT/trace-cp.json" GPUHEAP_CLEAN=prefill
grep -H "trace:" "$OUT"/c256-prof-*.log > "$OUT/prefill-run3.txt"
rm -f "$OUT"/trace*.json*
cat "$OUT/prefill-run3.txt"
tar czf "$R/r.tgz" -C "$R" r
[ -z "${SKIP_PY:-}" ] || { echo "SKIP_PY set: width 64 skipped"; pack; exit 0; }
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: width 64 skipped"; pack; exit 0; }
GH_REV=$GH_REV bash tools/gpu-run.sh python 2>&1 | tail -30
pack
