"""Tests of the gpuheap Python package that need no GPU and no PyTorch or CuPy.

    PYTHONPATH=python python3 -m unittest discover -s python/tests -p 'test_pure*.py'

What needs more is skipped, not failed:
  - the mirrors of the C header (errors, enums, struct layouts) need the
    source tree's include/gpuheap.h (layouts also a C compiler);
  - the tests against the library need libgpuheap.so ($GPUHEAP_LIBRARY, or
    found next to the package / by the loader). They use the simulated
    frame provider (backend "sim"), which runs without a GPU.
PyTorch and CuPy are replaced by small fakes where the glue is tested; the
real thing is tested by gpu_train.py, gpu_offload.py and gpu_cupy.py on the
GPU machine, and the offload hooks on a CPU PyTorch by
test_pure_torch_offload.py (skipped without PyTorch).
"""
import ctypes
import gc
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
HEADER = os.path.join(os.path.dirname(PYDIR), "include", "gpuheap.h")
for _p in (PYDIR, HERE):  # the package; _child.py and gpu_train.py next to this file
    if _p not in sys.path:
        sys.path.insert(0, _p)

import gpuheap  # noqa: E402
from gpuheap import _capi, snapshot as snap_mod  # noqa: E402
import gpuheap.torch as ght  # noqa: E402
import gpuheap.cupy  # noqa: E402,F401

MiB = 1 << 20


def _header():
    if not os.path.exists(HEADER):
        raise unittest.SkipTest(f"no {HEADER} (not a source tree)")
    with open(HEADER) as f:
        return f.read()


_lib_state = {}


def _lib():
    """The library, or skip."""
    if "lib" not in _lib_state:
        try:
            _lib_state["lib"] = gpuheap.library()
        except gpuheap.Error as e:
            _lib_state["lib"] = None
            _lib_state["why"] = str(e)
    if _lib_state["lib"] is None:
        raise unittest.SkipTest("no libgpuheap: " + _lib_state["why"][:200])
    return _lib_state["lib"]


def _sim(**kw):
    _lib()
    opts = dict(backend="sim", device_budget=32 * MiB, host_budget=64 * MiB, host_pool_frames=0)
    opts.update(kw)
    return gpuheap.Manager(**opts)


def _run_py(code, extra_path=(), env=None, timeout=120):
    """Run code in a fresh interpreter (for what changes process-wide state:
    the global manager, sys.modules fakes). Returns (rc, stdout+stderr)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(list(extra_path) + [PYDIR] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    if env:
        e.update(env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


# ---------------------------------------------------------------- fakes
class FakeStorage:
    def __init__(self, ptr, nbytes):
        self._ptr, self._n = ptr, nbytes

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return self._n


class FakeTensor:
    """What gpuheap.torch reads of a tensor."""

    def __init__(self, ptr, nbytes, is_cuda=True, leaf=False, requires_grad=False):
        self._st = FakeStorage(ptr, nbytes)
        self.is_cuda, self.is_leaf, self.requires_grad = is_cuda, leaf, requires_grad
        self.grad = None
        self.hooks = []

    def untyped_storage(self):
        return self._st

    def register_post_accumulate_grad_hook(self, fn):
        self.hooks.append(fn)
        t = self

        class H:
            def remove(self_):
                t.hooks.remove(fn)
        return H()


class FakeManager:
    """Records the calls gpuheap.torch makes; errors can be scripted per
    (call, ptr). stats()/frame_map() serve the snapshot tests."""

    def __init__(self, stats=None, frames=None):
        self.calls = []
        self.fail = {}
        self._stats, self._frames = stats, frames

    def _do(self, what, ptr, *rest):
        self.calls.append((what, ptr) + rest)
        code = self.fail.get((what, ptr))
        if code is not None:
            raise gpuheap.Error(code, "scripted", what)

    def evict(self, ptr):
        self._do("evict", ptr)

    def evict_ahead(self, ptr):
        self._do("evict_ahead", ptr)

    def advise(self, ptr, advice):
        self._do("advise", ptr, gpuheap.parse_advice(advice))

    def prefetch(self, ptr, stream=None):
        self._do("prefetch", ptr)

    def prefetch_ahead(self, ptr, stream=None):
        self._do("prefetch_ahead", ptr)

    def prefetch_room(self, ptr, reserve=0, stream=None):
        self._do("prefetch_room", ptr, reserve)

    def prefetch_many(self, ptrs, stream=None):
        self._do("prefetch_many", tuple(ptrs))

    def set_kind(self, ptr, kind):
        self._do("set_kind", ptr, gpuheap.parse_kind(kind))

    def stats(self):
        return self._stats

    def frame_map(self):
        if isinstance(self._frames, Exception):
            raise self._frames
        return self._frames


def fake_stats(**over):
    s = _capi.TmgrStats()
    s.frame_bytes = 2 * MiB
    s.device_budget, s.host_budget = 64 * MiB, 128 * MiB
    s.frames[0], s.frames[1], s.frames[2] = 100, 6, 3
    s.heap_frames[1] = 2
    for k in range(4):
        s.tensors[k] = k + 1
        s.tensor_bytes[k] = (k + 1) * MiB
        s.tensor_bytes_tier[k][1] = (k + 1) * MiB // 2
        s.tensor_bytes_tier[k][2] = (k + 1) * MiB - (k + 1) * MiB // 2
    s.pinned_tensors, s.pending_frees, s.host_pool_frames = 1, 2, 3
    s.evictions, s.restores, s.bytes_evicted, s.bytes_restored = 7, 5, 14 * MiB, 10 * MiB
    s.oom_events, s.heap_grows, s.heap_shrinks = 1, 4, 2
    for k in range(_capi.VMM_OP_COUNT):
        s.vmm_calls[k], s.vmm_ns[k] = 10 + k, 1000 * (k + 1)
    s.vmm_move_ns, s.spare_frames, s.ordered_moves = 1500, 4, 7
    s.chunk_frames, s.chunk_changes = 18, 1
    for k, v in over.items():
        setattr(s, k, v)
    return s


def fake_frames():
    fb = 2 * MiB
    base = 0x7F0000000000
    return [
        {"va": base, "tier": "device", "kind": "heap", "pinned": False, "heap": True, "tensors": 0, "used_bytes": 0},
        {"va": base + fb, "tier": "device", "kind": "weights", "pinned": True, "heap": False, "tensors": 3,
         "used_bytes": fb},
        {"va": base + 5 * fb, "tier": "host", "kind": "activations", "pinned": False, "heap": False, "tensors": 1,
         "used_bytes": fb // 2},
        {"va": base + 6 * fb, "tier": "device", "kind": "workspace", "pinned": False, "heap": False, "tensors": 0,
         "used_bytes": 0},
        {"va": base + 7 * fb, "tier": "device", "kind": "optimizer", "pinned": False, "heap": False, "tensors": 2,
         "used_bytes": 3 * fb // 4},
    ]


# ---------------------------------------------------------------- tests
class TestImportsAndEnums(unittest.TestCase):
    def test_import_without_frameworks(self):
        rc, out = _run_py("""
            import sys
            sys.modules['torch'] = None; sys.modules['cupy'] = None; sys.modules['matplotlib'] = None
            import gpuheap, gpuheap.torch, gpuheap.cupy, gpuheap.snapshot
            try:
                gpuheap.torch.enable()
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_UNSUPPORTED and 'PyTorch' in str(e), e
            try:
                gpuheap.cupy.enable()
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_UNSUPPORTED and 'CuPy' in str(e), e
            print('ok')
        """)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_version(self):
        hdr = _header()
        v = [re.search(rf"#define GPUHEAP_VERSION_{p} (\d+)", hdr).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
        self.assertEqual(gpuheap.__version__, ".".join(v))

    def test_enums_match_header(self):
        hdr = _header()
        for enum_cls, prefix in ((gpuheap.Tier, "GH_TIER_"), (gpuheap.Kind, "GH_KIND_"),
                                 (gpuheap.Backend, "GH_BACKEND_"), (gpuheap.Advice, "GH_ADVICE_")):
            found = dict((m.group(1), int(m.group(2)))
                         for m in re.finditer(rf"{prefix}(\w+)\s*=\s*(\d+)", hdr) if m.group(1) != "COUNT")
            self.assertEqual(found, {e.name: e.value for e in enum_cls}, prefix)
        self.assertEqual(int(re.search(r"GH_TIER_COUNT\s*=\s*(\d+)", hdr).group(1)), _capi.TIER_COUNT)
        self.assertEqual(int(re.search(r"GH_KIND_COUNT\s*=\s*(\d+)", hdr).group(1)), _capi.KIND_COUNT)
        self.assertEqual(int(re.search(r"GH_ADVICE_COUNT\s*=\s*(\d+)", hdr).group(1)), _capi.ADVICE_COUNT)
        self.assertEqual(int(re.search(r"GH_TMGR_GROW_ON_DEMAND (\d+)u", hdr).group(1)), _capi.TMGR_GROW_ON_DEMAND)
        hist = {m.group(1): int(m.group(2)) for m in re.finditer(r"GH_HIST_(\w+)\s*=\s*(\d+)", hdr)}
        self.assertEqual(hist, {"ALLOC": _capi.HIST_ALLOC, "FREE_REQUESTED": _capi.HIST_FREE_REQUESTED,
                                "FREE_COMPLETED": _capi.HIST_FREE_COMPLETED, "OOM": _capi.HIST_OOM})

    def test_errors_match_header(self):
        hdr = _header()
        table = re.findall(r'X\((\w+),\s*(-\d+),\s*"([^"]*)"\)', hdr)
        self.assertEqual([(n, int(c), t) for n, c, t in table], gpuheap.ERRNO_MAP)

    def test_every_prototype_is_in_header(self):
        hdr = _header()
        for name in _capi.PROTOTYPES:
            self.assertRegex(hdr, rf"\b{name}\(", name)


class TestLayout(unittest.TestCase):
    """The ctypes mirrors against the C compiler's view of the header."""

    def test_struct_layouts(self):
        hdr = _header()
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
        if not cc:
            self.skipTest("no C compiler")
        structs = [("gh_heap_options_t", _capi.HeapOptions), ("gh_tmgr_options_t", _capi.TmgrOptions),
                   ("gh_tmgr_stats_t", _capi.TmgrStats)]
        structs += [("gh_frame_info_t", _capi.FrameInfo), ("gh_tensor_info_t", _capi.TensorInfo),
                    ("gh_hist_entry_t", _capi.HistEntry)]
        lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "gpuheap.h"', "int main(void) {"]
        for cname, py in structs:
            lines.append(f'printf("{cname} sizeof %zu\\n", sizeof({cname}));')
            for fname, _ in py._fields_:
                lines.append(f'printf("{cname} {fname} %zu\\n", offsetof({cname}, {fname}));')
        lines.append("return 0; }")
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines))
            p = subprocess.run([cc, "-std=c11", "-I", os.path.dirname(HEADER), src, "-o", exe],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        seen = {}
        for line in out.splitlines():
            cname, field, value = line.split()
            seen[(cname, field)] = int(value)
        for cname, py in structs:
            self.assertEqual(seen[(cname, "sizeof")], ctypes.sizeof(py), cname)
            for fname, _ in py._fields_:
                self.assertEqual(seen[(cname, fname)], getattr(py, fname).offset, f"{cname}.{fname}")


class TestErrors(unittest.TestCase):
    def test_error_fields(self):
        e = gpuheap.Error(gpuheap.ERR_BUDGET, "wanted 3 GiB", "gh_tensor_alloc")
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(e.code, -8)
        self.assertEqual(e.name, "GH_ERR_BUDGET")
        self.assertEqual(e.message, "the memory budget is exhausted")
        self.assertEqual(str(e), "gh_tensor_alloc: GH_ERR_BUDGET: the memory budget is exhausted (wanted 3 GiB)")

    def test_names_and_messages(self):
        for name, code, text in gpuheap.ERRNO_MAP:
            self.assertEqual(getattr(gpuheap, "ERR_" + name), code)
            self.assertEqual(gpuheap.err_name(code), "GH_ERR_" + name)
            self.assertEqual(gpuheap.strerror(code), text)
        self.assertEqual(gpuheap.err_name(0), "GH_OK")
        self.assertEqual(gpuheap.strerror(0), "success")
        self.assertNotIn("GH_ERR_PINNED", gpuheap.err_name(-99))

    def test_library_agrees(self):
        lib = _lib()
        for name, code, text in gpuheap.ERRNO_MAP:
            self.assertEqual(lib.gh_err_name(code).decode(), "GH_ERR_" + name)
            self.assertEqual(lib.gh_strerror(code).decode(), text)

    def test_check_reads_detail(self):
        _lib()
        with self.assertRaises(gpuheap.Error) as cm:
            gpuheap.Manager(backend="sim", device_budget=4096)  # below one frame
        self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)
        self.assertIn("gh_tmgr_create", str(cm.exception))
        self.assertTrue(cm.exception.detail)


class TestOptions(unittest.TestCase):
    def test_parse_size(self):
        P = gpuheap.parse_size
        self.assertEqual(P(0), 0)
        self.assertEqual(P(4096), 4096)
        self.assertEqual(P(2.0 * MiB), 2 * MiB)
        self.assertEqual(P("512"), 512)
        self.assertEqual(P("64MiB"), 64 * MiB)
        self.assertEqual(P("64 mib"), 64 * MiB)
        self.assertEqual(P("1.5G"), 3 << 29)
        self.assertEqual(P("8GiB"), 8 << 30)
        self.assertEqual(P("2GB"), 2 * 10 ** 9)
        self.assertEqual(P("4k"), 4096)
        self.assertEqual(P("1TiB"), 1 << 40)
        for bad in (-1, "-1", "abc", "12 parsecs", "", None, True, 1.5, float("nan"), [1], 1 << 64):
            with self.assertRaises(gpuheap.Error, msg=repr(bad)) as cm:
                P(bad)
            self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)

    def test_validate(self):
        v = gpuheap.validate_options(device_budget="1GiB", host_budget=2 << 30, low_watermark=0.5,
                                     high_watermark=1, backend="sim", device=0, host_pool_frames=0,
                                     heap_bytes="64MiB", heap_max_bytes="128MiB", heap={"page_bytes": 16384},
                                     grow_on_demand=1)
        self.assertEqual(v, {"device_budget": 1 << 30, "host_budget": 2 << 30, "low_watermark": 0.5,
                             "high_watermark": 1.0, "backend": gpuheap.Backend.SIM, "device": 0,
                             "host_pool_frames": 0, "heap_bytes": 64 * MiB, "heap_max_bytes": 128 * MiB,
                             "heap": {"page_bytes": 16384}, "grow_on_demand": True})
        self.assertEqual(gpuheap.validate_options(), {})
        self.assertEqual(gpuheap.validate_options(backend="cuda").get("backend"), gpuheap.Backend.CUDA_VMM)

    def test_validate_rejects(self):
        bad = [dict(low_watermark=0), dict(low_watermark=1.5), dict(high_watermark=-0.1), dict(high_watermark="x"),
               dict(low_watermark=True), dict(device_budget=-1), dict(host_budget="lots"), dict(device=-2),
               dict(device=1.0), dict(backend="tpu"), dict(backend=7), dict(host_pool_frames=-1),
               dict(host_pool_frames=1 << 32), dict(heap_bytes="2MiB", heap_max_bytes="1MiB"),
               dict(heap={"page_bytes": 3000}), dict(heap={"page_bytes": 1 << 17}), dict(heap={"colour": 1}),
               dict(heap=[1])]
        for kw in bad:
            with self.assertRaises(gpuheap.Error, msg=repr(kw)) as cm:
                gpuheap.validate_options(**kw)
            self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL, kw)
        with self.assertRaises(TypeError):
            gpuheap.validate_options(budget=1)

    def test_kinds(self):
        K = gpuheap.Kind
        for s, k in (("weights", K.WEIGHTS), ("Parameters", K.WEIGHTS), ("buffers", K.WEIGHTS),
                     ("activations", K.ACTIVATIONS), ("optimizer", K.OPTIMIZER), ("optimizer-state", K.OPTIMIZER),
                     ("gradients", K.OPTIMIZER), ("grads", K.OPTIMIZER), ("workspace", K.WORKSPACE),
                     (3, K.WEIGHTS), (0, K.WORKSPACE), (K.OPTIMIZER, K.OPTIMIZER)):
            self.assertIs(gpuheap.parse_kind(s), k, s)
        for bad in ("heap", "", 4, -1, None, True, 1.0):
            with self.assertRaises(gpuheap.Error, msg=repr(bad)):
                gpuheap.parse_kind(bad)
        self.assertEqual([k.value for k in K], [0, 1, 2, 3])  # eviction order: workspace first, weights last

    def test_advice(self):
        A = gpuheap.Advice
        for s, a in (("cold", A.COLD), (" Cold ", A.COLD), ("normal", A.NORMAL), ("warm", A.NORMAL), (0, A.NORMAL),
                     (1, A.COLD), (A.COLD, A.COLD), ("quiet", A.QUIET), (2, A.QUIET)):
            self.assertIs(gpuheap.parse_advice(s), a, s)
        for bad in ("hot", "", 3, -1, None, True, 1.0):
            with self.assertRaises(gpuheap.Error, msg=repr(bad)) as cm:
                gpuheap.parse_advice(bad)
            self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)

    def test_options_struct_only_overrides_given(self):
        lib = _lib()
        o = gpuheap._options_struct(lib, gpuheap.validate_options(device_budget="1GiB", grow_on_demand=True,
                                                                  heap={"slots": 5}))
        self.assertEqual(o.device_budget, 1 << 30)
        self.assertEqual(o.flags & _capi.TMGR_GROW_ON_DEMAND, 1)
        self.assertEqual(o.heap.slots, 5)
        self.assertEqual(o.device, -1)  # the library's defaults stay
        self.assertAlmostEqual(o.low_watermark, 1.0)
        self.assertEqual(o.host_pool_frames, 64)


