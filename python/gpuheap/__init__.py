"""gpuheap: a GPU heap whose tensor manager hands memory to frameworks from one
budget and evicts cold 2 MiB frames to pinned host memory mapped at the same
address -- pointers never change.

This package is pure Python over the C library (libgpuheap.so) through
ctypes. The library is found through $GPUHEAP_LIBRARY, next to the package,
or the loader's usual paths, and only loaded on first use.

    import gpuheap
    m = gpuheap.Manager(device_budget="8GiB", host_budget="32GiB")
    m.stats()["evictions"]

Framework glue: gpuheap.torch (CUDAPluggableAllocator, activation offload),
gpuheap.cupy (CFunctionAllocator); pictures: gpuheap.snapshot.

Every failing library call raises gpuheap.Error, carrying the library's code
(Error.code, e.g. gpuheap.ERR_BUDGET), its name and message (gh_err_name,
gh_strerror) and the detail the library recorded for the calling thread
(gh_last_error_detail). Invalid arguments caught in Python raise the same
Error with code ERR_INVAL before anything reaches the library.
"""
import enum
import math
import re
import sys
import threading
import traceback
import ctypes

from . import _capi

__version__ = "0.1.0"

__all__ = [
    "Error", "Kind", "Tier", "Backend", "Advice", "Manager", "parse_size", "parse_kind", "parse_advice",
    "validate_options", "library_path", "library", "global_manager", "set_global",
    "strerror", "err_name",
]

# ---------------------------------------------------------------- errors
# A mirror of GH_ERRNO_MAP (include/gpuheap.h), so that error codes have a
# name and a message even without the library; tests/test_pure.py checks it
# against the header and, where it loads, against the library.
ERRNO_MAP = [
    ("INVAL", -1, "invalid argument"),
    ("NOMEM", -2, "out of host memory"),
    ("DEVICE_NOMEM", -3, "out of device memory"),
    ("CUDA", -4, "a CUDA call failed (gh_last_error_detail says which)"),
    ("NO_DEVICE", -5, "no CUDA device is available"),
    ("FOREIGN", -6, "pointer does not belong to this heap"),
    ("DOUBLE_FREE", -7, "pointer was already freed"),
    ("BUDGET", -8, "the memory budget is exhausted"),
    ("UNSUPPORTED", -9, "operation not supported by this build or device"),
    ("CORRUPT", -10, "metadata failed a consistency check, or moved data was lost"),
    ("BUSY", -11, "not finished yet (the stream has not reached it)"),
    ("PINNED", -12, "the tensor is pinned"),
]
OK = 0
ERR_INVAL, ERR_NOMEM, ERR_DEVICE_NOMEM, ERR_CUDA, ERR_NO_DEVICE, ERR_FOREIGN = -1, -2, -3, -4, -5, -6
ERR_DOUBLE_FREE, ERR_BUDGET, ERR_UNSUPPORTED, ERR_CORRUPT, ERR_BUSY, ERR_PINNED = -7, -8, -9, -10, -11, -12
__all__ += ["OK"] + ["ERR_" + _n for _n, _c, _t in ERRNO_MAP]
_BY_CODE = {code: (name, text) for name, code, text in ERRNO_MAP}


def err_name(code):
    """gh_err_name: "GH_ERR_BUDGET" for -8 ("GH_OK" for 0)."""
    if code == OK:
        return "GH_OK"
    lib = _capi.loaded()
    if lib is not None:
        return lib.gh_err_name(code).decode()
    name = _BY_CODE.get(code)
    return "GH_ERR_" + name[0] if name else "GH_ERR_UNKNOWN"


def strerror(code):
    """gh_strerror: the message of an error code ("success" for 0)."""
    if code == OK:
        return "success"
    lib = _capi.loaded()
    if lib is not None:
        return lib.gh_strerror(code).decode()
    name = _BY_CODE.get(code)
    return name[1] if name else "unknown error"


class Error(RuntimeError):
    """A gpuheap failure. code: the GH_ERR_* value (negative int); name: its
    name ("GH_ERR_BUDGET"); message: gh_strerror; detail: what the failing
    call saw (gh_last_error_detail, or a message from the Python side)."""

    def __init__(self, code, detail="", context=""):
        self.code = int(code)
        self.name = err_name(self.code)
        self.message = strerror(self.code)
        self.detail = detail or ""
        self.context = context or ""
        text = f"{self.name}: {self.message}"
        if self.context:
            text = f"{self.context}: {text}"
        if self.detail:
            text += f" ({self.detail})"
        super().__init__(text)


