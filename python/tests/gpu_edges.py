#!/usr/bin/env python3
"""GPU test: PyTorch and CuPy on gpuheap at the edges that users of
pluggable allocators meet, each case in a fresh interpreter (the allocator
is chosen once a process):

  oom       both budgets spent (256 MiB each): the request that fits
            neither calls the observer attached PyTorch's way
            (torch._C._cuda_attach_out_of_memory_observer), which takes a
            snapshot, then raises a RuntimeError "gpuheap: out of memory (...)"
            (PyTorch makes a tensor at address 0 of a NULL, which faults
            and ends the CUDA context: bench/results/logs-torch-edges/),
            the tensors made before it read back their fill, and the
            process goes on allocating and computing.
  graph     torch.cuda.graph of a small network's forward and backward,
            served from a graph pool (gpuheap.torch.enable gives PyTorch
            the pool callbacks): five replays on new inputs equal eager
            within 1e-4, and a tensor zeroed after the capture is still
            zero after them (without pools the probe saw a replay write
            into it: bench/results/logs-torch-edges/); once the graph and
            its outputs are gone, no block is kept freed or retired and
            every pinned tensor is a block still held (PyTorch keeps a
            cuBLAS workspace made during the capture).
  graph_evict  the same with the device budget spent (1 GiB budget,
            1.5 GiB of filled tensors made first): the capture's blocks
            evict tensors while the capture runs, which must not touch
            the capturing stream; the replays equal eager, the tensors
            keep their fill.
  graph_callables  torch.cuda.make_graphed_callables over a network (its
            forward and backward graphs share one pool): five training
            steps' outputs and gradients equal a copy run eagerly.
  graph_refused  a capture begun with PyTorch's raw API on a stream no
            pool serves (torch.cuda.graph not used): refused at its first
            allocation with a RuntimeError naming the capture; the
            process goes on.
  compile   torch.compile (Inductor, no CUDA graphs): forward and
            backward on gpuheap, outputs equal to eager within 1e-5.
  compile_graphs  torch.compile(mode="reduce-overhead"), whose CUDA graph
            trees call PyTorch's allocator for what a pluggable one refuses
            (gpuheap.torch answers them): an MLP trained 8 steps, an eval
            forward between steps from the fourth on (a new recording from
            a replayed path: the trees' checkpoint restore), losses and
            outputs equal to an eager copy's within 1e-4; then another
            compiled function warmed up and recorded into the pool after
            the first one's replays, its outputs equal to eager; no graph
            skipped.
  compile_mid  reduce-overhead training where another compiled function
            runs between each replayed forward and its backward (from the
            fourth step on: its warm-up, then its recording while the
            forward's saved tensors are alive): each step's gradients equal
            an eager copy's within 1e-3 of their scale from the fourth step
            on. Before graph pools kept a graph's memory for that graph,
            the other function's recording took the memory of the forward's
            saved input copy and the first layer's weight gradient was off
            by 1.6-2.8 times its scale (bench/results/logs-compile/, run 9).
            Steps 0-2 are not compared: at step 2 the compiled gradients
            differ from eager by up to 1.6e-2 on PyTorch's own allocator too.
  cudnn_benchmark  torch.backends.cudnn.benchmark = True (cuDNN asks the
            allocator for cacheInfo, which PyTorch's pluggable allocator
            refuses; gpuheap answers it): a convolutional network's forward
            and backward equal the same with benchmark off within 1e-3 of
            their scale.
  record_stream  a tensor written on a side stream after a long spin,
            record_stream'ed there and dropped on the main stream, whose
            next tensor of that size is zeroed: no element of it may hold
            the side stream's late fill (without gpuheap's record-stream
            callback every element did: the probe's run 3).
  stats     torch.cuda.memory_allocated, max_memory_allocated,
            memory_stats, memory_summary, reset_peak_memory_stats and
            reset_accumulated_memory_stats answer
            from gpuheap's statistics (PyTorch's own raise under a
            pluggable allocator).
  memory_viz  torch.cuda.memory._record_memory_history() and
            _snapshot() (a pluggable allocator refuses both; gpuheap serves
            them in PyTorch's format): a small network trained two steps
            with history on, one tensor made in a named function; every
            live tensor is an active block of the snapshot, that tensor's
            block and its alloc entry name the function, PyTorch's own
            segsum, trace and trace_plot read the snapshot, _dump_snapshot
            writes a pickle that loads back, memory_snapshot() gives the
            segments, get_per_process_memory_fraction() the budget's share
            of the device.
  fraction  torch.cuda.set_per_process_memory_fraction(0.01): gpuheap's
            device budget becomes 1 % of the device's memory (its
            memory-fraction callback); 1.5 GiB of filled tensors then go
            past it by eviction, not by an error, and keep their fill.
  device    (two devices or more) a tensor on a device the manager does
            not serve: RuntimeError naming both devices.
  cupy_oom  CuPy, both budgets spent: cupy's OutOfMemoryError naming
            gpuheap, and the process goes on.

    python3 python/tests/gpu_edges.py

Exit: 0 pass, 1 fail, 77 skipped (no PyTorch, no CUDA device, no libgpuheap).
"""
import argparse
import json
import os
import sys
import tempfile