class TestLibraryLookup(unittest.TestCase):
    def test_candidates(self):
        self.assertEqual(_capi.candidates({"GPUHEAP_LIBRARY": "/x/libgpuheap.so"}), [("/x/libgpuheap.so", True)])
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "libgpuheap.so"), "w").close()
            c = _capi.candidates({}, here=d)
            self.assertEqual(c[0], (os.path.join(d, "libgpuheap.so"), False))
            self.assertIn(("libgpuheap.so", False), c)
            self.assertIn(("libgpuheap.so.0", False), c)

    def test_missing_library_is_an_error(self):
        rc, out = _run_py("""
            import gpuheap
            try:
                gpuheap.Manager()
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_UNSUPPORTED, e
                assert '/nonexistent/libgpuheap.so' in str(e) and 'GPUHEAP_LIBRARY' in str(e), e
                print('ok')
        """, env={"GPUHEAP_LIBRARY": "/nonexistent/libgpuheap.so"})
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_path_is_the_loaded_file(self):
        lib = _lib()
        self.assertTrue(os.path.isabs(lib.path) and os.path.exists(lib.path), lib.path)


class TestStats(unittest.TestCase):
    def test_stats_to_dict(self):
        d = gpuheap.stats_to_dict(fake_stats())
        self.assertEqual(d["frames"], {"none": 100, "device": 6, "host": 3})
        self.assertEqual(d["heap_frames"], {"none": 0, "device": 2, "host": 0})
        self.assertEqual(d["tensors"], {"workspace": 1, "activations": 2, "optimizer": 3, "weights": 4})
        self.assertEqual(d["tensor_bytes_tier"]["weights"], {"none": 0, "device": 2 * MiB, "host": 2 * MiB})
        self.assertEqual(d["evictions"], 7)
        self.assertEqual(d["vmm_calls"], {"create": 10, "release": 11, "map": 12, "unmap": 13})
        self.assertEqual(d["vmm_ns"], {"create": 1000, "release": 2000, "map": 3000, "unmap": 4000})
        self.assertEqual((d["vmm_move_ns"], d["spare_frames"], d["ordered_moves"]), (1500, 4, 7))
        self.assertEqual((d["chunk_frames"], d["chunk_changes"]), (18, 1))
        for k in ("moves", "move_ns", "stream_waits", "stream_wait_ns", "cached_frames", "peak_tensor_bytes",
                  "host_placed_bytes"):
            self.assertIn(k, d)
        json.dumps(d)

    def test_torch_style(self):
        st = gpuheap.stats_to_dict(fake_stats())
        m = ght.torch_style_stats(st)
        self.assertEqual(list(m), sorted(m))
        self.assertEqual(m["allocated_bytes.all.current"], 10 * MiB)
        self.assertEqual(m["reserved_bytes.all.current"], (6 + 3 + 2) * 2 * MiB)
        self.assertEqual(m["allocation.all.current"], 10)
        self.assertEqual(m["allocated_bytes.all.peak"], 0)
        peaked = ght.torch_style_stats(gpuheap.stats_to_dict(fake_stats(peak_tensor_bytes=12 * MiB, moves=3,
                                                                         move_ns=5000)))
        self.assertEqual(peaked["allocated_bytes.all.peak"], 12 * MiB)
        self.assertEqual((peaked["gpuheap.moves"], peaked["gpuheap.move_ns"]), (3, 5000))
        self.assertEqual(peaked["gpuheap.stream_waits"], 0)
        self.assertEqual((m["gpuheap.spare_frames"], m["gpuheap.vmm_move_ns"], m["gpuheap.ordered_moves"]),
                         (4, 1500, 7))
        self.assertEqual((m["gpuheap.chunk_frames"], m["gpuheap.chunk_changes"]), (18, 1))
        self.assertEqual(m["num_ooms"], 1)
        self.assertEqual(m["gpuheap.device_bytes"], 8 * 2 * MiB)
        self.assertEqual(m["gpuheap.host_bytes"], 3 * 2 * MiB)
        self.assertEqual(m["gpuheap.allocated_bytes.device.current"] + m["gpuheap.allocated_bytes.host.current"],
                         m["allocated_bytes.all.current"])
        self.assertEqual(m["gpuheap.allocated_bytes.weights.current"], 4 * MiB)
        self.assertEqual(m["gpuheap.evictions"], 7)
        self.assertEqual([k for k in m if k.endswith(".peak")], ["allocated_bytes.all.peak"])  # the one peak kept
        fm = FakeManager(stats=st)
        self.assertEqual(ght.memory_stats(fm), m)

    def test_frame_to_dict(self):
        f = _capi.FrameInfo(va=0x1000, tier=2, kind=3, pinned=0, heap=0, tensors=4, used_bytes=99)
        self.assertEqual(gpuheap.frame_to_dict(f), {"va": 0x1000, "tier": "host", "kind": "weights",
                                                    "pinned": False, "heap": False, "tensors": 4, "used_bytes": 99})
        h = _capi.FrameInfo(va=0, tier=1, kind=255, pinned=1, heap=1)
        self.assertEqual(gpuheap.frame_to_dict(h)["kind"], "heap")


class FakeLib:
    """Stands in for the library's frame-map and cache calls (not all
    libraries have them yet), with C's calling convention."""
    path = "fake"

    def __init__(self, frames, grow_once=0, empty_cache=True):
        self.frames, self.grow_once, self.calls = frames, grow_once, []
        if not empty_cache:
            self.gh_tmgr_empty_cache = None

    def gh_tmgr_frame_map(self, h, out, cap, count_p):
        self.calls.append(("frame_map", cap))
        if self.grow_once and out is not None:  # frames mapped between the two calls
            self.frames = self.frames + [self.frames[-1]] * self.grow_once
            self.grow_once = 0
        for i in range(min(cap, len(self.frames))):
            out[i] = self.frames[i]
        count_p._obj.value = len(self.frames)
        return 0

    def gh_tmgr_empty_cache(self, h):
        self.calls.append(("empty_cache",))
        return 0

    def gh_tmgr_maintain(self, h):
        self.calls.append(("maintain",))
        return 0

    def gh_tmgr_reset_peak(self, h):
        self.calls.append(("reset_peak",))
        return 0


class TestFrameMapBinding(unittest.TestCase):
    def frames(self, n):
        return [_capi.FrameInfo(va=0x200000 * (i + 1), tier=1 + i % 2, kind=i % 4, pinned=i == 0, heap=0,
                                tensors=i, used_bytes=4096 * i) for i in range(n)]

    def test_two_calls(self):
        lib = FakeLib(self.frames(5))
        m = gpuheap.Manager._borrow(0x1234, lib)
        fm = m.frame_map()
        self.assertEqual(len(fm), 5)
        self.assertEqual(fm[1], {"va": 0x400000, "tier": "host", "kind": "activations", "pinned": False,
                                 "heap": False, "tensors": 1, "used_bytes": 4096})
        self.assertEqual(lib.calls[0], ("frame_map", 0))

    def test_grows_between_calls(self):
        lib = FakeLib(self.frames(3), grow_once=100)  # more than the slack of the second call
        m = gpuheap.Manager._borrow(0x1234, lib)
        self.assertEqual(len(m.frame_map()), 103)
        self.assertEqual(len(lib.calls), 3)

    def test_empty_cache_and_fallback(self):
        lib = FakeLib([])
        gpuheap.Manager._borrow(0x1234, lib).empty_cache()
        self.assertEqual(lib.calls, [("empty_cache",)])
        old = FakeLib([], empty_cache=False)
        gpuheap.Manager._borrow(0x1234, old).empty_cache()
        self.assertEqual(old.calls, [("maintain",)])
        self.assertEqual(gpuheap.Manager._borrow(0x1234, lib).frame_map(), [])

    def test_reset_peak(self):
        lib = FakeLib([])
        m = gpuheap.Manager._borrow(0x1234, lib)
        m.reset_peak()
        ght.reset_peak_memory_stats(m)
        self.assertEqual(lib.calls, [("reset_peak",), ("reset_peak",)])
        lib.gh_tmgr_reset_peak = None
        with self.assertRaises(gpuheap.Error) as cm:
            m.reset_peak()
        self.assertEqual(cm.exception.code, gpuheap.ERR_UNSUPPORTED)

    def test_missing_frame_map(self):
        lib = FakeLib([])
        lib.gh_tmgr_frame_map = None
        with self.assertRaises(gpuheap.Error) as cm:
            gpuheap.Manager._borrow(0x1234, lib).frame_map()
        self.assertEqual(cm.exception.code, gpuheap.ERR_UNSUPPORTED)


class TestSnapshot(unittest.TestCase):
    def _snap(self, frames=None):
        fm = FakeManager(stats=gpuheap.stats_to_dict(fake_stats()), frames=fake_frames() if frames is None else frames)
        return snap_mod.snapshot(fm)

    def test_snapshot_dict(self):
        s = self._snap()
        self.assertEqual(json.loads(json.dumps(s)), s)
        self.assertEqual(s["version"], 1)
        self.assertEqual(s["tiers"]["device"]["frames"], 6)
        self.assertEqual(s["tiers"]["device"]["bytes"], 8 * 2 * MiB)
        self.assertEqual(s["tiers"]["host"]["tensor_bytes"], sum(s["kinds"][k]["bytes_by_tier"]["host"]
                                                                 for k in snap_mod.KINDS))
        self.assertEqual(s["kinds"]["optimizer"]["tensors"], 3)
        self.assertEqual(s["counters"]["bytes_evicted"], 14 * MiB)
        self.assertEqual(len(s["frames"]), 5)

    def test_layout(self):
        cells = snap_mod.layout(self._snap(), columns=4)
        self.assertEqual([c["state"] for c in cells], ["heap", "device", "gap", "host", "free", "device"])
        self.assertEqual(cells[2]["gap_frames"], 3)
        self.assertEqual([(c["x"], c["y"]) for c in cells], [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)])

    def test_html(self):
        s = self._snap()
        page = snap_mod.to_html(s, columns=4, title="<frames & more>")
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        self.assertIn("&lt;frames &amp; more&gt;", page)
        self.assertNotIn("<frames & more>", page)
        self.assertEqual(page.count("<title>") - 1, 6)  # one tooltip a cell, plus the page title
        self.assertIn("PINNED", page)
        self.assertIn("0x7f0000200000", page)
        self.assertIn(snap_mod.COLORS["host"], page)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "f.html")
            snap_mod.write_html(p, s)
            self.assertGreater(os.path.getsize(p), 1000)
            j = os.path.join(d, "s.json")
            snap_mod.write_json(j, s)
            h2 = os.path.join(d, "g.html")
            self.assertEqual(snap_mod.main([j, "--html", h2]), 0)
            self.assertTrue(os.path.exists(h2))

    def test_without_frame_map(self):
        s = self._snap(frames=gpuheap.Error(gpuheap.ERR_UNSUPPORTED, "old library", "gh_tmgr_frame_map"))
        self.assertIsNone(s["frames"])
        self.assertIn("old library", s["frames_error"])
        self.assertIn("No frame map", snap_mod.to_html(s))
        self.assertEqual(snap_mod.layout(s), [])

    def test_empty_and_large(self):
        self.assertIn("<svg", snap_mod.to_html(self._snap(frames=[])))
        fb = 2 * MiB
        many = [{"va": i * fb, "tier": "device" if i % 3 else "host", "kind": "activations", "pinned": False,
                 "heap": False, "tensors": 1, "used_bytes": fb} for i in range(5000)]
        cells = snap_mod.layout(self._snap(frames=many))
        self.assertEqual(len(cells), 5000)
        self.assertEqual(cells[-1]["y"], 4999 // 64)

    def test_png(self):
        """write_png in fresh interpreters (matplotlib's compiled modules can
        fail to load beside what this process has imported, PyTorch among
        them): a PNG where matplotlib loads, and where it is installed but
        fails to load in the calling process (drawn by a child);
        GH_ERR_UNSUPPORTED naming it where it is missing or hidden."""
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "s.json")
            with open(src, "w") as f:
                json.dump(self._snap(), f)
            # hide: matplotlib hidden (not installed, to write_png); break_:
            # matplotlib.pyplot fails to load in this process only, as
            # beside PyTorch on some machines: a fresh interpreter draws.
            for i, (hide, break_) in enumerate(((False, False), (True, False), (False, True))):
                p = os.path.join(d, f"f{i}.png")
                rc, out = _run_py(f"""
                    import json, sys, importlib.util
                    if {hide}:
                        sys.modules['matplotlib'] = None
                    if {break_}:
                        if importlib.util.find_spec('matplotlib') is None:
                            print('no matplotlib: skipped')
                            sys.exit(0)
                        sys.modules['matplotlib.pyplot'] = None
                    import gpuheap, gpuheap.snapshot as s
                    with open({src!r}) as f:
                        snap = json.load(f)
                    if {break_}:
                        s.write_png({p!r}, snap)
                        with open({p!r}, 'rb') as f:
                            assert f.read(8) == b'\\x89PNG\\r\\n\\x1a\\n'
                        print('png in a child ok')
                        s._png_in_child = lambda *a: 'boom'  # the child fails too: the error says both
                        try:
                            s.write_png({p!r} + '.2', snap)
                        except gpuheap.Error as e:
                            assert e.code == gpuheap.ERR_UNSUPPORTED and 'matplotlib' in str(e) and 'boom' in str(e), e
                            print('child failure ok')
                        sys.exit(0)
                    try:
                        import matplotlib.pyplot  # noqa: F401
                    except Exception:
                        try:
                            s.write_png({p!r}, snap)
                        except gpuheap.Error as e:
                            assert e.code == gpuheap.ERR_UNSUPPORTED and 'matplotlib' in str(e), e
                            print('unsupported ok')
                    else:
                        s.write_png({p!r}, snap)
                        with open({p!r}, 'rb') as f:
                            assert f.read(8) == b'\\x89PNG\\r\\n\\x1a\\n'
                        print('png ok')
                """)
                self.assertEqual(rc, 0, out)
                if break_ and "no matplotlib" in out:
                    continue
                self.assertIn("png in a child ok" if break_ else "unsupported ok" if hide else "ok", out)
                if break_:
                    self.assertIn("child failure ok", out)


