#!/usr/bin/env python3
"""Run 8 (a diagnosis): probe.py's ro_mid with the eager twin, where run 7
found gpuheap's compiled gradient of the first layer's weight wrong (from
step 4 on, by more than its own scale) while the other parameters'
matched the twin to rounding. Each step, after the forward, the tensors
the compiled forward saved for the backward (its autograd node's
saved_tensors) are copied; after the second function's call (steps >= 3)
and again just before the backward they are compared with their copies:
a saved tensor that changed was overwritten by memory handed to
something else. With GPUHEAP_POOL_LOG=1 the library logs every graph-pool
event, and the six torch._C functions graph trees call are wrapped to
log their calls, so that the log says which allocation took the memory.
Lines go to stderr in order; a summary line a step to stdout.

Run 9: --plain leaves the saved tensors alone (run 8's references to
them made both allocators run as they did not in run 7), and logs the
adopted blocks after the second function instead.

    GPUHEAP_POOL_LOG=1 GPUHEAP_LIBRARY=... PYTHONPATH=python python3 diag8.py gpuheap|torch [--plain]
"""
import json
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
import probe  # noqa: E402


def log(*a):
    print("diag:", *a, file=sys.stderr, flush=True)


def _saved(loss):
    """The saved tensors of the compiled function's backward node(s)."""
    out, seen, todo = [], set(), [loss.grad_fn]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if "CompiledFunction" in type(n).__name__:
            try:
                out.extend(t for t in n.saved_tensors if t is not None)
            except Exception as e:  # noqa: BLE001
                log("saved_tensors:", type(e).__name__, str(e)[:200])
        todo.extend(f for f, _ in n.next_functions)
    return out


def main():
    alloc = sys.argv[1]
    plain = "--plain" in sys.argv[2:]
    torch, _ = probe._setup(alloc)
    state = None
    if alloc == "gpuheap":
        import gpuheap
        lib = gpuheap.library()
        C = torch._C

        def wrap(name, show):
            f = getattr(C, name)

            def w(*a):
                r = f(*a)
                log(name, show(a, r))
                return r
            setattr(C, name, w)
        wrap("_cuda_checkPoolLiveAllocations", lambda a, r: f"pool {tuple(a[1])} {len(a[2])} ptrs -> {r}")
        wrap("_cuda_getCheckpointState", lambda a, r: f"pool {tuple(a[1])} -> {r!r}")
        wrap("_cuda_setCheckpointPoolState", lambda a, r: f"{a[1]!r} stale {len(a[2])} storages {len(a[3])}")
        wrap("_cuda_cudaCachingAllocator_raw_delete", lambda a, r: f"{a[0]:#x}")
        wrap("_free_And_Remove_DeleterFn", lambda a, r: f"{a[0]:#x}")
        state = lambda p: lib.gh_torch_pool_block_state(p)  # noqa: E731
    m = probe._net(torch)
    m2 = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
    import copy
    me = copy.deepcopy(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    cm, cm2 = torch.compile(m, mode="reduce-overhead"), torch.compile(m2, mode="reduce-overhead")
    g = torch.Generator(device="cuda").manual_seed(1)
    try:
        for step in range(8):
            x = torch.randn(512, 256, device="cuda", generator=g)
            t = torch.randint(0, 10, (512,), device="cuda", generator=g)
            log(f"STEP {step} forward")
            loss = torch.nn.functional.cross_entropy(cm(x), t)
            saved = [] if plain else _saved(loss)
            copies = [s.detach().clone() for s in saved]
            desc = [(hex(s.data_ptr()), s.untyped_storage().nbytes(), tuple(s.shape), str(s.dtype).split(".")[-1],
                     state(s.data_ptr()) if state else None) for s in saved]
            log(f"STEP {step} saved", desc)
            changed = {}
            if step >= 3:
                log(f"STEP {step} second function")
                with torch.no_grad():
                    float(cm2(x + step).double().sum().item())
                torch.cuda.synchronize()
                changed["after_cm2"] = [int((s != c).sum().item()) for s, c in zip(saved, copies)]
                if alloc == "gpuheap":
                    import gpuheap.torch as ght
                    ad = ght._GraphTrees.installed.adopted
                    changed["adopted"] = sorted(hex(p) for p in ad)
                    log(f"STEP {step} adopted", changed["adopted"])
            log(f"STEP {step} backward")
            changed["before_bwd"] = [int((s != c).sum().item()) for s, c in zip(saved, copies)]
            loss.backward()
            torch.nn.functional.cross_entropy(me(x), t).backward()
            gd = [float(((p.grad - q.grad).abs().max() / q.grad.abs().max()).item())
                  for p, q in zip(m.parameters(), me.parameters())]
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                for p, q in zip(m.parameters(), me.parameters()):
                    q.copy_(p)
                    q.grad = None
            del saved, copies
            line = {"alloc": alloc, "step": step, "saved": desc, "changed": changed,
                    "grad_diff": [f"{v:.2e}" for v in gd], "loss": float(loss.item()).hex()}
            log(f"STEP {step} done", json.dumps(line))
            print(json.dumps(line), flush=True)
        torch.cuda.synchronize()
        print(json.dumps({"alloc": alloc, "result": "ok"}), flush=True)
    except BaseException as e:  # noqa: BLE001
        print(json.dumps({"alloc": alloc, "result": probe._err(e)}), flush=True)


if __name__ == "__main__":
    main()
