#!/usr/bin/env python3
"""GPU test: train a small ResNet-style CNN on synthetic images three ways,
each in its own process, and check that gpuheap changes nothing but memory.

  (a) default               PyTorch's caching allocator; records its peak
                            (torch.cuda.max_memory_allocated)
  (b) gpuheap               gpuheap.torch.enable(), no device budget limit
  (c) gpuheap_half_offload  gpuheap.torch.enable(device_budget = half of (a)'s
                            peak), gpuheap.torch.offload(mode=--offload-mode,
                            "cold" by default) around the forward pass
  (d) save_on_cpu           with --reference-csv only: PyTorch's own offload,
                            torch.autograd.graph.save_on_cpu(pin_memory=True)
                            around the forward pass, on the default allocator
                            (every saved tensor copied to pinned host memory
                            and back; no budget): what (c) is compared with
  (f) transfer_floor        with --floor only: (a) plus, on a stream of its
                            own, the copies that any offload at (c)'s budget
                            must make, at the earliest moments they could run
                            and with nothing else in their way: (a)'s peak
                            less (c)'s budget out to pinned host memory from
                            the start of the forward, back from the start of
                            the backward once out, awaited before step().
                            A lower bound on (c)'s step on this machine
                            (every byte above the budget at the peak leaves
                            during the forward and comes back during the
                            backward: PCIe one way each)

Checks: the losses of (b) and (c) equal (a)'s bit for bit at every step;
(c) evicted frames (evictions > 0) and met no out-of-memory. Determinism:
torch.manual_seed, cudnn.deterministic, benchmark off,
torch.use_deterministic_algorithms(True) with CUBLAS_WORKSPACE_CONFIG=:4096:8
set before torch is imported; synthetic data from a seeded CPU generator.

  python3 python/tests/gpu_train.py --steps 20 --csv bench/results/torch-h200.csv

CSV rows (header included): config,ms_per_step,device_budget_gib,
bytes_moved_per_step,loss_last; config is a, b or c (the log names them as
above). device_budget_gib: for (a) (and (d), (f)) the card's memory,
for (b) and (c) the manager's device budget. ms_per_step: mean over the
steps after --warmup, synchronized. bytes_moved_per_step: gpuheap's
bytes_evicted + bytes_restored over those steps, per step (0 for (a)).
--reference-csv writes (a) and (d) in the same form; (d)'s bytes moved are
twice the bytes of the CUDA tensors its pack hook copied out. With --floor,
(f)'s row goes there too (bytes moved: twice (a)'s peak less (c)'s budget).

Exit: 0 pass, 1 fail, 77 skipped (no torch, no CUDA device, no libgpuheap).
Every line of progress is flushed; each child runs under --time-limit.
"""
import argparse
import csv
import json
import os
import sys
import tempfile
import time

from _child import PYDIR, SKIP, log, run, torch_or_skip, verdict

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before torch is imported

CONFIGS = {"a": "default", "b": "gpuheap", "c": "gpuheap_half_offload", "d": "save_on_cpu", "f": "transfer_floor"}  # CSV: the letter; log: the name


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="training steps per config")
    ap.add_argument("--warmup", type=int, default=2, help="steps left out of the timing")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--image", type=int, default=96, help="image side, pixels")
    ap.add_argument("--width", type=int, default=64, help="channels of the first stage")
    ap.add_argument("--blocks", type=int, default=2, help="residual blocks per stage (3 stages)")
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefetch-distance", type=int, help="(c): offload(prefetch_distance=); default: offload()'s")
    ap.add_argument("--offload-mode", choices=["cold", "evict"], default="cold",
                    help="(c): gpuheap.torch.offload's mode (cold: advise, evict under pressure; evict: at once)")
    ap.add_argument("--budget-fraction", type=float, default=0.5, help="(c)'s device budget / (a)'s peak")
    ap.add_argument("--profile", action="store_true", help="run the timed steps under torch.profiler and print "
                    "where the time goes (device time of the kernels, host time of the operators; internal)")
    ap.add_argument("--trace", help="with --profile: write the Chrome trace here and print the GPU's busy time "
                    "a step (the union of its kernels and copies) against the step's wall time")
    ap.add_argument("--gpu-only", action="store_true", help="with --profile: record the GPU's activity only (the "
                    "host slowed far less; no operator tables) and mark each timed step's forward, backward and "
                    "optimizer on the GPU with a marker kernel, so that --trace splits the time by phase")
    ap.add_argument("--model-prefetch", nargs="?", const="all", choices=["all", "step"],
                    help="(b), (c): mark_model(prefetch=True) (all, the value when none is given): weights and "
                    "optimizer memory the manager evicted are brought back before forward and step(); "
                    "step: mark_model(prefetch='step'), before step() only")
    ap.add_argument("--offload-state", action="store_true", help="(b), (c): mark_model(offload_state=True): the "
                    "optimizer's state evicted ahead (or advised quiet) after each step() and brought back before the "
                    "next (with --model-prefetch step, the parameters and gradients too)")
    ap.add_argument("--pin-state", action="store_true", help="(b), (c): pin the optimizer's state (gpuheap.torch.pin) "
                    "after the first step(), so that it stays on the device (bench/NOTES.md, host side, row 125)")
    ap.add_argument("--quiet", action="store_true", help="(c): offload(quiet=True)")
    ap.add_argument("--quiet-auto", action="store_true", help="(c): offload(quiet='auto'), the default: saved "
                    "tensors only autograd reaches are advised quiet (evicted homeless)")
    ap.add_argument("--no-quiet", action="store_true", help="(c): offload(quiet=False)")
    ap.add_argument("--no-prefetch-ahead", action="store_true", help="(c): offload(prefetch_ahead=False)")
    ap.add_argument("--keep-last", type=int, default=2, help="(c): offload(keep_last=)")
    ap.add_argument("--prefetch-room", type=int, default=0, help="(c): offload(prefetch_room=): saved tensors past "
                    "the distance prefetched ahead where the budget has room (bench/NOTES.md, host side, row 127)")
    ap.add_argument("--room-reserve", help="(c): offload(room_reserve=), bytes or a size (default: offload()'s)")
    ap.add_argument("--no-offload", action="store_true", help="(c): no offload context (the budget only)")
    ap.add_argument("--no-unpack-weights", action="store_true", help="(c): offload(prefetch_weights=False)")
    ap.add_argument("--host-ops", action="store_true", help="(c): run the last step under a dispatch mode that "
                    "counts, per operator, the calls with an input in host memory as the kernel is queued "
                    "(moves wait for queued work, so that is where the kernel finds it), and print them")
    ap.add_argument("--low-watermark", type=float, help="(c)'s eviction target, a fraction of the budget "
                    "(default: the library's)")
    ap.add_argument("--phases", action="store_true", help="time forward, backward and the optimizer step on the GPU "
                    "(CUDA events on the current stream) and report their ms a step; also the host's ms in each "
                    "(to the step's end, after loss.item()) and, with GPUHEAP_CALL_TIMES=1, the manager's calls "
                    "and physical-memory time in each")
    ap.add_argument("--hook-times", action="store_true", help="(c): time the offload hooks on the host (pack, "
                    "unpack and the methods they call, inclusive) and report their ms a step")
    ap.add_argument("--csv", help="write the three rows here (e.g. bench/results/torch-h200.csv)")
    ap.add_argument("--reference-csv", help="also run (d), PyTorch's own offload (save_on_cpu), and write the "
                    "rows of (a) and (d) here")
    ap.add_argument("--floor", action="store_true", help="also run (f), the transfer floor: (a) with the copies any "
                    "offload at (c)'s budget must make, on a stream of their own (rows of --reference-csv too)")
    ap.add_argument("--snapshot-dir", help="(c): write the frame map at the end of a forward (json, html, png)")
    ap.add_argument("--time-limit", type=float, default=300, help="seconds per config process")
    ap.add_argument("--only", choices=sorted(CONFIGS), help="run one config in this process (internal)")
    ap.add_argument("--peak", type=int, default=0, help="(a)'s peak bytes, for (c) (internal)")
    ap.add_argument("--out", help="the child's JSON result (with --only: optional)")
    return ap