class TestOffloadBookkeeping(unittest.TestCase):
    """gpuheap.torch.Offload's hooks, driven by hand with fake tensors, in
    mode "evict" (pack evicts); TestOffloadCold runs them again in mode
    "cold" (pack advises cold)."""
    MODE, HINT, COUNTER = "evict", "evict", "evicted"

    def make(self, **kw):
        fm = FakeManager()
        kw.setdefault("min_bytes", MiB)
        kw.setdefault("mode", self.MODE)
        kw.setdefault("quiet", False)  # the default; the quiet advice has tests of its own (TestOffloadQuiet)
        kw.setdefault("prefetch_ahead", False)  # tests of its own below (test_prefetch_ahead_*)
        off = ght.Offload(manager=fm, stream=lambda: None, **kw)
        return fm, off

    def hint(self, p):
        """The call pack makes for storage p."""
        return ("advise", p, gpuheap.Advice.COLD) if self.HINT == "advise" else ("evict", p)

    @staticmethod
    def tensors(n, size=4 * MiB, base=0x10000000):
        return [FakeTensor(base + i * 0x1000000, size) for i in range(n)]

    def test_pack_returns_the_tensor_and_hints_behind(self):
        fm, off = self.make(keep_last=2, prefetch_distance=2)
        ts = self.tensors(6)
        for t in ts:
            self.assertIs(off.pack(t), t)  # no copy, no new object
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        self.assertEqual(fm.calls, [self.hint(p) for p in ptr[:4]])  # the last 2 are not hinted
        self.assertEqual(off.counters["packed"], 6)
        self.assertEqual(off.counters[self.COUNTER], 4)
        self.assertEqual(off.counters["advised"] + off.counters["evicted"], 4)

    def test_unpack_prefetches_in_reverse_order(self):
        fm, off = self.make(keep_last=2, prefetch_distance=2)
        ts = self.tensors(6)
        for t in ts:
            off.pack(t)
        fm.calls.clear()
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        order = []
        for t in reversed(ts):  # backward uses them last-saved first
            self.assertIs(off.unpack(t), t)
            self.assertEqual({c[0] for c in fm.calls} - {"prefetch"}, set())
            order.append([c[1] for c in fm.calls])
            fm.calls.clear()
        self.assertEqual(order, [[ptr[5], ptr[4], ptr[3]], [ptr[2]], [ptr[1]], [ptr[0]], [], []])
        self.assertEqual(off.counters["prefetched"], 6)
        self.assertEqual(off.counters["unpacked"], 6)

    def test_distance_zero_and_out_of_order(self):
        fm, off = self.make(keep_last=0, prefetch_distance=0)
        ts = self.tensors(3)
        for t in ts:
            off.pack(t)
        self.assertEqual([c[0] for c in fm.calls], [self.HINT] * 3)
        fm.calls.clear()
        off.unpack(ts[1])
        off.unpack(ts[1])  # unpacked twice (retain_graph): prefetched once
        off.unpack(ts[2])
        self.assertEqual(fm.calls, [("prefetch", ts[1].untyped_storage().data_ptr()),
                                    ("prefetch", ts[2].untyped_storage().data_ptr())])

    def test_skips(self):
        fm, off = self.make(keep_last=0)
        small = FakeTensor(0x1000, 4096)
        cpu = FakeTensor(0x2000, 8 * MiB, is_cuda=False)
        empty = FakeTensor(0, 0)
        param = FakeTensor(0x3000000, 8 * MiB, leaf=True, requires_grad=True)
        for t in (small, cpu, empty, param):
            self.assertIs(off.pack(t), t)
            self.assertIs(off.unpack(t), t)
        self.assertEqual(fm.calls, [])
        self.assertEqual(off.counters["skipped"], 4)
        ght._protected.add(0x4000000)  # marked weights by mark_model
        try:
            w = FakeTensor(0x4000000, 8 * MiB)
            self.assertIs(off.pack(w), w)
        finally:
            ght._protected.discard(0x4000000)
        self.assertEqual(fm.calls, [])

    def test_same_storage_saved_twice(self):
        fm, off = self.make(keep_last=1, prefetch_distance=1)
        a, b = self.tensors(2)
        view = FakeTensor(a.untyped_storage().data_ptr(), 4 * MiB)  # another tensor into a's storage
        off.pack(a)
        off.pack(view)
        self.assertEqual(off.counters["packed"], 1)
        off.pack(b)
        self.assertEqual(fm.calls, [self.hint(a.untyped_storage().data_ptr())])
        self.assertEqual(len(off.pending()), 2)

    def test_dead_entries_are_skipped_and_pruned(self):
        fm, off = self.make(keep_last=5, prefetch_distance=1)
        ts = self.tensors(4)
        for t in ts:
            off.pack(t)
        p = [t.untyped_storage().data_ptr() for t in ts]
        del ts[1:3]  # their graph was freed
        gc.collect()
        off.unpack(ts[1])  # the last one saved
        self.assertEqual([c[1] for c in fm.calls], [p[3], p[0]])  # the dead ones between are not counted
        off._prune()
        self.assertEqual(off.pending(), [p[0]])  # dead and unpacked entries go

    def test_reused_across_steps(self):
        """One Offload for every step; an input tensor that lives across steps
        is tracked again in each forward."""
        fm, off = self.make(keep_last=0, prefetch_distance=0)
        x, a = self.tensors(2)
        for step in range(2):
            off._prune()  # what __enter__ does
            off.pack(x)
            off.pack(a)
            off.unpack(a)
            off.unpack(x)
        px, pa = x.untyped_storage().data_ptr(), a.untyped_storage().data_ptr()
        self.assertEqual(fm.calls, [self.hint(px), self.hint(pa), ("prefetch", pa), ("prefetch", px)] * 2)
        off._prune()
        self.assertEqual(off.pending(), [])

    def test_hint_errors_never_raise(self):
        fm, off = self.make(keep_last=0, prefetch_distance=1)
        a, b, c = self.tensors(3)
        pa, pb, pc = (t.untyped_storage().data_ptr() for t in (a, b, c))
        fm.fail[(self.HINT, pa)] = gpuheap.ERR_FOREIGN  # not a gpuheap allocation
        fm.fail[(self.HINT, pb)] = gpuheap.ERR_PINNED
        fm.fail[(self.HINT, pc)] = gpuheap.ERR_CUDA
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for t in (a, b, c):
                off.pack(t)
        self.assertEqual(off.counters["foreign"], 1)
        self.assertEqual(off.counters["hint_errors"], 1)
        self.assertEqual(len([x for x in w if issubclass(x.category, RuntimeWarning)]), 1)
        fm.calls.clear()
        off.unpack(c)
        off.unpack(b)
        off.unpack(a)  # dropped: not prefetched
        self.assertEqual([x[1] for x in fm.calls], [pc, pb])

    def test_validation(self):
        for kw in (dict(prefetch_distance=-1), dict(keep_last=-2), dict(prefetch_distance=1.5),
                   dict(min_bytes="lots"), dict(mode="lazy"), dict(mode=None)):
            with self.assertRaises(gpuheap.Error, msg=repr(kw)):
                ght.Offload(manager=FakeManager(), **kw)

    def test_needs_enable(self):
        off = ght.Offload()
        with self.assertRaises(gpuheap.Error) as cm:
            off.manager
        self.assertIn("enable()", str(cm.exception))


class TestOffloadCold(TestOffloadBookkeeping):
    """The same in mode "cold", the default: pack advises cold (no move)."""
    MODE, HINT, COUNTER = "cold", "advise", "advised"

    def test_default_mode_is_cold(self):
        self.assertEqual(ght.Offload(manager=FakeManager()).mode, "cold")
        self.assertEqual(ght.offload(manager=FakeManager()).mode, "cold")
        self.assertEqual(ght.offload(manager=FakeManager(), mode="evict").mode, "evict")
        self.assertEqual(ght.OFFLOAD_MODES, ("cold", "evict"))

    def test_default_distance_is_one(self):
        self.assertEqual(ght.Offload(manager=FakeManager()).prefetch_distance, 1)
        self.assertEqual(ght.offload(manager=FakeManager()).prefetch_distance, 1)

    def test_offload_passes_its_arguments(self):
        """offload() builds the Offload its arguments describe (gpu_train.py
        calls it with every one of them)."""
        off = ght.offload(prefetch_distance=2, keep_last=3, min_bytes=4 * MiB, manager=FakeManager(), mode="evict",
                          prefetch_weights=False, quiet=True, prefetch_ahead=False)
        self.assertEqual((off.prefetch_distance, off.keep_last, off.min_bytes, off.mode, off.prefetch_weights,
                          off.quiet, off.prefetch_ahead), (2, 3, 4 * MiB, "evict", False, True, False))
        self.assertTrue(ght.offload(manager=FakeManager()).prefetch_ahead)

    def test_forward_then_backward(self):
        """A whole step: pack advises all but the newest keep_last, in packing
        order; unpack prefetches each one and the next prefetch_distance in
        reverse order, once each, never advising or evicting."""
        fm, off = self.make(keep_last=1, prefetch_distance=3)
        ts = self.tensors(8)
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        for t in ts:
            off.pack(t)
        self.assertEqual(fm.calls, [("advise", p, gpuheap.Advice.COLD) for p in ptr[:7]])
        fm.calls.clear()
        for t in reversed(ts):
            off.unpack(t)
        self.assertEqual(fm.calls, [("prefetch", p) for p in reversed(ptr)])
        fm.calls.clear()
        off.unpack(ts[7])  # once more: nothing left to prefetch ahead of it
        off.unpack(ts[5])
        self.assertEqual(fm.calls, [])
        self.assertEqual(off.counters, {"packed": 8, "skipped": 0, "advised": 7, "evicted": 0, "prefetched": 8,
                                        "prefetched_ahead": 0, "prefetched_room": 0, "weights_prefetched": 0, "quieted": 0,
                                        "quieted_forward": 0, "unpacked": 8, "foreign": 0, "hint_errors": 0})

    def packed_ahead(self, n):
        """An offload context with prefetch ahead, after packing n tensors."""
        fm, off = self.make(keep_last=1, prefetch_distance=1, prefetch_ahead=True, alone=lambda t, packs: True)
        ts = self.tensors(n)
        for t in ts:
            off.pack(t)
        fm.calls.clear()
        return fm, off, ts, [t.untyped_storage().data_ptr() for t in ts]

    def test_prefetch_ahead(self):
        """With prefetch_ahead (the default), the next prefetch_distance
        tensors are prefetched ahead (no stream waits for their copies) and
        each one is prefetched again at its own unpack (its use: the streams
        wait then); a tensor unpacked first, never prefetched, is prefetched
        plainly."""
        fm, off, ts, ptr = self.packed_ahead(4)
        for t in reversed(ts):
            off.unpack(t)
        self.assertEqual(fm.calls, [("prefetch", ptr[3]), ("prefetch_ahead", ptr[2]),
                                    ("prefetch", ptr[2]), ("prefetch_ahead", ptr[1]),
                                    ("prefetch", ptr[1]), ("prefetch_ahead", ptr[0]),
                                    ("prefetch", ptr[0])])
        self.assertEqual((off.counters["prefetched"], off.counters["prefetched_ahead"]), (4, 3))
        fm.calls.clear()
        off.unpack(ts[2])  # unpacked again (retain_graph): nothing to prefetch, nothing to wait for
        self.assertEqual(fm.calls, [])

    def test_prefetch_room(self):
        """prefetch_room=N: past the distance, up to N more tensors in the
        order backward uses them are prefetched where there is room
        (prefetch_room, with twice the largest saved tensor as the reserve
        by default); the first refusal (ERR_BUDGET) ends the walk and leaves
        the refused ones for later unpacks, which try them again; a tensor
        prefetched so is not prefetched ahead again, only used."""
        fm, off = self.make(keep_last=1, prefetch_distance=1, prefetch_ahead=True, prefetch_room=2,
                            alone=lambda t, packs: True)
        ts = self.tensors(6)
        for t in ts:
            off.pack(t)
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        size = ts[0].untyped_storage().nbytes()
        fm.calls.clear()
        fm.fail[("prefetch_room", ptr[2])] = gpuheap.ERR_BUDGET
        off.unpack(ts[5])
        self.assertEqual(fm.calls, [("prefetch", ptr[5]), ("prefetch_ahead", ptr[4]),
                                    ("prefetch_room", ptr[3], 2 * size), ("prefetch_room", ptr[2], 2 * size)])
        self.assertEqual(off.counters["prefetched_room"], 1)
        fm.calls.clear()
        del fm.fail[("prefetch_room", ptr[2])]
        off.unpack(ts[4])  # 3 was prefetched by room: the walk goes on past it
        self.assertEqual(fm.calls, [("prefetch", ptr[4]), ("prefetch_room", ptr[2], 2 * size),
                                    ("prefetch_room", ptr[1], 2 * size)])
        fm.calls.clear()
        off.unpack(ts[3])  # its use; 0 is next
        self.assertEqual(fm.calls, [("prefetch", ptr[3]), ("prefetch_room", ptr[0], 2 * size)])
        self.assertEqual(off.counters["prefetched_room"], 4)
        self.assertEqual(off.counters["prefetched_ahead"], 5)

    def test_prefetch_room_reserve_and_limits(self):
        """An explicit room_reserve is passed as given; nothing is tried
        with prefetch_ahead=False or beyond a tensor something else reaches;
        a library without the call turns it off (ERR_UNSUPPORTED), and any
        other error is counted as a hint error, warned once; bad values
        raise ERR_INVAL."""
        fm, off = self.make(keep_last=1, prefetch_distance=1, prefetch_ahead=True, prefetch_room=3,
                            room_reserve="4MiB", alone=lambda t, packs: t.untyped_storage().data_ptr() != 0x11000000)
        ts = self.tensors(5)
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        self.assertIn(0x11000000, ptr)
        for t in ts:
            off.pack(t)
        fm.calls.clear()
        off.unpack(ts[4])
        k = ptr.index(0x11000000)
        want = [("prefetch", ptr[4]), ("prefetch_ahead" if k != 3 else "prefetch", ptr[3])]
        want += [("prefetch_room", ptr[j], 4 * MiB) for j in range(2, -1, -1) if j > k]
        self.assertEqual(fm.calls, want)
        for fail, counted in ((gpuheap.ERR_UNSUPPORTED, 0), (gpuheap.ERR_CUDA, 1)):
            fm, off = self.make(keep_last=1, prefetch_distance=0, prefetch_ahead=True, prefetch_room=1,
                                alone=lambda t, packs: True)
            ts = self.tensors(3)
            for t in ts:
                off.pack(t)
            p1 = ts[1].untyped_storage().data_ptr()
            fm.fail[("prefetch_room", p1)] = fail
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                off.unpack(ts[2])
            self.assertEqual(off.counters["hint_errors"], counted)
            self.assertEqual(len(w), counted)
            self.assertEqual(off.prefetch_room, 0 if fail == gpuheap.ERR_UNSUPPORTED else 1)
        fm, off = self.make(keep_last=1, prefetch_distance=1, prefetch_ahead=False, prefetch_room=3)
        ts = self.tensors(4)
        for t in ts:
            off.pack(t)
        fm.calls.clear()
        off.unpack(ts[3])
        self.assertNotIn("prefetch_room", [c[0] for c in fm.calls])
        for bad in ({"prefetch_room": -1}, {"prefetch_room": 1.5}, {"prefetch_room": True},
                    {"room_reserve": "lots"}):
            with self.assertRaises(gpuheap.Error) as cm:
                ght.Offload(manager=FakeManager(), **bad)
            self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)

    def test_prefetch_ahead_same_storage(self):
        """A storage saved twice is in use from the first of its unpacks: the
        walk ahead does not prefetch it ahead again."""
        fm, off = self.make(keep_last=0, prefetch_distance=1, prefetch_ahead=True, alone=lambda t, packs: True)
        ts = self.tensors(2)
        p0, p1 = (t.untyped_storage().data_ptr() for t in ts)
        for t in (ts[0], ts[1], ts[1]):
            off.pack(t)
        fm.calls.clear()
        off.unpack(ts[1])
        self.assertEqual(fm.calls, [("prefetch", p1), ("prefetch_ahead", p0)])

    def test_prefetch_ahead_only_alone(self):
        """A tensor something besides autograd still reaches (a
        recomputation's input, a variable) is prefetched plainly, so that a
        read before its unpack finds its bytes; so is every tensor when this
        torch cannot tell."""
        P, A = "prefetch", "prefetch_ahead"
        # (an ahead one is prefetched again at its own unpack: its use)
        for alone, want in ((lambda t, packs: t.untyped_storage().data_ptr() != 0x11000000, (P, P, A, P)),
                            (lambda t, packs: None, (P, P, P)),
                            (lambda t, packs: True, (P, A, P, A, P))):
            fm, off = self.make(keep_last=1, prefetch_distance=1, prefetch_ahead=True, alone=alone)
            ts = self.tensors(3)
            ptr = [t.untyped_storage().data_ptr() for t in ts]
            for t in ts:
                off.pack(t)
            fm.calls.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for t in reversed(ts):
                    off.unpack(t)
            got = [c[0] for c in fm.calls]
            self.assertEqual(tuple(got), want)
            self.assertEqual(off.counters["prefetched_ahead"], want.count(A))
            self.assertEqual(fm.calls[0], (P, ptr[2]))

    def test_prefetch_ahead_older_library(self):
        """A library without gh_tensor_prefetch_ahead: plain prefetches from
        then on, no error counted."""
        fm, off, ts, ptr = self.packed_ahead(3)
        fm.fail[("prefetch_ahead", ptr[1])] = gpuheap.ERR_UNSUPPORTED
        for t in reversed(ts):
            off.unpack(t)
        self.assertEqual(fm.calls, [("prefetch", ptr[2]), ("prefetch_ahead", ptr[1]), ("prefetch", ptr[1]),
                                    ("prefetch", ptr[0])])
        self.assertFalse(off.prefetch_ahead)
        self.assertEqual((off.counters["hint_errors"], off.counters["prefetched"]), (0, 3))

    def test_unpack_prefetches_protected(self):
        """Weights autograd saved (storages mark_model protected) are skipped
        in pack and prefetched, every time, as they are unpacked."""
        fm, off = self.make(keep_last=0, prefetch_distance=0)
        w = FakeTensor(0x900000, 4 * MiB, leaf=True, requires_grad=True)
        ght._protected.add(0x900000)
        try:
            off.pack(w)
            self.assertEqual(fm.calls, [])
            off.unpack(w)
            off.unpack(w)
            self.assertEqual(fm.calls, [("prefetch", 0x900000), ("prefetch", 0x900000)])
            self.assertEqual(off.counters["weights_prefetched"], 2)
            self.assertEqual(off.counters["prefetched"], 0)
        finally:
            ght._protected.clear()

    def test_unpack_distance_window(self):
        """Each unpack tops the window up to prefetch_distance tensors ahead."""
        fm, off = self.make(keep_last=0, prefetch_distance=2)
        ts = self.tensors(5)
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        for t in ts:
            off.pack(t)
        fm.calls.clear()
        off.unpack(ts[4])
        self.assertEqual(fm.calls, [("prefetch", ptr[4]), ("prefetch", ptr[3]), ("prefetch", ptr[2])])
        fm.calls.clear()
        off.unpack(ts[3])
        self.assertEqual(fm.calls, [("prefetch", ptr[1])])
        fm.calls.clear()
        off.unpack(ts[1])  # ts[2] not unpacked yet: the window looks ahead of ts[1] only
        self.assertEqual(fm.calls, [("prefetch", ptr[0])])

    def test_falls_back_to_evict(self):
        """A library without gh_tensor_advise: the first advice fails with
        ERR_UNSUPPORTED, offload warns once and evicts from then on."""
        fm, off = self.make(keep_last=0, prefetch_distance=0)
        a, b = self.tensors(2)
        pa, pb = a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()
        fm.fail[("advise", pa)] = gpuheap.ERR_UNSUPPORTED
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            off.pack(a)
            off.pack(b)
        self.assertEqual(fm.calls, [("advise", pa, gpuheap.Advice.COLD), ("evict", pa), ("evict", pb)])
        self.assertEqual(off.mode, "evict")
        self.assertEqual(off.counters["evicted"], 2)
        self.assertEqual(off.counters["hint_errors"], 0)
        self.assertEqual(len([x for x in w if "falling back" in str(x.message)]), 1)


