#!/usr/bin/env bash
# Config (c) of python/tests/gpu_train.py in several variants, alternated on
# one machine (machines differ by 10-20% in (c)): ROUNDS rounds (default 2)
# of 20 steps each, run by tools/diag-train.sh (a line per run with ms/step,
# GB moved and the manager's per-step figures; logs and JSON in
# $OUT/diag.tgz). Needs build-gpu/libgpuheap.so and (a)'s peak (PEAK, bytes;
# gpu_train.py prints it). The variants of bench/NOTES.md, host side, rows
# 13 and 15:
#   v0  the defaults, no weights prefetched at unpack
#   v1  the defaults
#   v2  CLOCK with young-last (GPUHEAP_EVICT_YOUNG_LAST=1)
#   v3  young-last + mark_model(prefetch=True)
set -uo pipefail
cd "$(dirname "$0")/.."
variants=""
for r in $(seq 1 "${ROUNDS:-2}"); do variants="$variants v0-$r v1-$r v2-$r v3-$r"; done
DIAG="$variants" exec bash tools/diag-train.sh
