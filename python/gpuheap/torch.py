"""PyTorch on gpuheap: every CUDA tensor from gpuheap's tensor manager, one
memory budget, cold frames on the host at the same address.

    import gpuheap.torch
    gpuheap.torch.enable(device_budget="40GiB")       # before the first CUDA tensor
    ...
    with gpuheap.torch.offload():                     # activations are advised cold in forward
        loss = model(x).loss                          # (evicted only under pressure), come back
                                                      # ahead of use in backward
    loss.backward()

enable() installs gpuheap through torch.cuda.memory.CUDAPluggableAllocator
(gh_torch_alloc_or_throw / gh_torch_free of libgpuheap.so: out of memory is
a RuntimeError "gpuheap: out of memory (...)"; CUDA graph captures are
served from graph pools; python/README.md, "Limits"); it must run before
PyTorch initializes CUDA, because PyTorch refuses to swap an allocator that
has been used. The per-tensor calls (set_kind, pin, unpin, advise, evict,
prefetch, tier) take a CUDA tensor and act on its *storage*:
tensor.untyped_storage().data_ptr(), the start of the allocation gpuheap
made (a view acts on the whole storage it looks into).

This module imports without PyTorch; PyTorch is imported when a function
needs it.
"""
import collections
import contextlib
import ctypes
import itertools
import sys
import threading
import warnings
import weakref

import gpuheap
from gpuheap import _capi
from gpuheap import (Error, Kind, Advice, ERR_INVAL, ERR_UNSUPPORTED, ERR_NO_DEVICE, ERR_FOREIGN, ERR_DOUBLE_FREE,
                     ERR_PINNED, ERR_BUDGET)

__all__ = ["enable", "is_enabled", "manager", "memory_stats", "memory_summary", "torch_style_stats", "empty_cache",
           "graph_pools", "set_kind", "pin", "unpin", "pinned", "advise", "evict", "prefetch", "tier", "mark_model",
           "offload", "Offload", "OFFLOAD_MODES"]

TOO_LATE = ("PyTorch has initialized CUDA (and its caching allocator) already: call gpuheap.torch.enable() "
            "before the first CUDA tensor, and before anything else that initializes CUDA in PyTorch "
            "(torch.cuda.current_device(), torch.cuda.synchronize(), .cuda(), ...)")

_lock = threading.RLock()
_manager = None
_allocator = None
_protected = set()  # storage addresses marked weights / optimizer state: offload never evicts them


def _torch():
    try:
        import torch
    except ImportError as e:
        raise Error(ERR_UNSUPPORTED, f"PyTorch does not import ({e})", "gpuheap.torch") from None
    return torch


def _too_late(torch):
    """True when PyTorch's CUDA allocator has been initialized (then
    change_current_allocator fails) or has handed out memory."""
    if torch.cuda.is_initialized():
        return True
    try:
        return torch.cuda.memory_allocated() > 0  # 0 without initializing while CUDA is not initialized
    except Exception:
        return False


def enable(device_budget=None, host_budget=None, torch_stats=True, graph_trees=True, **options):
    """Make gpuheap PyTorch's CUDA allocator; returns the gpuheap.Manager.

    device_budget, host_budget: bytes or "40GiB"-style strings; None: the
    library's defaults (free device memory at creation minus 1 GiB; half of
    that on the host, at least 1 GiB). Other options: those of
    gpuheap.Manager (low_watermark, high_watermark, device, device_reserve,
    host_pool_frames, ...).

    torch_stats=True (the default) makes torch.cuda.memory_stats() and what
    PyTorch builds on it (memory_allocated, max_memory_allocated,
    memory_reserved, max_memory_reserved) answer from gpuheap's statistics,
    torch.cuda.memory_summary() print gpuheap's summary, and
    torch.cuda.reset_peak_memory_stats() restart gpuheap's peak: under a
    pluggable allocator PyTorch's own raise a RuntimeError (getDeviceStats
    is not supported), which stops programs that only log their memory.
    It also serves PyTorch's memory snapshots and history
    (torch.cuda.memory_snapshot(), torch.cuda.memory._snapshot(),
    _dump_snapshot() and _record_memory_history(), which a pluggable
    allocator refuses) from gpuheap's tensors and its call history, in
    PyTorch's format (gpuheap.memviz), and
    torch.cuda.get_per_process_memory_fraction() from the device budget.

    PyTorch is also given gpuheap's callbacks for record_stream,
    torch.cuda.empty_cache() and CUDA graph pools (torch.cuda.graph
    captures allocate from pools of their own, pinned and kept until the
    graph is gone: graph_pools()); a PyTorch that lacks some gets one
    warning naming what is lost. cuDNN's benchmark mode asks the allocator
    how large a workspace it may take (cacheInfo, which PyTorch's pluggable
    allocator refuses): gpuheap answers with the device budget's free bytes.

    graph_trees=True (the default) lets torch.compile(mode="reduce-overhead")
    record its CUDA graphs on gpuheap: the calls its graph trees make to
    PyTorch's allocator that a pluggable allocator refuses (the pool's live
    allocations, its checkpointed state and the restoring of it) are
    answered from gpuheap's graph pools (_GraphTrees).

    Must run before PyTorch initializes CUDA; raises gpuheap.Error
    (ERR_INVAL) saying so otherwise. A second call returns the same manager
    (its options, if different, are ignored with a warning)."""
    global _manager, _allocator
    torch = _torch()
    with _lock:
        if _manager is not None:
            if device_budget is not None or host_budget is not None or options:
                warnings.warn("gpuheap.torch.enable: already enabled; the new options are ignored", stacklevel=2)
            return _manager
        opts = gpuheap.validate_options(device_budget=device_budget, host_budget=host_budget, **options)
        if _too_late(torch):
            raise Error(ERR_INVAL, TOO_LATE, "gpuheap.torch.enable")
        if not torch.cuda.is_available():
            raise Error(ERR_NO_DEVICE, "torch.cuda.is_available() is False", "gpuheap.torch.enable")
        path = gpuheap.library_path()
        m = gpuheap.Manager(**opts)
        try:
            m.set_global()  # refused if another manager (or the default one) serves the entry points already
        except Error:
            m.close()
            raise
        try:
            mem = torch.cuda.memory
            Pluggable = getattr(mem, "CUDAPluggableAllocator", None) or torch.cuda.CUDAPluggableAllocator
            # The entry point that throws: PyTorch turns a C++ exception from
            # it into a RuntimeError, where a NULL would become a tensor at
            # address 0 that faults at its first kernel.
            alloc = Pluggable(path, "gh_torch_alloc_or_throw", "gh_torch_free")
            _set_callbacks(alloc)
            mem.change_current_allocator(alloc)
        except RuntimeError as e:
            _unset_global(m)
            raise Error(ERR_INVAL, f"{TOO_LATE} [PyTorch: {e}]", "gpuheap.torch.enable") from e
        except BaseException:
            _unset_global(m)
            raise
        _manager, _allocator = m, alloc
        dev = opts.get("device")
        dev = torch.cuda.current_device() if dev is None or dev < 0 else dev
        if torch_stats:
            _patch_torch_stats(torch)
            _MemoryHistory.install(torch, m, dev)
        _serve_cache_info()
        if graph_trees:
            _GraphTrees.install(torch, dev)
        return m


def _serve_cache_info():
    """PyTorch's pluggable allocator raises for cacheInfo, which cuDNN's
    benchmark mode (torch.backends.cudnn.benchmark = True) asks at its first
    convolution: answered by gpuheap instead (gh_torch_serve_cache_info: the
    device budget's free bytes). One warning where it cannot be."""
    lib = gpuheap.library()
    rc = lib.gh_torch_serve_cache_info() if lib.gh_torch_serve_cache_info is not None else ERR_UNSUPPORTED
    if rc != 0:
        detail = (lib.gh_last_error_detail().decode(errors="replace") if lib.gh_torch_serve_cache_info is not None
                  else "an older libgpuheap")
        warnings.warn("gpuheap.torch: torch.backends.cudnn.benchmark = True raises under gpuheap "
                      f"(PyTorch's pluggable allocator has no cacheInfo: {detail})", RuntimeWarning, stacklevel=3)
    return rc == 0


def _patch_torch_stats(torch):
    """torch.cuda's memory_stats, memory_summary, reset_peak_memory_stats and
    reset_accumulated_memory_stats answered by gpuheap
    (enable(torch_stats=True)). PyTorch's memory_allocated,
    max_memory_allocated, memory_reserved and max_memory_reserved look
    memory_stats up in torch.cuda.memory when called, so they follow; the
    keys PyTorch has and gpuheap does not (torch_style_stats says which)
    read as PyTorch's .get() defaults, 0."""
    patches = {"memory_stats": lambda device=None: memory_stats(),  # one manager, one device
               "memory_summary": lambda device=None, abbreviated=False: memory_summary(),
               "reset_peak_memory_stats": lambda device=None: reset_peak_memory_stats(),
               "reset_accumulated_memory_stats": lambda device=None: reset_accumulated_memory_stats()}
    for mod in (torch.cuda.memory, torch.cuda):
        for name, fn in patches.items():
            if hasattr(mod, name):
                setattr(mod, name, fn)


# At most this many history entries are kept (48 bytes each in the
# library's ring, which grows as they come): PyTorch's default max_entries
# is sys.maxsize.
HISTORY_MAX_ENTRIES = 1 << 22