def parse_args(argv=None):
    return parser().parse_args(argv)


# The kinds of call _gh_tmgr_call_times reports, in its order; of the
# provider's calls _gh_tmgr_op_times reports ("pmu_wait": waits for the
# provider's mutex); and of the host's waits for the GPU by the rule that
# made them, _gh_tmgr_wait_times (host/tensor_internal.h).
CALL_KINDS = ("alloc", "free", "advise", "prefetch", "prefetch_ahead", "prefetch_many", "evict", "other")
OP_KINDS = ("copy", "event_record", "event_query", "event_sync", "event_destroy", "stream_sync", "stream_wait",
            "other", "pmu_wait")
WAIT_KINDS = ("drain", "quiet", "spare", "ordered", "users", "move", "frees", "reclaim", "other")


def call_times(m):
    """With GPUHEAP_CALL_TIMES=1 (set before the manager is made): the
    manager's public calls so far and their host time in ms, by kind
    (_gh_tmgr_call_times, from entry to exit), and its provider calls other
    than the physical-memory ones, with "op_" before their kinds
    (_gh_tmgr_op_times), and the host's waits for the GPU by rule, with
    "wait_" before theirs (_gh_tmgr_wait_times, left out by a library
    without it); {} otherwise."""
    if m is None or os.environ.get("GPUHEAP_CALL_TIMES") != "1":
        return {}
    import ctypes
    import gpuheap
    out = {}
    for fn, kinds, prefix in (("_gh_tmgr_call_times", CALL_KINDS, ""), ("_gh_tmgr_op_times", OP_KINDS, "op_"),
                              ("_gh_tmgr_wait_times", WAIT_KINDS, "wait_")):
        f = getattr(gpuheap.library().cdll, fn, None)
        if f is None and prefix == "wait_":
            continue
        n, ns = (ctypes.c_uint64 * len(kinds))(), (ctypes.c_uint64 * len(kinds))()
        if f is None or f(ctypes.c_void_p(m.handle), n, ns) != 0:
            return {}
        out.update({prefix + k: (n[i], ns[i] * 1e-6) for i, k in enumerate(kinds)})
    return out


CLEAN_KINDS = ("cleaned", "evicted_clean", "dropped", "left_unclean")


def clean_counts(m):
    """With GPUHEAP_CLEAN set (host/tensor_move.c, "cleaning"): the frames
    cleaned so far, evicted clean, whose clean copy was dropped, and left
    unclean (_gh_tmgr_clean_counts); {} otherwise."""
    if m is None or not os.environ.get("GPUHEAP_CLEAN"):
        return {}
    import ctypes
    import gpuheap
    f = getattr(gpuheap.library().cdll, "_gh_tmgr_clean_counts", None)
    n = (ctypes.c_uint64 * 4)()
    if f is None or f(ctypes.c_void_p(m.handle), n, None, None) != 0:
        return {}
    return {k: n[i] for i, k in enumerate(CLEAN_KINDS)}


def vmm_ms(m):
    """With GPUHEAP_CALL_TIMES=1, the manager's physical-memory calls'
    time so far, ms; None otherwise (or without a manager)."""
    if m is None or os.environ.get("GPUHEAP_CALL_TIMES") != "1":
        return None
    return sum(m.stats().get("vmm_ns", {}).values()) * 1e-6


