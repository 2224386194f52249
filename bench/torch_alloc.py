#!/usr/bin/env python3
"""Host alloc/free latency of PyTorch's caching allocator against gpuheap's
tensor manager, both called from Python the same way, on the sizes of
bench_tensor.cu.

  python3 bench/torch_alloc.py --lib build-gpu/libgpuheap.so --csv out.csv

PyTorch: torch.cuda.caching_allocator_alloc / caching_allocator_delete (the
allocator itself, no tensor object). gpuheap: gh_torch_alloc / gh_torch_free
(the CUDAPluggableAllocator entry points) through ctypes, on the process-wide
manager. Each call is timed with time.perf_counter_ns around it; median and
p90 in microseconds, after one warm-up pass. The process-wide manager is
made by the first call, and its host-pool thread then pins its host memory
in the background (64 frames, ~0.1 s): the timing starts once that pool is
full, so that the first size is not timed beside it (it was, until
2026-12-01: its calls took ~0.5 us more, alloc and free alike). The two include Python's call
overhead (a ctypes call costs about as much as a torch binding call; both
are measured on an empty function and printed, so the overhead can be
subtracted).

  python3 bench/torch_alloc.py --lib build-gpu/libgpuheap.so --tensors --csv out.csv

--tensors: the latency as a PyTorch program sees it instead: torch.empty(b,
dtype=uint8, device="cuda") and dropping the last reference, timed the same
way, in two fresh interpreters, one on PyTorch's caching allocator and one
after gpuheap.torch.enable() (PyTorch then calls gpuheap's entry points
from C++, with no ctypes in between). Both include PyTorch's own tensor
construction and destruction, which is the same in both.

  python3 bench/torch_alloc.py --lib build-gpu/libgpuheap.so --tensors --graph

--graph: the same, with a captured CUDA graph kept alive in each interpreter
while it is timed (torch.cuda.graph of y = x * 2 on 1 MiB, replayed once):
its private pool holds a block, so that each release is first looked up
among the graph pools' blocks (gpuheap's gh_torch_free does so only while
some pool holds one), as in a program whose graphs (reduce-overhead) stay."""
import argparse
import ctypes
import json
import os
import subprocess
import statistics
import sys
import time

SIZES = [512, 4096, 65536, 1 << 20, 8 << 20, 64 << 20, 256 << 20]


def iters_for(b):
    return 4000 if b <= 1 << 20 else (400 if b <= 8 << 20 else 60)


def live_for(b):
    return 64 if b <= 1 << 20 else 4


def p90(v):
    v = sorted(v)
    return v[int(0.9 * (len(v) - 1) + 0.5)]


def measure(alloc, free, b):
    """Median and p90 of alloc(b) and of free(held, j, b), which releases
    held[j] (the list holds the only reference, so dropping it from there
    frees a tensor)."""
    iters, live = iters_for(b), live_for(b)
    a, f = [], []
    for _ in range(2):  # warm-up, then the measured pass
        a, f = [], []
        i = 0
        while i < iters:
            n = min(live, iters - i)
            held = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                p = alloc(b)
                a.append((time.perf_counter_ns() - t0) / 1e3)
                if p is None or (isinstance(p, int) and not p):
                    raise RuntimeError(f"alloc of {b} bytes failed")
                held.append(p)
                p = None
            for j in range(n):
                t0 = time.perf_counter_ns()
                free(held, j, b)
                f.append((time.perf_counter_ns() - t0) / 1e3)
            i += n
    return statistics.median(a), p90(a), statistics.median(f), p90(f)


def drop(held, j, b):
    """free() for tensors: drop the last reference."""
    held[j] = None


