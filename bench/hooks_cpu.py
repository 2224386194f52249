"""The offload hooks' own Python time on the CPU, a training step's shape.

    PYTHONPATH=python python3 bench/hooks_cpu.py [--steps 300] [--reps 5]

gpuheap.torch.Offload's pack and unpack are driven as autograd drives them
in python/tests/gpu_train.py's training run (c), per step (the counters of
bench/results/logs-hooks/phases/c-1.json): 140 packs, of which 29 storages
large enough to track and 111 small ones skipped; a backward unpacking the
29 in reverse, 61 weights (storages mark_model protected) and the 111 small
ones. The tensors are stand-ins with the few methods the hooks read, the
manager the library's simulated one (backend "sim") with a budget that
holds everything, so nothing moves: what is timed is the hooks' Python and
the manager's calls that find nothing to do. Each tracked tensor's
variable is dropped by the "model" two packs after it is saved, so the
quiet test (quiet="auto") finds it alone then, as in a forward.

PyTorch is not needed: a stand-in module gives the C bindings the hooks
call (the current stream, the storage's use count). The figures are the
CPU's, not a GPU machine's: they rank changes to the hooks' Python, and
gpu_train.py --hook-times measures the real thing (bench/NOTES.md, host
side, rows 89, 90 and 94).
"""
import argparse
import os
import statistics
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import gpuheap  # noqa: E402
import gpuheap.torch as ght  # noqa: E402

MiB = 1 << 20
TRACKED, SMALL, WEIGHTS = 29, 111, 61  # a step of the training run; --tracked sets the first


class _Storage:
    __slots__ = ("_ptr", "_n", "_cdata")

    def __init__(self, ptr, n):
        self._ptr, self._n, self._cdata = ptr, n, ptr

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return self._n


class _Device:
    __slots__ = ("type", "index")

    def __init__(self):
        self.type, self.index = "cuda", 0

    def __hash__(self):
        return hash((self.type, self.index))

    def __eq__(self, o):
        return isinstance(o, _Device) and (o.type, o.index) == (self.type, self.index)


DEV = _Device()


class _Tensor:
    """What the hooks read of a tensor."""
    __slots__ = ("_st", "is_cuda", "is_leaf", "requires_grad", "device", "__weakref__")

    def __init__(self, ptr, n, leaf=False):
        self._st = _Storage(ptr, n)
        self.is_cuda, self.is_leaf, self.requires_grad, self.device = True, leaf, leaf, DEV

    def untyped_storage(self):
        return _Storage(self._st._ptr, self._st._n)  # a new object a call, as torch's

    def _use_count(self):
        return 1


def _fake_torch():
    c = types.SimpleNamespace(_storage_Use_Count=lambda cdata: 1, _cuda_getCurrentRawStream=lambda idx: 0,
                              _cuda_getDevice=lambda: 0)
    cuda = types.SimpleNamespace(is_available=lambda: False, current_device=lambda: 0)
    graph = types.SimpleNamespace(saved_tensors_hooks=None)
    t = types.ModuleType("torch")
    t._C, t.cuda, t.autograd, t.Tensor = c, cuda, types.SimpleNamespace(graph=graph), _Tensor
    return t


def _calibrate(saved):
    """The counts of a tensor that only `saved` (autograd's stand-in) holds,
    measured as Offload measures them: from a local one frame down."""
    x = saved[-1]
    cal = ght._alone_counts(x)
    del x
    return cal


def step(off, big, small, weights, saved):
    """One forward and its backward through off's hooks."""
    live = []  # the model's variables: each tracked tensor dropped two packs after its save
    k = 0
    for i in range(TRACKED):
        t = big[i]
        saved.append(t)
        live.append(t)
        off.pack(t)
        for _ in range(SMALL // TRACKED + (1 if i < SMALL % TRACKED else 0)):
            off.pack(small[k])
            k += 1
        if len(live) > 2:
            live.pop(0)
    live.clear()
    wi = si = 0
    for i in reversed(range(TRACKED)):
        off.unpack(big[i])
        j = TRACKED - i  # the weights and small ones spread evenly over the backward
        while wi < WEIGHTS * j // TRACKED:
            off.unpack(weights[wi])
            wi += 1
        while si < SMALL * j // TRACKED:
            off.unpack(small[si])
            si += 1
    saved.clear()
    off._prune()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tracked", type=int, default=TRACKED,
                    help="tracked saved tensors a step (a deeper model; the training run: %(default)s)")
    a = ap.parse_args()
    globals()["TRACKED"] = a.tracked
    sys.modules["torch"] = _fake_torch()
    m = gpuheap.Manager(backend="sim", device_budget=max(512, 4 * TRACKED + 128) * MiB, host_budget=64 * MiB, host_pool_frames=0)
    big = [_Tensor(m.alloc(2 * MiB), 2 * MiB) for _ in range(TRACKED)]  # 2 MiB: past min_bytes
    small = [_Tensor(0x100000 + i * 4096, 4096) for i in range(SMALL)]
    wptrs = [m.alloc(MiB) for _ in range(WEIGHTS)]
    weights = [_Tensor(p, MiB) for p in wptrs]
    for p in wptrs:
        m.set_kind(p, "weights")
        ght._protected.add(p)
    saved = [big[0]]  # held by `big` too, as every tracked tensor here
    ght._ALONE[DEV] = _calibrate(saved)
    saved.clear()
    off = ght.Offload(manager=m, stream=lambda: ght._current_stream())
    for _ in range(20):  # warm up
        step(off, big, small, weights, saved)
    per = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step(off, big, small, weights, saved)
        per.append((time.perf_counter() - t0) / a.steps * 1e3)
    n = 20 + a.reps * a.steps
    counts = {k: round(v / n, 1) for k, v in off.counters.items() if v}
    print(f"hooks_cpu: {statistics.median(per):.3f} ms a step (median of {a.reps}; min {min(per):.3f}, "
          f"max {max(per):.3f}), {a.steps} steps each")
    print("a step:", counts)
    m.close()


if __name__ == "__main__":
    main()