def host_mark(m):
    """--phases: the host's clock, call_times(m) and vmm_ms(m) now."""
    return time.perf_counter(), call_times(m), vmm_ms(m)


def host_phase_add(acc, marks):
    """--phases: add one step's host time by phase to acc ({phase: {what:
    ms}}); marks: (clock, call_times, vmm_ms) at the start of forward,
    backward, optimizer and at the step's end. Per phase: "host" (the
    wall time), "vmm" (physical-memory calls) and each kind of call whose
    time grew."""
    for i, k in enumerate(PHASES):
        (t0, c0, v0), (t1, c1, v1) = marks[i], marks[i + 1]
        d = acc.setdefault(k, {})
        d["host"] = d.get("host", 0.0) + (t1 - t0) * 1e3
        if v0 is not None and v1 is not None:
            d["vmm"] = d.get("vmm", 0.0) + v1 - v0
        for c in c1:
            x = c1[c][1] - c0.get(c, (0, 0.0))[1]
            if x > 0:
                d[c] = d.get(c, 0.0) + x


def counting_pack(inner, counter):
    """(d): a pack hook that adds the bytes of each CUDA tensor it is given
    to counter[0], then packs it with `inner` (save_on_cpu's own hook)."""
    def pack(t):
        if t.is_cuda:
            counter[0] += t.numel() * t.element_size()
        return inner(t)
    return pack


def budget_bytes(peak, fraction):
    """(c)'s device budget: `fraction` of (a)'s peak, at least one frame."""
    return max(2 << 20, int(peak * fraction))


class FloorCopies:
    """(f): the bytes above (c)'s budget at (a)'s peak, copied to pinned host
    memory on a stream of their own from the start of each forward, and back
    from the start of the backward (after the copy out: one stream, as PCIe
    carries them one way at a time in any offload: restores need the room
    that evictions made); the step waits for them before step(). Nothing else
    waits for them, so this is the least any offload at that budget adds."""

    def __init__(self, torch, nbytes):
        self.torch, self.nbytes = torch, nbytes
        self.dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        self.host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        self.stream = torch.cuda.Stream()

    def _copy(self, dst, src):
        self.stream.wait_stream(self.torch.cuda.current_stream())
        with self.torch.cuda.stream(self.stream):
            dst.copy_(src, non_blocking=True)

    def forward_start(self):
        self._copy(self.host, self.dev)

    def backward_start(self):
        self._copy(self.dev, self.host)

    def backward_end(self):
        self.torch.cuda.current_stream().wait_stream(self.stream)


# The Offload methods --hook-times times (inclusive: a method's time
# includes the timed methods it calls).
HOOK_METHODS = ("pack", "unpack", "_quiet_scan", "_start_backward", "_quiet_alone", "_is_alone", "_hint")


def time_hooks(off, acc, names=HOOK_METHODS):
    """--hook-times: wrap off's methods `names` (instance attributes, so
    that saved_tensors_hooks and the methods' own calls go through them)
    with timers adding [calls, seconds] to acc[name]."""
    for name in names:
        def timed(*args, _f=getattr(off, name), _c=acc.setdefault(name, [0, 0.0]), **kw):
            t = time.perf_counter()
            try:
                return _f(*args, **kw)
            finally:
                _c[0] += 1
                _c[1] += time.perf_counter() - t
        setattr(off, name, timed)


# ---------------------------------------------------------------- the model
def build(torch, a):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return F.relu(y + (x if self.short is None else self.short(x)))

    class Net(nn.Module):
        # No max pooling and no adaptive pooling: their CUDA backward passes
        # have no deterministic implementation.
        def __init__(self):
            super().__init__()
            w = a.width
            self.stem = nn.Sequential(nn.Conv2d(3, w, 3, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU())
            layers, cin = [], w
            for i, cout in enumerate((w, 2 * w, 4 * w)):
                for j in range(a.blocks):
                    layers.append(Block(cin, cout, 2 if (j == 0 and i > 0) else 1))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, a.classes)

        def forward(self, x):
            return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))

    return Net()


def data(torch, a, n=4):
    g = torch.Generator().manual_seed(a.seed + 1)
    xs = [torch.randn(a.batch, 3, a.image, a.image, generator=g) for _ in range(n)]
    ys = [torch.randint(0, a.classes, (a.batch,), generator=g) for _ in range(n)]
    return xs, ys