def _check(rc, context):
    """Raise Error for a nonzero return code; the detail is read at once, on
    the calling thread (the library keeps it per thread)."""
    if rc != OK:
        lib = _capi.loaded()
        detail = lib.gh_last_error_detail().decode(errors="replace") if lib else ""
        raise Error(rc, detail, context)
    return rc


def library():
    """The loaded library (loads it on first use); raises Error if none."""
    try:
        return _capi.load()
    except _capi.LibraryNotFound as e:
        raise Error(ERR_UNSUPPORTED, str(e), "loading libgpuheap") from None


def library_path():
    """The path of the loaded libgpuheap.so (what PyTorch's pluggable
    allocator must dlopen: the same file, hence the same process-wide manager)."""
    return library().path


def _need(lib, name):
    fn = getattr(lib, name)
    if fn is None:
        raise Error(ERR_UNSUPPORTED, f"{lib.path} has no {name} (an older build of the library)", name)
    return fn


# ---------------------------------------------------------------- enums
class Tier(enum.IntEnum):
    """gh_tier_t: where a frame's bytes live."""
    NONE = 0    # not backed; in stats: free frames of the tensor region
    DEVICE = 1  # HBM
    HOST = 2    # pinned host memory mapped at the same address


class Kind(enum.IntEnum):
    """gh_kind_t: what a tensor holds; sets its eviction priority (workspace
    and activations go first, weights last)."""
    WORKSPACE = 0
    ACTIVATIONS = 1
    OPTIMIZER = 2
    WEIGHTS = 3


class Advice(enum.IntEnum):
    """gh_advice_t: what gh_tensor_advise says about a tensor."""
    NORMAL = 0  # its kind's usual eviction priority (what prefetch and pin imply)
    COLD = 1    # evicted first when device room is short, oldest advice first; nothing moves now
    QUIET = 2   # cold, and untouched until its next prefetch except by work queued now: moves skip the drain


class Backend(enum.IntEnum):
    """gh_backend_t: where frames come from."""
    DEFAULT = 0   # CUDA VMM in the CUDA library
    CUDA_VMM = 1
    SIM = 2       # host memory standing in for both tiers (tests)


_KIND_ALIASES = {
    "workspace": Kind.WORKSPACE, "scratch": Kind.WORKSPACE,
    "activations": Kind.ACTIVATIONS, "activation": Kind.ACTIVATIONS,
    "optimizer": Kind.OPTIMIZER, "optimizer_state": Kind.OPTIMIZER, "optim": Kind.OPTIMIZER,
    # Gradients are written in backward and read by the optimizer's step:
    # they rank with optimizer state (evicted after activations, before weights).
    "gradients": Kind.OPTIMIZER, "gradient": Kind.OPTIMIZER, "grads": Kind.OPTIMIZER, "grad": Kind.OPTIMIZER,
    "weights": Kind.WEIGHTS, "weight": Kind.WEIGHTS, "parameters": Kind.WEIGHTS, "params": Kind.WEIGHTS,
    "buffers": Kind.WEIGHTS,
}