class _MemoryHistory:
    """torch.cuda.memory's snapshots and history served by gpuheap
    (enable(torch_stats=True)): the torch._C functions they call, which
    raise under a pluggable allocator, replaced by

      _cuda_memorySnapshot         gpuheap.memviz.torch_snapshot of the manager
                                   (with a pool id: that CUDA graph pool's
                                   segments only)
      _cuda_record_memory_history  the manager's call history
                                   (Manager.record_history) and, for
                                   context "state", "alloc" or "all", the
                                   Python stack of each allocation, taken
                                   through gh_torch_set_history_context
      _cuda_record_memory_history_legacy  the same, from the older arguments
      _cuda_getMemoryFraction      device budget / the device's memory
      _cuda_attach_out_of_memory_observer  fn(device, bytes asked, bytes of
                                   tensors on the device, the device budget's
                                   bytes not in use) at each request refused
                                   for want of room, before PyTorch raises
                                   (PyTorch's recipe: dump a snapshot there);
                                   through Manager.set_oom_observer, whose
                                   observer set before is called first (one
                                   set after replaces this)

    The stacks are Python frames only (PyTorch's stacks="all" adds C++
    frames, which gpuheap cannot see), innermost first, as PyTorch gives
    them; an allocation made by a thread with no Python frames (autograd's
    backward threads) has none. The frames are kept while a live tensor or
    a history entry names them."""

    installed = None

    def __init__(self, torch, manager, device):
        self.torch, self.manager, self.device = torch, manager, device
        self.frames = {}  # tag -> frames
        self.tags = itertools.count(1)
        self.prune_at = 1 << 16
        self.fn = None  # the ctypes callback, once made (never dropped: see _stacks)
        self.stacks_on = False
        self.lock = threading.Lock()
        self.oom_observers = []

    @classmethod
    def install(cls, torch, manager, device):
        h = cls(torch, manager, device)
        lib = gpuheap.library()
        C = torch._C
        if lib.gh_tmgr_tensor_map is not None and hasattr(C, "_cuda_memorySnapshot"):
            C._cuda_memorySnapshot = h.snapshot
        if lib.gh_tmgr_record_history is not None:
            if hasattr(C, "_cuda_record_memory_history"):
                C._cuda_record_memory_history = h.record
            if hasattr(C, "_cuda_record_memory_history_legacy"):
                C._cuda_record_memory_history_legacy = h.record_legacy
        if hasattr(C, "_cuda_getMemoryFraction"):
            C._cuda_getMemoryFraction = h.memory_fraction
        if hasattr(C, "_cuda_attach_out_of_memory_observer"):
            C._cuda_attach_out_of_memory_observer = h.attach_oom_observer
        cls.installed = h
        return h

    # -- torch._C's stand-ins
    def snapshot(self, arg=None):
        """_cuda_memorySnapshot(None or (pool id 0, pool id 1, include_traces))."""
        include_traces, pool = True, None
        if arg is not None:
            arg = tuple(arg)
            if tuple(arg[:2]) != (0, 0):
                pool = (int(arg[0]), int(arg[1]))  # a CUDA graph pool's segments only
            if len(arg) > 2:
                include_traces = bool(arg[2])
        from gpuheap import memviz
        return memviz.torch_snapshot(self.manager, self.device, include_traces, self.frames, pool)

    def record(self, enabled="all", context="all", stacks="all", max_entries=sys.maxsize, clear_history=False,
               *_ignored):
        """_cuda_record_memory_history(enabled, context, stacks, max_entries,
        clear_history, compile_context, global_record_annotations,
        skip_actions): the last three are accepted and ignored."""
        if enabled not in (None, "state", "all"):
            raise RuntimeError(f"gpuheap: _record_memory_history: enabled must be None, 'state' or 'all', not "
                               f"{enabled!r}")
        if context not in (None, "state", "alloc", "all"):
            raise RuntimeError(f"gpuheap: _record_memory_history: context must be None, 'state', 'alloc' or 'all', "
                               f"not {context!r}")
        if stacks not in ("python", "all"):
            raise RuntimeError(f"gpuheap: _record_memory_history: stacks must be 'python' or 'all', not {stacks!r}")
        if enabled is None:
            self._stacks(False)
            self.manager.record_history(0)
            with self.lock:
                self.frames.clear()
            return
        if clear_history:
            self.manager.record_history(0)
        keep = min(int(max_entries), HISTORY_MAX_ENTRIES) if enabled == "all" else 0
        self.manager.record_history(keep)
        self._stacks(context is not None)

    def record_legacy(self, enabled, record_context=True, trace_alloc_max_entries=1, trace_alloc_record_context=False,
                      record_context_cpp=False, clear_history=False, *_ignored):
        """_cuda_record_memory_history_legacy's arguments, read as record()'s."""
        if not enabled:
            return self.record(None)
        return self.record("all" if trace_alloc_max_entries > 1 else "state",
                           "all" if record_context or trace_alloc_record_context else None, "python",
                           max(int(trace_alloc_max_entries), 1), clear_history)

    def memory_fraction(self, device=None):
        """_cuda_getMemoryFraction: the device budget over the device's memory."""
        total = self.torch.cuda.get_device_properties(self.device).total_memory
        return self.manager.stats()["device_budget"] / total

    def attach_oom_observer(self, fn):
        """_cuda_attach_out_of_memory_observer(fn)."""
        if not callable(fn):
            raise TypeError(f"gpuheap: an out-of-memory observer must be callable, not {fn!r}")
        with self.lock:
            self.oom_observers.append(fn)
            first = len(self.oom_observers) == 1
        if first:
            before = self.manager._oom[1] if getattr(self.manager, "_oom", None) else None
            self.manager.set_oom_observer(lambda n, st: self._on_oom(n, st, before))

    def _on_oom(self, nbytes, st, before):
        if before is not None:
            before(nbytes, st)
        fb = st["frame_bytes"]
        on_device = sum(v["device"] for v in st["tensor_bytes_tier"].values())
        # as the library's OOM history entry counts it: every device frame created
        used = (st["frames"]["device"] + st["heap_frames"]["device"] + st["cached_frames"] + st["spare_frames"]) * fb
        free = max(st["device_budget"] - used, 0)
        for fn in list(self.oom_observers):
            try:
                fn(self.device, nbytes, on_device, free)
            except Exception:  # noqa: BLE001 (one observer's failure stops no other; printed)
                import traceback
                traceback.print_exc()

    # -- the stacks
    def _stacks(self, on):
        """The library's tag function set to _tag, or unset. The ctypes
        callback is made once and kept as long as this object (for good:
        installed): an allocation on another thread may still be calling
        it after it is unset."""
        if on == self.stacks_on:
            return
        if self.fn is None:
            self.fn = _capi.HIST_TAG_FN(self._tag)
        gpuheap.library().gh_torch_set_history_context(self.fn if on else _capi.HIST_TAG_FN())
        self.stacks_on = on

    def _tag(self, size):
        """gh_torch_set_history_context's function: the allocating thread's
        Python stack kept under a new tag. Never raises into the library."""
        try:
            f = sys._getframe(1)
            frames = []
            while f is not None:
                frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno, "name": f.f_code.co_name})
                f = f.f_back
            tag = next(self.tags)
            with self.lock:
                self.frames[tag] = frames
                full = len(self.frames) > self.prune_at
            if full:
                self.prune()
            return tag
        except BaseException:  # noqa: BLE001 (a callback from C: nothing may escape)
            return 0

    def prune(self):
        """Drop the frames no live tensor and no history entry names. A tag
        newer than every named one is kept: its allocation may be underway
        (the tag is made before it)."""
        named = {t["context"] for t in self.manager.tensor_map()}
        named.update(e["context"] for e in self.manager.history()[0])
        newest = max(named, default=0)
        with self.lock:
            for tag in [t for t in self.frames if t not in named and t < newest]:
                del self.frames[tag]
            self.prune_at = max(1 << 16, 2 * len(self.frames))


# The pluggable allocator's callbacks gpuheap gives PyTorch: (setter, entry
# point, what a PyTorch without that setter loses).
_CALLBACKS = (
    # Without it record_stream does nothing under a pluggable allocator, and
    # the memory of a tensor record_stream'ed on a side stream (by the
    # program, or by NCCL's process groups) would be reused while that
    # stream still writes it (bench/results/logs-torch-edges/, run 3).
    ("set_record_stream_fn", "gh_torch_record_stream",
     "Tensor.record_stream does nothing under gpuheap (synchronize side streams before dropping their tensors)"),
    # torch.cuda.empty_cache(): frames with no live tensor given back.
    ("set_reset_fn", "gh_torch_empty_cache", "torch.cuda.empty_cache() does nothing (use gpuheap.torch.empty_cache)"),
    # torch.cuda.set_per_process_memory_fraction(f): the device budget
    # becomes f of the device's memory (beyond it, eviction to the host).
    ("set_memory_fraction_fn", "gh_torch_set_memory_fraction",
     "torch.cuda.set_per_process_memory_fraction() does nothing (use Manager.set_device_budget)"),
    # CUDA graphs: a capture's memory kept in a pool of its own until the
    # graph is gone (host/adapters_torch.cc); without the three, captures
    # are refused at their first allocation.
    ("set_begin_allocate_to_pool", "gh_torch_begin_allocate_to_pool", "CUDA graph captures are refused"),
    ("set_end_allocate_to_pool_fn", "gh_torch_end_allocate_to_pool", "CUDA graph captures are refused"),
    ("set_release_pool", "gh_torch_release_pool", "CUDA graph captures are refused"),
)