from _child import PYDIR, SKIP, log, run as run_child, torch_or_skip, verdict

MiB = 1 << 20
CASES = ("oom", "graph", "graph_evict", "graph_callables", "graph_refused", "compile", "compile_graphs", "compile_mid",
         "cudnn_benchmark", "record_stream", "stats", "memory_viz", "fraction", "device", "cupy_oom")


def err(e):
    return f"{type(e).__module__}.{type(e).__name__}: {e}"


def enable_or_skip(**kw):
    sys.path.insert(0, PYDIR)
    import gpuheap
    import gpuheap.torch as ght
    try:
        ght.enable(**kw)
    except gpuheap.Error as e:
        if e.code in (gpuheap.ERR_UNSUPPORTED, gpuheap.ERR_NO_DEVICE) or "libgpuheap" in str(e):
            log(f"gpu_edges: skipped: {e}")
            sys.exit(SKIP)
        raise
    return ght


def case_oom(torch):
    enable_or_skip(device_budget="256MiB", host_budget="256MiB")
    keep, out = [], {"observed": []}

    def observer(device, alloc, device_allocated, device_free):  # PyTorch's recipe: a snapshot at the OOM
        snap = torch.cuda.memory._snapshot()
        out["observed"].append([device, alloc, device_allocated, device_free, len(snap["segments"])])

    torch._C._cuda_attach_out_of_memory_observer(observer)
    try:
        for i in range(64):
            t = torch.empty(32 * MiB, dtype=torch.uint8, device="cuda")
            t.fill_(i + 1)
            keep.append(t)
        out["error"] = None
    except RuntimeError as e:
        out["error"] = str(e)
    out["kept"] = len(keep)
    torch.cuda.synchronize()
    out["kept_ok"] = all(int(t[0].item()) == i + 1 and int(t[-1].item()) == i + 1 for i, t in enumerate(keep))
    del keep
    y = torch.ones(4 * MiB, device="cuda")
    out["after"] = float(y.sum().item())
    return out


