#!/usr/bin/env bash
# Device visit 36, run 2: what graph pools hold (bench/graph_pools.py) on
# PyTorch's allocator, on gpuheap (each block a capture used kept by its
# graph) and on gpuheap with GPUHEAP_POOL_SHARE=1 (a capture's temporaries
# shared with later captures, as PyTorch's pools do); then the graph and
# compile cases of gpu_edges.py with GPUHEAP_POOL_SHARE=1. Expects
# build-gpu from run 1 on the same machine (else builds the library).
set -u
. tools/env.sh
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
[ -f build-gpu/libgpuheap.so ] || GH_REV=${GH_REV:-unknown} bash tools/gpu-run.sh lib
export GPUHEAP_LIBRARY=$PWD/build-gpu/libgpuheap.so PYTHONPATH=$PWD/python
for prog in shared callables trees; do
  for cfg in torch gpuheap share; do
    a=gpuheap; e=GPUHEAP_POOL_SHARE=0
    [ $cfg = torch ] && a=torch
    [ $cfg = share ] && e=GPUHEAP_POOL_SHARE=1
    env $e timeout 100 python3 -u bench/graph_pools.py $a $prog > "$out/$prog-$cfg.log" 2>&1
    echo "$prog $cfg rc=$?: $(grep '^{' "$out/$prog-$cfg.log" | tail -1)" | tee -a "$out/pools.txt"
  done
done
GPUHEAP_POOL_SHARE=1 timeout 200 python3 -u python/tests/gpu_edges.py --cases graph_callables compile_graphs \
  compile_mid graph 2>&1 | grep -v Warning | cut -c1-900 | tee "$out/gpu_edges2-share.log"