def _set_callbacks(alloc):
    """Give PyTorch gpuheap's callbacks (_CALLBACKS) where its pluggable
    allocator takes them; one warning naming what is lost where it does not.
    The graph-pool callbacks are given all three or none (a capture whose
    pool never ends or is never released would keep its memory pinned).
    Returns the setters used."""
    inner = alloc.allocator() if hasattr(alloc, "allocator") else None
    lib = gpuheap.library()
    have = {name for name, entry, _ in _CALLBACKS
            if callable(getattr(inner, name, None)) and getattr(lib.cdll, entry, None) is not None}
    pools = {"set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn", "set_release_pool"}
    if not pools <= have:
        have -= pools
    lost = sorted({why for name, _, why in _CALLBACKS if name not in have})
    if lost:
        warnings.warn("gpuheap.torch: this PyTorch's pluggable allocator lacks callbacks gpuheap needs: "
                      + "; ".join(lost), RuntimeWarning, stacklevel=3)
    for name, entry, _ in _CALLBACKS:
        if name in have:
            getattr(inner, name)(lib.address_of(entry))
    return have


def _unset_global(m):
    """Undo m.set_global() after a failed enable and destroy m (nothing was
    allocated from it)."""
    try:
        gpuheap.set_global(None)
        m._global = False
        if m in gpuheap._globals:
            gpuheap._globals.remove(m)
        m.close()
    except Exception:
        pass


def is_enabled():
    return _manager is not None


def manager():
    """The manager enable() made; Error(ERR_INVAL) before enable()."""
    if _manager is None:
        raise Error(ERR_INVAL, "call gpuheap.torch.enable() first", "gpuheap.torch")
    return _manager


def _mgr(m):
    return m if m is not None else manager()


# ---------------------------------------------------------------- statistics
def torch_style_stats(st):
    """gpuheap statistics (Manager.stats()) in the shape of
    torch.cuda.memory_stats(): a dict sorted by key. Keys PyTorch also has:

      allocated_bytes.all.current  requested bytes of live tensors, both tiers
      reserved_bytes.all.current   bytes of mapped frames (tensor and device-heap
                                   frames, device and host tiers)
      allocation.all.current       live tensors
      allocated_bytes.all.peak     the most requested bytes live at once
                                   (Manager.reset_peak restarts it)
      num_ooms                     requests that found neither tier with room

    and gpuheap's own, prefixed "gpuheap.": budgets, frame_bytes, frames per
    tier (frames.device / .host / .free), heap_frames.*, device_bytes and
    host_bytes (mapped frames per tier), allocated_bytes.<tier>.current,
    allocated_bytes.<kind>.current, allocation.<kind>.current, evictions,
    restores, bytes_evicted, bytes_restored, pinned_tensors, pending_frees,
    host_pool_frames, heap_grows, heap_shrinks, cached_frames, spare_frames,
    and where the manager's time went: moves (batches moved between tiers),
    move_ns, stream_waits, stream_wait_ns, vmm_move_ns (physical-memory calls
    inside moves), ordered_moves (moves that left their copies running),
    chunk_frames and chunk_changes (the frames moved as one, and how often
    that size followed the tensors' sizes);
    host_placed_bytes (new tensors placed in host memory for
    want of device room).

    Left out, because gpuheap has nothing that means the same: the other
    *.peak keys and *.allocated / *.freed (no totals: sample them),
    active_bytes, inactive_split, the small/large pool split,
    num_alloc_retries (gpuheap never drops a cache and retries: it evicts,
    see gpuheap.evictions), num_device_alloc / num_device_free."""
    fb = st["frame_bytes"]
    tiers = ("device", "host")
    out = {
        "allocated_bytes.all.current": sum(st["tensor_bytes"].values()),
        "reserved_bytes.all.current": sum(st["frames"][t] + st["heap_frames"][t] for t in tiers) * fb,
        "allocation.all.current": sum(st["tensors"].values()),
        "allocated_bytes.all.peak": st["peak_tensor_bytes"],
        "num_ooms": st["oom_events"],
        "gpuheap.device_budget": st["device_budget"],
        "gpuheap.host_budget": st["host_budget"],
        "gpuheap.frame_bytes": fb,
        "gpuheap.frames.free": st["frames"]["none"],
    }
    for t in tiers:
        out[f"gpuheap.frames.{t}"] = st["frames"][t]
        out[f"gpuheap.heap_frames.{t}"] = st["heap_frames"][t]
        out[f"gpuheap.{t}_bytes"] = (st["frames"][t] + st["heap_frames"][t]) * fb
        out[f"gpuheap.allocated_bytes.{t}.current"] = sum(v[t] for v in st["tensor_bytes_tier"].values())
    for k, v in st["tensor_bytes"].items():
        out[f"gpuheap.allocated_bytes.{k}.current"] = v
        out[f"gpuheap.allocation.{k}.current"] = st["tensors"][k]
    for c in ("evictions", "restores", "bytes_evicted", "bytes_restored", "pinned_tensors", "pending_frees",
              "host_pool_frames", "heap_grows", "heap_shrinks"):
        out["gpuheap." + c] = st[c]
    for c in ("cached_frames", "spare_frames", "moves", "move_ns", "stream_waits", "stream_wait_ns",
              "host_placed_bytes", "vmm_move_ns", "ordered_moves", "chunk_frames", "chunk_changes"):
        out["gpuheap." + c] = st[c]
    return collections.OrderedDict(sorted(out.items()))


# The counters of torch_style_stats that only grow: reset_accumulated_memory_stats
# restarts them from 0 (a base per manager, subtracted by memory_stats).
ACCUMULATED_KEYS = ("num_ooms", "gpuheap.evictions", "gpuheap.restores", "gpuheap.bytes_evicted",
                    "gpuheap.bytes_restored", "gpuheap.heap_grows", "gpuheap.heap_shrinks", "gpuheap.moves",
                    "gpuheap.move_ns", "gpuheap.stream_waits", "gpuheap.stream_wait_ns", "gpuheap.vmm_move_ns",
                    "gpuheap.ordered_moves", "gpuheap.chunk_changes", "gpuheap.host_placed_bytes")
_accumulated_base = {}  # manager handle -> {key: value at the reset}


def memory_stats(manager=None):
    """torch_style_stats of the manager (default: the one enable() made),
    its accumulated counters (ACCUMULATED_KEYS) counted from the last
    reset_accumulated_memory_stats. torch.cuda.memory_stats() itself does
    not work under a pluggable allocator."""
    m = _mgr(manager)
    out = torch_style_stats(m.stats())
    for k, v in _accumulated_base.get(getattr(m, "handle", id(m)), {}).items():
        out[k] -= v
    return out


def reset_accumulated_memory_stats(manager=None):
    """Restart memory_stats()'s accumulated counters (ACCUMULATED_KEYS:
    evictions, restores, bytes moved, OOMs, ...) from 0, as
    torch.cuda.reset_accumulated_memory_stats() would (under
    enable(torch_stats=True) it does this); the library's own counters
    (Manager.stats()) go on counting."""
    m = _mgr(manager)
    st = torch_style_stats(m.stats())
    _accumulated_base[getattr(m, "handle", id(m))] = {k: st[k] for k in ACCUMULATED_KEYS}


def memory_summary(manager=None):
    """A readable summary of the manager's memory, what
    torch.cuda.memory_summary() prints under enable(torch_stats=True)
    (PyTorch's own needs statistics only its allocator keeps, and raises
    under gpuheap's): per tier, per kind, the counters, and the CUDA graph
    pools."""
    from gpuheap import snapshot as _snapshot
    text = _snapshot.to_text(_snapshot.snapshot(_mgr(manager), frames=False))
    if gpuheap.library().gh_torch_pool_counts is not None:
        text += "CUDA graph pools: " + "  ".join(f"{k} {v}" for k, v in graph_pools().items()) + "\n"
    return text


def reset_peak_memory_stats(manager=None):
    """Restart memory_stats()["allocated_bytes.all.peak"] from the bytes live
    now (gh_tmgr_reset_peak), as torch.cuda.reset_peak_memory_stats() would."""
    _mgr(manager).reset_peak()


def empty_cache(manager=None):
    """Give back frames that hold no live tensor (gh_tmgr_empty_cache), and
    for the enabled manager the memory of CUDA graphs gone that a capture
    underway kept back; tensors are not moved. torch.cuda.empty_cache()
    does the same under gpuheap.torch.enable (its empty-cache callback)."""
    m = _mgr(manager)
    if m is _manager and _GraphTrees.installed is not None:
        _GraphTrees.installed.sweep()  # adopted blocks whose storages are gone
    if m is _manager and gpuheap.library().gh_torch_empty_cache is not None:
        gpuheap.library().gh_torch_empty_cache()  # the graphs' blocks, then gh_tmgr_empty_cache
    else:
        m.empty_cache()


def graph_pools():
    """The CUDA graph pools gpuheap serves for PyTorch now, as a dict:
    pools, blocks (the memory of captures, pinned on the device), freed
    (blocks PyTorch freed that their pool keeps for its graph's replays),
    retired (blocks of graphs gone, given back once no capture is
    underway)."""
    lib = gpuheap.library()
    if lib.gh_torch_pool_counts is None:
        raise Error(ERR_UNSUPPORTED, "this libgpuheap has no graph pools", "gpuheap.torch.graph_pools")
    v = [ctypes.c_size_t() for _ in range(4)]
    lib.gh_torch_pool_counts(*[ctypes.byref(x) for x in v])
    return dict(zip(("pools", "blocks", "freed", "retired"), (x.value for x in v)))