def graph_run(torch, ght, width, batch):
    """A network's forward and backward captured with torch.cuda.graph,
    replayed on new inputs against eager, twice (a graph, then another
    after the first is gone); see the module's doc."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.ReLU(),
                              torch.nn.Linear(2 * width, width)).cuda()
    x = torch.randn(batch, width, device="cuda")
    out = graph_cycle(torch, ght, net, x)
    again = graph_cycle(torch, ght, net, x)
    out["max_diff"] = max(out["max_diff"], again["max_diff"])
    out["z_nonzero"] += again["z_nonzero"]
    out["pools_released_again"] = again["pools_released"]
    out["pinned_released_again"] = again["pinned_released"]
    return out


def graph_cycle(torch, ght, net, x):
    import gc
    m = ght.manager()
    batch, width = x.shape
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up on a side stream, as PyTorch asks before a capture
        for _ in range(3):
            net.zero_grad(set_to_none=True)
            net(x).square().mean().backward()
    torch.cuda.current_stream().wait_stream(s)
    net.zero_grad(set_to_none=True)
    st0 = m.stats()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = net(x)
        loss = y.square().mean()
        loss.backward()
    st1 = m.stats()
    out = {"evictions_in_capture": st1["evictions"] - st0["evictions"], "pools_captured": ght.graph_pools(),
           "pinned_captured": st1["pinned_tensors"]}
    z = torch.zeros(4 * MiB, device="cuda")  # made after the capture: no replay may write it
    w0 = net[0].weight
    diff = 0.0
    for i in range(5):
        xi = torch.randn(batch, width, device="cuda")
        x.copy_(xi)
        g.replay()
        ye = net(xi)
        le = ye.square().mean()
        (ge,) = torch.autograd.grad(le, [w0])
        torch.cuda.synchronize()
        diff = max(diff, float((y - ye).abs().max()), float((loss - le).abs()), float((w0.grad - ge).abs().max()))
    out["max_diff"] = diff
    out["z_nonzero"] = int((z != 0).sum().item())
    del g, y, loss, ye, le, ge
    net.zero_grad(set_to_none=True)
    gc.collect()
    torch.cuda.synchronize()
    out["pools_released"] = ght.graph_pools()
    out["pinned_released"] = m.stats()["pinned_tensors"]
    # What the blocks still held are: the bytes of the pinned frames (shared frames counted whole).
    out["pinned_frame_bytes"] = sum(f["used_bytes"] for f in m.frame_map() if f["pinned"])
    out["after"] = float((x * 0 + 1).sum().item())
    return out


def case_graph(torch):
    ght = enable_or_skip()
    return graph_run(torch, ght, 1024, 512)


def case_graph_evict(torch):
    ght = enable_or_skip(device_budget="1GiB", host_budget="4GiB")
    fills = []
    for i in range(12):
        t = torch.empty(128 * MiB, dtype=torch.uint8, device="cuda")
        t.fill_(i + 1)
        fills.append(t)
    out = graph_run(torch, ght, 2048, 8192)
    torch.cuda.synchronize()
    out["fills_ok"] = all(int(t[0].item()) == i + 1 and int(t[-1].item()) == i + 1 for i, t in enumerate(fills))
    out["evictions"] = ght.manager().stats()["evictions"]
    return out


def case_graph_callables(torch):
    import copy
    ght = enable_or_skip()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).cuda()
    ref = copy.deepcopy(net)
    x = torch.randn(256, 512, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(net, (x,))
    out = {"pools": ght.graph_pools()}
    diff = 0.0
    for _ in range(5):
        xi = torch.randn(256, 512, device="cuda")
        xg, xr = xi.clone().requires_grad_(), xi.clone().requires_grad_()
        y = graphed(xg)
        y.square().mean().backward()
        yr = ref(xr)
        yr.square().mean().backward()
        torch.cuda.synchronize()
        diff = max(diff, float((y - yr).abs().max()), float((xg.grad - xr.grad).abs().max()),
                   max(float((p.grad - q.grad).abs().max()) for p, q in zip(net.parameters(), ref.parameters())))
        net.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
    out["max_diff"] = diff
    out["steps"] = 5
    return out


def case_graph_refused(torch):
    """A capture begun with the CUDA runtime's own call (cudaStreamBeginCapture,
    through ctypes), which gives gpuheap no pool."""
    import ctypes
    enable_or_skip()
    rt = None
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            rt = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if rt is None:
        return {"skipped": "no libcudart to begin a capture with"}
    x = torch.full((MiB,), 1.0, device="cuda")
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    out = {"error": None}
    graph = ctypes.c_void_p()
    with torch.cuda.stream(s):
        assert rt.cudaStreamBeginCapture(ctypes.c_void_p(s.cuda_stream), 2) == 0  # relaxed
        try:
            y = (x * 2) * 3 + 1
        except RuntimeError as e:
            out["error"] = str(e)
        out["end_capture"] = rt.cudaStreamEndCapture(ctypes.c_void_p(s.cuda_stream), ctypes.byref(graph))
    if graph.value:
        rt.cudaGraphDestroy(graph)
    torch.cuda.synchronize()
    z = x * 4 + 1
    out["after"] = float(z.sum().item())
    return out


def case_compile(torch):
    enable_or_skip()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    x = torch.randn(64, 256, device="cuda")
    ref = m(x).detach().clone()
    cm = torch.compile(m)
    for _ in range(3):
        cm(x).sum().backward()
    torch.cuda.synchronize()
    return {"max_diff": float((cm(x) - ref).abs().max().item())}


def case_compile_graphs(torch):
    ght = enable_or_skip()
    import copy
    from torch._dynamo.utils import counters
    import torch._inductor.cudagraph_trees as trees
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    e = copy.deepcopy(m)
    opt, opt_e = torch.optim.SGD(m.parameters(), lr=0.01), torch.optim.SGD(e.parameters(), lr=0.01)
    cm = torch.compile(m, mode="reduce-overhead")
    g = torch.Generator(device="cuda").manual_seed(1)
    r = {"loss_diff": 0.0, "eval_diff": 0.0}
    for step in range(8):
        x = torch.randn(512, 256, device="cuda", generator=g)
        t = torch.randint(0, 10, (512,), device="cuda", generator=g)
        losses = []
        for net, o in ((cm, opt), (e, opt_e)):
            loss = torch.nn.functional.cross_entropy(net(x), t)
            loss.backward()
            o.step()
            o.zero_grad(set_to_none=True)
            losses.append(loss.item())
        r["loss_diff"] = max(r["loss_diff"], abs(losses[0] - losses[1]) / abs(losses[1]))
        if step >= 3:
            with torch.no_grad():
                a, b = cm(x), e(x)
                r["eval_diff"] = max(r["eval_diff"], float(((a - b).abs().max() / b.abs().max()).item()))
    mgr = trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    r["checkpoints"] = mgr.debug_checkpointing_counter if mgr is not None else -1
    # Another compiled function warmed up and recorded into the pool after
    # the first one's replays (a second checkpoint restore). A replay's
    # output is not read after a later run: graph trees invalidate it, on
    # PyTorch's allocator as on gpuheap (bench/results/logs-compile/, run 2).
    m2 = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
    cm2 = torch.compile(m2, mode="reduce-overhead")
    with torch.no_grad():
        y = cm(x).clone()
        r["y_diff"] = float(((y - e(x)).abs().max() / y.abs().max()).item())
        r["m2_diff"] = 0.0
        for i in range(4):
            ref = m2(x + i)
            z = cm2(x + i).clone()
            r["m2_diff"] = max(r["m2_diff"], float(((z - ref).abs().max() / ref.abs().max()).item()))
        torch.cuda.synchronize()
    r["adopted"] = len(ght._GraphTrees.installed.adopted) if ght._GraphTrees.installed else -1
    r["checkpoints_after"] = mgr.debug_checkpointing_counter if mgr is not None else -1
    r["skips"] = int(counters["inductor"]["cudagraph_skips"])
    r["pools"] = ght.graph_pools()
    return r


def case_compile_mid(torch):
    ght = enable_or_skip()
    import copy
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    m2 = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
    e = copy.deepcopy(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    cm, cm2 = torch.compile(m, mode="reduce-overhead"), torch.compile(m2, mode="reduce-overhead")
    g = torch.Generator(device="cuda").manual_seed(1)
    r = {"grad_diff": []}
    for step in range(8):
        x = torch.randn(512, 256, device="cuda", generator=g)
        t = torch.randint(0, 10, (512,), device="cuda", generator=g)
        loss = torch.nn.functional.cross_entropy(cm(x), t)
        if step >= 3:
            with torch.no_grad():
                cm2(x + step).sum().item()
        loss.backward()
        torch.nn.functional.cross_entropy(e(x), t).backward()
        r["grad_diff"].append([float(((p.grad - q.grad).abs().max() / q.grad.abs().max()).item())
                               for p, q in zip(m.parameters(), e.parameters())])
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for p, q in zip(m.parameters(), e.parameters()):
                q.copy_(p)
                q.grad = None
    torch.cuda.synchronize()
    r["worst_from_3"] = max(max(d) for d in r["grad_diff"][3:])
    r["skips"] = int(counters["inductor"]["cudagraph_skips"])
    r["pools"] = ght.graph_pools()
    return r


def case_cudnn_benchmark(torch):
    enable_or_skip()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(32, 64, 3, padding=1, stride=2), torch.nn.ReLU(),
                            torch.nn.Conv2d(64, 64, 3, padding=1)).cuda()
    x = torch.randn(32, 3, 64, 64, device="cuda")
    out = {}
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        m.zero_grad(set_to_none=True)
        try:
            y = m(x)
            y.square().mean().backward()
            torch.cuda.synchronize()
            out[bench] = (y.detach().clone(), m[0].weight.grad.clone())
        except RuntimeError as e:
            return {"error": err(e)}
    (y0, g0), (y1, g1) = out[False], out[True]
    return {"error": None, "y_diff": float(((y1 - y0).abs().max() / y0.abs().max()).item()),
            "grad_diff": float(((g1 - g0).abs().max() / g0.abs().max()).item())}


def case_record_stream(torch):
    enable_or_skip()
    return side_stream_race(torch)


def side_stream_race(torch):
    """A tensor written on a side stream after a long spin, record_stream'ed
    there, dropped on the main stream; the next tensor of its size zeroed on
    the main stream. corrupted: its elements that are not zero."""
    n = 16 * MiB // 4
    x = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    old = x.data_ptr()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(int(5e8))  # ~0.25 s of spinning, then the write
        x.fill_(7.0)
    x.record_stream(side)
    del x
    y = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    return {"same_address": y.data_ptr() == old, "corrupted": int((y != 0).sum().item())}


def case_stats(torch):
    ght = enable_or_skip()
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
    out = {"allocated": torch.cuda.memory_allocated(), "peak": torch.cuda.max_memory_allocated(),
           "stats_current": torch.cuda.memory_stats()["allocated_bytes.all.current"]}
    out["summary"] = torch.cuda.memory_summary()
    del x
    torch.cuda.reset_peak_memory_stats()
    out["peak_after_reset"] = torch.cuda.max_memory_allocated()
    torch.cuda.reset_accumulated_memory_stats()
    st = torch.cuda.memory_stats()
    out["accumulated_after_reset"] = {k: st[k] for k in ght.ACCUMULATED_KEYS if st[k]}
    return out


def made_here(torch):
    """A tensor whose allocation's stack names this function."""
    return torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")


