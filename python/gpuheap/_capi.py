"""The C library through ctypes: finding it, the mirrors of the public structs
of include/gpuheap.h, and the prototypes.

Nothing here is public API; gpuheap/__init__.py wraps it. The mirrors must
match the header field for field: tests/test_pure.py compiles a small C
program against the header (where a C compiler and the header are at hand)
and compares every size and offset with these.

Where the library comes from, first match wins:
  1. $GPUHEAP_LIBRARY, a path (no fallback when it is set and fails);
  2. next to this package: gpuheap/libgpuheap.so (or .so.0);
  3. the loader's usual search (LD_LIBRARY_PATH, ldconfig): libgpuheap.so,
     libgpuheap.so.0, ctypes.util.find_library("gpuheap").
The library is loaded on first use, so importing gpuheap never needs it.
"""
import ctypes
import ctypes.util
import os
import threading

c_size_t = ctypes.c_size_t
c_uint64 = ctypes.c_uint64
c_uint32 = ctypes.c_uint32
c_uint8 = ctypes.c_uint8
c_int = ctypes.c_int
c_void_p = ctypes.c_void_p

# Counts of the C enums (GH_TIER_COUNT, GH_KIND_COUNT, GH_ADVICE_COUNT).
TIER_COUNT = 3
KIND_COUNT = 4
ADVICE_COUNT = 3
VMM_OP_COUNT = 4  # GH_VMM_OP_COUNT: create, release, map, unmap
KIND_HEAP = 255  # gh_frame_info_t.kind of a device-heap frame
TMGR_GROW_ON_DEMAND = 1


class HeapOptions(ctypes.Structure):
    """gh_heap_options_t"""
    _fields_ = [
        ("page_bytes", c_size_t),
        ("slots", c_uint32),
        ("probe_limit", c_uint32),
        ("room_fill", c_uint32),
        ("refill_min", c_uint32),
        ("device", c_int),
    ]


class TmgrOptions(ctypes.Structure):
    """gh_tmgr_options_t"""
    _fields_ = [
        ("device", c_int),
        ("backend", c_int),  # gh_backend_t: an enum is an int in the C ABI
        ("device_budget", c_size_t),
        ("device_reserve", c_size_t),
        ("host_budget", c_size_t),
        ("va_bytes", c_size_t),
        ("low_watermark", ctypes.c_double),
        ("high_watermark", ctypes.c_double),
        ("heap_bytes", c_size_t),
        ("heap_max_bytes", c_size_t),
        ("heap", HeapOptions),
        ("host_pool_frames", c_uint32),
        ("flags", c_uint32),
    ]


class TmgrStats(ctypes.Structure):
    """gh_tmgr_stats_t"""
    _fields_ = [
        ("frame_bytes", c_size_t),
        ("device_budget", c_size_t),
        ("host_budget", c_size_t),
        ("frames", c_size_t * TIER_COUNT),
        ("heap_frames", c_size_t * TIER_COUNT),
        ("tensors", c_size_t * KIND_COUNT),
        ("tensor_bytes", c_size_t * KIND_COUNT),
        ("tensor_bytes_tier", (c_size_t * TIER_COUNT) * KIND_COUNT),
        ("pinned_tensors", c_size_t),
        ("pending_frees", c_size_t),
        ("host_pool_frames", c_size_t),
        ("evictions", c_uint64),
        ("restores", c_uint64),
        ("bytes_evicted", c_uint64),
        ("bytes_restored", c_uint64),
        ("oom_events", c_uint64),
        ("heap_grows", c_uint64),
        ("heap_shrinks", c_uint64),
        ("cached_frames", c_size_t),
        ("peak_tensor_bytes", c_size_t),
        ("moves", c_uint64),
        ("move_ns", c_uint64),
        ("stream_waits", c_uint64),
        ("stream_wait_ns", c_uint64),
        ("host_placed_bytes", c_uint64),
        ("clock_victims", c_uint64 * KIND_COUNT),
        ("quiet_waits", c_uint64),
        ("vmm_calls", c_uint64 * VMM_OP_COUNT),
        ("vmm_ns", c_uint64 * VMM_OP_COUNT),
        ("vmm_move_ns", c_uint64),
        ("spare_frames", c_size_t),
        ("ordered_moves", c_uint64),
        ("chunk_frames", c_size_t),
        ("chunk_changes", c_uint64),
        ("heap_grow_asks", c_uint64),
        ("heap_grow_denied", c_uint64),
        ("heap_grow_stale", c_uint64),
    ]


class FrameInfo(ctypes.Structure):
    """gh_frame_info_t"""
    _fields_ = [
        ("va", c_uint64),
        ("tier", c_uint8),
        ("kind", c_uint8),
        ("pinned", c_uint8),
        ("heap", c_uint8),
        ("tensors", c_uint32),
        ("used_bytes", c_uint64),
    ]