class _Hooks:
    """register_*_hook for the stand-ins: a list of functions and handles."""

    def __init__(self):
        self.hooks = []

    def add(self, fn):
        self.hooks.append(fn)
        lst = self.hooks

        class H:
            def remove(h):
                lst.remove(fn)
        return H()


class TestOffloadQuiet(unittest.TestCase):
    """quiet=True: the first unpack after a forward advises
    QUIET, in packing order, every saved tensor advised cold and not unpacked
    yet; once per backward; never in mode "evict"."""

    def make(self, **kw):
        fm = FakeManager()
        kw.setdefault("quiet", True)
        off = ght.Offload(manager=fm, stream=lambda: None, min_bytes=MiB, **kw)
        return fm, off

    def tensors(self, n):
        return [FakeTensor(0x10000000 + i * 0x1000000, 4 * MiB) for i in range(n)]

    def test_default_auto(self):
        self.assertEqual(ght.Offload(manager=FakeManager()).quiet, "auto")
        self.assertEqual(ght.offload(manager=FakeManager()).quiet, "auto")
        self.assertIs(ght.offload(manager=FakeManager(), quiet=True).quiet, True)
        self.assertIs(ght.offload(manager=FakeManager(), quiet=False).quiet, False)

    def test_first_unpack_quiets_the_cold_ones(self):
        fm, off = self.make(keep_last=2, prefetch_distance=0)
        ts = self.tensors(5)
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        for t in ts:
            off.pack(t)
        fm.calls.clear()
        off.unpack(ts[4])
        Q = gpuheap.Advice.QUIET
        self.assertEqual(fm.calls, [("advise", p, Q) for p in ptr[:3]] + [("prefetch", ptr[4])])
        fm.calls.clear()
        off.unpack(ts[3])  # the same backward: no more advice
        self.assertEqual(fm.calls, [("prefetch", ptr[3])])
        self.assertEqual(off.counters["quieted"], 3)
        # a new forward, then its backward: quiet again, only the new cold ones
        fm.calls.clear()
        us = [FakeTensor(0x40000000 + i * 0x1000000, 4 * MiB) for i in range(3)]
        for u in us:
            off.pack(u)
        off.unpack(us[2])
        q = [c for c in fm.calls if c[0] == "advise" and c[2] == Q]
        self.assertEqual([c[1] for c in q][-1], us[0].untyped_storage().data_ptr())
        self.assertNotIn(ptr[3], [c[1] for c in q])  # unpacked already

    def test_evict_mode_and_off(self):
        for kw in ({"mode": "evict"}, {"quiet": False}):
            fm, off = self.make(keep_last=0, prefetch_distance=0, **kw)
            ts = self.tensors(3)
            for t in ts:
                off.pack(t)
            off.unpack(ts[2])
            self.assertFalse([c for c in fm.calls if c[0] == "advise" and c[2] == gpuheap.Advice.QUIET], kw)
            self.assertEqual(off.counters["quieted"], 0)

    def test_auto_quiets_what_only_autograd_reaches(self):
        alone = set()
        seen = []

        def check(t, packs):
            seen.append((t.untyped_storage().data_ptr(), packs))
            return t.untyped_storage().data_ptr() in alone

        fm, off = self.make(keep_last=2, prefetch_distance=0, quiet="auto", alone=check)
        ts = self.tensors(5)
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        Q, C = gpuheap.Advice.QUIET, gpuheap.Advice.COLD
        off.pack(ts[0])
        off.pack(ts[0])  # saved twice: two of autograd's references
        off.pack(ts[1])
        off.pack(ts[2])  # ts[0] advised cold; still reachable: not quiet
        self.assertIn((ptr[0], 2), seen)
        self.assertNotIn(("advise", ptr[0], Q), fm.calls)
        alone.update({ptr[0], ptr[1]})
        off.pack(ts[3])  # ts[1] cold now; ts[0] and ts[1] reach only autograd
        calls = [c for c in fm.calls if c[0] == "advise"]
        self.assertEqual(calls, [("advise", ptr[0], C), ("advise", ptr[1], C), ("advise", ptr[0], Q),
                                 ("advise", ptr[1], Q)])
        self.assertEqual(off.counters["quieted_forward"], 2)
        off.pack(ts[4])  # ts[2] cold, reachable
        fm.calls.clear()
        off.unpack(ts[4])  # backward: ts[2] still reachable: not quiet; the quiet ones not again
        self.assertEqual(fm.calls, [("prefetch", ptr[4])])
        self.assertEqual((off.counters["quieted"], off.counters["quieted_forward"]), (0, 2))
        # the next backward, once ts[2] reaches only autograd: quiet at its first unpack
        for t in ts:
            off.pack(t)
        alone.add(ptr[2])
        fm.calls.clear()
        off.unpack(ts[4])
        self.assertIn(("advise", ptr[2], Q), fm.calls)
        self.assertNotIn(("advise", ptr[3], Q), fm.calls)  # reachable, never quiet
        self.assertGreaterEqual(off.counters["quieted"], 1)

    def test_auto_looks_again_after_doubling_waits(self):
        """A cold candidate found reachable is looked at again after 1, 2,
        4, ... packs (at most QUIET_WAIT_MAX); quiet ones and unpacked ones
        never again; at most QUIET_SCAN looks a pack, none left behind for
        long; the candidates of a forward whose backward has not run
        survive the next context's prune."""
        looks = {}
        alone = set()
        pack_no = [0]

        def check(t, packs):
            p = t.untyped_storage().data_ptr()
            looks.setdefault(p, []).append(pack_no[0])
            return p in alone

        fm, off = self.make(keep_last=0, prefetch_distance=0, quiet="auto", alone=check)

        def pack(t):
            off.pack(t)
            pack_no[0] += 1

        a = FakeTensor(0x50000000, 4 * MiB)
        pa = a.untyped_storage().data_ptr()
        pack(a)  # advised cold at its own pack (keep_last=0), looked at at once: reachable
        fillers = [FakeTensor(0x70000000 + i * 0x1000000, 4 * MiB) for i in range(30)]
        alone.update(t.untyped_storage().data_ptr() for t in fillers)
        for t in fillers[:24]:
            pack(t)
        self.assertEqual(looks[pa], [0, 1, 3, 7, 15, 23])  # waits 1, 2, 4, 8, 8
        for t in fillers[:24]:
            self.assertEqual(len(looks[t.untyped_storage().data_ptr()]), 1)  # quiet at the first look
        alone.add(pa)
        for t in fillers[24:]:
            pack(t)
        self.assertEqual(looks[pa], [0, 1, 3, 7, 15, 23])  # not due before pack 31
        self.assertNotIn(("advise", pa, gpuheap.Advice.QUIET), fm.calls)
        pack(FakeTensor(0x60000000, 4 * MiB))
        pack(FakeTensor(0x61000000, 4 * MiB))
        self.assertEqual(looks[pa][-1], 31)
        self.assertIn(("advise", pa, gpuheap.Advice.QUIET), fm.calls)

        # Many candidates due at once: at most QUIET_SCAN looks a pack, all of them within three packs.
        fm, off = self.make(keep_last=0, prefetch_distance=0, quiet="auto", alone=check)
        looks.clear()
        n = ght.Offload.QUIET_SCAN + 4
        ts = self.tensors(n)
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        off._npack = -100  # every candidate due at the next pack, whatever its own
        for t in ts:
            off.pack(t)
        for e in off._cold:
            e.qnext = 0
        off._npack = 0
        pack_no[0] = 100
        looks.clear()
        for k in range(3):
            pack(FakeTensor(0x71000000 + k * 0x1000000, 4 * MiB))
        per_pack = [sum(v.count(100 + k) for p, v in looks.items() if p in ptr) for k in range(3)]
        self.assertTrue(all(c <= ght.Offload.QUIET_SCAN for c in per_pack), per_pack)
        self.assertEqual(set(ptr), set(looks) & set(ptr))
        # A new context: no backward ran, the cold ones stay candidates; unpacked ones leave.
        alone.add(ptr[0])
        off._prune()
        for e in off._cold:
            e.qnext = 0
        pack(FakeTensor(0x60000000, 4 * MiB))
        self.assertIn(("advise", ptr[0], gpuheap.Advice.QUIET), fm.calls)
        off.unpack(ts[1])
        for e in off._cold:
            e.qnext = 0
        looks.clear()
        pack(FakeTensor(0x62000000, 4 * MiB))
        self.assertNotIn(ptr[1], looks)  # unpacked: no longer a candidate
        self.assertNotIn(ptr[0], looks)  # quiet
        self.assertIn(ptr[2], looks)

    def test_auto_without_a_count_turns_itself_off(self):
        fm, off = self.make(keep_last=0, prefetch_distance=0, quiet="auto", alone=lambda t, packs: None)
        ts = self.tensors(3)
        ght._warned_auto = False  # once a process: an earlier test may have had it
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for t in ts:
                off.pack(t)
        self.assertEqual(len([x for x in w if "quiet='auto'" in str(x.message)]), 1)
        self.assertEqual(off.counters["quieted_forward"], 0)
        off.unpack(ts[2])  # nor at backward
        self.assertEqual(off.counters["quieted"], 0)
        self.assertIs(off.quiet, False)

    def test_bad_quiet(self):
        for q in ("yes", 2, None):
            with self.assertRaises(gpuheap.Error) as cm:
                ght.Offload(manager=FakeManager(), quiet=q)
            self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)

    def test_quiet_errors_never_raise(self):
        fm, off = self.make(keep_last=0, prefetch_distance=0)
        ts = self.tensors(2)
        pa = ts[0].untyped_storage().data_ptr()
        for t in ts:
            off.pack(t)
        fm.fail[("advise", pa)] = gpuheap.ERR_BUDGET  # only the QUIET advice comes after the packs
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            off.unpack(ts[1])
        self.assertEqual(off.counters["hint_errors"], 1)


class _OneWeightModel:
    """A model of one parameter w and no buffers whose modules() must not be
    walked (`why`: the setting under test)."""

    def __init__(self, w, why):
        self.w, self.why = w, why

    def parameters(self, recurse=True):
        return iter([self.w])

    def buffers(self, recurse=True):
        return iter([])

    def modules(self):
        raise AssertionError(f"modules() walked with {self.why}")