def case_memory_viz(torch):
    ght = enable_or_skip()
    import pickle
    from torch.cuda import _memory_viz

    torch.cuda.memory._record_memory_history(max_entries=100000)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(torch.randn(64, 256, device="cuda")),
                                          torch.randint(0, 10, (64,), device="cuda")).backward()
        opt.step()
    x = made_here(torch)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    blocks = {b["address"]: b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"}
    live = [p.data_ptr() for p in net.parameters()] + [x.data_ptr()]
    out = {"missing": [p for p in live if p not in blocks], "blocks": len(blocks), "segments": len(snap["segments"]),
           "x_frames": [f["name"] for f in blocks.get(x.data_ptr(), {}).get("frames", [])][:3]}
    trace = snap["device_traces"][-1]
    out["actions"] = sorted({e["action"] for e in trace})
    out["entries"] = len(trace)
    x_alloc = [e for e in trace if e["action"] == "alloc" and e["addr"] == x.data_ptr()]
    out["x_alloc_frames"] = [f["name"] for f in x_alloc[-1]["frames"]][:3] if x_alloc else None
    out["segsum"] = _memory_viz.segsum(snap).splitlines()[-6:-5]
    out["trace_lines"] = len(_memory_viz.trace(snap).splitlines())
    out["html"] = len(_memory_viz.trace_plot(snap))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "snap.pickle")
        torch.cuda.memory._dump_snapshot(path)
        with open(path, "rb") as f:
            out["pickle_segments"] = len(pickle.load(f)["segments"])
    out["memory_snapshot"] = len(torch.cuda.memory_snapshot())
    out["fraction"] = torch.cuda.get_per_process_memory_fraction()
    out["budget_share"] = ght.manager().stats()["device_budget"] / torch.cuda.get_device_properties(0).total_memory
    torch.cuda.memory._record_memory_history(enabled=None)
    out["after_off"] = len(torch.cuda.memory._snapshot()["device_traces"][-1])
    # A graph's pool: its segments alone by its id, the output held, the
    # temporary kept for reuse; CUDA graph trees' own reader of a pool.
    from torch._inductor.cudagraph_trees import get_block_addrs
    pool, g, w = torch.cuda.graph_pool_handle(), torch.cuda.CUDAGraph(), torch.randn(512, 512, device="cuda")
    xin = torch.randn(1024, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.relu(xin @ w) @ w
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g, pool=pool):
        y = torch.relu(xin @ w) @ w
    segs = torch.cuda.memory_snapshot(mempool_id=pool)
    out["pool_ids"] = len({tuple(x["segment_pool_id"]) for x in segs})
    out["pool_held"] = sorted(b["address"] for x in segs for b in x["blocks"] if b["state"] == "active_allocated")
    out["pool_inactive"] = sum(b["state"] == "inactive" for x in segs for b in x["blocks"])
    out["y_in_pool"] = y.data_ptr() in out["pool_held"]
    out["trees_reader"] = sorted(get_block_addrs(pool)) == out["pool_held"]
    out["whole_has_pool"] = sum(tuple(x["segment_pool_id"]) == tuple(pool) for x in torch.cuda.memory_snapshot())
    out["pool_segments"] = len(segs)
    del g, y
    return out