def _parse_enum(value, enum_cls, table, what, where, names):
    """value as an enum_cls: itself, an int in range, or a name of `table`
    (matched lower-case, with "-" and " " read as "_"); Error(ERR_INVAL)
    naming `what` otherwise."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_cls(value)
        except ValueError:
            raise Error(ERR_INVAL, f"{what} {value} is not 0..{len(enum_cls) - 1}", where) from None
    if isinstance(value, str):
        v = table.get(value.strip().lower().replace("-", "_").replace(" ", "_"))
        if v is not None:
            return v
    raise Error(ERR_INVAL, f"unknown {what} {value!r} ({names})", where)


def parse_kind(kind):
    """A Kind from a Kind, an int 0..3 or a name ("weights", "activations",
    "optimizer", "workspace"; aliases "parameters", "gradients" (= optimizer),
    "buffers" (= weights), ...). Error(ERR_INVAL) otherwise."""
    return _parse_enum(kind, Kind, _KIND_ALIASES, "kind", "parse_kind", "one of: " + ", ".join(sorted(_KIND_ALIASES)))


_ADVICE_NAMES = {"cold": Advice.COLD, "normal": Advice.NORMAL, "warm": Advice.NORMAL, "quiet": Advice.QUIET}


def parse_advice(advice):
    """An Advice from an Advice, an int 0..2 or a name ("cold", "normal",
    "quiet"; also "warm" = normal). Error(ERR_INVAL) otherwise."""
    return _parse_enum(advice, Advice, _ADVICE_NAMES, "advice", "parse_advice", "cold, normal, quiet")


_BACKEND_NAMES = {"default": Backend.DEFAULT, "cuda": Backend.CUDA_VMM, "cuda_vmm": Backend.CUDA_VMM,
                  "vmm": Backend.CUDA_VMM, "sim": Backend.SIM, "simulation": Backend.SIM}


def _parse_backend(b):
    return _parse_enum(b, Backend, _BACKEND_NAMES, "backend", "options", "default, cuda_vmm, sim")


# ---------------------------------------------------------------- options
_UNITS = {"": 1, "b": 1,
          "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_MAX = (1 << 64) - 1


def parse_size(value, what="size"):
    """Bytes from an int, an integral float, or a string: "512", "64MiB",
    "1.5G". K/M/G/T and KiB/MiB/GiB/TiB are binary (2^10...), KB/MB/GB/TB
    decimal (10^3...). Error(ERR_INVAL) for negatives, non-numbers, overflow."""
    if isinstance(value, bool):
        raise Error(ERR_INVAL, f"{what}: {value!r} is not a size", "options")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise Error(ERR_INVAL, f"{what}: {value!r} is not a whole number of bytes", "options")
        n = int(value)
    elif isinstance(value, str):
        m = _SIZE_RE.match(value)
        unit = _UNITS.get(m.group(2).lower()) if m else None
        if unit is None:
            raise Error(ERR_INVAL, f"{what}: cannot read {value!r} as a size (e.g. 512MiB, 8GiB)", "options")
        n = int(float(m.group(1)) * unit)
    else:
        raise Error(ERR_INVAL, f"{what}: {value!r} is not a size", "options")
    if n < 0 or n > _SIZE_MAX:
        raise Error(ERR_INVAL, f"{what}: {value!r} is out of range", "options")
    return n


def _fraction(value, what):
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise Error(ERR_INVAL, f"{what}: {value!r} is not a number", "options") from None
    if isinstance(value, bool) or not (0.0 < f <= 1.0):
        raise Error(ERR_INVAL, f"{what}: {value!r} must lie in (0, 1]", "options")
    return f


def _uint(value, what, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) or not (lo <= value <= hi):
        raise Error(ERR_INVAL, f"{what}: {value!r} must be an integer in [{lo}, {hi}]", "options")
    return value


_HEAP_KEYS = ("page_bytes", "slots", "probe_limit", "room_fill", "refill_min")


def validate_options(device=None, backend=None, device_budget=None, device_reserve=None, host_budget=None,
                     va_bytes=None, low_watermark=None, high_watermark=None, heap_bytes=None,
                     heap_max_bytes=None, heap=None, host_pool_frames=None, grow_on_demand=None):
    """Check and normalize the manager's options (pure Python: no library
    needed). None means "the library's default" (gh_tmgr_options_init):
    device -1 (the current device); device_budget 0 = the device's free
    memory at creation minus device_reserve (1 GiB); host_budget 0 = half
    the device budget, at least 1 GiB; watermarks 1.0 / 0.90; no device heap;
    64 pooled host frames. Returns a dict of the options given, normalized;
    raises Error(ERR_INVAL) naming the first bad one."""
    out = {}
    if device is not None:
        out["device"] = _uint(device, "device", -1, 1 << 30)
    if backend is not None:
        out["backend"] = _parse_backend(backend)
    for name, v in (("device_budget", device_budget), ("device_reserve", device_reserve),
                    ("host_budget", host_budget), ("va_bytes", va_bytes),
                    ("heap_bytes", heap_bytes), ("heap_max_bytes", heap_max_bytes)):
        if v is not None:
            out[name] = parse_size(v, name)
    if low_watermark is not None:
        out["low_watermark"] = _fraction(low_watermark, "low_watermark")
    if high_watermark is not None:
        out["high_watermark"] = _fraction(high_watermark, "high_watermark")
    hb, hm = out.get("heap_bytes", 0), out.get("heap_max_bytes", 0)
    if hm and hm < hb:
        raise Error(ERR_INVAL, f"heap_max_bytes ({hm}) < heap_bytes ({hb})", "options")
    if heap is not None:
        if not isinstance(heap, dict) or set(heap) - set(_HEAP_KEYS):
            raise Error(ERR_INVAL, f"heap: a dict with keys among {_HEAP_KEYS}", "options")
        h = {}
        if heap.get("page_bytes") is not None:
            pb = parse_size(heap["page_bytes"], "heap.page_bytes")
            if pb & (pb - 1) or not (4096 <= pb <= 65536):
                raise Error(ERR_INVAL, f"heap.page_bytes: {pb} is not a power of two in 4096..65536", "options")
            h["page_bytes"] = pb
        for k in ("slots", "probe_limit", "room_fill", "refill_min"):
            if heap.get(k) is not None:
                h[k] = _uint(heap[k], "heap." + k, 0, (1 << 32) - 1)
        out["heap"] = h
    if host_pool_frames is not None:
        out["host_pool_frames"] = _uint(host_pool_frames, "host_pool_frames", 0, (1 << 32) - 1)
    if grow_on_demand is not None:
        out["grow_on_demand"] = bool(grow_on_demand)
    return out


def _options_struct(lib, opts):
    o = _capi.TmgrOptions()
    lib.gh_tmgr_options_init(ctypes.byref(o))
    for k, v in opts.items():
        if k == "heap":
            for hk, hv in v.items():
                setattr(o.heap, hk, hv)
        elif k == "grow_on_demand":
            o.flags = (o.flags | _capi.TMGR_GROW_ON_DEMAND) if v else (o.flags & ~_capi.TMGR_GROW_ON_DEMAND)
        else:
            setattr(o, k, int(v) if k not in ("low_watermark", "high_watermark") else v)
    return o


# ---------------------------------------------------------------- stats
_TIER_NAMES = [t.name.lower() for t in Tier]
_KIND_NAMES = [k.name.lower() for k in Kind]
_VMM_OP_NAMES = ["create", "release", "map", "unmap"]  # gh_vmm_op_t


def stats_to_dict(s):
    """A gh_tmgr_stats_t as a plain dict: tiers and kinds by name
    ("device", "host", "none"; "weights", ...)."""
    d = {
        "frame_bytes": s.frame_bytes,
        "device_budget": s.device_budget,
        "host_budget": s.host_budget,
        "frames": {_TIER_NAMES[t]: s.frames[t] for t in range(_capi.TIER_COUNT)},
        "heap_frames": {_TIER_NAMES[t]: s.heap_frames[t] for t in range(_capi.TIER_COUNT)},
        "tensors": {_KIND_NAMES[k]: s.tensors[k] for k in range(_capi.KIND_COUNT)},
        "tensor_bytes": {_KIND_NAMES[k]: s.tensor_bytes[k] for k in range(_capi.KIND_COUNT)},
        "tensor_bytes_tier": {_KIND_NAMES[k]: {_TIER_NAMES[t]: s.tensor_bytes_tier[k][t]
                                               for t in range(_capi.TIER_COUNT)}
                              for k in range(_capi.KIND_COUNT)},
        "clock_victims": {_KIND_NAMES[k]: s.clock_victims[k] for k in range(_capi.KIND_COUNT)},
        "vmm_calls": {_VMM_OP_NAMES[k]: s.vmm_calls[k] for k in range(_capi.VMM_OP_COUNT)},
        "vmm_ns": {_VMM_OP_NAMES[k]: s.vmm_ns[k] for k in range(_capi.VMM_OP_COUNT)},
    }
    for f in ("pinned_tensors", "pending_frees", "host_pool_frames", "evictions", "restores",
              "bytes_evicted", "bytes_restored", "oom_events", "heap_grows", "heap_shrinks", "cached_frames",
              "peak_tensor_bytes", "moves", "move_ns", "stream_waits", "stream_wait_ns", "host_placed_bytes",
              "quiet_waits", "vmm_move_ns", "spare_frames", "ordered_moves",
              "chunk_frames", "chunk_changes", "heap_grow_asks", "heap_grow_denied", "heap_grow_stale"):
        d[f] = getattr(s, f)
    return d


def frame_to_dict(f):
    """A gh_frame_info_t as a dict (tier and kind by name; kind "heap" for
    device-heap frames)."""
    tier = _TIER_NAMES[f.tier] if f.tier < _capi.TIER_COUNT else f"tier{f.tier}"
    if f.heap or f.kind == _capi.KIND_HEAP:
        kind = "heap"
    else:
        kind = _KIND_NAMES[f.kind] if f.kind < _capi.KIND_COUNT else f"kind{f.kind}"
    return {"va": f.va, "tier": tier, "kind": kind, "pinned": bool(f.pinned), "heap": bool(f.heap),
            "tensors": f.tensors, "used_bytes": f.used_bytes}


def tensor_to_dict(t):
    """A gh_tensor_info_t as a dict (kind by name, stream as an integer)."""
    kind = _KIND_NAMES[t.kind] if t.kind < _capi.KIND_COUNT else f"kind{t.kind}"
    return {"ptr": t.ptr, "bytes": t.bytes, "span": t.span, "extent": t.extent, "device_bytes": t.device_bytes,
            "stream": t.stream, "kind": kind, "pinned": bool(t.pinned), "cold": bool(t.cold),
            "pending": bool(t.pending), "run": bool(t.run), "context": t.context}


_HIST_ACTIONS = {_capi.HIST_ALLOC: "alloc", _capi.HIST_FREE_REQUESTED: "free_requested",
                 _capi.HIST_FREE_COMPLETED: "free_completed", _capi.HIST_OOM: "oom"}


def hist_to_dict(e):
    """A gh_hist_entry_t as a dict (action and kind by name)."""
    kind = _KIND_NAMES[e.kind] if e.kind < _capi.KIND_COUNT else f"kind{e.kind}"
    d = {"action": _HIST_ACTIONS.get(e.action, f"action{e.action}"), "addr": e.addr, "size": e.size,
         "stream": e.stream, "time_ns": e.time_ns, "context": e.context, "kind": kind}
    if e.action == _capi.HIST_OOM:
        d["device_free"] = e.device_free
    return d


def _read_all(fn, struct, what, *args):
    """Call a gh_tmgr_* lister (fn(..., out, cap, &count, *args)) until the
    array holds them all; the structs."""
    count = ctypes.c_size_t()
    _check(fn(None, 0, ctypes.byref(count), *args), what)
    for _ in range(8):  # more may come between the two calls
        cap = count.value + 64
        arr = (struct * cap)()
        _check(fn(arr, cap, ctypes.byref(count), *args), what)
        if count.value <= cap:
            return arr[:count.value]
    raise Error(ERR_BUSY, "the list kept growing", what)


# ---------------------------------------------------------------- manager
def _ptr(p, what):
    if p is None:
        raise Error(ERR_INVAL, "NULL pointer", what)
    if isinstance(p, bool) or not isinstance(p, int):
        p = int(p)  # ctypes.c_void_p, objects with __int__
    if p <= 0:
        raise Error(ERR_INVAL, f"pointer {p:#x}", what)
    return p


def _stream(s):
    """A CUDA stream handle as an int (None / 0: the default stream); takes
    ints and objects with .cuda_stream (torch) or .ptr (cupy)."""
    if s is None:
        return None
    for attr in ("cuda_stream", "ptr"):
        if hasattr(s, attr):
            s = getattr(s, attr)
            break
    return int(s) or None


class Manager:
    """A tensor manager (gh_tmgr_t): tensors from one device budget and one
    host budget; cold frames move to host memory at the same address.

        Manager(device_budget="8GiB", host_budget="32GiB", low_watermark=0.8)

    Options (see validate_options; None = the library's default): device,
    backend ("default", "cuda_vmm", "sim"), device_budget, device_reserve,
    host_budget, va_bytes, low_watermark, high_watermark, heap_bytes,
    heap_max_bytes, heap (dict: page_bytes, slots, probe_limit, room_fill, refill_min),
    host_pool_frames, grow_on_demand (kernels calling gh_malloc_grow on a
    full device heap wait for the host to grow it; needs heap_max_bytes >
    heap_bytes > 0). Sizes take ints or "512MiB"-style strings.

    A Manager made here is destroyed by close() (or leaving a with block);
    no stream may still use its tensors then. One that was made the global
    manager (set_global, gpuheap.torch.enable, gpuheap.cupy.enable) is never
    destroyed: frameworks free their tensors through it until the process ends.
    """

    def __init__(self, **options):
        self.options = validate_options(**options)
        lib = library()
        self._lib = lib
        self._handle = None
        self._owned = True
        self._global = False
        self._oom = None  # (the ctypes callback, the Python function): kept alive here
        h = ctypes.c_void_p()
        _check(lib.gh_tmgr_create(ctypes.byref(h), ctypes.byref(_options_struct(lib, self.options))),
               "gh_tmgr_create")
        self._handle = h.value

    @classmethod
    def _borrow(cls, handle, lib):
        m = cls.__new__(cls)
        m.options, m._lib, m._handle, m._owned, m._global, m._oom = {}, lib, handle, False, True, None
        return m

    # -- lifetime
    @property
    def handle(self):
        """The gh_tmgr_t* as an int."""
        if not self._handle:
            raise Error(ERR_INVAL, "the manager is closed", "Manager")
        return self._handle

    def close(self):
        """Destroy the manager and every tensor in it (gh_tmgr_destroy).
        Refused for the global manager and for one this object did not make."""
        if not self._handle:
            return
        if self._global or not self._owned:
            raise Error(ERR_INVAL, "the global manager (or one not made here) lives as long as the process",
                        "Manager.close")
        h, self._handle = self._handle, None
        _check(self._lib.gh_tmgr_destroy(h), "gh_tmgr_destroy")
        self._oom = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._owned and not self._global:
            self.close()

    def __del__(self):
        try:
            if getattr(self, "_handle", None) and self._owned and not self._global and not sys.is_finalizing():
                self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if not self._handle else f"{self._handle:#x}"
        return f"<gpuheap.Manager {state}{' global' if self._global else ''}>"

    # -- tensors (raw pointers as ints)
    def alloc(self, nbytes, kind=Kind.ACTIVATIONS, stream=None):
        """gh_tensor_alloc: a 256-byte-aligned tensor of nbytes (> 0); its address."""
        n = parse_size(nbytes, "nbytes")
        p = ctypes.c_void_p()
        _check(self._lib.gh_tensor_alloc(self.handle, n, int(parse_kind(kind)), _stream(stream), ctypes.byref(p)),
               "gh_tensor_alloc")
        return p.value

    def free(self, ptr, stream=None):
        """gh_tensor_free (stream-ordered, like cudaFreeAsync); None does nothing."""
        if ptr is None or ptr == 0:
            return
        _check(self._lib.gh_tensor_free(self.handle, _ptr(ptr, "gh_tensor_free"), _stream(stream)), "gh_tensor_free")

    def record_stream(self, ptr, stream=None):
        """gh_tensor_record_stream: the tensor is used on `stream` too, and its
        memory is not reused before the work queued there up to its free is
        done (its free makes the free's stream wait for it on the GPU)."""
        _check(self._lib.gh_tensor_record_stream(self.handle, _ptr(ptr, "gh_tensor_record_stream"), _stream(stream)),
               "gh_tensor_record_stream")

    def prefetch(self, ptr, stream=None):
        """gh_tensor_prefetch: bring the tensor's frames to the device now and
        add `stream` to the streams it is used on; clears a cold advice. On a
        tensor that is all on the device it moves nothing and waits for no
        stream."""
        _check(self._lib.gh_tensor_prefetch(self.handle, _ptr(ptr, "gh_tensor_prefetch"), _stream(stream)),
               "gh_tensor_prefetch")

    def prefetch_ahead(self, ptr, stream=None):
        """gh_tensor_prefetch_ahead: start bringing the tensor's frames to the
        device without making any stream wait for the copies yet. The caller
        promises that nothing touches the tensor until its next prefetch (or
        prefetch_many, pin, free), which makes the streams wait then, on the
        GPU. ERR_UNSUPPORTED from a library that lacks the call."""
        fn = _need(self._lib, "gh_tensor_prefetch_ahead")
        _check(fn(self.handle, _ptr(ptr, "gh_tensor_prefetch_ahead"), _stream(stream)), "gh_tensor_prefetch_ahead")

    def prefetch_room(self, ptr, reserve=0, stream=None):
        """gh_tensor_prefetch_room: prefetch_ahead, only where the device
        budget has room for the tensor's frames on the host and `reserve`
        more bytes (an int or a size string) without evicting anything or
        waiting for the GPU (cached frames count as room); otherwise
        Error(ERR_BUDGET) and nothing changed. The promise of prefetch_ahead
        holds. ERR_UNSUPPORTED from a library that lacks the call."""
        fn = _need(self._lib, "gh_tensor_prefetch_room")
        _check(fn(self.handle, _ptr(ptr, "gh_tensor_prefetch_room"), _stream(stream),
                  parse_size(reserve, "reserve")), "gh_tensor_prefetch_room")

    def prefetch_many(self, ptrs, stream=None):
        """gh_tensor_prefetch_many: prefetch several tensors in one batch (one
        wait for their streams, one pipeline, none of them evicted for the
        others). Every pointer is checked before anything moves. With a
        library that lacks the call, one prefetch each."""
        ptrs = [_ptr(p, "gh_tensor_prefetch_many") for p in ptrs]
        if not ptrs:
            return
        try:
            fn = _need(self._lib, "gh_tensor_prefetch_many")
        except Error:
            for p in ptrs:
                self.prefetch(p, stream)
            return
        arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
        _check(fn(self.handle, arr, len(ptrs), _stream(stream)), "gh_tensor_prefetch_many")

    def evict(self, ptr):
        """gh_tensor_evict: mark the tensor cold and move its frames to the host
        now (frames shared with warm tensors stay; a full host tier moves
        fewer). Error ERR_PINNED if pinned; ERR_CUDA or ERR_DEVICE_NOMEM when
        CUDA failed a copy or map, the frames not moved still on the device
        with their data. After a wait for the GPU failed (copies it covered
        may not have run) the manager's moves, allocations and maintain
        raise ERR_CORRUPT, saying which wait; frees still work."""
        _check(self._lib.gh_tensor_evict(self.handle, _ptr(ptr, "gh_tensor_evict")), "gh_tensor_evict")

    def evict_ahead(self, ptr):
        """gh_tensor_evict_ahead: advise the tensor quiet and start moving its
        frames to the host without waiting for the copies and without making
        any stream wait for them. The caller promises that nothing touches
        the tensor until its next prefetch (or prefetch_many, pin, advice,
        free); its address is left unmapped meanwhile. A tensor under 1 MiB
        is only advised. Error ERR_PINNED if pinned, ERR_UNSUPPORTED with a
        library that lacks the call."""
        fn = _need(self._lib, "gh_tensor_evict_ahead")
        _check(fn(self.handle, _ptr(ptr, "gh_tensor_evict_ahead")), "gh_tensor_evict_ahead")

    def advise(self, ptr, advice):
        """gh_tensor_advise: "cold" marks the tensor cold without moving it or
        waiting for any stream: when the manager needs device room it evicts
        the frames of cold tensors first, oldest advice first. "normal" takes
        the mark back (prefetch and pin do too). Pinned tensors may be advised
        cold; they stay on the device until unpinned. Error ERR_UNSUPPORTED
        with a library that lacks the call."""
        a = parse_advice(advice)
        fn = _need(self._lib, "gh_tensor_advise")
        _check(fn(self.handle, _ptr(ptr, "gh_tensor_advise"), int(a)), "gh_tensor_advise")

    def pin(self, ptr):
        """gh_tensor_pin: keep on the device (restored first if on the host). Pins nest."""
        _check(self._lib.gh_tensor_pin(self.handle, _ptr(ptr, "gh_tensor_pin")), "gh_tensor_pin")

    def unpin(self, ptr):
        _check(self._lib.gh_tensor_unpin(self.handle, _ptr(ptr, "gh_tensor_unpin")), "gh_tensor_unpin")

    def set_kind(self, ptr, kind):
        """gh_tensor_set_kind: what the tensor holds (its eviction priority)."""
        _check(self._lib.gh_tensor_set_kind(self.handle, _ptr(ptr, "gh_tensor_set_kind"), int(parse_kind(kind))),
               "gh_tensor_set_kind")

    def tier(self, ptr):
        """gh_tensor_tier: the Tier of the tensor's first byte."""
        t = ctypes.c_int()
        _check(self._lib.gh_tensor_tier(self.handle, _ptr(ptr, "gh_tensor_tier"), ctypes.byref(t)), "gh_tensor_tier")
        return Tier(t.value)

    # -- the whole manager
    def stats(self):
        """gh_tmgr_stats as a dict (see stats_to_dict)."""
        s = _capi.TmgrStats()
        _check(self._lib.gh_tmgr_stats(self.handle, ctypes.byref(s)), "gh_tmgr_stats")
        return stats_to_dict(s)

    def frame_map(self):
        """gh_tmgr_frame_map: every mapped frame in address order, as dicts
        {va, tier, kind, pinned, heap, tensors, used_bytes}."""
        fn = _need(self._lib, "gh_tmgr_frame_map")
        rows = _read_all(lambda out, cap, cnt: fn(self.handle, out, cap, cnt), _capi.FrameInfo, "gh_tmgr_frame_map")
        return [frame_to_dict(f) for f in rows]

    def tensor_map(self):
        """gh_tmgr_tensor_map: every tensor in address order, live ones and
        those freed whose streams are not known to be past the free yet
        (pending), as dicts {ptr, bytes, span, extent, device_bytes, stream,
        kind, pinned, cold, pending, run, context}."""
        fn = _need(self._lib, "gh_tmgr_tensor_map")
        rows = _read_all(lambda out, cap, cnt: fn(self.handle, out, cap, cnt), _capi.TensorInfo, "gh_tmgr_tensor_map")
        return [tensor_to_dict(t) for t in rows]

    def record_history(self, max_entries):
        """gh_tmgr_record_history: keep the latest max_entries tensor calls
        (alloc, free_requested, free_completed, oom) from now on; 0 stops
        and drops them."""
        if not isinstance(max_entries, int) or max_entries < 0:
            raise Error(ERR_INVAL, f"max_entries must be an int >= 0, not {max_entries!r}", "record_history")
        _check(_need(self._lib, "gh_tmgr_record_history")(self.handle, max_entries), "gh_tmgr_record_history")

    def history(self):
        """gh_tmgr_history: (entries oldest first as dicts {action, addr,
        size, stream, time_ns, context, kind[, device_free]}, how many were
        dropped since recording began)."""
        fn = _need(self._lib, "gh_tmgr_history")
        dropped = ctypes.c_uint64()
        rows = _read_all(lambda out, cap, cnt, d: fn(self.handle, out, cap, cnt, d), _capi.HistEntry,
                         "gh_tmgr_history", ctypes.byref(dropped))
        return [hist_to_dict(e) for e in rows], dropped.value

    def empty_cache(self):
        """gh_tmgr_empty_cache: give back frames that hold no live tensor (as
        torch.cuda.empty_cache). With a library that lacks it, runs
        gh_tmgr_maintain instead (which reclaims completed frees)."""
        fn = self._lib.gh_tmgr_empty_cache
        if fn is None:
            self.maintain()
        else:
            _check(fn(self.handle), "gh_tmgr_empty_cache")

    def set_device_budget(self, budget):
        """gh_tmgr_set_device_budget: the device budget becomes `budget`
        (bytes or a string such as "8GiB"; whole frames, at least one). A
        lower one evicts now, as an allocation would make room; where
        pinned tensors or the device heap keep more on the device, Error
        (ERR_BUDGET) and the old budget stays."""
        n = parse_size(budget, "device_budget")
        _check(_need(self._lib, "gh_tmgr_set_device_budget")(self.handle, n), "gh_tmgr_set_device_budget")

    def reset_peak(self):
        """gh_tmgr_reset_peak: restart stats()["peak_tensor_bytes"] from the
        bytes live now (as torch.cuda.reset_peak_memory_stats)."""
        _check(_need(self._lib, "gh_tmgr_reset_peak")(self.handle), "gh_tmgr_reset_peak")

    def maintain(self):
        """gh_tmgr_maintain: a sync point (reclaim frees, evict/restore to the
        watermarks; with a device heap, grow it past its high watermark or give
        back its free trailing frames, including frames whose only claimed
        pages are empty pages kept by hint slots)."""
        _check(self._lib.gh_tmgr_maintain(self.handle), "gh_tmgr_maintain")

    def set_oom_observer(self, fn):
        """Call fn(bytes_wanted, stats_dict) when a request finds neither tier
        with room (before it fails with ERR_BUDGET). It runs on the thread of
        the failing call -- possibly one of PyTorch's -- outside the manager's
        lock, so it may call the manager (e.g. empty_cache). Exceptions in fn
        are printed and swallowed. None removes the observer."""
        if fn is None:
            _check(self._lib.gh_tmgr_set_oom_observer(self.handle, _capi.OOM_FN(), None), "gh_tmgr_set_oom_observer")
            self._oom = None
            return
        if not callable(fn):
            raise Error(ERR_INVAL, f"{fn!r} is not callable", "set_oom_observer")

        def trampoline(user, nbytes, stats_p):
            try:
                fn(int(nbytes), stats_to_dict(stats_p.contents) if stats_p else {})
            except BaseException:  # never unwind into C
                traceback.print_exc()

        cb = _capi.OOM_FN(trampoline)
        _check(self._lib.gh_tmgr_set_oom_observer(self.handle, cb, None), "gh_tmgr_set_oom_observer")
        prev, self._oom = self._oom, (cb, fn)
        if prev is not None:
            _retired_callbacks.append(prev)  # a call in flight may still be running it

    # -- the process-wide manager
    def set_global(self):
        """Make this the process-wide manager of the framework entry points
        (gh_tmgr_set_global). From then on it is never destroyed."""
        _check(self._lib.gh_tmgr_set_global(self.handle), "gh_tmgr_set_global")
        self._global = True
        _globals.append(self)
        return self


_retired_callbacks = []  # observer callbacks replaced while C might still call them
_globals = []            # managers made global: alive until the process ends
_global_lock = threading.Lock()


def set_global(manager):
    """gh_tmgr_set_global(manager) (a Manager, or None to unset: the library
    then keeps none until set again or made on first use)."""
    if manager is None:
        lib = library()
        _check(lib.gh_tmgr_set_global(None), "gh_tmgr_set_global")
        return None
    return manager.set_global()


def global_manager():
    """The process-wide manager (gh_tmgr_global: made with the defaults on
    first use unless one was set), as a Manager that is never destroyed."""
    with _global_lock:
        for m in _globals:
            if m._handle:
                lib = m._lib
                h = lib.gh_tmgr_global()
                if h == m._handle:
                    return m
        lib = library()
        h = lib.gh_tmgr_global()
        if not h:
            detail = lib.gh_last_error_detail().decode(errors="replace")
            # gh_tmgr_global returns NULL and keeps only the detail, not the code.
            raise Error(ERR_CUDA if "cuda" in detail.lower() else ERR_NOMEM, detail, "gh_tmgr_global")
        m = Manager._borrow(h, lib)
        _globals.append(m)
        return m