class TestMarkModel(unittest.TestCase):
    def test_kinds_and_hooks(self):
        fm = FakeManager()
        w = FakeTensor(0x100000, 8192, leaf=True, requires_grad=True)
        w.grad = FakeTensor(0x200000, 8192)
        buf = FakeTensor(0x300000, 256, leaf=True)
        cpu = FakeTensor(0x400000, 8, is_cuda=False, leaf=True, requires_grad=True)

        class Model:
            def __init__(self):
                self.pre = _Hooks()

            def parameters(self, recurse=True):
                return iter([w, cpu])

            def buffers(self, recurse=True):
                return iter([buf])

            def modules(self):
                return iter([self])

            def register_forward_pre_hook(self, fn):
                return self.pre.add(fn)

        class Opt:
            def __init__(self):
                self.state = {}
                self.param_groups = [{"params": [w, cpu]}]
                self.post, self.pre = _Hooks(), _Hooks()

            def register_step_post_hook(self, fn):
                return self.post.add(fn)

            def register_step_pre_hook(self, fn):
                return self.pre.add(fn)

        opt = Opt()
        model = Model()
        try:
            marks = ght.mark_model(model, opt, manager=fm, prefetch=True, stream=lambda: None)
            K = gpuheap.Kind
            self.assertEqual(fm.calls, [("set_kind", 0x100000, K.WEIGHTS), ("set_kind", 0x300000, K.WEIGHTS),
                                        ("set_kind", 0x200000, K.OPTIMIZER)])
            self.assertEqual(marks.counts, {"weights": 2, "optimizer": 0, "gradients": 1, "foreign": 0,
                                            "prefetch_errors": 0, "advise_errors": 0, "state_evicted_ahead": 0})
            self.assertIn(0x100000, ght._protected)
            fm.calls.clear()
            # the optimizer's first step makes its state; the post hook marks it, once
            opt.state[w] = {"momentum_buffer": FakeTensor(0x500000, 8192), "step": 3}
            opt.post.hooks[0](opt, (), {})
            opt.post.hooks[0](opt, (), {})
            self.assertEqual(fm.calls, [("set_kind", 0x500000, K.OPTIMIZER)])
            # a new gradient each step
            fm.calls.clear()
            w.grad = FakeTensor(0x600000, 8192)
            w.hooks[0](w)
            self.assertEqual(fm.calls, [("set_kind", 0x600000, K.OPTIMIZER)])
            # foreign storages are counted, not raised
            fm.fail[("set_kind", 0x700000)] = gpuheap.ERR_FOREIGN
            w.grad = FakeTensor(0x700000, 8192)
            w.hooks[0](w)
            self.assertEqual(marks.counts["foreign"], 1)
            # before forward: the module's own CUDA parameters and buffers, one batch
            fm.calls.clear()
            self.assertEqual(len(model.pre.hooks), 1)
            model.pre.hooks[0](model, ())
            self.assertEqual(fm.calls, [("prefetch_many", (0x100000, 0x300000))])
            # before step: parameters, gradients and state
            fm.calls.clear()
            opt.pre.hooks[0](opt, (), {})
            self.assertEqual(fm.calls, [("prefetch_many", (0x100000, 0x700000, 0x500000))])
            # a failed batch is counted and warned about once, never raised
            fm.fail[("prefetch_many", (0x100000, 0x300000))] = gpuheap.ERR_BUDGET
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.pre.hooks[0](model, ())
                model.pre.hooks[0](model, ())
            self.assertEqual(marks.counts["prefetch_errors"], 2)
            self.assertEqual(len([x for x in caught if "prefetch failed" in str(x.message)]), 1)
            # a storage gpuheap did not make: one prefetch each, the others still done
            fm.calls.clear()
            fm.fail[("prefetch_many", (0x100000, 0x300000))] = gpuheap.ERR_FOREIGN
            fm.fail[("prefetch", 0x300000)] = gpuheap.ERR_FOREIGN
            model.pre.hooks[0](model, ())
            self.assertEqual(fm.calls, [("prefetch_many", (0x100000, 0x300000)), ("prefetch", 0x100000),
                                        ("prefetch", 0x300000)])
            marks.remove()
            self.assertEqual(opt.post.hooks, [])
            self.assertEqual(opt.pre.hooks, [])
            self.assertEqual(model.pre.hooks, [])
            self.assertEqual(w.hooks, [])
        finally:
            ght._protected.clear()

    def test_no_prefetch_hooks(self):
        """prefetch=False (the default): kinds only, no forward or step pre-hooks."""
        fm = FakeManager()
        w = FakeTensor(0x100000, 8192, leaf=True)

        try:
            marks = ght.mark_model(_OneWeightModel(w, "prefetch=False"), manager=fm, grads=False)
            self.assertEqual(fm.calls, [("set_kind", 0x100000, gpuheap.Kind.WEIGHTS)])
            marks.remove()
        finally:
            ght._protected.clear()

    def test_step_prefetch_only(self):
        """prefetch="step": the step pre-hook alone (no module walked, no
        forward pre-hook); a string other than "step" is refused."""
        fm = FakeManager()
        w = FakeTensor(0x100000, 8192, leaf=True)
        w.grad = FakeTensor(0x200000, 8192)

        class Opt:
            def __init__(self):
                self.state = {w: {"momentum_buffer": FakeTensor(0x300000, 8192)}}
                self.param_groups = [{"params": [w]}]
                self.pre = _Hooks()

            def register_step_pre_hook(self, fn):
                return self.pre.add(fn)

        opt = Opt()
        try:
            with self.assertRaises(gpuheap.Error) as cm:
                ght.mark_model(_OneWeightModel(w, "a bad prefetch"), opt, manager=fm, grads=False, prefetch="forward")
            self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)
            self.assertEqual((opt.pre.hooks, fm.calls, ght._protected), ([], [], set()))  # nothing done first
            marks = ght.mark_model(_OneWeightModel(w, "prefetch='step'"), opt, manager=fm, grads=False, prefetch="step",
                                   stream=lambda: None)
            self.assertEqual(len(opt.pre.hooks), 1)
            fm.calls.clear()
            opt.pre.hooks[0](opt, (), {})
            self.assertEqual(fm.calls, [("prefetch_many", (0x100000, 0x200000, 0x300000))])
            marks.remove()
            self.assertEqual(opt.pre.hooks, [])
        finally:
            ght._protected.clear()

    def test_offload_state(self):
        """offload_state=True: the step pre-hook brings the state back (with
        prefetch="step" the parameters and gradients too); a step post-hook advises the state quiet (foreign
        storages skipped, other failures counted and warned about once);
        a state-dict pre-hook brings the state back; remove() takes all
        three away. Without an optimizer, or one with no state-dict hooks,
        Error(ERR_INVAL) before anything is done."""
        fm = FakeManager()
        w = FakeTensor(0x100000, 8192, leaf=True)
        w.grad = FakeTensor(0x200000, 8192)

        class OldOpt:
            def __init__(self):
                self.state = {w: {"momentum_buffer": FakeTensor(0x300000, 8192), "step": 1,
                                  "on_host": FakeTensor(0x900000, 64, is_cuda=False)}}
                self.param_groups = [{"params": [w]}]
                self.pre, self.post = _Hooks(), _Hooks()

            def register_step_pre_hook(self, fn):
                return self.pre.add(fn)

            def register_step_post_hook(self, fn):
                return self.post.add(fn)

        class Opt(OldOpt):
            def __init__(self):
                super().__init__()
                self.sd = _Hooks()

            def register_state_dict_pre_hook(self, fn):
                return self.sd.add(fn)

        Q = gpuheap.Advice.QUIET
        try:
            for opt in (None, OldOpt()):
                with self.assertRaises(gpuheap.Error) as cm:
                    ght.mark_model(_OneWeightModel(w, "offload_state"), opt, manager=fm, offload_state=True)
                self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)
                self.assertEqual((fm.calls, ght._protected), ([], set()))
            opt = Opt()
            marks = ght.mark_model(_OneWeightModel(w, "offload_state"), opt, manager=fm, grads=False,
                                   offload_state=True, stream=lambda: None)
            self.assertEqual((len(opt.pre.hooks), len(opt.post.hooks), len(opt.sd.hooks)), (1, 2, 1))
            fm.calls.clear()
            opt.pre.hooks[0](opt, (), {})
            self.assertEqual(fm.calls, [("prefetch_many", (0x300000,))])  # the state alone
            marks.remove()
            marks = ght.mark_model(_OneWeightModel(w, "offload_state"), opt, manager=fm, grads=False,
                                   offload_state=True, prefetch="step", stream=lambda: None)
            fm.calls.clear()
            opt.pre.hooks[0](opt, (), {})
            self.assertEqual(fm.calls, [("prefetch_many", (0x100000, 0x200000, 0x300000))])  # with prefetch="step"
            fm.calls.clear()
            for h in opt.post.hooks:
                h(opt, (), {})
            self.assertEqual(fm.calls, [("advise", 0x300000, Q)])  # marked already: no set_kind
            opt.state[w]["exp_avg"] = FakeTensor(0x400000, 8192)
            fm.calls.clear()
            fm.fail[("advise", 0x300000)] = gpuheap.ERR_FOREIGN
            fm.fail[("advise", 0x400000)] = gpuheap.ERR_DEVICE_NOMEM
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(2):
                    opt.post.hooks[1](opt, (), {})
            self.assertEqual(fm.calls, [("advise", 0x300000, Q), ("advise", 0x400000, Q)] * 2)
            self.assertEqual(marks.counts["advise_errors"], 2)
            self.assertEqual(len([x for x in caught if "advice failed" in str(x.message)]), 1)
            fm.calls.clear()
            opt.sd.hooks[0](opt)
            self.assertEqual(fm.calls, [("prefetch_many", (0x300000, 0x400000))])
            marks.remove()
            self.assertEqual((opt.pre.hooks, opt.post.hooks, opt.sd.hooks), ([], [], []))
        finally:
            ght._protected.clear()

    def test_offload_state_ahead(self):
        """offload_state=True under pressure: after a step() that followed
        evictions (the manager's count grew since the last step's own, or
        was above 0 before the first), the state is evicted ahead instead
        of advised quiet; failures counted as the advice's, foreign skipped."""
        st = {"evictions": 3}
        fm = FakeManager(stats=st)
        w = FakeTensor(0x100000, 8192, leaf=True, requires_grad=True)
        w.grad = FakeTensor(0x200000, 8192)

        class Opt:
            def __init__(self):
                self.state = {w: {"momentum_buffer": FakeTensor(0x300000, 8192), "step": 1}}
                self.param_groups = [{"params": [w]}]
                self.pre, self.post, self.sd = _Hooks(), _Hooks(), _Hooks()

            def register_step_pre_hook(self, fn):
                return self.pre.add(fn)

            def register_step_post_hook(self, fn):
                return self.post.add(fn)

            def register_state_dict_pre_hook(self, fn):
                return self.sd.add(fn)

        Q = gpuheap.Advice.QUIET
        try:
            opt = Opt()
            marks = ght.mark_model(_OneWeightModel(w, "offload_state"), opt, manager=fm, grads=False,
                                   offload_state=True, stream=lambda: None)

            def post():
                fm.calls.clear()
                opt.post.hooks[1](opt, (), {})
                return list(fm.calls)

            self.assertEqual(post(), [("evict_ahead", 0x300000)])  # 3 evicted before the first step
            self.assertEqual(post(), [("advise", 0x300000, Q)])    # none since
            st["evictions"] = 9
            self.assertEqual(post(), [("evict_ahead", 0x300000)])
            self.assertEqual(marks.counts["state_evicted_ahead"], 2)
            st["evictions"] = 12
            fm.fail[("evict_ahead", 0x300000)] = gpuheap.ERR_FOREIGN
            post()
            self.assertEqual(marks.counts["advise_errors"], 0)
            st["evictions"] = 15
            fm.fail[("evict_ahead", 0x300000)] = gpuheap.ERR_PINNED
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                post()
            self.assertEqual(marks.counts["advise_errors"], 1)
            self.assertEqual(len([x for x in caught if "advice failed" in str(x.message)]), 1)
            fm._stats = None  # stats that fail: advised quiet
            self.assertEqual(post(), [("advise", 0x300000, Q)])
            fm._stats = st
            st["evictions"] = 20
            fm.fail[("evict_ahead", 0x300000)] = gpuheap.ERR_UNSUPPORTED  # an older library
            self.assertEqual(post(), [("evict_ahead", 0x300000), ("advise", 0x300000, Q)])
            st["evictions"] = 25
            self.assertEqual(post(), [("advise", 0x300000, Q)])  # not tried again
            self.assertEqual(marks.counts["advise_errors"], 1)
            marks.remove()
            self.assertEqual((opt.pre.hooks, opt.post.hooks, opt.sd.hooks), ([], [], []))
        finally:
            ght._protected.clear()

class TestGraphTrees(unittest.TestCase):
    """gpuheap.torch._GraphTrees, the stand-ins for the six torch._C calls of
    CUDA graph trees, over a model of the library's graph-pool entry points
    (their C side: tests/cpu/test_torch_graph.cc) and a model of PyTorch's
    storages and their weak references: what each passes to PyTorch's own,
    what it asks of the library, and that every weak reference it takes is
    freed."""

    class Lib:
        """The library's pools: {pool: {address: state}}."""

        def __init__(self):
            self.pools = {(0, 1): {0x1000: 0, 0x2000: 1, 0x3000: 1}}
            self.calls = []

        def _find(self, ptr):
            for pool, blocks in self.pools.items():
                if ptr in blocks:
                    return pool, blocks
            return None, None

        def gh_torch_pool_blocks(self, id0, id1, ptrs, states, cap):
            blocks = self.pools.get((id0, id1), {})
            for i, (p, st) in enumerate(sorted(blocks.items())[:cap]):
                ptrs[i], states[i] = p, st
            return len(blocks)

        def gh_torch_pool_block_state(self, ptr):
            _pool, blocks = self._find(ptr)
            return -1 if blocks is None else blocks[ptr]

        def gh_torch_pool_adopt(self, id0, id1, arr, n):
            named = [arr[i] for i in range(n)]
            self.calls.append(("adopt", (id0, id1), sorted(named)))
            blocks = self.pools.get((id0, id1), {})
            if any(p not in blocks for p in named):
                return gpuheap.ERR_FOREIGN
            for p, st in blocks.items():
                if st == 2 and p not in named:
                    blocks[p] = 1
            for p in named:
                blocks[p] = 2
            return 0

        def gh_torch_pool_unadopt(self, ptr):
            self.calls.append(("unadopt", ptr))
            _pool, blocks = self._find(ptr)
            if blocks is None or blocks[ptr] != 2:
                return gpuheap.ERR_INVAL
            blocks[ptr] = 1
            return 0

        def gh_last_error_detail(self):
            return b"model: refused"

    class Torch:
        """Storages by StorageImpl address (what graph trees pass), their
        weak references counted."""

        def __init__(self):
            self.storages = {}  # impl address -> data address, while alive
            self.weak = {}      # weak reference -> impl address
            self.freed_weak = 0
            self.orig_calls = []
            t = self

            class Storage:
                def __init__(self, impl):
                    self.impl = impl

                def data_ptr(self):
                    return t.storages[self.impl]

                def _weak_ref(self):
                    w = 0x9000 + len(t.weak) + t.freed_weak
                    t.weak[w] = self.impl
                    return w

                @staticmethod
                def _new_with_weak_ptr(impl):
                    return Storage(impl) if impl in t.storages else None

                @staticmethod
                def _expired(w):
                    return t.weak[w] not in t.storages

                @staticmethod
                def _free_weak_ref(w):
                    del t.weak[w]
                    t.freed_weak += 1

            self.UntypedStorage = Storage

            def orig(name, result=None):
                def f(*args):
                    t.orig_calls.append((name,) + args)
                    return result
                return f

            class C:
                pass
            self._C = C
            for name in ght._GraphTrees.NAMES:
                setattr(C, name, staticmethod(orig(name, "orig")))

    def setUp(self):
        self.lib, self.torch = self.Lib(), self.Torch()
        self.t = ght._GraphTrees(self.torch, self.lib, 0)

    def test_check_and_state(self):
        t = self.t
        self.assertTrue(t.check_live(0, (0, 1), {0x1000}))
        self.assertFalse(t.check_live(0, (0, 1), {0x1000, 0x2000}))  # 0x2000 is freed
        self.assertFalse(t.check_live(0, (0, 1), set()))
        self.assertTrue(t.check_live(0, (0, 7), set()))              # a pool with no blocks
        self.assertEqual(t.check_live(1, (0, 1), {0x1000}), "orig")  # another device: PyTorch's
        st = t.get_state(0, [0, 1])
        self.assertIsInstance(st, ght._Checkpoint)
        self.assertEqual((st.pool, st.live), ((0, 1), frozenset({0x1000})))
        self.assertIn("1 live blocks", repr(st))
        self.assertEqual(t.get_state(1, (0, 1)), "orig")
        self.assertEqual(t.set_state(0, "not ours", [], []), "orig")
        self.assertEqual([c[0] for c in self.torch.orig_calls],
                         ["_cuda_checkPoolLiveAllocations", "_cuda_getCheckpointState", "_cuda_setCheckpointPoolState"])
        with self.assertRaisesRegex(RuntimeError, "stale storages"):
            t.set_state(0, st, [0x77], [])

    def test_restore_adopts_and_gives_up(self):
        t, torch, lib = self.t, self.torch, self.lib
        torch.storages.update({0x501: 0x2000, 0x502: 0x3000})  # replay outputs over freed blocks
        st = t.get_state(0, (0, 1))
        t.set_state(0, st, [], [0x501, 0x502, 0x501])
        self.assertEqual(lib.calls[-1], ("adopt", (0, 1), [0x2000, 0x3000]))
        self.assertEqual(lib.pools[(0, 1)], {0x1000: 0, 0x2000: 2, 0x3000: 2})
        self.assertTrue(t.check_live(0, (0, 1), {0x1000, 0x2000, 0x3000}))
        # PyTorch's asserts and frees after the restore
        self.assertTrue(t.has_standard_deleter(0x501))
        self.assertEqual(t.has_standard_deleter(0x503), "orig")
        t.free_and_remove(0x501)                                 # the trees free a live output
        self.assertEqual(lib.pools[(0, 1)][0x2000], 1)
        self.assertEqual(t.free_and_remove(0x503), "orig")
        # raw_delete: an adopted block given up; a freed one left alone; others PyTorch's
        t.raw_delete(0x3000)
        self.assertEqual(lib.pools[(0, 1)][0x3000], 1)
        self.assertIsNone(t.raw_delete(0x2000))
        self.assertEqual(t.raw_delete(0x1000), "orig")
        self.assertEqual(t.raw_delete(0x4000), "orig")
        self.assertEqual(t.adopted, {})
        self.assertEqual(torch.weak, {})                         # every weak reference freed

    def test_sweep_and_restore_again(self):
        t, torch, lib = self.t, self.torch, self.lib
        torch.storages.update({0x501: 0x2000, 0x502: 0x3000})
        st = t.get_state(0, (0, 1))
        t.set_state(0, st, [], [0x501, 0x502])
        del torch.storages[0x501]                                # its storage gone
        self.assertFalse(t.check_live(0, (0, 1), {0x1000, 0x2000, 0x3000}))  # swept first
        self.assertTrue(t.check_live(0, (0, 1), {0x1000, 0x3000}))
        self.assertEqual(lib.pools[(0, 1)][0x2000], 1)
        t.set_state(0, st, [], [])                               # 0x3000 no longer named
        self.assertEqual(lib.pools[(0, 1)][0x3000], 1)
        self.assertEqual((t.adopted, torch.weak), ({}, {}))
        # a storage already gone when named: skipped
        t.set_state(0, st, [], [0x501])
        self.assertEqual(lib.calls[-1], ("adopt", (0, 1), []))

    def test_refused_restore(self):
        t, torch, lib = self.t, self.torch, self.lib
        torch.storages[0x501] = 0x7000                           # not a block of the pool
        with self.assertRaisesRegex(RuntimeError, "model: refused"):
            t.set_state(0, t.get_state(0, (0, 1)), [], [0x501])
        self.assertEqual((t.adopted, torch.weak), ({}, {}))
        self.assertEqual(lib.pools[(0, 1)], {0x1000: 0, 0x2000: 1, 0x3000: 1})


