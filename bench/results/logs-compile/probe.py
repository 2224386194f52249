#!/usr/bin/env python3
"""Probe (device visit 33): two PyTorch features that CUDAPluggableAllocator
users report broken -- torch.backends.cudnn.benchmark (PyTorch asks the
allocator for cacheInfo) and torch.compile(mode="reduce-overhead")
(CUDA graph trees ask for checkPoolLiveAllocations and the checkpoint
state) -- on PyTorch's allocator and on gpuheap, and, for
reduce-overhead, on gpuheap with the three torch._C entry points replaced
by stand-ins that only log their calls (whether the rest of the trees'
protocol then works, and which of the three a run reaches). Each probe
runs in a process of its own; one JSON line a probe. Run 2 adds the
same probes on gpuheap's own answers (no stand-ins) and ro_live: a
replay's output held while another compiled function records into the
pool. Run 3 adds ro_mid: another compiled function run while a replayed
forward's saved activations are alive; run 6 the same eager (a reference
for the losses) and on PyTorch's allocator with the trees' allocation
history (what its check found).

    GPUHEAP_LIBRARY=build-gpu/libgpuheap.so PYTHONPATH=python python3 probe.py [name ...]
"""
import json
import subprocess
import sys


def _err(e):
    return f"{type(e).__module__}.{type(e).__name__}: {str(e)[:400]}"


def _setup(alloc, stub=False):
    import torch
    calls = []
    if alloc == "gpuheap":
        import gpuheap.torch as ght
        ght.enable()
        if stub:
            C = torch._C

            def check(device, pool, live):
                calls.append(["checkPoolLiveAllocations", list(pool), len(live)])
                return True

            def get_state(device, pool):
                calls.append(["getCheckpointState", list(pool)])
                return ("stub", tuple(pool))

            def set_state(device, state, stale, add_deleters):
                calls.append(["setCheckpointPoolState", len(stale), len(add_deleters)])
                raise RuntimeError("stub: setCheckpointPoolState")

            C._cuda_checkPoolLiveAllocations = check
            C._cuda_getCheckpointState = get_state
            C._cuda_setCheckpointPoolState = set_state
    return torch, calls


def _cudnn(alloc):
    torch, _ = _setup(alloc)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(32, 32, 3, padding=1)).cuda()
    x = torch.randn(16, 3, 64, 64, device="cuda")
    out = {}
    try:
        y = m(x)
        y.square().mean().backward()
        torch.cuda.synchronize()
        out["result"] = "ok"
        out["sum"] = float(y.double().sum().item())
    except BaseException as e:
        out["result"] = _err(e)
    return out


def _net(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                               torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()


def _tree_counts(torch, out):
    from torch._dynamo.utils import counters
    out["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"])
    try:
        import torch._inductor.cudagraph_trees as ct
        mgr = ct.get_manager(0, create_if_none_exists=False)
        if mgr is not None:
            out["graphs"] = next(mgr.graph_counter)
            out["checkpoints"] = mgr.debug_checkpointing_counter
    except BaseException as e:
        out["tree"] = _err(e)


def _tail(torch, alloc, out):
    """What every reduce-overhead probe reports at its end: the trees'
    counts, and gpuheap's graph pools."""
    _tree_counts(torch, out)
    if alloc == "gpuheap":
        import gpuheap.torch as ght
        out["graph_pools"] = ght.graph_pools()


def _ro(alloc, stub, what):
    torch, calls = _setup(alloc, stub)
    m = _net(torch)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    cm = torch.compile(m, mode="reduce-overhead")
    g = torch.Generator(device="cuda").manual_seed(1)
    out = {"losses": []}
    try:
        for step in range(8):
            x = torch.randn(512, 256, device="cuda", generator=g)
            t = torch.randint(0, 10, (512,), device="cuda", generator=g)
            if what == "infer":
                with torch.no_grad():
                    out["losses"].append(float(cm(x).double().sum().item()).hex())
                continue
            loss = torch.nn.functional.cross_entropy(cm(x), t)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            out["losses"].append(float(loss.item()).hex())
            if what == "train_eval" and step >= 3:
                with torch.no_grad():
                    out.setdefault("eval", []).append(float(cm(x).double().sum().item()).hex())
        torch.cuda.synchronize()
        out["result"] = "ok"
    except BaseException as e:
        out["result"] = _err(e)
    _tail(torch, alloc, out)
    out["calls"] = calls[:12]
    out["n_calls"] = len(calls)
    return out


def _live(alloc):
    """A replay's output held while another compiled function is warmed up
    and recorded into the same pool (the trees' checkpoint restore names
    that output's storage): it must keep its values."""
    torch, calls = _setup(alloc)
    m = _net(torch)
    m2 = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
    cm, cm2 = torch.compile(m, mode="reduce-overhead"), torch.compile(m2, mode="reduce-overhead")
    g = torch.Generator(device="cuda").manual_seed(1)
    out = {}
    try:
        with torch.no_grad():
            x = torch.randn(512, 256, device="cuda", generator=g)
            for _ in range(3):
                y = cm(x)                      # warm-up, recording, then a replay
            keep = y.clone()
            ref2 = m2(x)
            for i in range(4):                 # cm2 warmed up and recorded while y lives
                z = cm2(x + i)
                out.setdefault("m2_diff", []).append(float((z - m2(x + i)).abs().max().item()))
                del z
            torch.cuda.synchronize()
            out["y_changed"] = int((y != keep).sum().item())
            out["m2_ref"] = float(ref2.double().sum().item())
        out["result"] = "ok"
    except BaseException as e:
        out["result"] = _err(e)
    _tail(torch, alloc, out)
    if alloc == "gpuheap":
        import gpuheap.torch as ght
        t = ght._GraphTrees.installed
        out["adopted_now"] = None if t is None else len(t.adopted)
    return out