class TensorInfo(ctypes.Structure):
    """gh_tensor_info_t"""
    _fields_ = [
        ("ptr", c_uint64),
        ("bytes", c_uint64),
        ("span", c_uint64),
        ("extent", c_uint64),
        ("device_bytes", c_uint64),
        ("stream", c_uint64),
        ("kind", c_uint8),
        ("pinned", c_uint8),
        ("cold", c_uint8),
        ("pending", c_uint8),
        ("run", c_uint8),
        ("reserved", c_uint8 * 3),
        ("context", c_uint64),
    ]


class HistEntry(ctypes.Structure):
    """gh_hist_entry_t"""
    _fields_ = [
        ("time_ns", c_uint64),
        ("addr", c_uint64),
        ("size", c_uint64),
        ("stream", c_uint64),
        ("context", c_uint64),
        ("device_free", c_uint64),
        ("action", c_uint8),
        ("kind", c_uint8),
        ("reserved", c_uint8 * 6),
    ]


# gh_hist_action_t
HIST_ALLOC, HIST_FREE_REQUESTED, HIST_FREE_COMPLETED, HIST_OOM = 0, 1, 2, 3

# uint64_t (*gh_hist_tag_fn)(size_t size)
HIST_TAG_FN = ctypes.CFUNCTYPE(c_uint64, c_size_t)

# void (*gh_oom_fn)(void* user, size_t bytes_wanted, const gh_tmgr_stats_t* stats)
OOM_FN = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, ctypes.POINTER(TmgrStats))

_P = c_void_p  # gh_tmgr_t*, pointers to tensors, streams
_PP = ctypes.POINTER(c_void_p)

# name: (restype, argtypes, required). Optional entry points may be missing
# from an older library; calling one then raises GH_ERR_UNSUPPORTED.
PROTOTYPES = {
    "gh_strerror": (ctypes.c_char_p, [c_int], True),
    "gh_err_name": (ctypes.c_char_p, [c_int], True),
    "gh_last_error_detail": (ctypes.c_char_p, [], True),
    "gh_tmgr_options_init": (None, [ctypes.POINTER(TmgrOptions)], True),
    "gh_tmgr_create": (c_int, [_PP, ctypes.POINTER(TmgrOptions)], True),
    "gh_tmgr_destroy": (c_int, [_P], True),
    "gh_tensor_alloc": (c_int, [_P, c_size_t, c_int, _P, _PP], True),
    "gh_tensor_free": (c_int, [_P, _P, _P], True),
    "gh_tensor_prefetch": (c_int, [_P, _P, _P], True),
    "gh_tensor_record_stream": (c_int, [_P, _P, _P], True),
    "gh_tensor_evict": (c_int, [_P, _P], True),
    "gh_tensor_prefetch_many": (c_int, [_P, _PP, c_size_t, _P], False),
    "gh_tensor_prefetch_ahead": (c_int, [_P, _P, _P], False),
    "gh_tensor_prefetch_room": (c_int, [_P, _P, _P, c_size_t], False),
    "gh_tensor_evict_ahead": (c_int, [_P, _P], False),
    "gh_tensor_advise": (c_int, [_P, _P, c_int], False),
    "gh_tensor_pin": (c_int, [_P, _P], True),
    "gh_tensor_unpin": (c_int, [_P, _P], True),
    "gh_tensor_set_kind": (c_int, [_P, _P, c_int], True),
    "gh_tensor_tier": (c_int, [_P, _P, ctypes.POINTER(c_int)], True),
    "gh_tmgr_stats": (c_int, [_P, ctypes.POINTER(TmgrStats)], True),
    "gh_tmgr_frame_map": (c_int, [_P, ctypes.POINTER(FrameInfo), c_size_t, ctypes.POINTER(c_size_t)], False),
    "gh_tmgr_empty_cache": (c_int, [_P], False),
    "gh_tmgr_tensor_map": (c_int, [_P, ctypes.POINTER(TensorInfo), c_size_t, ctypes.POINTER(c_size_t)], False),
    "gh_tmgr_record_history": (c_int, [_P, c_size_t], False),
    "gh_tmgr_history": (c_int, [_P, ctypes.POINTER(HistEntry), c_size_t, ctypes.POINTER(c_size_t),
                                ctypes.POINTER(c_uint64)], False),
    "gh_torch_set_history_context": (None, [HIST_TAG_FN], False),
    "gh_tmgr_reset_peak": (c_int, [_P], False),
    "gh_tmgr_set_oom_observer": (c_int, [_P, OOM_FN, _P], True),
    "gh_tmgr_maintain": (c_int, [_P], True),
    "gh_tmgr_set_global": (c_int, [_P], True),
    "gh_tmgr_global": (_P, [], True),
    "gh_torch_alloc": (_P, [ctypes.c_ssize_t, c_int, _P], True),
    # Throws a C++ exception on failure: for PyTorch only, never called through ctypes.
    "gh_torch_alloc_or_throw": (_P, [ctypes.c_ssize_t, c_int, _P], True),
    "gh_torch_free": (None, [_P, ctypes.c_ssize_t, c_int, _P], True),
    "gh_torch_record_stream": (None, [_P, _P], True),
    "gh_torch_empty_cache": (None, [], False),
    "gh_tmgr_set_device_budget": (c_int, [_P, c_size_t], False),
    "gh_torch_pool_counts": (None, [ctypes.POINTER(c_size_t)] * 4, False),
    # CUDA graph trees (gpuheap.torch's stand-ins for PyTorch's checkpoint calls).
    "gh_torch_pool_blocks": (c_size_t, [ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_size_t),
                                        ctypes.POINTER(c_int), c_size_t], False),
    "gh_torch_pool_list": (c_size_t, [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_ulonglong),
                                      ctypes.POINTER(c_int), c_size_t], False),
    "gh_torch_pool_block_state": (c_int, [_P], False),
    "gh_torch_pool_adopt": (c_int, [ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_size_t),
                                    c_size_t], False),
    "gh_torch_pool_unadopt": (c_int, [_P], False),
    "gh_torch_cache_info": (c_size_t, [c_int], False),
    "gh_torch_serve_cache_info": (c_int, [], False),
    "gh_cupy_malloc": (_P, [_P, c_size_t, c_int], True),
    "gh_cupy_free": (None, [_P, _P, c_int], True),
}