FAKE_TORCH = '''
"""A stand-in for PyTorch: what gpuheap.torch.enable touches."""
import os
STATE = {"initialized": os.environ.get("FAKE_TORCH_INIT") == "1", "allocated": 0, "installed": None,
         "swap_fails": os.environ.get("FAKE_TORCH_SWAP_FAILS") == "1"}

class _Native:
    def set_record_stream_fn(self, fn):
        STATE["record_stream_fn"] = fn
    def set_reset_fn(self, fn):
        STATE["reset_fn"] = fn
    def set_memory_fraction_fn(self, fn):
        STATE["memory_fraction_fn"] = fn

class _NativeWithPools(_Native):
    def set_begin_allocate_to_pool(self, fn):
        STATE["begin_fn"] = fn
    def set_end_allocate_to_pool_fn(self, fn):
        STATE["end_fn"] = fn
    def set_release_pool(self, fn):
        STATE["release_fn"] = fn

class _Memory:
    class CUDAPluggableAllocator:
        def __init__(self, path, alloc, free):
            self.args = (path, alloc, free)
        def allocator(self):
            if os.environ.get("FAKE_TORCH_NO_RECORD") == "1":
                return object()
            return _Native() if os.environ.get("FAKE_TORCH_NO_POOLS") == "1" else _NativeWithPools()
    @staticmethod
    def memory_stats(device=None):
        raise RuntimeError("CUDAPluggableAllocator does not yet support getDeviceStats")
    @staticmethod
    def reset_peak_memory_stats(device=None):
        raise RuntimeError("CUDAPluggableAllocator does not yet support resetPeakStats")
    @staticmethod
    def memory_summary(device=None, abbreviated=False):  # as PyTorch's: keys only its allocator keeps
        return str(_Memory.memory_stats(device=device)["active_bytes.all.allocated"])
    @staticmethod
    def max_memory_allocated(device=None):  # as PyTorch's: memory_stats looked up at the call
        return _Memory.memory_stats(device=device).get("allocated_bytes.all.peak", 0)
    @staticmethod
    def change_current_allocator(a):
        if STATE["swap_fails"]:
            raise RuntimeError("Can't swap an already initialized allocator")
        STATE["installed"] = a

class _C:  # what CUDA graph trees call that a pluggable allocator refuses
    @staticmethod
    def _cuda_checkPoolLiveAllocations(device, pool, ptrs):
        raise RuntimeError("pluggable does not yet support checkPoolLiveAllocations")
    @staticmethod
    def _cuda_getCheckpointState(device, pool):
        raise RuntimeError("CUDAPluggableAllocator does not yet support getCheckpointState")
    @staticmethod
    def _cuda_setCheckpointPoolState(device, state, stale, storages):
        raise RuntimeError("CUDAPluggableAllocator does not yet support setCheckpointPoolState")
    @staticmethod
    def _cuda_cudaCachingAllocator_raw_delete(ptr):
        raise RuntimeError("Trying to free a pointer not allocated here")
    @staticmethod
    def _free_And_Remove_DeleterFn(storage_ptr):
        raise RuntimeError("Expected standard deleter")
    @staticmethod
    def _has_Standard_Deleter(storage_ptr):
        return False

class UntypedStorage:
    @staticmethod
    def _new_with_weak_ptr(cdata):
        return None
    @staticmethod
    def _expired(cdata):
        return True
    @staticmethod
    def _free_weak_ref(cdata):
        pass
    def _weak_ref(self):
        return 0

class cuda:
    memory = _Memory
    memory_stats = _Memory.memory_stats
    memory_summary = _Memory.memory_summary
    @staticmethod
    def current_device():
        return 0
    @staticmethod
    def is_initialized():
        return STATE["initialized"]
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def memory_allocated(device=None):
        return STATE["allocated"]
'''


class TestTorchEnableWithFake(unittest.TestCase):
    def run_fake(self, code, **env):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "torch"))
            with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
                f.write(FAKE_TORCH)
            return _run_py(code, extra_path=[d], env=env)

    def test_too_late(self):
        rc, out = self.run_fake("""
            import gpuheap, gpuheap.torch
            try:
                gpuheap.torch.enable(device_budget='1GiB')
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_INVAL, e
                assert 'call gpuheap.torch.enable() before the first CUDA tensor' in str(e), e
                print('ok')
        """, FAKE_TORCH_INIT="1")
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_bad_options_before_anything(self):
        rc, out = self.run_fake("""
            import gpuheap, gpuheap.torch
            try:
                gpuheap.torch.enable(device_budget='-5')
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_INVAL and 'device_budget' in str(e), e
                print('ok')
        """)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_enable_installs_the_library(self):
        _lib()
        rc, out = self.run_fake("""
            import gpuheap, gpuheap.torch, torch
            m = gpuheap.torch.enable(device_budget='64MiB', host_budget='64MiB', backend='sim', host_pool_frames=0)
            a = torch.STATE['installed']
            assert a.args == (gpuheap.library_path(), 'gh_torch_alloc_or_throw', 'gh_torch_free'), a.args
            # record_stream, empty_cache and CUDA graph pools reach the manager through PyTorch's callbacks
            lib = gpuheap.library()
            for key, entry in (('record_stream_fn', 'gh_torch_record_stream'), ('reset_fn', 'gh_torch_empty_cache'),
                               ('memory_fraction_fn', 'gh_torch_set_memory_fraction'),
                               ('begin_fn', 'gh_torch_begin_allocate_to_pool'),
                               ('end_fn', 'gh_torch_end_allocate_to_pool'), ('release_fn', 'gh_torch_release_pool')):
                assert torch.STATE[key] == lib.address_of(entry) != None, key
            assert gpuheap.torch.graph_pools() == {'pools': 0, 'blocks': 0, 'freed': 0, 'retired': 0}
            # torch.compile's CUDA graph trees: the six torch._C calls answered by gpuheap
            trees = gpuheap.torch._GraphTrees.installed
            assert trees is not None and trees.device == 0
            assert torch._C._cuda_getCheckpointState == trees.get_state
            assert torch._C._has_Standard_Deleter == trees.has_standard_deleter
            assert gpuheap.torch.enable() is m
            assert gpuheap.global_manager() is m
            # the entry point PyTorch will call serves from this manager
            lib = gpuheap.library()
            p = lib.gh_torch_alloc(3 << 20, 0, None)
            assert p and m.tier(p) == gpuheap.Tier.DEVICE
            s = gpuheap.torch.memory_stats()
            assert s['allocated_bytes.all.current'] == 3 << 20, s
            m.evict(p); assert m.tier(p) == gpuheap.Tier.HOST
            # the device budget changed at run time (what set_per_process_memory_fraction reaches)
            m.prefetch(p)
            m.pin(p)
            m.set_device_budget('16MiB')
            assert m.stats()['device_budget'] == 16 << 20
            try:
                m.set_device_budget('1MiB')           # less than a frame
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_INVAL, e
            else:
                raise AssertionError('no error')
            try:
                m.set_device_budget('2MiB')           # the pinned tensor's frames alone need more
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_BUDGET and 'budget stays' in str(e), e
            else:
                raise AssertionError('no error')
            assert m.stats()['device_budget'] == 16 << 20
            m.unpin(p)
            lib.gh_torch_free(p, 3 << 20, 0, None)
            gpuheap.torch.empty_cache()
            try:
                m.close()
            except gpuheap.Error as e:
                assert 'process' in str(e)
            print('ok')
        """)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_torch_stats(self):
        _lib()
        for flag in (True, False):
            rc, out = self.run_fake(f"""
                import gpuheap, gpuheap.torch, torch
                m = gpuheap.torch.enable(device_budget='64MiB', backend='sim', host_pool_frames=0, torch_stats={flag})
                lib = gpuheap.library()
                p = lib.gh_torch_alloc(3 << 20, 0, None)
                try:
                    got = (torch.cuda.memory_stats()['allocated_bytes.all.current'],
                           torch.cuda.memory.max_memory_allocated())
                    text = torch.cuda.memory_summary()
                    assert text.startswith('gpuheap memory summary') and '3.00 MiB' in text, text
                    assert 'CUDA graph pools: pools 0' in text, text
                    lib.gh_torch_free(p, 3 << 20, 0, None)
                    torch.cuda.memory.reset_peak_memory_stats()
                    got += (torch.cuda.memory.max_memory_allocated(),)
                except RuntimeError as e:
                    got = str(e)
                print('got', got)
            """)
            self.assertEqual(rc, 0, out)
            if flag:
                self.assertIn("got (3145728, 3145728, 0)", out)
            else:
                self.assertIn("does not yet support getDeviceStats", out)

    def test_graph_trees_off(self):
        """enable(graph_trees=False) leaves torch._C's graph-tree calls to PyTorch."""
        _lib()
        rc, out = self.run_fake("""
            import gpuheap, gpuheap.torch, torch
            before = torch._C._cuda_getCheckpointState
            m = gpuheap.torch.enable(device_budget='64MiB', backend='sim', host_pool_frames=0, graph_trees=False)
            assert gpuheap.torch._GraphTrees.installed is None
            assert torch._C._cuda_getCheckpointState is before
            print('ok')
        """)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_callbacks_missing(self):
        """A PyTorch whose allocator lacks the graph-pool setters: one warning
        naming what is lost, the other callbacks still given, no pool
        callback given alone."""
        _lib()
        rc, out = self.run_fake("""
            import warnings, gpuheap, gpuheap.torch, torch
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter('always')
                m = gpuheap.torch.enable(device_budget='64MiB', backend='sim', host_pool_frames=0)
            msgs = [str(x.message) for x in w]
            # (cuDNN's benchmark mode is not served where no libtorch_cuda is loaded: its own warning)
            assert any('cudnn.benchmark' in x for x in msgs), msgs
            msgs = [x for x in msgs if 'cudnn.benchmark' not in x]
            assert len(msgs) == 1 and 'CUDA graph captures are refused' in msgs[0], msgs
            assert 'record_stream' not in msgs[0], msgs
            assert torch.STATE['reset_fn'] == gpuheap.library().address_of('gh_torch_empty_cache')
            assert 'begin_fn' not in torch.STATE
            print('ok')
        """, FAKE_TORCH_NO_POOLS="1")
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_record_stream(self):
        _lib()
        rc, out = self.run_fake("""
            import warnings, gpuheap, gpuheap.torch
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter('always')
                m = gpuheap.torch.enable(device_budget='64MiB', backend='sim', host_pool_frames=0)
            assert any('record_stream does nothing' in str(x.message) for x in w), [str(x.message) for x in w]
            lib = gpuheap.library()
            p = lib.gh_torch_alloc(3 << 20, 0, 0x1000)
            lib.gh_torch_record_stream(p, 0x2000)       # PyTorch's callback: no error to return
            m.record_stream(p, 0x3000)
            codes = []
            for q in (p + 16, None):                    # not a tensor's start; then freed
                if q is None:
                    lib.gh_torch_free(p, 3 << 20, 0, 0x1000)
                try:
                    m.record_stream(q or p, 0x3000)
                except gpuheap.Error as e:
                    codes.append(e.code)
            assert codes == [gpuheap.ERR_FOREIGN, gpuheap.ERR_DOUBLE_FREE], codes
            print('ok')
        """, FAKE_TORCH_NO_RECORD="1")
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_swap_refused(self):
        _lib()
        rc, out = self.run_fake("""
            import gpuheap, gpuheap.torch
            try:
                gpuheap.torch.enable(device_budget='64MiB', backend='sim', host_pool_frames=0)
            except gpuheap.Error as e:
                assert 'before the first CUDA tensor' in str(e) and "Can't swap" in str(e), e
            # the manager was taken back: another can be made global
            m = gpuheap.Manager(backend='sim', device_budget='64MiB', host_pool_frames=0).set_global()
            print('ok')
        """, FAKE_TORCH_SWAP_FAILS="1")
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)


FAKE_CUPY = '''
"""A stand-in for CuPy: CFunctionAllocator calls the C functions as CuPy does."""
import ctypes
_alloc = [None]

class OutOfMemoryError(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__(size, total, limit)

class MemoryPointer:
    def __init__(self, ptr, size, free):
        self.ptr, self.size, self._free = ptr, size, free
    def release(self):
        if self.ptr:
            self._free(self.ptr)
            self.ptr = 0

class CFunctionAllocator:
    def __init__(self, param, malloc_func, free_func, owner):
        self._m = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)(malloc_func)
        self._f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(free_func)
        self._param, self.owner = param, owner
    def malloc(self, size):
        p = self._m(self._param, size, 0) if size else 0
        return MemoryPointer(p or 0, size, lambda ptr: self._f(self._param, ptr, 0))

class _memory:
    pass
_memory.CFunctionAllocator = CFunctionAllocator
_memory.OutOfMemoryError = OutOfMemoryError

class cuda:
    memory = _memory
    @staticmethod
    def set_allocator(a):
        _alloc[0] = a
    @staticmethod
    def get_allocator():
        return _alloc[0]
'''


class TestCupyEnableWithFake(unittest.TestCase):
    def test_enable(self):
        _lib()
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "cupy"))
            with open(os.path.join(d, "cupy", "__init__.py"), "w") as f:
                f.write(FAKE_CUPY)
            rc, out = _run_py("""
                import gpuheap, gpuheap.cupy, cupy
                m = gpuheap.cupy.enable(device_budget='16MiB', host_budget='16MiB', backend='sim',
                                        host_pool_frames=0)
                malloc = cupy.cuda.get_allocator()
                a = malloc(5 << 20)
                assert a.ptr and m.tier(a.ptr) == gpuheap.Tier.DEVICE
                assert m.stats()['tensor_bytes']['activations'] == 5 << 20
                assert malloc(0).ptr == 0
                big = []
                try:
                    for _ in range(40):
                        big.append(malloc(4 << 20))
                except cupy.cuda.memory.OutOfMemoryError as e:
                    assert 'gpuheap' in str(e), e
                else:
                    raise AssertionError('no OutOfMemoryError past both budgets')
                assert m.stats()['frames']['host'] > 0  # the device budget spilled to the host first
                for b in big:
                    b.release()
                a.release()
                m.maintain()
                assert m.stats()['tensors']['activations'] == 0, m.stats()
                assert gpuheap.cupy.enable() is m
                gpuheap.cupy.disable()
                assert cupy.cuda.get_allocator() is None
                print('ok')
            """, extra_path=[d])
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)


