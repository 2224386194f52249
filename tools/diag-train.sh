#!/usr/bin/env bash
# Where a training step's time goes: config (c) at the defaults, (c) with a
# budget that needs no moves (the offload context's own cost), (a) and (b),
# and (a), (c) under the profiler with the GPU's busy time from the trace.
# Variants: see the case below (c-old*, c-new*: the device spares and the
# cache release order off / on, bench/NOTES.md host side row 19; c-chN-R:
# chunks of N frames, round R, row 20; vK-R: tools/ab-train.sh's variants;
# c-da0* / c-da1*: device aliases off / on, row 23; c-rec, b-rec: (c), (b)
# with GPUHEAP_TRACE, the call trace kept as diag/c.ghtrace, b.ghtrace;
# c-ssr0* / c-ssr1*, b-ssr*: same-stream reuse off / on, row 29; all-ssr1:
# (a), (b), (c) with it on, losses compared; c-om0* / c-om1*: ordered moves
# off / on, row 30; c-mv0* / c-mv1*: the mover off / on, row 31; c-quiet*:
# the offload context's quiet advice; c-pdN*: prefetch distance N, row 33;
# c-ca0* / c-ca1*: the chunk fixed at 16 / following the tensors, row 36;
# c-pa0* / c-pa1*: the offload context's prefetch ahead off / on, row 37;
# c-cro* / c-crs*: the cache releasing its oldest / shortest runs first,
# row 41; c-qa0* / c-qa1*: offload(quiet="auto") off / on, row 43).
# Needs build-gpu/libgpuheap.so; logs under $OUT (or ./gpu-out), one tarball.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out/diag"
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
peak=${PEAK:-1482845601}
g() {
  local name=$1
  shift
  timeout 150 python3 -u python/tests/gpu_train.py --peak "$peak" --out "$out/diag/$name.json" "$@" > "$out/diag/$name.log" 2>&1
  echo "$name: $(grep -hE 'ms/step|per step|trace:|device time' "$out/diag/$name.log" | sed 's/^.*gpu_train\[.\]//' | tr '\n' ' ')"
}
for v in ${DIAG:-c0 c-nomove a0 b0 c-prof a-prof}; do
  case $v in
    c0) g c0 --only c --steps 20 ;;
    c-nomove) g c-nomove --only c --steps 20 --budget-fraction 4 ;;
    a0) g a0 --only a --steps 20 ;;
    b0) g b0 --only b --steps 20 ;;
    c-nomove-nw) g c-nomove-nw --only c --steps 20 --budget-fraction 4 --no-unpack-weights ;;
    c-nomove-prof) g c-nomove-prof --only c --steps 8 --budget-fraction 4 --profile --trace "$out/diag/cn.trace" ;;
    c-nomove-nooff) g c-nomove-nooff --only c --steps 20 --budget-fraction 4 --no-offload ;;
    c-old*) GPUHEAP_DEVICE_SPARES=0 GPUHEAP_CACHE_RELEASE_NEWEST=1 g "$v" --only c --steps 20 ;;
    c-nospare*) GPUHEAP_DEVICE_SPARES=0 g "$v" --only c --steps 20 ;;
    c-new*) g "$v" --only c --steps 20 ;;
    cn-old*) GPUHEAP_DEVICE_SPARES=0 GPUHEAP_CACHE_RELEASE_NEWEST=1 g "$v" --only c --steps 20 --budget-fraction 4 ;;
    cn-new*) g "$v" --only c --steps 20 --budget-fraction 4 ;;
    c-ch*) n=${v#c-ch}; GPUHEAP_CHUNK_FRAMES=${n%%-*} g "$v" --only c --steps 20 ;;
    v0-*) GPUHEAP_EVICT_YOUNG_LAST=0 g "$v" --only c --steps 20 --no-unpack-weights ;;
    v1-*) GPUHEAP_EVICT_YOUNG_LAST=0 g "$v" --only c --steps 20 ;;
    v2-*) GPUHEAP_EVICT_YOUNG_LAST=1 g "$v" --only c --steps 20 ;;
    v3-*) GPUHEAP_EVICT_YOUNG_LAST=1 g "$v" --only c --steps 20 --model-prefetch ;;
    c-quiet*) g "$v" --only c --steps 20 --quiet ;;
    c-om0*) GPUHEAP_ORDERED_MOVES=0 g "$v" --only c --steps 20 ;;
    c-om1*) g "$v" --only c --steps 20 ;;
    c-mv0*) GPUHEAP_MOVER=0 g "$v" --only c --steps 20 ;;
    c-pd*) n=${v#c-pd}; g "$v" --only c --steps 20 --prefetch-distance "${n%%-*}" ;;
    c-mv1*) GPUHEAP_MOVER=1 g "$v" --only c --steps 20 ;;
    c-ca0*) GPUHEAP_CHUNK_AUTO=0 g "$v" --only c --steps 20 ;;
    c-ca1*) g "$v" --only c --steps 20 ;;
    c-pa0*) g "$v" --only c --steps 20 --no-prefetch-ahead ;;
    c-pa1*) g "$v" --only c --steps 20 ;;
    c-cro*) GPUHEAP_CACHE_RELEASE=oldest g "$v" --only c --steps 20 ;;
    c-crs*) g "$v" --only c --steps 20 ;;
    c-qa0*) g "$v" --only c --steps 20 ;;
    c-qa1*) g "$v" --only c --steps 20 --quiet-auto ;;
    c-qah*) GPUHEAP_HOMELESS=0 g "$v" --only c --steps 20 --quiet-auto ;;
    c-da0*) GPUHEAP_DEVICE_ALIASES=0 g "$v" --only c --steps 20 ;;
    c-da1*) g "$v" --only c --steps 20 ;;
    c-ssr0*) GPUHEAP_SAME_STREAM_REUSE=0 g "$v" --only c --steps 20 ;;
    c-ssr1*) GPUHEAP_SAME_STREAM_REUSE=1 g "$v" --only c --steps 20 ;;
    b-ssr0*) GPUHEAP_SAME_STREAM_REUSE=0 g "$v" --only b --steps 20 ;;
    b-ssr1*) GPUHEAP_SAME_STREAM_REUSE=1 g "$v" --only b --steps 20 ;;
    all-ssr1) GPUHEAP_SAME_STREAM_REUSE=1 g "$v" --steps 20 ;;
    c-rec | b-rec) GPUHEAP_TRACE=$out/diag/${v%-rec}.ghtrace g "$v" --only "${v%-rec}" --steps 20 ;;
    c-prof) g c-prof --only c --steps 8 --profile --trace "$out/diag/c.trace" ;;
    a-prof) g a-prof --only a --steps 8 --profile --trace "$out/diag/a.trace" ;;
    b-prof) g b-prof --only b --steps 8 --profile --trace "$out/diag/b.trace" ;;
  esac
done
rm -f "$out"/diag/*.trace
tar czf "$out/diag.tgz" -C "$out" diag && rm -rf "$out/diag"
