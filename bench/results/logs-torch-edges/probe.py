#!/usr/bin/env python3
"""Probe (device visit 31): what PyTorch does on gpuheap at the edges that
users of pluggable allocators meet -- both budgets spent, CUDA graph
capture, torch.compile. Each probe runs in a process of its own (a crash
must not end the others); prints one JSON line a probe.

    GPUHEAP_LIBRARY=build-gpu/libgpuheap.so PYTHONPATH=python python3 probe.py [name ...]
"""
import json
import os
import subprocess
import sys

MiB = 1 << 20


def p_oom_once():
    import torch, gpuheap.torch as ght
    ght.enable(device_budget="256MiB", host_budget="256MiB")
    return _past_budgets(torch)


def _past_budgets(torch):
    """A 600 MiB tensor past both budgets (256 MiB each), filled, then a
    small one: what each gave."""
    out = {}
    try:
        x = torch.empty(600 * MiB, dtype=torch.uint8, device="cuda")
        out["ptr"] = x.data_ptr()
        x.fill_(1)
        torch.cuda.synchronize()
        out["result"] = "no error"
    except BaseException as e:
        out["result"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"
    try:
        y = torch.ones(1 * MiB, device="cuda")
        out["after"] = float(y.sum().item())
    except BaseException as e:
        out["after"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def p_oom_null():
    """The same as oom_once through gh_torch_alloc (NULL on failure)
    installed by hand: what PyTorch does with a NULL."""
    import torch, gpuheap
    m = gpuheap.Manager(device_budget="256MiB", host_budget="256MiB")
    m.set_global()
    torch.cuda.memory.change_current_allocator(
        torch.cuda.memory.CUDAPluggableAllocator(gpuheap.library_path(), "gh_torch_alloc", "gh_torch_free"))
    return _past_budgets(torch)


def p_oom_loop():
    import torch, gpuheap.torch as ght
    ght.enable(device_budget="256MiB", host_budget="256MiB")
    keep, out = [], {}
    try:
        for i in range(64):
            t = torch.empty(32 * MiB, dtype=torch.uint8, device="cuda")
            keep.append(t)
            out["last_ptr"] = t.data_ptr()
            t.fill_(i)
        torch.cuda.synchronize()
        out["result"] = "no error"
    except BaseException as e:
        out["result"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"
    out["tensors"] = len(keep)
    try:
        out["check"] = all(int(t[0].item()) == i for i, t in enumerate(keep[:8]))
    except BaseException as e:
        out["check"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def p_graph():
    import torch, gpuheap.torch as ght
    ght.enable()
    out = {}
    x = torch.full((4 * MiB,), 1.0, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            y = (x * 2) * 3 + 1
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            y = (x * 2) * 3 + 1   # (x * 2) and its product are intermediates freed in capture
        out["capture"] = "ok"
    except BaseException as e:
        out["capture"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"
        return out
    try:
        g.replay()
        torch.cuda.synchronize()
        out["replay_y"] = float(y[0].item())
        zs = [torch.zeros(4 * MiB, device="cuda") for _ in range(4)]   # may land on the intermediates
        torch.cuda.synchronize()
        x.fill_(5.0)
        g.replay()
        torch.cuda.synchronize()
        out["replay2_y"] = float(y[0].item())
        out["zeros_clobbered"] = [float(z.abs().sum().item()) for z in zs]
    except BaseException as e:
        out["replay"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"
    return out


def _compile(mode):
    import torch, gpuheap.torch as ght
    ght.enable()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    x = torch.randn(64, 256, device="cuda")
    ref = m(x).detach().clone()
    out = {}
    try:
        cm = torch.compile(m, mode=mode)
        for _ in range(3):
            r = cm(x)
            r.sum().backward()
        torch.cuda.synchronize()
        out["result"] = "ok"
        out["max_diff"] = float((cm(x) - ref).abs().max().item())
    except BaseException as e:
        out["result"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:400]}"
    return out


def p_compile_default():
    return _compile(None)


def p_compile_reduce_overhead():
    return _compile("reduce-overhead")


def p_cupy_oom():
    import cupy, gpuheap.cupy as ghc
    ghc.enable(device_budget="256MiB", host_budget="256MiB")
    out = {}
    try:
        x = cupy.empty(600 * MiB, dtype=cupy.uint8)
        out["ptr"] = int(x.data.ptr)
        x.fill(1)
        cupy.cuda.Device().synchronize()
        out["result"] = "no error"
    except BaseException as e:
        out["result"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"
    try:
        out["after"] = float(cupy.ones(1 << 20).sum())
    except BaseException as e:
        out["after"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def _race(torch):
    """python/tests/gpu_edges.py's side_stream_race (the same steps this
    probe ran at a307165, moved there)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python", "tests"))
    from gpu_edges import side_stream_race
    return side_stream_race(torch)


def p_race_torch():
    import torch
    return _race(torch)


def p_race_gpuheap():
    import torch, gpuheap.torch as ght
    ght.enable()
    out = _race(torch)
    a = torch.cuda.memory.get_current_allocator() if hasattr(torch.cuda.memory, "get_current_allocator") else None
    inner = ght._allocator.allocator() if ght._allocator is not None else None
    out["allocator_attrs"] = sorted(n for n in dir(inner) if not n.startswith("__")) if inner is not None else None
    return out


def p_mem_pool():
    """torch.cuda.MemPool / use_mem_pool under gpuheap: PyTorch routes a
    scope's allocations to a private pool through the same callbacks as a
    graph capture (begin with a filter of the calling thread, end, release
    at the pool's end)."""
    import gc
    import torch, gpuheap.torch as ght
    ght.enable()
    out = {}
    try:
        pool = torch.cuda.MemPool()
        out["pool_id"] = list(pool.id)
        with torch.cuda.use_mem_pool(pool):
            a = torch.full((4 * MiB,), 3.0, device="cuda")
            b = a * 2
        out["in_scope"] = ght.graph_pools()
        c = torch.full((4 * MiB,), 5.0, device="cuda")  # outside the scope
        out["after_scope"] = ght.graph_pools()
        out["values"] = [float(a[0].item()), float(b[-1].item()), float(c[0].item())]
        del a, b
        gc.collect()
        out["freed"] = ght.graph_pools()
        del pool
        gc.collect()
        torch.cuda.synchronize()
        out["released"] = ght.graph_pools()
        out["pinned"] = ght.manager().stats()["pinned_tensors"]
        out["result"] = "ok"
    except BaseException as e:
        out["result"] = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:400]}"
    return out


PROBES = {n[2:]: f for n, f in globals().items() if n.startswith("p_")}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print("RESULT " + json.dumps(PROBES[sys.argv[2]]()), flush=True)
        return
    for name in sys.argv[1:] or PROBES:
        try:
            r = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, timeout=180)
            res = [l[7:] for l in r.stdout.splitlines() if l.startswith("RESULT ")]
            line = {"probe": name, "rc": r.returncode,
                    "out": json.loads(res[0]) if res else None,
                    "stderr_tail": r.stderr.strip().splitlines()[-6:] if r.stderr.strip() else []}
        except subprocess.TimeoutExpired:
            line = {"probe": name, "rc": "timeout"}
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