CHILD_SCRIPT = """
import argparse, json, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--what")
ap.add_argument("--n", type=int)
ap.add_argument("--out")
a = ap.parse_args()
if a.what == "ok":
    with open(a.out, "w") as f:
        json.dump({"n": a.n, "path": sys.path[1]}, f)
elif a.what == "skip":
    sys.exit(77)
elif a.what == "silent":
    pass
elif a.what == "slow":
    time.sleep(30)
else:
    sys.exit(3)
"""


def trace_report_log(ev):
    """What gpu_train.trace_report prints for a Chrome trace of events ev
    (one step, config c)."""
    import contextlib
    import gpu_train
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"traceEvents": ev}, f)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            gpu_train.trace_report(f.name, 1, "c")
    finally:
        os.unlink(f.name)
    return out.getvalue()


class TestTimelineSplit(unittest.TestCase):
    """gpu_train.py --trace: the GPU's time split into compute alone,
    copies alone and both (pure Python, no torch)."""

    def setUp(self):
        import gpu_train
        self.split = gpu_train.timeline_split

    def test_overlap(self):
        # compute on two streams 0-10 and 5-15 (union 0-15), a copy 10-20
        self.assertEqual(self.split([(0, 10), (5, 15)], [(10, 20)]), {"compute": 10.0, "copy": 5.0, "both": 5.0})

    def test_gaps_and_nesting(self):
        # a gap 4-6 counts nowhere; a copy inside compute is all "both"
        self.assertEqual(self.split([(0, 4), (6, 12)], [(7, 9), (8, 10), (20, 21)]),
                         {"compute": 7.0, "copy": 1.0, "both": 3.0})

    def test_touching_and_empty(self):
        self.assertEqual(self.split([(0, 5)], [(5, 8)]), {"compute": 5.0, "copy": 3.0, "both": 0.0})
        self.assertEqual(self.split([], []), {"compute": 0.0, "copy": 0.0, "both": 0.0})

    def test_trace_report(self):
        # a kernel, gpuheap's copy kernel beside it, an engine copy, a set:
        # the copy kernel counts as a copy
        ev = [{"ph": "X", "cat": "kernel", "name": "conv", "ts": 0, "dur": 10000},
              {"ph": "X", "cat": "kernel", "name": "gh_copy_words(uint4 const*, uint4*, unsigned long)", "ts": 5000,
               "dur": 10000},
              {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 30000, "dur": 5000},
              {"ph": "X", "cat": "gpu_memset", "name": "Memset", "ts": 40000, "dur": 1000}]
        self.assertIn("compute alone 6.00 ms, copies alone 10.00, both 5.00, GPU idle 20.00 (1 copy kernels)",
                      trace_report_log(ev))  # microseconds in, ms out


class TestStreamsOverlap(unittest.TestCase):
    """gpu_train.py --trace: the time the copies of two streams (the two
    directions) run at once (pure Python, no torch)."""

    def test_overlap(self):
        import gpu_train
        # stream 1: 0-10 and 20-30; stream 2: 5-25; one stream alone never counts
        self.assertEqual(gpu_train.streams_overlap({1: [(0, 10), (20, 30)], 2: [(5, 25)]}), 10.0)
        self.assertEqual(gpu_train.streams_overlap({1: [(0, 10), (5, 15)]}), 0.0)
        self.assertEqual(gpu_train.streams_overlap({1: [(0, 5)], 2: [(5, 9)]}), 0.0)  # touching
        self.assertEqual(gpu_train.streams_overlap({}), 0.0)

    def test_trace_report(self):
        ev = [{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 0, "dur": 4000, "args": {"stream": 7}},
              {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 1000, "dur": 4000, "args": {"stream": 8}}]
        self.assertIn("engine copies of two or more streams at once 3.00 ms (2 streams with copies)",
                      trace_report_log(ev))


class TestPhaseSplit(unittest.TestCase):
    """gpu_train.py --gpu-only --trace: the split by phase between marker
    kernels (pure Python, no torch)."""

    def test_windows(self):
        import gpu_train
        # one step: forward 0-10, backward 10-30, optimizer 30-40 (the end);
        # a copy 5-15 straddles forward and backward
        out = gpu_train.phase_split([(0, 4), (12, 20), (31, 33)], [(5, 15)], [10, 0, 30], 40)
        self.assertEqual(out["forward"], {"compute": 4.0, "copy": 5.0, "both": 0.0, "idle": 1.0, "span": 10.0})
        self.assertEqual(out["backward"], {"compute": 5.0, "copy": 2.0, "both": 3.0, "idle": 10.0, "span": 20.0})
        self.assertEqual(out["optimizer"], {"compute": 2.0, "copy": 0.0, "both": 0.0, "idle": 8.0, "span": 10.0})

    def test_at_first_copy(self):
        import gpu_train
        # the forward 0-10 cut at its first copy (5); the backward's first
        # copy is the one that straddles its start (cut at 10: nothing
        # before); the optimizer has none (all before)
        out = gpu_train.phase_split([(0, 4), (12, 20), (31, 33)], [(5, 15), (7, 8)], [10, 0, 30], 40,
                                    at_first_copy=True)
        self.assertEqual(out["forward"]["before"], {"compute": 4.0, "copy": 0.0, "both": 0.0, "idle": 1.0, "span": 5.0})
        self.assertEqual(out["forward"]["after"], {"compute": 0.0, "copy": 5.0, "both": 0.0, "idle": 0.0, "span": 5.0})
        self.assertEqual(out["backward"]["before"]["span"], 0.0)
        self.assertEqual(out["backward"]["after"], {"compute": 5.0, "copy": 2.0, "both": 3.0, "idle": 10.0, "span": 20.0})
        self.assertEqual(out["optimizer"]["before"]["span"], 10.0)
        self.assertEqual(out["optimizer"]["after"]["span"], 0.0)

    def test_two_steps_sum(self):
        import gpu_train
        out = gpu_train.phase_split([(0, 1), (6, 7)], [], [0, 2, 4, 6, 8, 10], 12)
        self.assertEqual(out["forward"]["compute"], 2.0)
        self.assertEqual(out["forward"]["span"], 4.0)
        self.assertEqual(out["optimizer"]["idle"], 4.0)

    def test_marks_not_in_threes(self):
        import gpu_train
        self.assertEqual(gpu_train.phase_split([(0, 1)], [], [0, 2], 5), {})
        self.assertEqual(gpu_train.phase_split([(0, 1)], [], [], 5), {})

    def test_trace_report_phases(self):
        # marker kernels are neither compute nor copies, and split the step
        mark = "void at::cuda::(anonymous namespace)::spin_kernel(long)"
        ev = [{"ph": "X", "cat": "kernel", "name": mark, "ts": 0, "dur": 1},
              {"ph": "X", "cat": "kernel", "name": "conv", "ts": 1000, "dur": 3000},
              {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "ts": 2000, "dur": 4000},
              {"ph": "X", "cat": "kernel", "name": mark, "ts": 8000, "dur": 1},
              {"ph": "X", "cat": "kernel", "name": "conv_bw", "ts": 9000, "dur": 2000},
              {"ph": "X", "cat": "kernel", "name": mark, "ts": 12000, "dur": 1},
              {"ph": "X", "cat": "kernel", "name": "sgd", "ts": 12000, "dur": 1000}]
        log = trace_report_log(ev)
        self.assertIn("; 3 kernels, 1 copies)", log)  # the marks not counted
        self.assertIn("forward: 8.00 ms a step: compute alone 1.00, copies alone 2.00, both 2.00, GPU idle 3.00", log)
        self.assertIn("backward: 4.00 ms a step: compute alone 2.00, copies alone 0.00, both 0.00, GPU idle 2.00", log)
        self.assertIn("optimizer: 1.00 ms a step: compute alone 1.00", log)


class TestHostPhases(unittest.TestCase):
    """gpu_train.py --phases: the host's time and the manager's calls by
    phase (pure Python, no torch)."""

    def test_add(self):
        import gpu_train
        acc = {}
        marks = [(1.000, {"alloc": (3, 1.0), "free": (1, 0.5)}, 10.0),
                 (1.010, {"alloc": (5, 4.0), "free": (1, 0.5)}, 12.5),
                 (1.030, {"alloc": (6, 4.5), "free": (4, 2.0)}, 12.5),
                 (1.031, {"alloc": (6, 4.5), "free": (4, 2.0)}, 12.5)]
        gpu_train.host_phase_add(acc, marks)
        gpu_train.host_phase_add(acc, marks)  # a second step adds
        self.assertAlmostEqual(acc["forward"]["host"], 20.0)
        self.assertEqual((acc["forward"]["alloc"], acc["forward"]["vmm"]), (6.0, 5.0))
        self.assertNotIn("free", acc["forward"])  # no time in the phase: left out
        self.assertEqual((acc["backward"]["alloc"], acc["backward"]["free"], acc["backward"]["vmm"]), (1.0, 3.0, 0.0))
        self.assertAlmostEqual(acc["optimizer"]["host"], 2.0)
        self.assertEqual(set(acc["optimizer"]), {"host", "vmm"})

    def test_no_manager(self):
        import gpu_train
        acc = {}
        gpu_train.host_phase_add(acc, [(0.0, {}, None), (0.001, {}, None), (0.002, {}, None), (0.004, {}, None)])
        self.assertEqual(set(acc["optimizer"]), {"host"})
        self.assertAlmostEqual(acc["optimizer"]["host"], 2.0)
        self.assertIsNone(gpu_train.vmm_ms(None))


class TestReferenceConfig(unittest.TestCase):
    """gpu_train.py --reference-csv: config (d), PyTorch's save_on_cpu, its
    bytes counted by a wrapper of its pack hook (pure Python, no torch)."""

    class T:  # what counting_pack reads of a tensor
        def __init__(self, cuda, n, size):
            self.is_cuda, self.n, self.size = cuda, n, size

        def numel(self):
            return self.n

        def element_size(self):
            return self.size

    def test_counting_pack(self):
        import gpu_train
        got, counter = [], [0]
        pack = gpu_train.counting_pack(lambda t: got.append(t) or ("packed", t), counter)
        a, b, c = self.T(True, 1000, 4), self.T(False, 50, 8), self.T(True, 3, 2)
        self.assertEqual(pack(a), ("packed", a))  # inner's result, unchanged
        pack(b)
        pack(c)
        self.assertEqual(got, [a, b, c])  # every tensor packed by the inner hook, in order
        self.assertEqual(counter[0], 4000 + 6)  # host tensors are not counted

    def test_options(self):
        import gpu_train
        a = gpu_train.parse_args(["--reference-csv", "r.csv", "--only", "d"])
        self.assertEqual((a.reference_csv, a.only), ("r.csv", "d"))
        self.assertIsNone(gpu_train.parse_args([]).reference_csv)
        self.assertTrue(gpu_train.parse_args(["--floor"]).floor)
        self.assertFalse(gpu_train.parse_args([]).floor)
        self.assertEqual(gpu_train.parse_args(["--only", "f"]).only, "f")

    def test_budget_bytes(self):
        import gpu_train
        self.assertEqual(gpu_train.budget_bytes(1000 << 20, 0.5), 500 << 20)
        self.assertEqual(gpu_train.budget_bytes(1 << 20, 0.5), 2 << 20)  # at least one frame
        self.assertEqual(gpu_train.budget_bytes(3, 4.0), 2 << 20)

    def test_floor_copies(self):
        """(f)'s copies: out on their own stream after the current stream's
        work, back after that (the same stream), the current stream waiting
        for both before step()."""
        import gpu_train
        events = []

        class Buf:
            def __init__(self, name):
                self.name = name

            def copy_(self, src, non_blocking=False):
                events.append(("copy", src.name, self.name, non_blocking, cuda.cur))

        class FakeStream:
            def __init__(self, name):
                self.name = name

            def wait_stream(self, other):
                events.append(("wait", self.name, other.name))

        class Ctx:
            def __init__(self, s):
                self.s = s

            def __enter__(self):
                self.prev, cuda.cur = cuda.cur, self.s.name

            def __exit__(self, *exc):
                cuda.cur = self.prev

        class cuda:
            cur = "main"
            main = FakeStream("main")

            @staticmethod
            def current_stream():
                return cuda.main

            @staticmethod
            def stream(s):
                return Ctx(s)

            Stream = staticmethod(lambda: FakeStream("side"))

        class FakeTorch:
            uint8 = "u8"

            @staticmethod
            def empty(n, dtype=None, device=None, pin_memory=False):
                events.append(("empty", n, device, pin_memory))
                return Buf("host" if pin_memory else "dev")

        FakeTorch.cuda = cuda
        f = gpu_train.FloorCopies(FakeTorch, 12345)
        self.assertEqual(f.nbytes, 12345)
        self.assertEqual(events, [("empty", 12345, "cuda", False), ("empty", 12345, None, True)])
        del events[:]
        f.forward_start()
        f.backward_start()
        f.backward_end()
        self.assertEqual(events, [("wait", "side", "main"), ("copy", "dev", "host", True, "side"),
                                  ("wait", "side", "main"), ("copy", "host", "dev", True, "side"),
                                  ("wait", "main", "side")])
        self.assertEqual(cuda.cur, "main")


class TestChildOptions(unittest.TestCase):
    """gpu_train.py's parent passes each config's child every option that
    changes what the child runs (a flag it dropped made --offload-state a
    no-op outside --only)."""

    PARENT_ONLY = {"csv", "reference_csv", "floor", "only", "peak", "out"}

    def test_every_option_forwarded(self):
        import gpu_train
        from unittest import mock

        def same(x, v):  # "7" against "7.0"; --trace's path gets the config's letter
            try:
                return float(x) == float(v)
            except ValueError:
                return x == v or x.startswith(v + ".")

        flags = []
        for act in gpu_train.parser()._actions:
            if not act.option_strings or act.dest in self.PARENT_ONLY or act.dest == "help":
                continue
            flag = act.option_strings[0]
            value = (None if act.nargs == 0 else sorted(act.choices)[-1] if act.choices
                     else "7" if act.type in (int, float) else "x")
            argv = [flag] if value is None else [flag, value]
            flags.append(flag)
            with mock.patch.object(gpu_train, "run", return_value=(None, 0)) as run:
                gpu_train.run_child(gpu_train.parse_args(argv), "c", "/nonexistent", peak=1)
            got = [str(x) for x in run.call_args[0][1]]
            found = any(value is None or (i + 1 < len(got) and same(got[i + 1], value))
                        for i in range(len(got)) if got[i] == flag)
            self.assertTrue(found, f"{' '.join(argv)} not passed to the child: {got}")
        self.assertIn("--offload-state", flags)


class TestHookTimes(unittest.TestCase):
    """gpu_train.py --hook-times: the offload hooks wrapped with timers
    (pure Python, no torch)."""

    def test_wraps_instance_methods(self):
        import gpu_train

        class Off:
            def pack(self, t):
                self.inner(t)
                return ("p", t)

            def inner(self, t):
                if t < 0:
                    raise ValueError(t)

        off, acc = Off(), {}
        gpu_train.time_hooks(off, acc, ("pack", "inner"))
        self.assertEqual(off.pack(3), ("p", 3))  # the result passes through
        off.pack(4)
        with self.assertRaises(ValueError):
            off.pack(-1)  # an exception passes through, and is counted
        self.assertEqual((acc["pack"][0], acc["inner"][0]), (3, 3))  # pack's own call of inner went through its timer
        self.assertGreaterEqual(acc["pack"][1], acc["inner"][1])  # inclusive
        self.assertEqual(set(gpu_train.HOOK_METHODS) & {"pack", "unpack"}, {"pack", "unpack"})
        self.assertTrue(gpu_train.parse_args(["--hook-times"]).hook_times)