def case_fraction(torch):
    ght = enable_or_skip()
    torch.cuda.set_per_process_memory_fraction(0.01)
    total = torch.cuda.mem_get_info()[1]
    m = ght.manager()
    out = {"budget": m.stats()["device_budget"], "total": total}
    keep = []
    for i in range(12):
        t = torch.empty(128 * MiB, dtype=torch.uint8, device="cuda")
        t.fill_(i + 1)
        keep.append(t)
    torch.cuda.synchronize()
    out["evictions"] = m.stats()["evictions"]
    out["kept_ok"] = all(int(t[0].item()) == i + 1 and int(t[-1].item()) == i + 1 for i, t in enumerate(keep))
    return out


def case_device(torch):
    if torch.cuda.device_count() < 2:
        return {"skipped": "one CUDA device"}
    enable_or_skip(device=0)
    a = torch.ones(MiB, device="cuda:0")
    out = {"error": None, "dev0": float(a.sum().item())}
    try:
        torch.ones(MiB, device="cuda:1")
    except RuntimeError as e:
        out["error"] = str(e)
    return out


def case_cupy_oom(torch):
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return {"skipped": f"cupy: {e}"}
    sys.path.insert(0, PYDIR)
    import gpuheap.cupy as ghc
    ghc.enable(device_budget="256MiB", host_budget="256MiB")
    out = {"error": None}
    try:
        cupy.empty(600 * MiB, dtype=cupy.uint8).fill(1)
    except cupy.cuda.memory.OutOfMemoryError as e:
        out["error"] = str(e)
    out["after"] = float(cupy.ones(MiB, dtype=cupy.float32).sum())
    return out