def _mid(alloc, compiled=True, history=False, twin=False):
    """Training whose forward, once replayed, still has its saved
    activations alive (the loss not yet backpropagated) when another
    compiled function runs for the first times: the trees' checkpoint
    restore names the forward's live outputs (gpuheap adopts their blocks),
    the other function is warmed up and recorded into the pool, and the
    backward then reads the saved activations. Losses a step and the other
    function's outputs, to compare across allocators. twin: an eager copy
    of the network trained beside it on the same batches; each step, the
    largest difference between the two networks' gradients over the
    gradient's largest magnitude, per parameter (0 where bit for bit
    equal), then the copy's weights set to the compiled one's, so that
    each step's figure is that step's own."""
    torch, _ = _setup(alloc)
    if history:  # the trees record each pool allocation's stack, for their error's detail
        import torch._inductor.config as icfg
        icfg.triton.cudagraph_trees_history_recording = True
    m = _net(torch)
    m2 = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
    if twin:
        import copy
        me = copy.deepcopy(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    if compiled:
        cm, cm2 = torch.compile(m, mode="reduce-overhead"), torch.compile(m2, mode="reduce-overhead")
    else:  # the reference: the same program eager (float rounding differs from Inductor's kernels)
        cm, cm2 = m, m2
    g = torch.Generator(device="cuda").manual_seed(1)
    out = {"losses": [], "other": [], "adopted": [], "grad_diff": []}
    try:
        for step in range(8):
            x = torch.randn(512, 256, device="cuda", generator=g)
            t = torch.randint(0, 10, (512,), device="cuda", generator=g)
            loss = torch.nn.functional.cross_entropy(cm(x), t)
            if step >= 3:
                with torch.no_grad():
                    out["other"].append(float(cm2(x + step).double().sum().item()).hex())
                if alloc == "gpuheap":
                    import gpuheap.torch as ght
                    out["adopted"].append(len(ght._GraphTrees.installed.adopted))
            loss.backward()
            if twin:
                torch.nn.functional.cross_entropy(me(x), t).backward()
                out["grad_diff"].append([float(((p.grad - q.grad).abs().max() / q.grad.abs().max()).item())
                                         for p, q in zip(m.parameters(), me.parameters())])
            opt.step()
            opt.zero_grad(set_to_none=True)
            if twin:
                with torch.no_grad():
                    for p, q in zip(m.parameters(), me.parameters()):
                        q.copy_(p)
                        q.grad = None
            out["losses"].append(float(loss.item()).hex())
        torch.cuda.synchronize()
        out["result"] = "ok"
    except BaseException as e:
        out["result"] = _err(e)
        if history:
            out["detail"] = str(e)[:6000]
    _tail(torch, alloc, out)
    return out


PROBES = {
    "cudnn_benchmark_torch": lambda: _cudnn("torch"),
    "cudnn_benchmark_gpuheap": lambda: _cudnn("gpuheap"),
    "ro_infer_torch": lambda: _ro("torch", False, "infer"),
    "ro_infer_stub": lambda: _ro("gpuheap", True, "infer"),
    "ro_train_torch": lambda: _ro("torch", False, "train"),
    "ro_train_gpuheap": lambda: _ro("gpuheap", False, "train"),
    "ro_train_stub": lambda: _ro("gpuheap", True, "train"),
    "ro_train_eval_torch": lambda: _ro("torch", False, "train_eval"),
    "ro_train_eval_stub": lambda: _ro("gpuheap", True, "train_eval"),
    # run 2: gpuheap's own answers (gpuheap.torch.enable's cacheInfo and graph-tree stand-ins)
    "ro_infer_gpuheap": lambda: _ro("gpuheap", False, "infer"),
    "ro_train_eval_gpuheap": lambda: _ro("gpuheap", False, "train_eval"),
    "ro_live_torch": lambda: _live("torch"),
    "ro_live_gpuheap": lambda: _live("gpuheap"),
    # run 3 (prepared): a restore that names live storages
    "ro_mid_torch": lambda: _mid("torch"),
    "ro_mid_gpuheap": lambda: _mid("gpuheap"),
    "ro_mid_eager": lambda: _mid("torch", compiled=False),
    "ro_mid_torch_history": lambda: _mid("torch", history=True),
    "ro_mid_twin_gpuheap": lambda: _mid("gpuheap", twin=True),
    "ro_mid_twin_torch": lambda: _mid("torch", twin=True),
}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print("RESULT " + json.dumps(PROBES[sys.argv[2]]()), flush=True)
        return
    for name in sys.argv[1:] or PROBES:
        try:
            r = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, timeout=150)
            res = [l[7:] for l in r.stdout.splitlines() if l.startswith("RESULT ")]
            line = {"probe": name, "rc": r.returncode,
                    "out": json.loads(res[0]) if res else None,
                    "stderr_tail": r.stderr.strip().splitlines()[-8:] if r.stderr.strip() else []}
        except subprocess.TimeoutExpired:
            line = {"probe": name, "rc": "timeout"}
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
