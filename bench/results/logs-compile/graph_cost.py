"""Device visit 34, run 5: in one interpreter, torch.empty(512 B) and its
release timed (medians of 20000, microseconds) with no graph, with a
captured graph kept alive, and after that graph is deleted, three times
over, on PyTorch's allocator (argument torch) or gpuheap's (gpuheap): is
run 4's slower alloc and free with a graph the graph pool's (gpuheap
only, and gone once the graph is) or the interpreter's (both)?"""
import gc
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from torch_alloc import keep_graph  # noqa: E402 (bench/torch_alloc.py: the same capture, checked)

if sys.argv[1] == "gpuheap":
    import gpuheap.torch
    gpuheap.torch.enable()


def timed(n=20000):
    a, f = [], []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        x = torch.empty(512, dtype=torch.uint8, device="cuda")
        t1 = time.perf_counter_ns()
        del x
        t2 = time.perf_counter_ns()
        a.append(t1 - t0)
        f.append(t2 - t1)
    return round(statistics.median(a) / 1e3, 2), round(statistics.median(f) / 1e3, 2)


timed(2000)
for rnd in range(3):
    row = {"none": timed()}
    kept = keep_graph(torch)
    row["graph"] = timed()
    if sys.argv[1] == "gpuheap":
        row["pools"] = gpuheap.torch.graph_pools()
    del kept
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    row["after"] = timed()
    if sys.argv[1] == "gpuheap":
        row["pools_after"] = gpuheap.torch.graph_pools()
    print(sys.argv[1], rnd, row, flush=True)