def check(name, r):
    """The failures of case `name`'s result r."""
    f = []
    if r.get("skipped"):
        return f
    if name == "oom":
        if not (r["error"] or "").startswith("gpuheap: out of memory (33554432 bytes on device"):
            f.append(f"oom: the request past both budgets gave {r['error']!r}")
        if not 8 <= r["kept"] <= 16:
            f.append(f"oom: {r['kept']} tensors of 32 MiB before the error (256 MiB a tier: 8-16)")
        if not r["kept_ok"]:
            f.append("oom: a tensor made before the error lost its fill")
        obs = r.get("observed") or [[None] * 5]
        if not (len(obs) == 1 and obs[0][1] == 32 * MiB and obs[0][2] >= 128 * MiB and obs[0][4] >= 4):
            f.append(f"oom: PyTorch's out-of-memory observer saw {obs} (once, 32 MiB asked, a snapshot)")
    if name in ("graph", "graph_evict"):
        if not r["max_diff"] <= 1e-4:
            f.append(f"{name}: replays differ from eager by {r['max_diff']}")
        if r["z_nonzero"]:
            f.append(f"{name}: a replay wrote {r['z_nonzero']} elements of a tensor made after the capture")
        pc, pr = r["pools_captured"], r["pools_released"]
        if not (pc["pools"] >= 1 and pc["blocks"] >= 4 and r["pinned_captured"] >= pc["blocks"]):
            f.append(f"{name}: the capture's pool: {pc}, {r['pinned_captured']} pinned")
        # What PyTorch still holds from a capture (its cuBLAS workspaces for the capture's stream, made in the
        # first capture and kept) stays, and does not grow with a second graph on the same stream.
        pa = r["pools_released_again"]
        if not (pr["freed"] == pr["retired"] == pa["freed"] == pa["retired"] == 0 and pa["blocks"] == pr["blocks"]
                and r["pinned_released"] == pr["blocks"] and r["pinned_released_again"] == pa["blocks"]):
            f.append(f"{name}: after each graph and its outputs went: {pr}, then {pa}; "
                     f"{r['pinned_released']}, {r['pinned_released_again']} pinned")
    if name == "graph_callables" and not (r["max_diff"] <= 1e-4 and r["pools"]["pools"] >= 1 and
                                          r["pools"]["blocks"] >= 4):
        f.append(f"graph_callables: {r}")
    if name == "graph_evict" and not (r["evictions_in_capture"] > 0 and r["fills_ok"]):
        f.append(f"graph_evict: {r['evictions_in_capture']} evictions in the capture, fills kept: {r['fills_ok']}")
    if name == "graph_refused" and "capturing a CUDA graph" not in (r["error"] or ""):
        f.append(f"graph_refused: the capture gave {r['error']!r}, not gpuheap's refusal")
    if name in ("oom", "graph", "graph_evict", "graph_refused", "cupy_oom") and r.get("after") != {
            "oom": 4.0 * MiB, "graph": 512.0 * 1024, "graph_evict": 8192.0 * 2048, "graph_refused": 5.0 * MiB,
            "cupy_oom": 1.0 * MiB}[name]:
        f.append(f"{name}: after the error the process computed {r.get('after')!r}")
    if name == "record_stream" and r["corrupted"] != 0:
        f.append(f"record_stream: {r['corrupted']} elements of the new tensor hold the side stream's late write")
    if name == "stats" and not (r["allocated"] == r["stats_current"] >= 64 * MiB and r["peak"] >= 64 * MiB
                                and r["peak_after_reset"] < 64 * MiB
                                and r["summary"].startswith("gpuheap memory summary")
                                and "CUDA graph pools" in r["summary"]
                                and r.get("accumulated_after_reset") == {}):
        f.append(f"stats: {r}")
    if name == "compile_graphs" and not (max(r["loss_diff"], r["eval_diff"], r["y_diff"], r["m2_diff"]) <= 1e-4
                                         and r["checkpoints"] >= 1 and r["skips"] == 0):
        f.append(f"compile_graphs: {r}")
    if name == "compile_mid" and not (r["worst_from_3"] <= 1e-3 and r["skips"] == 0):
        f.append(f"compile_mid: {r}")
    if name == "cudnn_benchmark" and not (r["error"] is None and r["y_diff"] <= 1e-3 and r["grad_diff"] <= 1e-3):
        f.append(f"cudnn_benchmark: {r}")
    if name == "memory_viz" and not (not r["missing"] and r["x_frames"][:1] == ["made_here"]
                                     and (r["x_alloc_frames"] or [None])[:1] == ["made_here"]
                                     and {"alloc", "free_requested", "free_completed"} <= set(r["actions"])
                                     and r["trace_lines"] > r["entries"] > 0 and r["html"] > 1000
                                     and r["pickle_segments"] == r["segments"] > 0
                                     and r["memory_snapshot"] > 0
                                     and abs(r["fraction"] - r["budget_share"]) < 1e-9 and r["after_off"] == 0
                                     and r["pool_ids"] == 1 and r["y_in_pool"]
                                     and r["pool_inactive"] > 0 and r["trees_reader"]
                                     and r["whole_has_pool"] == r["pool_segments"] > 0):
        f.append(f"memory_viz: {r}")
    if name == "compile" and not r["max_diff"] <= 1e-5:
        f.append(f"compile: outputs differ from eager by {r['max_diff']}")
    if name == "fraction" and not (abs(r["budget"] - 0.01 * r["total"]) <= 2 * MiB and r["evictions"] > 0
                                   and r["kept_ok"]):
        f.append(f"fraction: {r}")
    if name == "device" and not ("device 1" in (r["error"] or "") and "serves device 0" in (r["error"] or "")):
        f.append(f"device: a tensor on cuda:1 gave {r['error']!r}")
    if name == "cupy_oom" and "gpuheap" not in (r["error"] or ""):
        f.append(f"cupy_oom: the array past both budgets gave {r['error']!r}")
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", choices=CASES, default=CASES, help="the cases to run (default: all)")
    ap.add_argument("--only", choices=CASES, help="one case in this process (internal)")
    ap.add_argument("--out", help="the case's JSON result (internal)")
    a = ap.parse_args()
    if a.only:
        torch = torch_or_skip("gpu_edges")
        r = globals()["case_" + a.only](torch)
        with open(a.out, "w") as f:
            json.dump(r, f)
        return 0
    torch_or_skip("gpu_edges")
    fails, results = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.cases:
            r, rc = run_child(__file__, ["--only", name], os.path.join(tmp, name + ".json"), f"gpu_edges: {name}", 300)
            if rc == SKIP:
                return SKIP
            if rc != 0:
                fails.append(f"{name}: the case's process failed")
                continue
            log(f"gpu_edges: {name}: {json.dumps(r)[:400]}")
            results[name] = r
            fails += check(name, r)
    return verdict("gpu_edges", fails, lambda: ", ".join(
        f"{n} {'skipped' if r.get('skipped') else 'ok'}" for n, r in results.items()))


if __name__ == "__main__":
    sys.exit(main())