# ---------------------------------------------------------------- CUDA graph trees
POOL_BLOCK_LIVE, POOL_BLOCK_FREED, POOL_BLOCK_ADOPTED = 0, 1, 2


class _Checkpoint:
    """A graph pool's state as getCheckpointState gives it to CUDA graph
    trees, which only hand it back to setCheckpointPoolState: the pool and
    its live blocks then (for reading; the restore needs only the storages
    PyTorch names)."""
    __slots__ = ("device", "pool", "live")

    def __init__(self, device, pool, live):
        self.device, self.pool, self.live = device, pool, live

    def __repr__(self):
        return f"<gpuheap graph pool {self.pool} checkpoint: {len(self.live)} live blocks>"


class _GraphTrees:
    """torch.compile(mode="reduce-overhead") records CUDA graphs with graph
    trees (torch/_inductor/cudagraph_trees.py). They allocate through
    PyTorch's graph-pool callbacks, which gpuheap serves, and also call six
    torch._C functions that reach PyTorch's allocator directly; a pluggable
    allocator refuses three of them outright and cannot take the others'
    pointers. enable() replaces the six by these methods, each passing what
    is not gpuheap's (another device, a state gpuheap did not make, memory
    of no graph pool) to PyTorch's own:

      _cuda_checkPoolLiveAllocations(device, pool, ptrs): whether the pool's
          live blocks (held by a tensor, or adopted) are exactly ptrs.
      _cuda_getCheckpointState(device, pool): a _Checkpoint.
      _cuda_setCheckpointPoolState(device, state, stale, storages): the
          trees' restore before a new recording from a replayed path, where
          the path's live outputs are storages PyTorch made over the graphs'
          memory without a deleter (no allocation of theirs). PyTorch's
          allocator gives them a deleter; here their blocks are adopted
          (gh_torch_pool_adopt: kept from reuse) and given up when the
          storage is gone (found when any of these runs, and by empty_cache)
          or PyTorch frees it by the two calls below. Stale storages (which
          graph trees never pass) are refused.
      _cuda_cudaCachingAllocator_raw_delete(ptr): an adopted block given up;
          one the pool keeps freed already left alone.
      _free_And_Remove_DeleterFn(storage): the same for a storage over an
          adopted block.
      _has_Standard_Deleter(storage): True for a storage over an adopted
          block, as it would be with PyTorch's allocator after the restore.
    """
    NAMES = ("_cuda_checkPoolLiveAllocations", "_cuda_getCheckpointState", "_cuda_setCheckpointPoolState",
             "_cuda_cudaCachingAllocator_raw_delete", "_free_And_Remove_DeleterFn", "_has_Standard_Deleter")
    installed = None

    def __init__(self, torch, lib, device):
        self.torch, self.lib, self.device = torch, lib, device
        self.orig = {name: getattr(torch._C, name, None) for name in self.NAMES}
        self.adopted = {}  # block address -> (pool, our weak reference to the storage over it)
        self.lock = threading.RLock()

    @classmethod
    def install(cls, torch, device):
        """Replace the six (once a process); False, with a warning, where
        this PyTorch or this libgpuheap lacks what they need."""
        lib = gpuheap.library()
        if cls.installed is not None:
            return True
        need = ("gh_torch_pool_blocks", "gh_torch_pool_block_state", "gh_torch_pool_adopt", "gh_torch_pool_unadopt")
        missing = [n for n in cls.NAMES if not callable(getattr(torch._C, n, None))]
        missing += [n for n in need if getattr(lib, n, None) is None]
        S = getattr(torch, "UntypedStorage", None)
        missing += [n for n in ("_new_with_weak_ptr", "_weak_ref", "_expired", "_free_weak_ref")
                    if not callable(getattr(S, n, None))]
        if missing:
            warnings.warn("gpuheap.torch: torch.compile(mode=\"reduce-overhead\") cannot record CUDA graphs under "
                          "gpuheap with this PyTorch or libgpuheap (missing: " + ", ".join(missing) + ")",
                          RuntimeWarning, stacklevel=3)
            return False
        t = cls(torch, lib, device)
        for name, fn in zip(cls.NAMES, (t.check_live, t.get_state, t.set_state, t.raw_delete, t.free_and_remove,
                                        t.has_standard_deleter)):
            setattr(torch._C, name, fn)
        cls.installed = t
        return True

    # -- the pool's blocks
    def _blocks(self, pool):
        n = self.lib.gh_torch_pool_blocks(pool[0], pool[1], None, None, 0)
        ptrs, states = (ctypes.c_size_t * max(n, 1))(), (ctypes.c_int * max(n, 1))()
        n = min(n, self.lib.gh_torch_pool_blocks(pool[0], pool[1], ptrs, states, n))
        return {ptrs[i]: states[i] for i in range(n)}

    def _live(self, pool):
        self.sweep()
        return {p for p, st in self._blocks(pool).items() if st != POOL_BLOCK_FREED}

    def _give_up(self, ptr):
        """Under self.lock: adopted block ptr given up (its storage gone or
        freed by PyTorch)."""
        _pool, weak = self.adopted.pop(ptr)
        self.torch.UntypedStorage._free_weak_ref(weak)
        if self.lib.gh_torch_pool_unadopt(ptr) != 0:
            raise RuntimeError("gpuheap: " + self.lib.gh_last_error_detail().decode(errors="replace"))

    def sweep(self):
        """Adopted blocks whose storage is gone given up; how many."""
        S = self.torch.UntypedStorage
        with self.lock:
            gone = [p for p, (_pool, weak) in self.adopted.items() if S._expired(weak)]
            for p in gone:
                self._give_up(p)
        return len(gone)

    def _ours(self, device):
        return int(device) == self.device

    def _storage_ptr(self, storage_ptr):
        """The data address of the storage at StorageImpl address storage_ptr
        (as graph trees pass them: weak references), and a strong reference
        to it (None, 0 where it is gone)."""
        st = self.torch.UntypedStorage._new_with_weak_ptr(storage_ptr)
        return (None, 0) if st is None else (st, st.data_ptr())

    # -- the six
    def check_live(self, device, pool, ptrs):
        if not self._ours(device):
            return self.orig["_cuda_checkPoolLiveAllocations"](device, pool, ptrs)
        return self._live(tuple(pool)) == {int(p) for p in ptrs}

    def get_state(self, device, pool):
        if not self._ours(device):
            return self.orig["_cuda_getCheckpointState"](device, pool)
        pool = tuple(pool)
        return _Checkpoint(int(device), pool, frozenset(self._live(pool)))

    def set_state(self, device, state, stale, storages):
        if not isinstance(state, _Checkpoint):
            return self.orig["_cuda_setCheckpointPoolState"](device, state, stale, storages)
        if stale:
            raise RuntimeError("gpuheap: setCheckpointPoolState with stale storages is not supported "
                               "(CUDA graph trees pass none)")
        S = self.torch.UntypedStorage
        with self.lock:
            self.sweep()
            named = {}
            for sp in storages:
                st, ptr = self._storage_ptr(sp)
                if st is not None and ptr and ptr not in named:
                    named[ptr] = st._weak_ref()
                del st
            arr = (ctypes.c_size_t * max(len(named), 1))(*named)
            if self.lib.gh_torch_pool_adopt(state.pool[0], state.pool[1], arr, len(named)) != 0:
                for weak in named.values():
                    S._free_weak_ref(weak)
                raise RuntimeError("gpuheap: restoring a CUDA graph pool's checkpoint: "
                                   + self.lib.gh_last_error_detail().decode(errors="replace"))
            # The library gave up this pool's adopted blocks not named again.
            for p in [p for p, (pool, _w) in self.adopted.items() if pool == state.pool and p not in named]:
                S._free_weak_ref(self.adopted.pop(p)[1])
            for p, weak in named.items():
                old = self.adopted.get(p)
                if old is not None:
                    S._free_weak_ref(old[1])
                self.adopted[p] = (state.pool, weak)

    def raw_delete(self, ptr):
        with self.lock:
            st = self.lib.gh_torch_pool_block_state(ptr)
            if st == POOL_BLOCK_ADOPTED and ptr in self.adopted:
                return self._give_up(ptr)
            if st == POOL_BLOCK_FREED:
                return None  # the pool keeps it already (its tensor went before the restore)
        return self.orig["_cuda_cudaCachingAllocator_raw_delete"](ptr)

    def _adopted_ptr(self, storage_ptr):
        """The adopted block the storage at storage_ptr is over, or None."""
        st, ptr = self._storage_ptr(storage_ptr)
        del st
        return ptr if ptr in self.adopted else None

    def free_and_remove(self, storage_ptr):
        with self.lock:
            ptr = self._adopted_ptr(storage_ptr)
            if ptr is not None:
                return self._give_up(ptr)
        return self.orig["_free_And_Remove_DeleterFn"](storage_ptr)

    def has_standard_deleter(self, storage_ptr):
        with self.lock:
            if self._adopted_ptr(storage_ptr) is not None:
                return True
        return self.orig["_has_Standard_Deleter"](storage_ptr)


# ---------------------------------------------------------------- tensors
def _storage(t, what):
    if not getattr(t, "is_cuda", False):
        raise Error(ERR_INVAL, f"{what}: not a CUDA tensor", "gpuheap.torch")
    st = t.untyped_storage()
    return st.data_ptr(), st.nbytes()


def set_kind(tensor, kind, manager=None):
    """What the tensor's storage holds ("weights", "activations", "optimizer",
    "gradients" (= optimizer), "workspace" or a gpuheap.Kind): its eviction
    priority. An empty storage is left alone."""
    ptr, _ = _storage(tensor, "set_kind")
    if ptr:
        _mgr(manager).set_kind(ptr, kind)