def keep_graph(torch):
    """A captured graph and its tensors, to keep alive (--graph)."""
    x = torch.ones(1 << 18, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x * 2  # warm-up off the capture, as torch.cuda.graph's docs ask
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2
    g.replay()
    torch.cuda.synchronize()
    if float(y[0]) != 2.0:
        raise RuntimeError("torch_alloc.py: the kept graph's replay gave %r" % float(y[0]))
    return g, x, y


def tensor_child(which, graph):
    """One interpreter's half of --tensors: rows as JSON on the last line."""
    import torch

    if not torch.cuda.is_available():
        print("torch_alloc.py: no CUDA device", file=sys.stderr)
        return 2
    if which == "gpuheap":
        import gpuheap.torch

        gpuheap.torch.enable()
    kept = keep_graph(torch) if graph else None
    if kept is not None and which == "gpuheap":
        pools = gpuheap.torch.graph_pools()
        if pools["blocks"] == 0:
            print("torch_alloc.py: --graph: no graph pool holds a block (%r)" % (pools,), file=sys.stderr)
            return 1
    rows = [(which, b) + measure(lambda n: torch.empty(n, dtype=torch.uint8, device="cuda"), drop, b)
            for b in SIZES]
    torch.cuda.synchronize()
    print(json.dumps(rows))
    return 0


def tensors(args):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env["GPUHEAP_LIBRARY"] = os.path.abspath(args.lib)
    pydir = os.path.join(os.path.dirname(here), "python")
    env["PYTHONPATH"] = os.pathsep.join([pydir] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    rows = []
    for which in ("torch", "gpuheap"):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--lib", args.lib, "--child", which]
                           + (["--graph"] if args.graph else []), env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            sys.stderr.write(r.stdout + r.stderr)
            return r.returncode
        rows += [tuple(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]
    print("tensors: torch.empty and the last reference dropped, fresh interpreter per allocator"
          + (", a captured graph kept alive" if args.graph else ""))
    print(f"{'allocator':<10} {'bytes':>12} {'alloc med':>10} {'alloc p90':>10} {'free med':>10} {'free p90':>10}")
    for r in sorted(rows, key=lambda r: (r[1], r[0] != "torch")):
        print(f"{r[0]:<10} {r[1]:>12} {r[2]:>10.2f} {r[3]:>10.2f} {r[4]:>10.2f} {r[5]:>10.2f}", flush=True)
    if args.csv:
        with open(args.csv, "w") as fh:
            fh.write("allocator,bytes,alloc_us_median,alloc_us_p90,free_us_median,free_us_p90\n")
            for r in rows:
                fh.write("%s,%d,%.3f,%.3f,%.3f,%.3f\n" % tuple(r))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="path to libgpuheap.so")
    ap.add_argument("--csv", help="write allocator,bytes,alloc_us_median,alloc_us_p90,free_us_median,free_us_p90")
    ap.add_argument("--tensors", action="store_true", help="time torch.empty and its release under each allocator")
    ap.add_argument("--graph", action="store_true", help="with --tensors: a captured CUDA graph kept alive meanwhile")
    ap.add_argument("--child", choices=("torch", "gpuheap"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.graph and not (args.tensors or args.child):
        ap.error("--graph goes with --tensors")
    if args.child:
        return tensor_child(args.child, args.graph)
    if args.tensors:
        return tensors(args)

    import torch

    if not torch.cuda.is_available():
        print("torch_alloc.py: no CUDA device", file=sys.stderr)
        return 2
    lib = ctypes.CDLL(args.lib)
    lib.gh_torch_alloc.restype = ctypes.c_void_p
    lib.gh_torch_alloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.gh_torch_free.restype = None
    lib.gh_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    dev = torch.cuda.current_device()
    stream = torch.cuda.current_stream().cuda_stream

    def torch_alloc(b):
        return torch.cuda.caching_allocator_alloc(b, dev)

    def torch_free(held, j, b):
        torch.cuda.caching_allocator_delete(held[j])

    def gh_alloc(b):
        return lib.gh_torch_alloc(b, dev, stream)

    def gh_free(held, j, b):
        lib.gh_torch_free(held[j], b, dev, stream)

    # Make the manager, then wait for its host pool (see the docstring).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from gpuheap import _capi
    gh_free([gh_alloc(512)], 0, 512)
    lib.gh_tmgr_global.restype = ctypes.c_void_p
    lib.gh_tmgr_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    st = _capi.TmgrStats()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        if lib.gh_tmgr_stats(lib.gh_tmgr_global(), ctypes.byref(st)) != 0 or st.host_pool_frames >= 64:
            break
        time.sleep(0.01)
    print(f"manager ready: host pool {st.host_pool_frames} frames after {time.monotonic() - t0:.2f} s")

    # The cost of the call itself: a ctypes call and a torch binding call
    # that do (almost) nothing.
    libc = ctypes.CDLL(None)
    libc.labs.restype = ctypes.c_long
    libc.labs.argtypes = [ctypes.c_long]
    t = []
    for _ in range(20000):
        t0 = time.perf_counter_ns()
        libc.labs(-1)
        t.append((time.perf_counter_ns() - t0) / 1e3)
    print(f"call overhead: ctypes {statistics.median(t):.2f} us", end="")
    t = []
    for _ in range(20000):
        t0 = time.perf_counter_ns()
        torch.cuda.current_device()
        t.append((time.perf_counter_ns() - t0) / 1e3)
    print(f", torch binding {statistics.median(t):.2f} us")

    rows = []
    print(f"{'allocator':<10} {'bytes':>12} {'alloc med':>10} {'alloc p90':>10} {'free med':>10} {'free p90':>10}")
    for b in SIZES:
        for name, al, fr in (("torch", torch_alloc, torch_free), ("gpuheap", gh_alloc, gh_free)):
            am, a9, fm, f9 = measure(al, fr, b)
            rows.append((name, b, am, a9, fm, f9))
            print(f"{name:<10} {b:>12} {am:>10.2f} {a9:>10.2f} {fm:>10.2f} {f9:>10.2f}", flush=True)
    torch.cuda.synchronize()
    if args.csv:
        with open(args.csv, "w") as fh:
            fh.write("allocator,bytes,alloc_us_median,alloc_us_p90,free_us_median,free_us_p90\n")
            for r in rows:
                fh.write("%s,%d,%.3f,%.3f,%.3f,%.3f\n" % r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
