"""CuPy on gpuheap: every CuPy allocation from gpuheap's tensor manager.

    import gpuheap.cupy
    gpuheap.cupy.enable(device_budget="8GiB", host_budget="64GiB")
    a = cupy.ones((1 << 30,), cupy.float32)   # may live partly on the host, same pointer

enable() makes a manager, sets it as the process-wide one
(gh_tmgr_set_global), wraps gh_cupy_malloc / gh_cupy_free of libgpuheap.so
in cupy.cuda.memory.CFunctionAllocator and installs it with
cupy.cuda.set_allocator. CuPy's memory pool is bypassed (gpuheap is the
pool). Arrays made before enable() keep their memory from the old allocator.

CuPy does not check the pointer a C allocator returns: a NULL would become an
array at address 0. So the allocator installed here checks it and raises
cupy.cuda.memory.OutOfMemoryError instead, with gpuheap's reason.

Streams: CuPy passes none to the C allocator; gpuheap orders CuPy's
allocations and frees on the legacy default stream, which every blocking
stream synchronizes with (see host/adapters.c). Work on non-blocking streams
must be ordered before a free by the caller.

This module imports without CuPy; CuPy is imported by enable().
"""
import threading
import warnings

import gpuheap
from gpuheap import Error, ERR_INVAL, ERR_UNSUPPORTED

__all__ = ["enable", "is_enabled", "manager", "disable"]

_lock = threading.Lock()
_state = None  # (manager, CFunctionAllocator, checked malloc, previous allocator)
_retired = []


def _cupy():
    try:
        import cupy
    except ImportError as e:
        raise Error(ERR_UNSUPPORTED, f"CuPy does not import ({e})", "gpuheap.cupy") from None
    return cupy


def _oom(cupy, size, detail):
    err = cupy.cuda.memory.OutOfMemoryError
    try:
        e = err(size, -1, 0)
    except TypeError:  # older CuPy: (size, total)
        e = err(size, -1)
    e.args = (f"gpuheap: out of memory allocating {size:,} bytes ({detail or 'budget exhausted'})",)
    return e


def enable(device_budget=None, host_budget=None, manager=None, **options):
    """Install gpuheap as CuPy's allocator; returns the gpuheap.Manager.

    device_budget, host_budget and **options: those of gpuheap.Manager
    (None: the library's defaults). manager: use this Manager instead of
    making one (it becomes the global manager). A second call returns the
    manager of the first (new options are ignored with a warning). If
    gpuheap.torch.enable() ran first, its manager is shared: pass
    manager=gpuheap.torch.manager()."""
    global _state
    cupy = _cupy()
    with _lock:
        if _state is not None:
            if device_budget is not None or host_budget is not None or options or manager is not None:
                warnings.warn("gpuheap.cupy.enable: already enabled; the new options are ignored", stacklevel=2)
            return _state[0]
        if manager is None and _retired:
            m = _retired[-1][0]  # enable() after disable(): the same global manager
        elif manager is None:
            m = gpuheap.Manager(**gpuheap.validate_options(device_budget=device_budget, host_budget=host_budget,
                                                           **options))
            m.set_global()
        else:
            if device_budget is not None or host_budget is not None or options:
                raise Error(ERR_INVAL, "pass either a manager or options, not both", "gpuheap.cupy.enable")
            m = manager
            if not m._global:
                m.set_global()
        lib = gpuheap.library()
        malloc_fn = lib.address_of("gh_cupy_malloc")
        free_fn = lib.address_of("gh_cupy_free")
        # param: unused by gpuheap (NULL); owner: the CDLL, which keeps the functions loaded.
        alloc = cupy.cuda.memory.CFunctionAllocator(0, malloc_fn, free_fn, lib.cdll)
        raw_malloc = alloc.malloc

        def malloc(size):
            mp = raw_malloc(size)
            if size > 0 and mp.ptr == 0:
                detail = lib.gh_last_error_detail().decode(errors="replace")
                raise _oom(cupy, size, detail)
            return mp

        previous = cupy.cuda.get_allocator()
        cupy.cuda.set_allocator(malloc)
        _state = (m, alloc, malloc, previous)
        return m


def disable():
    """Give CuPy back the allocator it had before enable(). The manager stays
    (arrays made through it still free into it)."""
    global _state
    cupy = _cupy()
    with _lock:
        if _state is None:
            return
        cupy.cuda.set_allocator(_state[3])
        _retired.append(_state)  # arrays made through it still free through gh_cupy_free
        _state = None


def is_enabled():
    return _state is not None


def manager():
    """The manager enable() installed; Error(ERR_INVAL) before enable()."""
    if _state is None:
        raise Error(ERR_INVAL, "call gpuheap.cupy.enable() first", "gpuheap.cupy")
    return _state[0]