def pin(tensor, manager=None):
    """Keep the storage on the device (brought back first if it is on the host). Pins nest."""
    ptr, _ = _storage(tensor, "pin")
    if ptr:
        _mgr(manager).pin(ptr)


def unpin(tensor, manager=None):
    ptr, _ = _storage(tensor, "unpin")
    if ptr:
        _mgr(manager).unpin(ptr)


@contextlib.contextmanager
def pinned(tensor, manager=None):
    """with gpuheap.torch.pinned(t): ... -- pin for the block."""
    pin(tensor, manager)
    try:
        yield tensor
    finally:
        unpin(tensor, manager)


def advise(tensor, advice, manager=None):
    """Advise the storage "cold" (evicted first when the device budget needs
    room, oldest advice first; nothing moves now and no stream is waited
    for) or "normal" again (prefetch and pin also clear a cold advice)."""
    a = gpuheap.parse_advice(advice)
    ptr, _ = _storage(tensor, "advise")
    if ptr:
        _mgr(manager).advise(ptr, a)


def evict(tensor, manager=None):
    """Mark the storage cold and move its frames to the host now (frames
    shared with warm tensors stay). The pointer does not change; kernels may
    still use the tensor (over PCIe) until it is prefetched."""
    ptr, _ = _storage(tensor, "evict")
    if ptr:
        _mgr(manager).evict(ptr)


def _current_stream(device=None):
    """The handle (an int) of the current CUDA stream of `device` (a
    torch.device, an index or None: the current device). Through the C
    bindings where this torch has them: torch.cuda.current_stream builds a
    Stream object and counts the devices at every call, ~10 us, and the
    offload hooks ask ~115 times a training step (bench/NOTES.md, host side,
    rows 89-90: 1.2 ms a step less in the hooks this way)."""
    torch = _torch()
    c = torch._C
    raw, cur = getattr(c, "_cuda_getCurrentRawStream", None), getattr(c, "_cuda_getDevice", None)
    if raw is not None and cur is not None and not isinstance(device, str):
        idx = device if isinstance(device, int) else getattr(device, "index", None)
        return raw(cur() if idx is None else idx)
    return torch.cuda.current_stream(device).cuda_stream


def prefetch(tensor, stream=None, manager=None):
    """Bring the storage's frames back to the device now; `stream` (default:
    the current stream of the tensor's device) joins the streams it is used on."""
    ptr, _ = _storage(tensor, "prefetch")
    if ptr:
        s = stream if stream is not None else _current_stream(tensor.device)
        _mgr(manager).prefetch(ptr, s)


def tier(tensor, manager=None):
    """The gpuheap.Tier of the storage's first byte (DEVICE or HOST)."""
    ptr, _ = _storage(tensor, "tier")
    return _mgr(manager).tier(ptr)