# ---------------------------------------------------------------- one config
def child(a):
    cfg = a.only
    torch = torch_or_skip("gpu_train")
    sys.path.insert(0, PYDIR)
    result = {"config": cfg, "name": CONFIGS[cfg], "losses": [], "steps_done": 0, "oom": False}
    m = None
    if cfg in ("b", "c"):
        import gpuheap
        import gpuheap.torch as ght
        try:
            gpuheap.library()
        except gpuheap.Error as e:
            log(f"gpu_train[{cfg}]: skipped: {e}")
            sys.exit(SKIP)
        kw = {}
        if cfg == "c":
            if a.peak <= 0:
                raise SystemExit("--peak is needed for config c")
            kw["device_budget"] = budget_bytes(a.peak, a.budget_fraction)
            # The default host budget (half the device budget) cannot hold what
            # the device budget leaves out: give the host the whole peak and more.
            kw["host_budget"] = 2 * a.peak + (1 << 30)
            if a.low_watermark is not None:
                kw["low_watermark"] = a.low_watermark
        m = ght.enable(**kw)
        ooms = []
        m.set_oom_observer(lambda n, st: ooms.append(n))
        log(f"gpu_train[{cfg}]: gpuheap from {gpuheap.library_path()}, device budget "
            f"{m.stats()['device_budget'] / 2**30:.3f} GiB, host budget {m.stats()['host_budget'] / 2**30:.3f} GiB")

    torch.manual_seed(a.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda")
    model = build(torch, a).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    xs, ys = data(torch, a)
    xs = [x.to(dev) for x in xs]
    ys = [y.to(dev) for y in ys]
    off = marks = None
    if m is not None:
        marks = ght.mark_model(model, opt, prefetch={None: False, "all": True, "step": "step"}[a.model_prefetch],
                               offload_state=a.offload_state)
    if cfg == "c" and not a.no_offload:
        quiet = False if a.no_quiet else True if a.quiet else "auto"
        kw = {} if a.prefetch_distance is None else {"prefetch_distance": a.prefetch_distance}
        if a.prefetch_room:
            kw["prefetch_room"] = a.prefetch_room
        if a.room_reserve is not None:
            kw["room_reserve"] = a.room_reserve
        off = ght.offload(mode=a.offload_mode, keep_last=a.keep_last, prefetch_weights=not a.no_unpack_weights,
                          quiet=quiet, prefetch_ahead=not a.no_prefetch_ahead, **kw)
    hook_acc = {}  # --hook-times: [calls, seconds] by method
    if a.hook_times and cfg == "c" and off is not None:
        time_hooks(off, hook_acc)
    packed = [0]  # (d): bytes of CUDA tensors copied out by save_on_cpu's pack hook
    if cfg == "d":
        off = torch.autograd.graph.save_on_cpu(pin_memory=True)
        off.pack_hook = counting_pack(off.pack_hook, packed)
    floor = None
    if cfg == "f":
        if a.peak <= 0:
            raise SystemExit("--peak is needed for config f")
        floor = FloorCopies(torch, max(0, a.peak - budget_bytes(a.peak, a.budget_fraction)))
        log(f"gpu_train[f]: {floor.nbytes / 2**30:.3f} GiB out in each forward and back in each backward")
    crit = torch.nn.CrossEntropyLoss()

    t_start = time.monotonic()
    t0 = None
    moved0 = 0
    packed0 = 0
    s0 = {}
    c0 = {}
    k0 = {}
    dev_max = 0
    snap_taken = False
    snap_s = 0.0
    phases = {}  # --phases: GPU ms by phase over the timed steps
    host_phases = {}  # --phases: the host's ms by phase, and (GPUHEAP_CALL_TIMES=1) the manager's calls in each
    t_step = time.perf_counter()
    for step in range(a.steps):
        if time.monotonic() - t_start > a.time_limit:
            log(f"gpu_train[{cfg}]: time limit reached after {step} steps")
            break
        if step == a.warmup:
            torch.cuda.synchronize()
            if a.profile:
                acts = [torch.profiler.ProfilerActivity.CUDA]
                if not a.gpu_only:
                    acts.insert(0, torch.profiler.ProfilerActivity.CPU)
                prof = torch.profiler.profile(activities=acts)
                prof.__enter__()
            t0 = time.perf_counter()
            packed0 = packed[0]
            for c in hook_acc.values():  # the timed steps only
                c[0], c[1] = 0, 0.0
            if m is not None:
                s0 = m.stats()
                moved0 = s0["bytes_evicted"] + s0["bytes_restored"]
                c0 = call_times(m)
                k0 = clean_counts(m)
        x, y = xs[step % len(xs)], ys[step % len(ys)]
        opt.zero_grad(set_to_none=True)
        evs = [torch.cuda.Event(enable_timing=True) for _ in range(4)] if a.phases else None
        marks_h = [] if evs and step >= a.warmup else None  # host_mark at each phase's start and the step's end
        mark = a.profile and a.gpu_only and t0 is not None  # --gpu-only: phases marked on the GPU

        def edge(i, sync=None):
            """The start of phase i (PHASES; 3: the step's end, after sync()):
            its CUDA event, the host's marks and the marker kernel."""
            if evs:
                evs[i].record()
            r = sync() if sync else None
            if marks_h is not None:
                marks_h.append(host_mark(m))
            if mark and i < len(PHASES):
                torch.cuda._sleep(0)  # the marker kernel (PHASE_MARK)
            return r
        edge(0)
        if floor is not None:
            floor.forward_start()
        mode = None
        if a.host_ops and m is not None and step == a.steps - 1:
            mode, host_counts = host_ops_mode(torch, m)
            mode.__enter__()
        try:
            if off is not None:
                with off:
                    out = model(x)
                    loss = crit(out, y)
            else:
                out = model(x)
                loss = crit(out, y)
            if m is not None:
                s = m.stats()  # the end of forward: the most activations alive
                dev_max = max(dev_max, (s["frames"]["device"] + s["heap_frames"]["device"]) * s["frame_bytes"])
                if a.snapshot_dir and cfg == "c" and step == a.steps - 1 and not snap_taken:
                    t_snap = time.perf_counter()
                    from gpuheap import snapshot as snap
                    os.makedirs(a.snapshot_dir, exist_ok=True)
                    sn = snap.snapshot(m)
                    snap.write_json(os.path.join(a.snapshot_dir, "torch-offload-frames.json"), sn)
                    snap.write_html(os.path.join(a.snapshot_dir, "torch-offload-frames.html"), sn)
                    try:
                        snap.write_png(os.path.join(a.snapshot_dir, "torch-offload-frames.png"), sn)
                    except Exception as e:
                        log(f"gpu_train[{cfg}]: no PNG: {e}")
                    snap_taken = True
                    snap_s += time.perf_counter() - t_snap  # writing the files is not part of the step
            edge(1)
            if floor is not None:
                floor.backward_start()
            loss.backward()
            if floor is not None:
                floor.backward_end()
            edge(2)
            opt.step()
            if a.pin_state and m is not None and step == 0:
                for st in opt.state.values():
                    for t in st.values():
                        if getattr(t, "is_cuda", False):
                            ght.pin(t)
            v = edge(3, loss.item)
            if evs and step >= a.warmup:
                for i, k in enumerate(PHASES):
                    phases[k] = phases.get(k, 0.0) + evs[i].elapsed_time(evs[i + 1])
                host_phase_add(host_phases, marks_h)
        except torch.cuda.OutOfMemoryError as e:
            log(f"gpu_train[{cfg}]: OUT OF MEMORY at step {step}: {e}")
            result["oom"] = True
            break
        finally:
            if mode is not None:
                mode.__exit__(None, None, None)
                host_ops_report(host_counts, cfg)
        result["losses"].append(v.hex())
        result["steps_done"] = step + 1
        extra = ""
        if m is not None:
            s = m.stats()
            extra = (f" dev {s['frames']['device']} host {s['frames']['host']} frames, "
                     f"evictions {s['evictions']} restores {s['restores']}")
        t_now = time.perf_counter()
        log(f"gpu_train[{cfg}] step {step} loss {v:.6f} ({v.hex()}) {(t_now - t_step) * 1e3:.1f} ms{extra}")
        t_step = t_now
    torch.cuda.synchronize()
    timed = result["steps_done"] - a.warmup
    if phases and timed > 0:
        result["phases_ms"] = {k: round(v / timed, 3) for k, v in phases.items()}
        log(f"gpu_train[{cfg}] phases on the GPU, ms a step: " +
            ", ".join(f"{k} {v:.2f}" for k, v in result["phases_ms"].items()))
        result["host_phases_ms"] = {k: {c: round(x / timed, 3) for c, x in v.items()} for k, v in host_phases.items()}
        for k, v in result["host_phases_ms"].items():
            log(f"gpu_train[{cfg}] host {k}, ms a step: " + ", ".join(f"{c} {x:.2f}" for c, x in v.items()))
    if hook_acc and timed > 0:
        result["hook_ms"] = {k: (round(c[0] / timed, 2), round(c[1] * 1e3 / timed, 3)) for k, c in hook_acc.items()}
        log(f"gpu_train[{cfg}] hooks on the host (inclusive), calls and ms a step: " +
            ", ".join(f"{k} {n:.0f} {ms:.2f}" for k, (n, ms) in result["hook_ms"].items()))
    if a.profile and t0 is not None:
        prof.__exit__(None, None, None)
        if not a.gpu_only:
            profile_report(prof, timed, cfg)
        if a.trace:
            prof.export_chrome_trace(a.trace)
            trace_report(a.trace, timed, cfg)
    result["ms_per_step"] = ((time.perf_counter() - t0 - snap_s) * 1e3 / timed if t0 is not None and timed > 0
                             else float("nan"))
    if snap_s:
        log(f"gpu_train[{cfg}]: the frame-map snapshot took {snap_s * 1e3:.1f} ms (left out of ms/step)")
    if m is None:
        result["peak"] = torch.cuda.max_memory_allocated()
        result["device_budget"] = torch.cuda.get_device_properties(0).total_memory
        result["bytes_moved_per_step"] = (2 * (packed[0] - packed0) / timed if cfg == "d" and timed > 0 else
                                          2 * floor.nbytes if floor is not None else 0)
    else:
        s = m.stats()
        result["stats"] = s
        result["device_budget"] = s["device_budget"]
        result["device_bytes_max_sampled"] = dev_max
        moved = s["bytes_evicted"] + s["bytes_restored"] - moved0
        result["bytes_moved_per_step"] = moved / timed if timed > 0 else float("nan")
        # Where the manager's time went, per timed step: batches moved and
        # host ms in them, waits for the streams and ms in those.
        if timed > 0 and s0:
            result["per_step"] = {k: (s[k] - s0.get(k, 0)) / timed * (1e-6 if k.endswith("_ns") else 1)
                                  for k in ("moves", "move_ns", "stream_waits", "stream_wait_ns",
                                            "quiet_waits", "host_placed_bytes", "ordered_moves")}
            result["per_step"]["clock_victims"] = {k: (v - s0.get("clock_victims", {}).get(k, 0)) / timed
                                                   for k, v in s.get("clock_victims", {}).items()}
            for key, scale in (("vmm_calls", 1), ("vmm_ns", 1e-6)):
                result["per_step"][key] = {k: round((v - s0.get(key, {}).get(k, 0)) / timed * scale, 3)
                                           for k, v in s.get(key, {}).items()}
            result["per_step"]["vmm_move_ns"] = (s.get("vmm_move_ns", 0) - s0.get("vmm_move_ns", 0)) / timed * 1e-6
            c = call_times(m)
            if c and c0:  # GPUHEAP_CALL_TIMES=1: calls a step and their ms a step, by kind
                result["per_step"]["calls"] = {k: round((c[k][0] - c0[k][0]) / timed, 2) for k in c}
                result["per_step"]["call_ms"] = {k: round((c[k][1] - c0[k][1]) / timed, 3) for k in c}
            k = clean_counts(m)
            if k and k0:  # GPUHEAP_CLEAN: frames a step (cleaned, evicted clean, dropped, left unclean)
                result["per_step"]["clean_frames"] = {x: round((k[x] - k0[x]) / timed, 1) for x in k}
                log(f"gpu_train[{cfg}]: cleaning, frames a step: {result['per_step']['clean_frames']}")
        result["oom"] = result["oom"] or s["oom_events"] > 0 or bool(ooms)
        result["memory_stats"] = dict(ght.memory_stats())
        if off is not None:
            result["offload"] = dict(off.counters)
        if marks is not None:
            result["marks"] = dict(marks.counts)
    if a.out:  # --only without --out: the log lines below only
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    log(f"gpu_train[{cfg}] ({CONFIGS[cfg]}): {result['steps_done']} steps, {result['ms_per_step']:.2f} ms/step, "
        f"{result['bytes_moved_per_step'] / 1e9:.3f} GB moved/step" +
        (f", peak {result['peak'] / 2**30:.3f} GiB" if "peak" in result else ""))
    if result.get("per_step"):
        log(f"gpu_train[{cfg}]: per step {json.dumps(result['per_step'])}")
    return 0


def host_ops_mode(torch, m):
    """--host-ops: a TorchDispatchMode counting, per operator, its calls and
    those with a CUDA tensor argument whose storage starts in host memory
    (with the bytes of those storages)."""
    import gpuheap
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    counts = {}

    class HostOps(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            flat, _ = tree_flatten((args, kwargs))
            host, nbytes, seen = 0, 0, set()
            for t in flat:
                if isinstance(t, torch.Tensor) and t.is_cuda:
                    st = t.untyped_storage()
                    p = st.data_ptr()
                    if not p or p in seen:
                        continue
                    seen.add(p)
                    try:
                        if m.tier(p) == gpuheap.Tier.HOST:
                            host, nbytes = host + 1, nbytes + st.nbytes()
                    except gpuheap.Error:
                        pass
            c = counts.setdefault(str(func), [0, 0, 0])
            c[0] += 1
            if host:
                c[1] += 1
                c[2] += nbytes
            return func(*args, **kwargs)

    return HostOps(), counts


def host_ops_report(counts, cfg):
    rows = sorted(counts.items(), key=lambda kv: -kv[1][2])
    log(f"gpu_train[{cfg}] host-ops: operator, calls, calls with an input in host memory, MB of those inputs")
    for name, (n, h, b) in rows:
        if h:
            log(f"gpu_train[{cfg}] host-ops: {name:48s} {n:5d} {h:5d} {b / 1e6:9.1f}")
    log(f"gpu_train[{cfg}] host-ops: {sum(c[1] for c in counts.values())} of {sum(c[0] for c in counts.values())} "
        f"calls found an input in host memory")


# ---------------------------------------------------------------- the parent
def profile_report(prof, steps, cfg):
    """--profile: per step, the kernels' device time and the busiest
    operators by device and by host time."""
    ka = prof.key_averages()
    dev = "self_device_time_total" if hasattr(ka[0], "self_device_time_total") else "self_cuda_time_total"
    total = sum(getattr(e, dev) for e in ka) / 1e3 / max(steps, 1)
    log(f"gpu_train[{cfg}] profile: kernels' device time {total:.2f} ms a step (over {steps} steps)")
    log(ka.table(sort_by=dev, row_limit=12))
    log(ka.table(sort_by="self_cpu_time_total", row_limit=12))


# gpuheap's eviction copies by kernel (host/copy_kernel.cu): copies, not compute.
COPY_KERNELS = ("gh_copy_words",)
# --gpu-only's phase marker (torch.cuda._sleep(0)): neither compute nor copy.
PHASE_MARK = "spin_kernel"
PHASES = ("forward", "backward", "optimizer")


def timeline_split(compute, copies):
    """Of the union of two lists of (start, end) intervals, the time where
    only compute runs, only copies run, and both run (dict, the intervals'
    unit). Intervals of one list may overlap (several streams)."""
    edges = [(s, 0, 1) for s, _ in compute] + [(e, 0, -1) for _, e in compute]
    edges += [(s, 1, 1) for s, _ in copies] + [(e, 1, -1) for _, e in copies]
    edges.sort(key=lambda x: (x[0], x[2]))  # at one time, ends before starts
    out = {"compute": 0.0, "copy": 0.0, "both": 0.0}
    n, last = [0, 0], None
    for t, k, d in edges:
        if last is not None and t > last:
            if n[0] and n[1]:
                out["both"] += t - last
            elif n[0]:
                out["compute"] += t - last
            elif n[1]:
                out["copy"] += t - last
        n[k] += d
        last = t
    return out


def streams_overlap(by_stream):
    """The time during which intervals of two or more streams run at once:
    by_stream maps a stream to its (start, end) intervals (the engine's
    copies: evictions on the manager's copy stream, restores on its
    restore stream, so this is the time the two directions of PCIe run
    together)."""
    edges = []
    for k, v in by_stream.items():
        edges += [(s, k, 1) for s, _ in v] + [(e, k, -1) for _, e in v]
    edges.sort(key=lambda x: (x[0], x[2]))  # at one time, ends before starts
    active, last, out = {}, None, 0.0
    for t, k, d in edges:
        if last is not None and t > last and sum(1 for n in active.values() if n) >= 2:
            out += t - last
        active[k] = active.get(k, 0) + d
        last = t
    return out


def phase_split(compute, copies, marks, end, at_first_copy=False):
    """timeline_split by phase: marks are the start times of the marker
    kernels, three a step (forward, backward, optimizer, in that order);
    each phase runs from its mark to the next (the last to `end`). Returns
    {phase: {"compute", "copy", "both", "idle", "span"}}, summed over the
    steps, in the intervals' unit; {} unless the marks come in threes.
    at_first_copy: each phase cut where its first copy starts (the whole
    phase before it where it has none): {phase: {"before": {...},
    "after": {...}}}, each as above."""
    marks = sorted(marks)
    if not marks or len(marks) % len(PHASES):
        return {}

    def zero():
        return {"compute": 0.0, "copy": 0.0, "both": 0.0, "idle": 0.0, "span": 0.0}
    out = {p: {"before": zero(), "after": zero()} if at_first_copy else zero() for p in PHASES}

    def add(o, lo, hi):
        def clip(v):
            return [(max(s, lo), min(e, hi)) for s, e in v if e > lo and s < hi]
        part = timeline_split(clip(compute), clip(copies))
        for k, v in part.items():
            o[k] += v
        o["span"] += hi - lo
        o["idle"] += hi - lo - sum(part.values())

    for i, lo in enumerate(marks):
        hi = marks[i + 1] if i + 1 < len(marks) else max(end, lo)
        o = out[PHASES[i % len(PHASES)]]
        if not at_first_copy:
            add(o, lo, hi)
            continue
        cut = min([max(s, lo) for s, e in copies if e > lo and s < hi], default=hi)
        add(o["before"], lo, cut)
        add(o["after"], cut, hi)
    return out


def trace_report(path, steps, cfg):
    """--trace: from the Chrome trace, per step, the GPU's busy time (union
    of kernel, copy and set intervals), the kernels' and the copies' sums,
    and the wall time from the first GPU interval to the last; then that
    time split into compute alone, copies alone (engine copies and
    gpuheap's copy kernel), both at once, and the GPU idle."""
    with open(path) as f:
        ev = json.load(f).get("traceEvents", [])
    iv = {"kernel": [], "gpu_memcpy": [], "gpu_memset": []}
    compute, copies, copy_kernels, marks, by_stream = [], [], 0, [], {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in iv:
            span_ = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
            if e["cat"] == "kernel" and PHASE_MARK in e.get("name", ""):
                marks.append(span_[0])
                continue
            iv[e["cat"]].append(span_)
            copy_kernel = e["cat"] == "kernel" and any(k in e.get("name", "") for k in COPY_KERNELS)
            copy_kernels += copy_kernel
            (copies if copy_kernel or e["cat"] == "gpu_memcpy" else compute).append(span_)
            if e["cat"] == "gpu_memcpy":
                by_stream.setdefault((e.get("args") or {}).get("stream"), []).append(span_)
    allv = sorted(x for v in iv.values() for x in v)
    if not allv or steps <= 0:
        log(f"gpu_train[{cfg}] trace: no GPU intervals")
        return
    busy, end = 0.0, allv[0][0]
    for s, e in allv:
        if e > end:
            busy += e - max(s, end)
            end = e
    span = end - allv[0][0]
    sums = {k: sum(e - s for s, e in v) / 1e3 / steps for k, v in iv.items()}
    log(f"gpu_train[{cfg}] trace: a step: GPU busy {busy / 1e3 / steps:.2f} ms of {span / 1e3 / steps:.2f} ms "
        f"(kernels {sums['kernel']:.2f}, copies {sums['gpu_memcpy']:.2f}, sets {sums['gpu_memset']:.2f}; "
        f"{len(iv['kernel']) / steps:.0f} kernels, {len(iv['gpu_memcpy']) / steps:.0f} copies)")
    split = timeline_split(compute, copies)
    ms = {k: v / 1e3 / steps for k, v in split.items()}
    log(f"gpu_train[{cfg}] trace: a step: compute alone {ms['compute']:.2f} ms, copies alone {ms['copy']:.2f}, "
        f"both {ms['both']:.2f}, GPU idle {(span - sum(split.values())) / 1e3 / steps:.2f} "
        f"({copy_kernels / steps:.0f} copy kernels)")
    log(f"gpu_train[{cfg}] trace: a step: engine copies of two or more streams at once "
        f"{streams_overlap(by_stream) / 1e3 / steps:.2f} ms ({len(by_stream)} streams with copies)")

    def line(o):
        return (f"{o['span'] / 1e3 / steps:.2f} ms a step: compute alone {o['compute'] / 1e3 / steps:.2f}, "
                f"copies alone {o['copy'] / 1e3 / steps:.2f}, both {o['both'] / 1e3 / steps:.2f}, "
                f"GPU idle {o['idle'] / 1e3 / steps:.2f}")
    for p, o in phase_split(compute, copies, marks, end).items():
        log(f"gpu_train[{cfg}] trace: {p}: {line(o)}")
    for p, o in phase_split(compute, copies, marks, end, at_first_copy=True).items():
        log(f"gpu_train[{cfg}] trace: {p}, before its first copy: {line(o['before'])}; after: {line(o['after'])}")


def run_child(a, cfg, tmp, peak=0):
    args = ["--only", cfg, "--steps", a.steps, "--warmup", a.warmup, "--batch", a.batch, "--image", a.image,
            "--width", a.width, "--blocks", a.blocks, "--classes", a.classes, "--seed", a.seed,
            "--offload-mode", a.offload_mode, "--budget-fraction", a.budget_fraction, "--time-limit", a.time_limit,
            "--peak", peak]
    if a.prefetch_distance is not None:
        args += ["--prefetch-distance", a.prefetch_distance]
    if a.snapshot_dir:
        args += ["--snapshot-dir", a.snapshot_dir]
    if a.low_watermark is not None:
        args += ["--low-watermark", a.low_watermark]
    if a.host_ops:
        args += ["--host-ops"]
    if a.phases:
        args += ["--phases"]
    if a.hook_times:
        args += ["--hook-times"]
    if a.profile:
        args += ["--profile"]
    if a.gpu_only:
        args += ["--gpu-only"]
    if a.trace:
        args += ["--trace", a.trace + "." + cfg]
    if a.model_prefetch:
        args += ["--model-prefetch", a.model_prefetch]
    if a.offload_state:
        args += ["--offload-state"]
    if a.pin_state:
        args += ["--pin-state"]
    if a.no_unpack_weights:
        args += ["--no-unpack-weights"]
    if a.no_offload:
        args += ["--no-offload"]
    if a.quiet:
        args += ["--quiet"]
    if a.quiet_auto:
        args += ["--quiet-auto"]
    if a.no_quiet:
        args += ["--no-quiet"]
    if a.no_prefetch_ahead:
        args += ["--no-prefetch-ahead"]
    if a.keep_last != 2:
        args += ["--keep-last", a.keep_last]
    if a.prefetch_room:
        args += ["--prefetch-room", a.prefetch_room]
    if a.room_reserve is not None:
        args += ["--room-reserve", a.room_reserve]
    log(f"gpu_train: config {cfg} ({CONFIGS[cfg]})")
    return run(__file__, args, os.path.join(tmp, f"{cfg}.json"), f"gpu_train: config {cfg} ({CONFIGS[cfg]})",
               a.time_limit + 120)


CSV_HEADER = ["config", "ms_per_step", "device_budget_gib", "bytes_moved_per_step", "loss_last"]


def write_csv(path, results):
    """One row per finished config of results [(letter, result or None)]:
    config is the letter (a, b, c; d in --reference-csv)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_HEADER)
        for cfg, r in results:
            if r is None:
                continue
            last = float.fromhex(r["losses"][-1]) if r["losses"] else float("nan")
            w.writerow([cfg, f"{r['ms_per_step']:.3f}", f"{r['device_budget'] / 2**30:.3f}",
                        f"{r['bytes_moved_per_step']:.0f}", repr(last)])


def parent(a):
    torch_or_skip("gpu_train")  # does not initialize CUDA here
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        ra, rc = run_child(a, "a", tmp)
        if rc:
            return rc
        log(f"gpu_train: (a) peak {ra['peak'] / 2**30:.3f} GiB, {ra['ms_per_step']:.2f} ms/step")
        rb, rc = run_child(a, "b", tmp)
        if rc == SKIP:
            return SKIP
        rcc, rc2 = run_child(a, "c", tmp, peak=ra["peak"])
        if rc2 == SKIP:
            return SKIP
        results = [("a", ra), ("b", rb), ("c", rcc)]
        rd = None
        if a.reference_csv:
            rd, rc3 = run_child(a, "d", tmp)
            if rc3 or rd is None:
                fails.append("config d did not finish")
        rf = None
        if a.floor:
            rf, rc4 = run_child(a, "f", tmp, peak=ra["peak"])
            if rc4 or rf is None:
                fails.append("config f did not finish")
            elif rf["losses"] != ra["losses"]:  # its copies touch no tensor of the model
                fails.append("(f) losses differ from (a)")
    if rc or rb is None:
        fails.append("config b did not finish")
    if rc2 or rcc is None:
        fails.append("config c did not finish")
    for cfg, r in results[1:]:
        if r is None:
            continue
        if r["losses"] != ra["losses"]:
            first = next((i for i, (x, y) in enumerate(zip(r["losses"], ra["losses"])) if x != y),
                         min(len(r["losses"]), len(ra["losses"])))
            fails.append(f"({cfg}) losses differ from (a) from step {first} "
                         f"({len(r['losses'])} against {len(ra['losses'])} steps)")
        if r["oom"]:
            fails.append(f"({cfg}) met an out-of-memory")
    if rcc is not None:
        if rcc["stats"]["evictions"] <= 0:
            fails.append("(c) evicted nothing")
        log(f"gpu_train: (c) offload counters {rcc.get('offload')}, evictions {rcc['stats']['evictions']}, "
            f"restores {rcc['stats']['restores']}, device max (sampled) "
            f"{rcc['device_bytes_max_sampled'] / 2**30:.3f} GiB of budget {rcc['device_budget'] / 2**30:.3f} GiB")
        ps = rcc.get("per_step")
        if ps:
            log(f"gpu_train: (c) a step: {ps['moves']:.1f} batches moved in {ps['move_ns']:.1f} ms, "
                f"{ps['stream_waits']:.1f} stream waits in {ps['stream_wait_ns']:.1f} ms (host time), "
                f"{ps['host_placed_bytes'] / 1e6:.1f} MB of new tensors placed in host memory")
    if a.csv:
        write_csv(a.csv, results)
        log(f"gpu_train: wrote {a.csv}")
    if rd is not None:
        # PyTorch's own offload: reported, not a check of gpuheap (its losses
        # are expected to equal (a)'s: the copies are exact).
        same = "bitwise equal to" if rd["losses"] == ra["losses"] else "DIFFERENT from"
        log(f"gpu_train: (d) save_on_cpu: {rd['ms_per_step']:.2f} ms/step ({rd['ms_per_step'] / ra['ms_per_step']:.2f}x "
            f"(a)), peak {rd['peak'] / 2**30:.3f} GiB, {rd['bytes_moved_per_step'] / 1e9:.3f} GB moved/step, "
            f"losses {same} (a)'s")
    if rf is not None:
        ratio = f", (c) {rcc['ms_per_step'] / rf['ms_per_step']:.2f}x the floor" if rcc is not None else ""
        log(f"gpu_train: (f) transfer floor: {rf['ms_per_step']:.2f} ms/step "
            f"({rf['ms_per_step'] / ra['ms_per_step']:.2f}x (a)), {rf['bytes_moved_per_step'] / 1e9:.3f} GB "
            f"moved/step{ratio}")
    refs = [(k, r) for k, r in (("a", ra), ("d", rd), ("f", rf)) if r is not None]
    if a.reference_csv and len(refs) > 1:
        write_csv(a.reference_csv, refs)
        log(f"gpu_train: wrote {a.reference_csv}")
    return verdict("gpu_train", fails, lambda: f"{len(ra['losses'])} steps, losses bitwise equal in all three configs")


def main(argv=None):
    a = parse_args(argv)
    if a.warmup >= a.steps:
        a.warmup = max(0, a.steps - 1)
    if a.only:
        return child(a)
    return parent(a)


if __name__ == "__main__":
    sys.exit(main())
