#!/usr/bin/env python3
"""GPU test: gpuheap.torch.offload() at its defaults under the autograd
patterns that read saved tensors outside their own backward node.

Runs the same training steps twice, each in its own process: (plain)
PyTorch's own allocator, no offload; (gpuheap) gpuheap.torch.enable() with a
device budget of --budget-fraction of the plain run's peak and the forward
under gpuheap.torch.offload() with its defaults (quiet="auto", prefetches
ahead). The model (Linear layers of --width, a batch of --batch rows) has,
in order: plain layers; a region under non-reentrant activation
checkpointing and one under reentrant checkpointing (their recomputations
read the regions' inputs in backward); a skip connection kept in a Python
variable across them; a tensor hook that reads a kept activation during
backward; and a side branch whose saved tensors no backward unpacks. Each
step first asks torch.autograd.grad for the last layer's weight only
(retain_graph=True: the rest of the graph stays packed), then runs the full
backward over the same graph, then an SGD step.

A third run (room) is the gpuheap run with offload(prefetch_room=4): saved
tensors past the prefetch distance prefetched ahead where the budget has
room for them.

Checks: the losses, the partial gradients and the final parameters bitwise
equal in all three runs; the gpuheap run evicted and restored frames,
advised saved tensors quiet, prefetched some ahead, and met no
out-of-memory; the room run met no out-of-memory either.

  python3 python/tests/gpu_offload.py [--steps 4 --width 2048 --batch 2048]

Exit: 0 pass, 1 fail, 77 skipped (no PyTorch, no CUDA device, no libgpuheap).
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before torch is imported

from _child import PYDIR, SKIP, log, run as run_child, torch_or_skip, verdict  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-fraction", type=float, default=0.5, help="gpuheap's device budget / the plain peak")
    ap.add_argument("--time-limit", type=float, default=300, help="seconds per run")
    ap.add_argument("--only", choices=["plain", "gpuheap", "room"], help="one run in this process (internal)")
    ap.add_argument("--peak", type=int, default=0, help="the plain run's peak bytes (internal)")
    ap.add_argument("--out", help="the run's JSON result (internal)")
    return ap.parse_args(argv)


def digest(t):
    return hashlib.sha256(t.detach().contiguous().cpu().numpy().tobytes()).hexdigest()


def build(torch, a):
    nn = torch.nn
    from torch.utils.checkpoint import checkpoint

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            w = a.width
            self.inp = nn.Linear(w, w)
            self.pre = nn.ModuleList(nn.Linear(w, w) for _ in range(3))
            self.ck1 = nn.ModuleList(nn.Linear(w, w) for _ in range(2))  # non-reentrant checkpoint
            self.ck2 = nn.ModuleList(nn.Linear(w, w) for _ in range(2))  # reentrant checkpoint
            self.post = nn.ModuleList(nn.Linear(w, w) for _ in range(3))
            self.side = nn.Linear(w, w)
            self.head = nn.Linear(w, 16)

        @staticmethod
        def region(layers, h):
            for lin in layers:
                h = torch.relu(lin(h))
            return h

        def forward(self, x):
            h = torch.relu(self.inp(x))
            skip = h  # a Python reference across the regions: never quiet, never ahead
            for lin in self.pre:
                h = torch.relu(lin(h))
            kept = h  # read by the hook below during backward, outside any node
            h = checkpoint(self.region, self.ck1, h, use_reentrant=False)
            h = checkpoint(self.region, self.ck2, h, use_reentrant=True)
            if h.requires_grad:
                h.register_hook(lambda g: g * (1.0 + kept.mean()))
            side = torch.sigmoid(self.side(h)).sum()  # saved tensors no backward unpacks
            for lin in self.post:
                h = torch.relu(lin(h))
            h = h + skip
            return self.head(h).square().mean(), side

    return Net()


def child(a):
    torch = torch_or_skip("gpu_offload")
    m = ght = None
    if a.only in ("gpuheap", "room"):
        sys.path.insert(0, PYDIR)
        import gpuheap
        import gpuheap.torch as ght
        try:
            gpuheap.library()
        except gpuheap.Error as e:
            log(f"gpu_offload[{a.only}]: skipped: {e}")
            sys.exit(SKIP)
        if a.peak <= 0:
            raise SystemExit("--peak is needed for the gpuheap run")
        m = ght.enable(device_budget=max(2 << 20, int(a.peak * a.budget_fraction)), host_budget=2 * a.peak + (1 << 30))
        ooms = []
        m.set_oom_observer(lambda n, st: ooms.append(n))
        log(f"gpu_offload[{a.only}]: device budget {m.stats()['device_budget'] / 2**20:.0f} MiB")
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda")
    model = build(torch, a).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(a.seed + 1)
    xs = [torch.randn(a.batch, a.width, generator=g).to(dev) for _ in range(2)]
    off = None
    if m is not None:
        ght.mark_model(model, opt)
        off = ght.offload(prefetch_room=4) if a.only == "room" else ght.offload()  # the defaults under test
    out = {"losses": [], "partial": [], "oom": False}
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        x = xs[step % len(xs)]
        if off is not None:
            with off:
                loss, side = model(x)
        else:
            loss, side = model(x)
        del side  # its graph goes unread
        (gw,) = torch.autograd.grad(loss, [model.head.weight], retain_graph=True)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item().hex())
        out["partial"].append(digest(gw))
        extra = ""
        if m is not None:
            s = m.stats()
            extra = f", evictions {s['evictions']} restores {s['restores']}"
        log(f"gpu_offload[{a.only}] step {step}: loss {loss.item():.6e}{extra}")
        del loss, gw
    torch.cuda.synchronize()
    out["params"] = [digest(p) for p in model.parameters()]
    if m is None:
        out["peak"] = torch.cuda.max_memory_allocated()
    else:
        s = m.stats()
        out["stats"] = {k: s[k] for k in ("evictions", "restores", "oom_events", "device_budget")}
        out["oom"] = s["oom_events"] > 0 or bool(ooms)
        out["offload"] = dict(off.counters)
        log(f"gpu_offload[{a.only}]: offload counters {json.dumps(off.counters)}")
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


def run(a, which, tmp, peak=0):
    log(f"gpu_offload: run {which}")
    args = ["--only", which, "--steps", a.steps, "--width", a.width, "--batch", a.batch, "--seed", a.seed,
            "--budget-fraction", a.budget_fraction, "--peak", peak]
    return run_child(__file__, args, os.path.join(tmp, which + ".json"), f"gpu_offload: {which}", a.time_limit)


def parent(a):
    torch_or_skip("gpu_offload")
    with tempfile.TemporaryDirectory() as tmp:
        plain, rc = run(a, "plain", tmp)
        if rc:
            return rc
        gh, rc = run(a, "gpuheap", tmp, plain["peak"])
        if rc:
            return rc
        room, rc = run(a, "room", tmp, plain["peak"])
        if rc:
            return rc
    fails = []
    for key in ("losses", "partial", "params"):
        for name, r in (("gpuheap", gh), ("room", room)):
            if plain[key] != r[key]:
                fails.append(f"{key} differ between the plain and the {name} run")
    if room["oom"]:
        fails.append("the room run met an out-of-memory")
    st, c = gh["stats"], gh["offload"]
    if st["evictions"] <= 0 or st["restores"] <= 0:
        fails.append(f"the gpuheap run moved too little (evictions {st['evictions']}, restores {st['restores']}): "
                     "lower --budget-fraction")
    if c["quieted"] + c["quieted_forward"] <= 0:
        fails.append("no saved tensor was advised quiet (quiet='auto' off?)")
    if c["prefetched_ahead"] <= 0:
        fails.append("no saved tensor was prefetched ahead")
    if gh["oom"]:
        fails.append("the gpuheap run met an out-of-memory")
    return verdict("gpu_offload", fails,
                   lambda: f"{a.steps} steps bitwise equal (losses, partial gradients, parameters); "
                   f"budget {st['device_budget'] >> 20} MiB of a {plain['peak'] >> 20} MiB peak, {st['evictions']} "
                   f"frames evicted, {st['restores']} restored; quiet {c['quieted']} + {c['quieted_forward']} in "
                   f"forward, ahead {c['prefetched_ahead']}; with prefetch_room=4 bitwise equal too, "
                   f"{room['offload']['prefetched_room']} prefetched where there was room")


def main(argv=None):
    a = parse_args(argv)
    return child(a) if a.only else parent(a)


if __name__ == "__main__":
    sys.exit(main())