class _Marks:
    """What mark_model did; remove() takes its hooks away."""

    def __init__(self):
        self.counts = {"weights": 0, "optimizer": 0, "gradients": 0, "foreign": 0, "prefetch_errors": 0,
                       "advise_errors": 0, "state_evicted_ahead": 0}
        self._hooks = []

    def remove(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def __repr__(self):
        return f"<gpuheap.torch marks {self.counts}>"


def _mark(t, kind, m, marks, key, protect):
    if t is None or not getattr(t, "is_cuda", False):
        return
    ptr = t.untyped_storage().data_ptr()
    if not ptr:
        return
    try:
        m.set_kind(ptr, kind)
    except Error as e:
        if e.code in (ERR_FOREIGN, ERR_DOUBLE_FREE):  # not a gpuheap allocation
            marks.counts["foreign"] += 1
            return
        raise
    marks.counts[key] += 1
    if protect:
        _protected.add(ptr)


def _storages(tensors):
    """The gpuheap-able storage addresses of CUDA tensors (None skipped)."""
    out = []
    for t in tensors:
        p = _torch_ptr(t) if t is not None else None
        if p:
            out.append(p)
    return out


def _bring_back(m, marks, ptrs, stream):
    """Prefetch storages in one batch on stream() (those all on the device
    move nothing and wait for nothing). Never raises: in hooks a failure is
    counted in marks.counts["prefetch_errors"] and warned about once."""
    if not ptrs:
        return
    try:
        m.prefetch_many(ptrs, stream())
    except Error as e:
        if e.code in (ERR_FOREIGN, ERR_DOUBLE_FREE):  # a storage not from gpuheap: one at a time, skipping it
            for p in ptrs:
                try:
                    m.prefetch(p, stream())
                except Error:
                    pass
            return
        _hook_error(marks, "prefetch_errors", "prefetch", e)


def _hook_error(marks, key, what, e):
    """A failure inside one of mark_model's hooks, which must not raise:
    a storage not from gpuheap is skipped, anything else counted in
    marks.counts[key] and warned about once."""
    if e.code in (ERR_FOREIGN, ERR_DOUBLE_FREE):
        return
    marks.counts[key] += 1
    if marks.counts[key] == 1:
        warnings.warn(f"gpuheap.torch.mark_model: {what} failed: {e}", RuntimeWarning)


def _evictions(m):
    """The manager's frames evicted so far (None where its stats fail)."""
    try:
        return m.stats()["evictions"]
    except (Error, TypeError, KeyError):
        return None


def _state_storages(optimizer):
    """The storages of an optimizer's CUDA state tensors (momentum, ...)."""
    return _storages(v for state in optimizer.state.values() for v in state.values()
                     if getattr(v, "is_cuda", False))


def mark_model(model, optimizer=None, grads=True, manager=None, prefetch=False, *, stream=None,
               offload_state=False):
    """Give a model's memory its kinds: parameters and buffers WEIGHTS
    (evicted last), optimizer state OPTIMIZER, and -- with grads=True --
    gradients OPTIMIZER as they are accumulated (a post-accumulate-grad hook,
    since zero_grad(set_to_none=True) makes new ones every step). Optimizer
    state is made lazily by the first step(): it is marked now and after
    every step (a step post-hook; only storages not marked yet cost a call).
    Weights and optimizer state are also never evicted by offload().

    Under a device budget the manager may still evict them, as any frame,
    once nothing colder is left, and nothing brings evicted memory back by
    itself: kernels then read it over PCIe. In backward, offload()
    prefetches the weights autograd saved as it unpacks them. With
    prefetch=True each module with parameters or buffers of its own also
    prefetches them before its forward (a forward pre-hook), and the
    optimizer its parameters, gradients and state before step() (a step
    pre-hook), in one call each (nothing moves for memory on the device);
    prefetch="step" installs the step pre-hook alone (any other string is
    Error(ERR_INVAL), before anything is marked). Off by default: in
    python/tests/gpu_train.py (c) it moved more than it saved (111-139
    against 93-121 ms a step; bench/NOTES.md, host side, rows 12-13), and
    at widths 384 and 512 both ways moved 2.5-2.8 GB a step more, which
    the next backward evicted again (rows 102 and 105).

    offload_state=True moves the optimizer's state out of the way between
    steps, instead of leaving it on the host once evicted, where every
    step's kernels read and write it over PCIe (bench/NOTES.md, host side,
    row 106). After each step() it is advised quiet (the next forward
    evicts it first when the budget fills, its address left unmapped while
    on the host); when the manager evicted anything since the previous
    step() (or before the first), it is evicted ahead at once instead
    (Manager.evict_ahead: its copies run beside the next forward, which
    then finds the room made; counts["state_evicted_ahead"] steps), row
    107. Before each step() it is brought back by copy in one call (a
    step pre-hook; with prefetch="step" or True the parameters and
    gradients come in the same call). It makes a promise for the
    program: nothing but step() touches the state between steps.
    optimizer.state_dict() keeps it (a state-dict pre-hook brings the
    state back first); reading the state tensors any other way between
    steps, or keeping a state dict across a step, can fault on the
    unmapped address. Needs the optimizer (Error(ERR_INVAL) without one,
    or where it has no state-dict hooks, PyTorch before 2.2).

    Returns a handle whose remove() takes the hooks away. `stream`: a
    callable giving the stream of the prefetches (default: the current one)."""
    if isinstance(prefetch, str) and prefetch != "step":
        raise Error(ERR_INVAL, f"prefetch: {prefetch!r} is not False, True or 'step'", "mark_model")
    if offload_state and (optimizer is None or not all(
            hasattr(optimizer, h) for h in ("register_step_pre_hook", "register_step_post_hook",
                                            "register_state_dict_pre_hook"))):
        raise Error(ERR_INVAL, "offload_state needs an optimizer with state-dict hooks (PyTorch 2.2 or later)",
                    "mark_model")
    m = _mgr(manager)
    marks = _Marks()
    stream = stream or (lambda: _current_stream())
    for t in itertools.chain(model.parameters(), model.buffers()):
        _mark(t, Kind.WEIGHTS, m, marks, "weights", True)
    if grads:
        for p in model.parameters():
            if p.grad is not None:
                _mark(p.grad, Kind.OPTIMIZER, m, marks, "gradients", False)
            if p.requires_grad and hasattr(p, "register_post_accumulate_grad_hook"):
                marks._hooks.append(p.register_post_accumulate_grad_hook(
                    lambda q: _mark(q.grad, Kind.OPTIMIZER, m, marks, "gradients", False)))
    if prefetch and prefetch != "step":
        for mod in model.modules():
            if next(itertools.chain(mod.parameters(recurse=False), mod.buffers(recurse=False)), None) is None:
                continue

            def before_forward(mod, args):
                _bring_back(m, marks, _storages(itertools.chain(mod.parameters(recurse=False),
                                                                mod.buffers(recurse=False))), stream)

            marks._hooks.append(mod.register_forward_pre_hook(before_forward))
    if optimizer is not None:
        seen = set()

        def mark_state(*_):
            for state in optimizer.state.values():
                for v in state.values():
                    if getattr(v, "is_cuda", False):
                        ptr = v.untyped_storage().data_ptr()
                        if ptr and ptr not in seen:
                            seen.add(ptr)
                            _mark(v, Kind.OPTIMIZER, m, marks, "optimizer", True)

        mark_state()
        if hasattr(optimizer, "register_step_post_hook"):
            marks._hooks.append(optimizer.register_step_post_hook(mark_state))
        if (prefetch or offload_state) and hasattr(optimizer, "register_step_pre_hook"):
            def before_step(opt, args, kwargs):
                ts = []
                if prefetch:  # offload_state alone: the state only
                    for g in opt.param_groups:
                        for p in g["params"]:
                            ts.append(p)
                            ts.append(p.grad)
                _bring_back(m, marks, _storages(ts) + _state_storages(opt), stream)

            marks._hooks.append(optimizer.register_step_pre_hook(before_step))
        if offload_state:
            seen_ev = [None]  # the manager's evictions after the last step's own
            can_ahead = [True]  # False with a library that has no gh_tensor_evict_ahead

            def after_step(opt, args, kwargs):
                # Under pressure (frames evicted since the last step's end, or
                # before the first) the state leaves now, its copies beside
                # the next forward; otherwise it is only advised quiet.
                ev = _evictions(m)
                ahead = can_ahead[0] and ev is not None and (ev > seen_ev[0] if seen_ev[0] is not None else ev > 0)
                for p in _state_storages(opt):
                    try:
                        if ahead:
                            try:
                                m.evict_ahead(p)
                                continue
                            except Error as e:
                                if e.code != ERR_UNSUPPORTED:
                                    raise
                                can_ahead[0] = ahead = False  # an older library: the advice, from now on
                        m.advise(p, Advice.QUIET)
                    except Error as e:
                        _hook_error(marks, "advise_errors", "advice", e)
                if ahead:
                    marks.counts["state_evicted_ahead"] += 1
                seen_ev[0] = _evictions(m) if ahead else ev

            def before_state_dict(opt):
                _bring_back(m, marks, _state_storages(opt), stream)

            marks._hooks.append(optimizer.register_step_post_hook(after_step))
            marks._hooks.append(optimizer.register_state_dict_pre_hook(before_state_dict))
    return marks


# ---------------------------------------------------------------- offload
class _Entry:
    __slots__ = ("ref", "ptr", "nbytes", "index", "hinted", "prefetched", "ahead", "unpacked", "dropped",
                 "quiet", "packs", "qnext", "qwait", "__weakref__")

    def __init__(self, t, ptr, nbytes, index):
        try:
            self.ref = weakref.ref(t)
        except TypeError:  # an object without weak references: hold it (the graph holds it anyway)
            self.ref = lambda t=t: t
        self.ptr, self.nbytes, self.index = ptr, nbytes, index
        self.hinted = self.prefetched = self.unpacked = self.dropped = False  # hinted: advised cold / evicted
        self.ahead = False  # prefetched ahead: its streams wait for the copies at its unpack
        self.quiet = False  # advised quiet (until its unpack)
        self.packs = 1  # times autograd saved this tensor object (each holds a reference)
        self.qnext = self.qwait = 0  # quiet="auto": the pack count of its next look, and the wait after that

    def alive(self):
        return not self.dropped and self.ref() is not None


_ALONE = {}  # device -> (base_refs, base_storage, base_handles), or None when this torch cannot tell
_ALONE_WHY = {}  # device -> why not (for the warning)
_warned_auto = False  # quiet="auto" found it cannot tell (warned once a process)


def _alone_counts(t):
    """(references to the tensor object, tensors on its storage, C++ handles
    on the tensor itself). Called the same way (from a local variable, one
    frame down) when calibrating and when checking, so that the
    interpreter's own references cancel out."""
    return sys.getrefcount(t), _torch()._C._storage_Use_Count(t.untyped_storage()._cdata), t._use_count()


def _torch_alone_calibration(dev):
    """The counts of a tensor that autograd alone keeps (saved once, no
    other reference, no view), measured on `dev` under saved-tensor hooks
    of its own; None when this torch lacks torch._C._storage_Use_Count or
    the probe does not behave as expected."""
    if dev in _ALONE:
        return _ALONE[dev]
    try:
        torch = _torch()
    except Error as err:
        _ALONE[dev], _ALONE_WHY[dev] = None, str(err)
        return None
    cal, why = None, "this torch has no torch._C._storage_Use_Count or Tensor._use_count"
    if getattr(torch._C, "_storage_Use_Count", None) is not None and hasattr(torch.Tensor, "_use_count"):
        seen = []

        def keep(x):
            seen.append(weakref.ref(x))
            return x

        try:
            # Grad mode on, and hooks of its own (innermost), whatever the caller's.
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(keep, lambda x: x):
                a = torch.ones(16, device=dev, requires_grad=True)
                b = a * 2.0
                c = b.sin()  # saves b, its input
                del b
            refs = [r for r in seen if r() is not None and r() is not a and r() is not c]
            why = f"the probe saw {len(seen)} saved tensor(s), {len(refs)} of its own"
            if len(refs) == 1:
                x = refs[0]()
                cal = _alone_counts(x)
                del x
            del c, a
        except (RuntimeError, AttributeError, TypeError) as err:
            cal, why = None, f"the probe failed: {err}"
    _ALONE[dev] = cal
    _ALONE_WHY[dev] = why
    return cal


def _torch_tensor_info(t):
    """(storage address, storage bytes) of a saved tensor that offload may
    move, or None: not on CUDA, empty, a parameter (a leaf that requires
    grad), or storage marked weights / optimizer state by mark_model."""
    if not getattr(t, "is_cuda", False):
        return None
    try:
        st = t.untyped_storage()
        ptr = st.data_ptr()
    except (RuntimeError, NotImplementedError):  # sparse, tensor subclasses without storage
        return None
    if not ptr or (t.is_leaf and t.requires_grad) or ptr in _protected:
        return None
    return ptr, st.nbytes()


def _torch_ptr(t):
    if not getattr(t, "is_cuda", False):
        return None
    try:
        return t.untyped_storage().data_ptr() or None
    except (RuntimeError, NotImplementedError):
        return None


OFFLOAD_MODES = ("cold", "evict")
# Offload's counter for each hint sent ("use" counts nothing; the others,
# prefetches ahead included, "prefetched").
_HINT_COUNTER = {"advise": "advised", "evict": "evicted", "weights": "weights_prefetched", "quiet": "quieted",
                 "quiet_forward": "quieted_forward", "room": "prefetched_room"}


class Offload:
    """Same-address activation offload over torch.autograd.graph.saved_tensors_hooks.

    Forward (pack): each tensor autograd saves for backward is kept as it is
    -- the pack hook returns the tensor itself: nothing is copied and no
    pointer changes. Once `keep_last` newer saved tensors exist, its storage
    is hinted to gpuheap, as `mode` says:

      mode="cold" (the default): advised cold (gh_tensor_advise). Nothing
        moves and no stream is waited for in the hook. When the device
        budget needs room -- an allocation in forward or backward, a
        prefetch -- the manager evicts the frames of cold tensors first,
        oldest advice first (the activations backward needs last), in one
        batch of what the request needs (or down to the manager's low
        watermark, when set below 1.0). So only what exceeds the budget
        moves; with a budget that holds the whole step nothing moves at
        all.
      mode="evict": evicted now (gh_tensor_evict): its frames go to pinned
        host memory at once, after the work queued on its streams is done,
        whether the budget needs the room or not. Every saved tensor then
        crosses PCIe twice a step, and each hint synchronizes.

    The `keep_last` most recent ones -- the next ops of the forward read
    them, and backward starts with them -- are not hinted (2 by default:
    4 and 8 were no faster on the training run of python/tests/gpu_train.py,
    and drained streams 2-4 times a step: bench/NOTES.md, host side, row
    99). Skipped: tensors not on CUDA, storages smaller than `min_bytes`
    (they share 2 MiB frames with others; the manager's CLOCK handles
    those), parameters, storages mark_model marked as weights / optimizer
    state, and storages that gpuheap did not allocate (the hint then fails
    with ERR_FOREIGN and the tensor is left alone).

    Backward (unpack): unpack returns the same tensor; before that it
    prefetches it (if not done yet) and the next `prefetch_distance` saved
    tensors in reverse order of packing -- the order backward uses them --
    so their frames are back on the device before their kernels run. A
    prefetch also takes back a cold advice; for a tensor that was never
    evicted it moves nothing and waits for nothing. A tensor that is still
    on the host when a kernel reads it is read over PCIe: slower, still
    correct. Weights and optimizer state that autograd saved (mark_model's
    storages) are prefetched as they are unpacked, in case the manager
    evicted them under pressure (counted in "weights_prefetched");
    prefetch_weights=False leaves them where they are.

    quiet="auto" (the default): a cold saved tensor is advised
    GH_ADVICE_QUIET as soon as nothing but autograd can reach it: no other
    tensor on its storage (views hold one), no reference to the tensor
    object but autograd's saved slots (the model's own variables dropped
    it), and no C++ handle on the tensor but its Python object's
    (Tensor._use_count(); a C++ extension or library keeping the tensor
    raises it), so no op can read it before its unpack, which prefetches
    it. Looked at in forward (up to QUIET_SCAN saved tensors per pack, one
    still reachable again after 1, 2, 4, ... packs, at most QUIET_WAIT_MAX;
    counted in "quieted_forward") and once more at the first unpack of a
    backward for those still cold (counted in "quieted"). The manager then
    evicts it homeless: its address unmapped while on the host, which saves
    the driver's page-table calls for host memory there (~57 us a 2 MiB
    frame out and back; host/TENSORS.md), and its moves wait for the work
    queued before the advice instead of draining the streams. The counts
    are calibrated on a probe tensor that autograd alone keeps; a torch
    without torch._C._storage_Use_Count or Tensor._use_count, or whose
    probe does not behave, turns it off with a warning (once a process).
    Activation checkpointing is safe under it: both of PyTorch's variants
    save their regions' inputs through these hooks and unpack them before
    recomputing (python/tests/gpu_offload.py runs them, a skip connection,
    a backward hook reading a kept activation, a branch never unpacked and
    a partial torch.autograd.grad, bitwise equal to PyTorch's allocator).
    What no count can see is code that keeps a raw device pointer without a
    reference to the tensor, which no allocator can protect. On the
    training run of python/tests/gpu_train.py (c): 53.1 / 59.6 / 57.7 ms a
    step against 75.7 / 73.0 / 77.1 with quiet=False, alternated on one
    machine (bench/NOTES.md, host side, row 62).

    quiet=True: at the first unpack of a backward, every saved tensor
    advised cold and not unpacked yet is advised GH_ADVICE_QUIET (counted in
    "quieted"), whatever else reaches it; nothing in forward. That breaks
    where code reads a saved activation during backward outside its node
    while it is evicted (a hook on a kept activation, a tensor the program
    still uses): a kernel reading it faults, its address unmapped. For
    comparisons; quiet=False advises nothing quiet (every eviction maps
    host memory at the tensor's address and drains its streams).

    prefetch_ahead=True (the default): the next tensors are prefetched
    ahead (gh_tensor_prefetch_ahead): their copies are queued but no stream
    waits for them until their own unpack prefetches them again, so the
    backward kernels queued in between run beside the copies instead of
    after them (counted in "prefetched_ahead"). Only tensors that nothing
    but autograd reaches (the test of quiet="auto") are prefetched ahead:
    nothing else can read them before their unpack; the others are
    prefetched plainly (their streams wait for the copies), as are all of
    them where the test cannot be made. With a library that lacks the
    call, plain prefetches.

    prefetch_distance defaults to 1: a tensor restored further ahead takes
    room that the next evictions then take back. The training run of
    python/tests/gpu_train.py measured distance 1 / 2 / 3 at 56-60 / 58-67 /
    73-77 ms a step, with prefetches ahead, alternated (bench/NOTES.md, host
    side, row 61; row 11 found the same order before them).

    prefetch_room=N (0, off, by default): past the prefetch distance, up to
    N more saved tensors, in the order backward uses them, are prefetched
    ahead where the device budget has room for them and `room_reserve`
    bytes more without evicting anything or waiting for the GPU
    (gh_tensor_prefetch_room; counted in "prefetched_room"); the first
    refusal ends the walk until the next unpack. So the room that a
    backward's late stages free (their activations used and dropped) is
    filled with the early stages' activations while the late stages still
    compute, instead of each restore waiting for the frees of the kernel
    just before it. room_reserve (an int or a size string) defaults to
    twice the largest tensor saved in the pass: the room the backward's
    own new tensors (the gradients) take meanwhile. Only tensors that
    nothing but autograd reaches are prefetched so (prefetch_ahead's
    promise); with prefetch_ahead=False or a library that lacks the call,
    nothing is. Off by default: on the training run of
    python/tests/gpu_train.py at width 256 the room was there when asked
    but the backward's own gradients needed it next, so the clock evicted
    again what had come back early (and gradients and weights): 185-213 ms
    a step against 155-159; level at widths 64 and 512 (bench/NOTES.md,
    host side, row 127).

    Cost: a prefetch of an evicted tensor (and an eviction) moves frames at
    once, after waiting for the work queued on the streams of the tensors
    moved (not the device).

    With a library that lacks gh_tensor_advise, mode="cold" falls back to
    "evict" (with a warning). Hints never raise in the hooks: failures are
    counted in .counters ("hint_errors") and warned about once.
    """

    def __init__(self, prefetch_distance=1, keep_last=2, min_bytes=1 << 20, manager=None, *, mode="cold",
                 prefetch_weights=True, quiet="auto", prefetch_ahead=True, prefetch_room=0, room_reserve=None,
                 tensor_info=None, tensor_ptr=None, stream=None, alone=None):
        for name, v in (("prefetch_distance", prefetch_distance), ("keep_last", keep_last),
                        ("prefetch_room", prefetch_room)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise Error(ERR_INVAL, f"{name}: {v!r} must be an integer >= 0", "offload")
        if mode not in OFFLOAD_MODES:
            raise Error(ERR_INVAL, f"mode: {mode!r} is not one of {', '.join(OFFLOAD_MODES)}", "offload")
        if quiet not in (False, True, "auto"):
            raise Error(ERR_INVAL, f"quiet: {quiet!r} is not False, True or 'auto'", "offload")
        self.prefetch_distance = prefetch_distance
        self.keep_last = keep_last
        self.min_bytes = gpuheap.parse_size(min_bytes, "min_bytes")
        self.mode = mode
        self.prefetch_weights = bool(prefetch_weights)
        self.quiet = quiet if quiet == "auto" else bool(quiet)
        self._quiet_forward = quiet == "auto"
        self._alone = alone  # tests: (tensor, packs) -> whether autograd alone can reach it
        self._cold = {}  # entries advised cold, not yet quiet nor unpacked: _quiet_scan's candidates (in order)
        self._npack = 0  # packs of tracked tensors so far (the clock of the candidates' looks)
        self.prefetch_ahead = bool(prefetch_ahead)
        self.prefetch_room = prefetch_room
        self.room_reserve = None if room_reserve is None else gpuheap.parse_size(room_reserve, "room_reserve")
        self._largest = 0  # the largest storage saved in the pass (room_reserve's default: twice it)
        self._backward = False  # an unpack ran since the last pack
        self._manager = manager
        self._info = tensor_info or _torch_tensor_info
        self._ptr = tensor_ptr or _torch_ptr
        self._stream = stream or (lambda: _current_stream())
        self._lock = threading.Lock()
        self._entries = []
        self._by_ptr = {}
        self._cm = None
        self._warned = False
        self.counters = {"packed": 0, "skipped": 0, "advised": 0, "evicted": 0, "prefetched": 0,
                         "prefetched_ahead": 0, "prefetched_room": 0, "weights_prefetched": 0, "quieted": 0,
                         "quieted_forward": 0, "unpacked": 0, "foreign": 0, "hint_errors": 0}

    @property
    def manager(self):
        return _mgr(self._manager)

    # -- the hooks
    def pack(self, t):
        info = self._info(t)
        if info is None or info[1] < self.min_bytes:
            with self._lock:
                self.counters["skipped"] += 1
            return t
        ptr, nbytes = info
        victim = None
        with self._lock:
            self._backward = False
            e = self._by_ptr.get(ptr)
            # A storage saved again in the same forward keeps its first entry;
            # one from an earlier pass whose backward ran gets a new one.
            if e is not None and not e.unpacked and e.ref() is t:
                e.packs += 1  # the same tensor saved again: one more reference autograd holds
            if e is None or not e.alive() or e.unpacked:
                e = _Entry(t, ptr, nbytes, len(self._entries))
                self._largest = max(self._largest, nbytes)
                self._entries.append(e)
                self._npack += 1
                self._by_ptr[ptr] = e
                self.counters["packed"] += 1
                i = len(self._entries) - 1 - self.keep_last
                if i >= 0:
                    v = self._entries[i]
                    if v.alive() and not v.hinted and not v.unpacked:
                        v.hinted = True
                        victim = v
                        if self._quiet_forward:
                            v.qnext, v.qwait = self._npack, 1
                            self._cold[v] = None
        if victim is not None:
            self._hint("advise" if self.mode == "cold" else "evict", victim)
        if self._quiet_forward and self.mode == "cold":
            self._quiet_scan()
        return t

    # Saved tensors looked at per pack for having gone quiet (_quiet_scan),
    # and the most packs a candidate found reachable waits before its next
    # look (the waits double from 1: 1, 2, 4, ...).
    QUIET_SCAN = 8
    QUIET_WAIT_MAX = 8

    def _is_alone(self, e):
        """Whether only autograd can reach e's tensor now (see _torch_alone_calibration);
        None when this torch cannot tell."""
        t = e.ref()
        if t is None:
            return False
        if self._alone is not None:
            return self._alone(t, e.packs)
        dev = getattr(t, "device", None)
        cal = _torch_alone_calibration(dev) if dev is not None else None
        if cal is None:
            return None
        n, st, h = _alone_counts(t)  # the calibration's shape: a local, one frame down
        return n <= cal[0] + e.packs - 1 and st <= cal[1] and h <= cal[2]

    def _quiet_scan(self):
        """quiet="auto": advise QUIET the cold saved tensors that nothing but
        autograd can reach any more (their forward uses are over: only their
        unpack reads them), up to QUIET_SCAN of them looked at per pack, in
        turn. Their evictions then leave their addresses unmapped (the
        manager's homeless evictions), saving the driver's page-table calls
        for host memory. A torch that cannot tell turns it off, warned once.
        The candidates are kept apart (_cold), so that a pack looks at them
        alone, not at every tensor saved so far, and one found reachable is
        looked at again after 1, 2, 4, ... packs (at most QUIET_WAIT_MAX):
        a tensor the model keeps for long (a block's input, which its skip
        connection reads at the block's end) is not looked at every pack
        (bench/NOTES.md, host side, row 94)."""
        with self._lock:
            cold = self._cold
            if not cold:
                return
            now, cand, gone = self._npack, [], []
            for x in cold:
                if x.quiet or x.unpacked or not x.alive():
                    gone.append(x)
                elif x.qnext <= now:
                    cand.append(x)
                    x.qnext = now + x.qwait
                    x.qwait = min(2 * x.qwait, self.QUIET_WAIT_MAX)
                    if len(cand) == self.QUIET_SCAN:
                        break
            for x in gone:
                del cold[x]
        if cand:
            self._quiet_alone(cand, "quiet_forward")

    def _quiet_alone(self, cand, what):
        """Advise QUIET those of cand that only autograd reaches (quiet="auto");
        a torch that cannot tell turns it off, warned once."""
        quiet = []
        for x in cand:
            ok = self._is_alone(x)
            if ok is None:
                self._auto_off(x)
                return
            if ok:
                quiet.append(x)
        for x in quiet:
            with self._lock:
                if x.unpacked or x.quiet:
                    continue
                x.quiet = True
                self._cold.pop(x, None)
            self._hint(what, x)

    def _auto_off(self, x):
        global _warned_auto
        with self._lock:
            self._quiet_forward = False
            self.quiet = False
        t = x.ref()
        why = _ALONE_WHY.get(getattr(t, "device", None), "no count")
        if not _warned_auto:
            _warned_auto = True
            warnings.warn(f"gpuheap.torch.offload: quiet='auto' cannot tell which saved tensors only autograd "
                          f"reaches ({why}); no saved tensor is advised quiet", RuntimeWarning)

    def _start_backward(self):
        """The first unpack after a forward: a saved tensor advised cold and
        not unpacked yet that only autograd reaches (quiet="auto"; every
        one with quiet=True) is read by nothing queued from now on until its
        own unpack, which prefetches it first. Tell the manager (quiet
        advice), so that moving it waits for the forward's work only."""
        with self._lock:
            if self._backward:
                return
            self._backward = True
            quiet = [x for x in self._entries if x.hinted and not x.unpacked and not x.quiet and x.alive()] \
                if self.quiet and self.mode == "cold" else []
        if self.quiet == "auto":
            self._quiet_alone(quiet, "quiet")
            return
        for x in quiet:
            x.quiet = True
            self._hint("quiet", x)

    def unpack(self, t):
        ptr = self._ptr(t)
        todo = []
        if not self._backward:
            self._start_backward()
        # Weights autograd saved: on the device before their backward.
        if ptr and self.prefetch_weights and ptr in _protected:
            self._hint("weights", None, ptr=ptr)
            return t
        with self._lock:
            e = self._by_ptr.get(ptr) if ptr else None
            if e is None or e.dropped:
                return t
            if not e.unpacked:
                e.unpacked = True
                self.counters["unpacked"] += 1
            if not e.prefetched:
                e.prefetched = True
                todo.append(("prefetch", e))
            elif e.ahead:  # prefetched ahead: its streams wait for its copies from here on
                todo.append(("use", e))
            e.ahead = False
            i, n = e.index - 1, 0
            while i >= 0 and n < self.prefetch_distance:
                x = self._entries[i]
                i -= 1
                if x.unpacked or not x.alive():
                    continue
                if x.ptr == e.ptr:  # the same storage saved again: in use from now on, never ahead
                    x.prefetched = True
                    continue
                n += 1
                if not x.prefetched:
                    x.prefetched = True
                    # Ahead only where nothing but its unpack can read it
                    # before its copies land (whatever else holds it might).
                    x.ahead = self.prefetch_ahead and self._is_alone(x) is True
                    todo.append(("ahead" if x.ahead else "prefetch", x))
            n = 0
            while i >= 0 and n < self.prefetch_room and self.prefetch_ahead:
                x = self._entries[i]
                i -= 1
                if x.unpacked or not x.alive() or x.prefetched or x.ptr == e.ptr:
                    continue
                n += 1
                if self._is_alone(x) is not True:
                    break  # its copies could meet a reader: the walk stops (the distance prefetches it later)
                x.prefetched = x.ahead = True  # undone where refused
                todo.append(("room", x))
        if todo:
            stream = self._stream()  # one handle for the unpack's hints
            for k, (what, x) in enumerate(todo):
                if not self._hint(what, x, stream) and what == "room":
                    with self._lock:  # refused: these wait for the distance's turn
                        for _, y in todo[k:]:
                            y.prefetched = y.ahead = False
                    break
        return t

    def _hint(self, what, e, stream=None, ptr=None):
        """Send one hint for entry e (or, for "weights", for storage ptr
        alone); prefetches go on `stream` (None: self._stream() now).
        Returns whether it was made; "room" (prefetch_room) is refused
        quietly where the budget has no room (ERR_BUDGET), and turns
        prefetch_room off with a library that lacks the call."""
        if e is not None:
            ptr = e.ptr
        try:
            if what == "room":
                reserve = self.room_reserve if self.room_reserve is not None else 2 * self._largest
                self.manager.prefetch_room(ptr, reserve, self._stream() if stream is None else stream)
            elif what == "advise":
                self.manager.advise(ptr, Advice.COLD)
            elif what in ("quiet", "quiet_forward"):
                self.manager.advise(ptr, Advice.QUIET)
            elif what == "evict":
                self.manager.evict(ptr)
            elif what == "ahead":
                self.manager.prefetch_ahead(ptr, self._stream() if stream is None else stream)
            else:  # prefetch, use, weights
                self.manager.prefetch(ptr, self._stream() if stream is None else stream)
        except Error as err:
            if what == "room" and err.code in (ERR_BUDGET, ERR_UNSUPPORTED):
                if err.code == ERR_UNSUPPORTED:  # an older library: no gh_tensor_prefetch_room
                    with self._lock:
                        self.prefetch_room = 0
                return False
            if what == "ahead" and err.code == ERR_UNSUPPORTED:  # an older library: no gh_tensor_prefetch_ahead
                with self._lock:
                    self.prefetch_ahead = False
                    e.ahead = False
                return self._hint("prefetch", e, stream)
            if what == "advise" and err.code == ERR_UNSUPPORTED:  # an older library: no gh_tensor_advise
                with self._lock:
                    self.mode = "evict"
                warnings.warn(f"gpuheap.torch.offload: {err}; falling back to mode='evict'", RuntimeWarning)
                return self._hint("evict", e)
            with self._lock:
                if err.code in (ERR_FOREIGN, ERR_DOUBLE_FREE):  # not (or no longer) a gpuheap allocation
                    if e is not None:
                        e.dropped = True
                    self.counters["foreign"] += 1
                    return False
                if err.code == ERR_PINNED:
                    return False
                self.counters["hint_errors"] += 1
                warn = not self._warned
                self._warned = True
            if warn:
                warnings.warn(f"gpuheap.torch.offload: {what} hint failed: {err}", RuntimeWarning)
            return False
        with self._lock:
            if what in ("ahead", "room"):
                self.counters["prefetched_ahead"] += 1
            if what != "use":
                self.counters[_HINT_COUNTER.get(what, "prefetched")] += 1
        return True

    # -- bookkeeping
    def _prune(self):
        """Forget entries whose tensors are gone (their graphs were freed) or
        whose backward has run: a new forward pass starts a new sequence."""
        with self._lock:
            keep = [e for e in self._entries if e.alive() and not e.unpacked]
            for i, e in enumerate(keep):
                e.index = i
            self._entries = keep
            self._by_ptr = {e.ptr: e for e in keep}
            self._largest = max((e.nbytes for e in keep), default=0)
            self._cold = {e: None for e in keep if e.hinted and not e.quiet} if self._quiet_forward else {}

    def pending(self):
        """Saved tensors being tracked (alive, for tests and debugging)."""
        with self._lock:
            return [e.ptr for e in self._entries if e.alive()]

    # -- the context
    def __enter__(self):
        torch = _torch()
        self._prune()
        if self._quiet_forward and self._alone is None and torch.cuda.is_available():
            # Calibrated here, outside any hook (grad mode may be off inside them).
            _torch_alone_calibration(torch.device("cuda", torch.cuda.current_device()))
        self._cm = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        cm, self._cm = self._cm, None
        return cm.__exit__(*exc) if cm is not None else False


def offload(prefetch_distance=1, keep_last=2, min_bytes=1 << 20, manager=None, mode="cold", prefetch_weights=True,
            quiet="auto", prefetch_ahead=True, prefetch_room=0, room_reserve=None):
    """with gpuheap.torch.offload(): loss = model(x)  -- see Offload (mode
    "cold", the default: saved tensors are advised cold and evicted only when
    the device budget needs room; "evict": evicted at once). Backward may run
    after the block: the hooks stay with the saved tensors."""
    return Offload(prefetch_distance=prefetch_distance, keep_last=keep_last, min_bytes=min_bytes, manager=manager,
                   mode=mode, prefetch_weights=prefetch_weights, quiet=quiet, prefetch_ahead=prefetch_ahead,
                   prefetch_room=prefetch_room, room_reserve=room_reserve)