class LibraryNotFound(OSError):
    """Raised by load() when no libgpuheap could be loaded; gpuheap turns it
    into a gpuheap.Error."""


class _Lib:
    """The loaded library: the CDLL, where it came from, and its typed
    entry points as attributes (missing optional ones are None)."""

    def __init__(self, cdll, path):
        self.cdll = cdll
        self.path = path
        self.missing = []
        for name, (restype, argtypes, required) in PROTOTYPES.items():
            try:
                fn = getattr(cdll, name)
            except AttributeError:
                if required:
                    raise LibraryNotFound(f"{path}: no symbol {name}: not a gpuheap library, or too old")
                self.missing.append(name)
                setattr(self, name, None)
                continue
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name, fn)

    def address_of(self, name):
        """The address of an exported function (for CuPy's CFunctionAllocator)."""
        return ctypes.cast(getattr(self.cdll, name), c_void_p).value


_lock = threading.Lock()
_lib = None


def candidates(environ=None, here=None):
    """The places load() tries, in order: (path, is_explicit). Pure: tests
    call it with a fake environment."""
    environ = os.environ if environ is None else environ
    env = environ.get("GPUHEAP_LIBRARY")
    if env:
        return [(env, True)]
    here = here or os.path.dirname(os.path.abspath(__file__))
    out = []
    for name in ("libgpuheap.so", "libgpuheap.so.0"):
        p = os.path.join(here, name)
        if os.path.exists(p):
            out.append((p, False))
    out += [("libgpuheap.so", False), ("libgpuheap.so.0", False)]
    found = ctypes.util.find_library("gpuheap")
    if found:
        out.append((found, False))
    return out


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", c_void_p)]


def _real_path(cdll, fallback):
    """The file the loader actually mapped (dladdr on one of its symbols),
    so that PyTorch's CUDAPluggableAllocator dlopens the very same copy --
    and so shares its process-wide manager."""
    for libname in (None, "libdl.so.2"):
        try:
            dl = ctypes.CDLL(libname)
            dladdr = dl.dladdr
        except (OSError, AttributeError):
            continue
        dladdr.argtypes = [c_void_p, ctypes.POINTER(_DlInfo)]
        dladdr.restype = c_int
        info = _DlInfo()
        addr = ctypes.cast(cdll.gh_strerror, c_void_p).value
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    return os.path.realpath(fallback) if os.path.sep in fallback else fallback


def load():
    """The library, loaded once (thread-safe). Raises LibraryNotFound."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path, explicit in candidates():
            try:
                cdll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                tried.append(f"{path}: {e}")
                if explicit:
                    break
                continue
            _lib = _Lib(cdll, _real_path(cdll, path))
            return _lib
        raise LibraryNotFound("libgpuheap not found (set GPUHEAP_LIBRARY to the path of libgpuheap.so, "
                              "built with CUDA: the CPU library is static). Tried: " + "; ".join(tried))


def loaded():
    """The library if load() succeeded already, else None (never loads)."""
    return _lib