class TestCurrentStream(unittest.TestCase):
    """gpuheap.torch._current_stream: the current stream's handle through the
    C bindings where torch has them, torch.cuda.current_stream otherwise
    (with a stand-in for torch)."""

    def fake(self, raw=True):
        import types
        calls = []
        c = types.SimpleNamespace(_cuda_getDevice=lambda: calls.append("dev") or 3)
        if raw:
            c._cuda_getCurrentRawStream = lambda i: calls.append(("raw", i)) or 0x1000 + i
        cuda = types.SimpleNamespace(current_stream=lambda d=None: calls.append(("obj", d)) or
                                     types.SimpleNamespace(cuda_stream=0x2000))
        return types.SimpleNamespace(_C=c, cuda=cuda), calls

    def test_raw(self):
        import types
        from unittest import mock
        import gpuheap.torch as ght
        fake, calls = self.fake()
        with mock.patch.object(ght, "_torch", lambda: fake):
            self.assertEqual(ght._current_stream(), 0x1003)  # the current device's
            self.assertEqual(ght._current_stream(types.SimpleNamespace(index=1)), 0x1001)  # a torch.device's
            self.assertEqual(ght._current_stream(types.SimpleNamespace(index=None)), 0x1003)  # "cuda": current
            self.assertEqual(ght._current_stream(2), 0x1002)
            self.assertEqual(ght._current_stream("cuda:1"), 0x2000)  # a name: torch parses it
        self.assertEqual(calls, ["dev", ("raw", 3), ("raw", 1), "dev", ("raw", 3), ("raw", 2), ("obj", "cuda:1")])

    def test_fallback(self):
        from unittest import mock
        import gpuheap.torch as ght
        fake, calls = self.fake(raw=False)
        with mock.patch.object(ght, "_torch", lambda: fake):
            self.assertEqual(ght._current_stream("cuda:0"), 0x2000)
        self.assertEqual(calls, [("obj", "cuda:0")])


class TestChildRunner(unittest.TestCase):
    """python/tests/_child.py, what gpu_train.py, gpu_offload.py and gpu_cupy.py share."""

    def test_outcomes(self):
        import _child
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "child.py")
            with open(script, "w") as f:
                f.write(CHILD_SCRIPT)
            out = os.path.join(d, "r.json")
            stdout, sys.stdout = sys.stdout, io.StringIO()
            try:
                r = _child.run(script, ["--what", "ok", "--n", 5], out, "t: ok", 60)
                self.assertEqual(r, ({"n": 5, "path": PYDIR}, 0))  # python/ first on PYTHONPATH
                os.unlink(out)
                self.assertEqual(_child.run(script, ["--what", "skip"], out, "t: skip", 60), (None, _child.SKIP))
                self.assertEqual(_child.run(script, ["--what", "fail"], out, "t: fail", 60), (None, 1))
                self.assertEqual(_child.run(script, ["--what", "silent"], out, "t: silent", 60), (None, 1))
                self.assertEqual(_child.run(script, ["--what", "slow"], out, "t: slow", 1), (None, 1))
                log = sys.stdout.getvalue()
            finally:
                sys.stdout = stdout
        self.assertIn("t: fail failed (exit 3)", log)
        self.assertIn("t: silent failed (exit 0)", log)
        self.assertIn("t: slow killed after 1 s", log)
        self.assertNotIn("t: ok", log)
        self.assertEqual(_child.SKIP, 77)

    def test_verdict(self):
        import _child

        def boom():
            raise AssertionError("the PASS line is built only without failures")
        stdout, sys.stdout = sys.stdout, io.StringIO()
        try:
            self.assertEqual(_child.verdict("t", ["x differ", "no eviction"], boom), 1)
            self.assertEqual(_child.verdict("t", [], lambda: "3 steps"), 0)
            log = sys.stdout.getvalue()
        finally:
            sys.stdout = stdout
        self.assertEqual(log.splitlines(), ["t: FAIL: x differ", "t: FAIL: no eviction", "t: PASS: 3 steps"])

    def test_train_csv(self):
        import gpu_train
        self.assertEqual(gpu_train.CONFIGS, {"a": "default", "b": "gpuheap", "c": "gpuheap_half_offload",
                                             "d": "save_on_cpu", "f": "transfer_floor"})
        r = {"losses": [(1.5).hex(), (0.25).hex()], "ms_per_step": 15.04, "device_budget": 3 << 29,
             "bytes_moved_per_step": 1e9}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sub", "t.csv")
            gpu_train.write_csv(path, [("a", r), ("b", None), ("c", dict(r, losses=[]))])
            with open(path) as f:
                lines = f.read().splitlines()
        self.assertEqual(lines, ["config,ms_per_step,device_budget_gib,bytes_moved_per_step,loss_last",
                                 "a,15.040,1.500,1000000000,0.25", "c,15.040,1.500,1000000000,nan"])


class TestManagerOnSimulation(unittest.TestCase):
    """The bindings against the real library, with its simulated frames."""

    def test_tensor_calls(self):
        with _sim() as m:
            p = m.alloc("3MiB", "weights")
            q = m.alloc(4096, gpuheap.Kind.ACTIVATIONS)
            self.assertEqual(p % 256, 0)
            self.assertEqual(m.tier(p), gpuheap.Tier.DEVICE)
            m.evict(p)
            self.assertEqual(m.tier(p), gpuheap.Tier.HOST)
            m.prefetch(p)
            self.assertEqual(m.tier(p), gpuheap.Tier.DEVICE)
            m.evict(p)
            m.prefetch_ahead(p)  # on the device, its copy's wait left to the next prefetch
            self.assertEqual(m.tier(p), gpuheap.Tier.DEVICE)
            m.prefetch(p)
            m.evict_ahead(p)  # quiet, on the host, its copies queued
            self.assertEqual(m.tier(p), gpuheap.Tier.HOST)
            m.prefetch(p)  # its next use
            self.assertEqual(m.tier(p), gpuheap.Tier.DEVICE)
            m.evict_ahead(q)  # under 1 MiB: advised only
            self.assertEqual(m.tier(q), gpuheap.Tier.DEVICE)
            m.prefetch(q)
            with self.assertRaises(gpuheap.Error) as cm:
                m.prefetch_ahead(p + 256)
            self.assertEqual(cm.exception.code, gpuheap.ERR_FOREIGN)
            m.pin(p)
            with self.assertRaises(gpuheap.Error) as cm:
                m.evict(p)
            self.assertEqual(cm.exception.code, gpuheap.ERR_PINNED)
            self.assertIn("pinned", cm.exception.detail)
            with self.assertRaises(gpuheap.Error) as cm:
                m.evict_ahead(p)
            self.assertEqual(cm.exception.code, gpuheap.ERR_PINNED)
            m.unpin(p)
            m.set_kind(q, "gradients")
            st = m.stats()
            self.assertEqual(st["tensors"]["optimizer"], 1)
            self.assertEqual(st["tensor_bytes"]["weights"], 3 * MiB)
            self.assertGreaterEqual(st["evictions"], 1)
            self.assertGreaterEqual(st["restores"], 1)
            with self.assertRaises(gpuheap.Error) as cm:
                m.free(p + 256)
            self.assertEqual(cm.exception.code, gpuheap.ERR_FOREIGN)
            m.free(q)
            with self.assertRaises(gpuheap.Error) as cm:
                m.free(q)
            self.assertEqual(cm.exception.code, gpuheap.ERR_DOUBLE_FREE)
            m.free(None)
            for bad in (0, -5):
                with self.assertRaises(gpuheap.Error):
                    m.evict(bad)
            m.free(p)
            m.maintain()
            m.empty_cache()
        with self.assertRaises(gpuheap.Error):
            m.stats()  # closed
        m.close()  # twice: nothing

    def test_oom_observer(self):
        with _sim() as m:
            seen = []

            def observer(n, st):
                seen.append((n, st["oom_events"]))
                m.stats()  # the observer may call the manager

            m.set_oom_observer(observer)
            with self.assertRaises(gpuheap.Error) as cm:
                m.alloc("1GiB")
            self.assertEqual(cm.exception.code, gpuheap.ERR_BUDGET)
            self.assertEqual(seen, [(1 << 30, 1)])
            m.set_oom_observer(lambda n, st: 1 / 0)  # an exception inside is printed, not raised into C
            stderr, sys.stderr = sys.stderr, io.StringIO()
            try:
                with self.assertRaises(gpuheap.Error):
                    m.alloc("1GiB")
                self.assertIn("ZeroDivisionError", sys.stderr.getvalue())
            finally:
                sys.stderr = stderr
            m.set_oom_observer(None)
            with self.assertRaises(gpuheap.Error):
                m.alloc("1GiB")
            self.assertEqual(len(seen), 1)
            self.assertEqual(m.stats()["oom_events"], 3)
            with self.assertRaises(gpuheap.Error):
                m.set_oom_observer(42)

    def test_spill_to_host_and_frame_map(self):
        with _sim(device_budget=8 * MiB, host_budget=32 * MiB) as m:
            ptrs = [m.alloc(3 * MiB) for _ in range(6)]  # 12 frames' worth into a 4-frame budget
            st = m.stats()
            self.assertLessEqual(st["frames"]["device"], 4)
            self.assertGreater(st["frames"]["host"], 0)
            try:
                frames = m.frame_map()
            except gpuheap.Error as e:
                self.assertEqual(e.code, gpuheap.ERR_UNSUPPORTED)  # a library without it yet
                frames = None
            if frames is not None:
                self.assertEqual(len(frames), st["frames"]["device"] + st["frames"]["host"])
                self.assertEqual([f["va"] for f in frames], sorted(f["va"] for f in frames))
                self.assertEqual({f["tier"] for f in frames}, {"device", "host"})
            s = snap_mod.snapshot(m)
            self.assertEqual(s["tiers"]["host"]["frames"], st["frames"]["host"])
            self.assertIn("<svg", snap_mod.to_html(s))
            for p in ptrs:
                m.free(p)

    def test_offload_moves_real_frames(self):
        """Offload's hints against the real manager: fake tensors whose
        storages are real simulated allocations."""
        with _sim(device_budget=32 * MiB, host_budget=64 * MiB) as m:
            ptrs = [m.alloc(4 * MiB) for _ in range(5)]
            ts = [FakeTensor(p, 4 * MiB) for p in ptrs]
            off = ght.Offload(manager=m, keep_last=1, prefetch_distance=1, stream=lambda: None, mode="evict")
            for t in ts:
                off.pack(t)
            self.assertEqual([m.tier(p) for p in ptrs], [gpuheap.Tier.HOST] * 4 + [gpuheap.Tier.DEVICE])
            off.unpack(ts[4])
            self.assertEqual([m.tier(p) for p in ptrs], [gpuheap.Tier.HOST] * 3 + [gpuheap.Tier.DEVICE] * 2)
            for t in reversed(ts[:4]):
                off.unpack(t)
            self.assertEqual([m.tier(p) for p in ptrs], [gpuheap.Tier.DEVICE] * 5)
            self.assertEqual(off.counters["hint_errors"], 0)
            foreign = FakeTensor(0x12345600, 4 * MiB)  # not gpuheap's
            for mode in ght.OFFLOAD_MODES:
                off2 = ght.Offload(manager=m, keep_last=0, stream=lambda: None, mode=mode)
                off2.pack(foreign)
                self.assertEqual(off2.counters["foreign"], 1, mode)
            for p in ptrs:
                m.free(p)

    def test_advise(self):
        with _sim(device_budget=16 * MiB) as m:
            p = m.alloc("4MiB")
            q = m.alloc(4096, "workspace")
            m.advise(p, "cold")
            m.advise(q, gpuheap.Advice.COLD)
            st = m.stats()
            self.assertEqual((st["evictions"], st["restores"]), (0, 0))  # a mark: nothing moves
            self.assertEqual(m.tier(p), gpuheap.Tier.DEVICE)
            m.advise(p, "normal")
            m.advise(p, 1)
            m.pin(q)
            m.advise(q, "cold")  # pinned tensors may be advised cold
            m.unpin(q)
            for bad in ("lukewarm", 7, None):
                with self.assertRaises(gpuheap.Error) as cm:
                    m.advise(p, bad)
                self.assertEqual(cm.exception.code, gpuheap.ERR_INVAL)
            self.assertEqual(m._lib.gh_tensor_advise(m.handle, p, 7), gpuheap.ERR_INVAL)  # the library checks too
            self.assertEqual(m._lib.gh_tensor_advise(m.handle, p, -1), gpuheap.ERR_INVAL)
            with self.assertRaises(gpuheap.Error) as cm:
                m.advise(p + 256, "cold")
            self.assertEqual(cm.exception.code, gpuheap.ERR_FOREIGN)
            m.free(p)
            with self.assertRaises(gpuheap.Error) as cm:
                m.advise(p, "cold")
            self.assertEqual(cm.exception.code, gpuheap.ERR_DOUBLE_FREE)
            self.assertIn("freed already", cm.exception.detail)
            m.free(q)

    def test_offload_cold_on_real_frames(self):
        """Offload's default mode against the real manager: pack advises, so
        nothing moves until the budget is spent; then the oldest advice goes
        first, one frame per new frame (low watermark 1); unpack's prefetches
        of tensors still on the device move nothing; the evicted ones come
        back. Every byte survives."""
        with _sim(device_budget=16 * MiB, host_budget=64 * MiB, low_watermark=1.0) as m:
            ptrs = [m.alloc(2 * MiB) for _ in range(6)]
            for i, p in enumerate(ptrs):
                ctypes.memset(p, i + 1, 2 * MiB)
            ts = [FakeTensor(p, 2 * MiB) for p in ptrs]
            off = ght.Offload(manager=m, keep_last=1, prefetch_distance=1, stream=lambda: None)
            self.assertEqual(off.mode, "cold")
            for t in ts:
                off.pack(t)
            self.assertEqual(off.counters["advised"], 5)
            self.assertEqual(m.stats()["evictions"], 0)
            self.assertEqual({m.tier(p) for p in ptrs}, {gpuheap.Tier.DEVICE})
            extra = [m.alloc(2 * MiB) for _ in range(2)]  # the 7th and 8th frames: room
            self.assertEqual(m.stats()["evictions"], 0)
            extra += [m.alloc(2 * MiB) for _ in range(2)]  # pressure: the two oldest advised go
            D, H = gpuheap.Tier.DEVICE, gpuheap.Tier.HOST
            self.assertEqual([m.tier(p) for p in ptrs], [H, H, D, D, D, D])
            self.assertEqual(m.stats()["evictions"], 2)
            for t in reversed(ts[3:]):
                off.unpack(t)  # it and the one before: on the device, nothing moves
            st = m.stats()
            self.assertEqual((st["evictions"], st["restores"]), (2, 0))
            off.unpack(ts[2])  # prefetches ts[1] ahead: back from the host
            self.assertEqual([m.tier(p) for p in ptrs[:2]], [H, D])
            self.assertEqual(m.stats()["restores"], 1)
            off.unpack(ts[1])
            off.unpack(ts[0])
            self.assertEqual([m.tier(p) for p in ptrs[:2]], [D, D])
            st = m.stats()
            self.assertEqual(st["restores"], 2)
            self.assertEqual(st["evictions"], 4)  # room for the two restores
            for i, p in enumerate(ptrs):
                self.assertEqual(ctypes.string_at(p, 2 * MiB), bytes([i + 1]) * (2 * MiB), i)
            self.assertEqual(off.counters["prefetched"], 6)
            self.assertEqual(off.counters["hint_errors"], 0)
            for p in ptrs + extra:
                m.free(p)

    def test_global_manager_in_a_fresh_process(self):
        _lib()
        rc, out = _run_py("""
            import gpuheap
            m = gpuheap.Manager(backend='sim', device_budget='16MiB', host_pool_frames=0)
            assert m.set_global() is m
            assert gpuheap.global_manager() is m
            try:
                gpuheap.Manager(backend='sim', device_budget='16MiB', host_pool_frames=0).set_global()
            except gpuheap.Error as e:
                assert e.code == gpuheap.ERR_INVAL, e
            try:
                m.close()
            except gpuheap.Error:
                print('ok')
        """)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)


if __name__ == "__main__":
    unittest.main()
