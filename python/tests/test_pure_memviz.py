"""gpuheap.memviz (a manager's memory in the format of PyTorch's memory
snapshots) and gpuheap.torch._MemoryHistory (torch.cuda.memory's
snapshot and history calls served by gpuheap), on the library's CPU
simulation; PyTorch is not needed: torch is a stand-in here. Where a
PyTorch is installed, its own readers of snapshots (torch.cuda._memory_viz)
read the snapshot too.

  GPUHEAP_LIBRARY=build/libgpuheap.so PYTHONPATH=python \
      python3 -m unittest discover -s python/tests -p 'test_pure*.py'"""
import importlib.util
import os
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
sys.path.insert(0, PYDIR)

import gpuheap  # noqa: E402
from gpuheap import memviz  # noqa: E402

MiB = 1 << 20


def _lib_or_skip():
    try:
        lib = gpuheap.library()
    except gpuheap.Error as e:
        raise unittest.SkipTest("no libgpuheap: " + str(e)[:200])
    if lib.gh_tmgr_tensor_map is None or lib.gh_tmgr_record_history is None:
        raise unittest.SkipTest("a libgpuheap without tensor maps or history")
    return lib


def _torch_memory_viz():
    """PyTorch's torch/cuda/_memory_viz.py loaded alone (it imports nothing
    of torch's), or None without a PyTorch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "cuda", "_memory_viz.py")
    if not os.path.exists(path):
        return None
    s = importlib.util.spec_from_file_location("_gh_torch_memory_viz", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


class TestSnapshot(unittest.TestCase):
    """torch_snapshot of a simulated manager with runs, small tensors, a
    pending free, evicted frames and a history."""

    def setUp(self):
        _lib_or_skip()

    def _manager(self):
        return gpuheap.Manager(backend="sim", device_budget=8 * MiB, host_budget=64 * MiB, host_pool_frames=0)

    def test_segments_tile_and_name_every_tensor(self):
        with self._manager() as m:
            m.record_history(1000)
            big = [m.alloc(3 * MiB) for _ in range(4)]  # 8 frames into a 4-frame budget: some on the host
            small = [m.alloc(1000 + 512 * i) for i in range(5)]
            m.free(small[1])  # pending until its stream is past the free
            snap = memviz.torch_snapshot(m)
            memviz.check_tiling(snap)
            self.assertEqual(sorted(snap), ["allocator_settings", "device_traces", "segments"])
            blocks = {b["address"]: b for s in snap["segments"] for b in s["blocks"] if b["state"] != "inactive"}
            for p in big:
                self.assertEqual(blocks[p]["requested_size"], 3 * MiB)
                self.assertEqual(blocks[p]["state"], "active_allocated")
            for i, p in enumerate(small):
                self.assertEqual(blocks[p]["requested_size"], 1000 + 512 * i)
                self.assertLessEqual(blocks[p]["requested_size"], blocks[p]["size"])
            self.assertEqual(blocks[small[1]]["state"], "active_pending_free")
            runs = [s for s in snap["segments"] if s["segment_type"] == "large" and s["allocated_size"]]
            self.assertEqual(len(runs), 4)
            self.assertTrue(all(s["total_size"] == 4 * MiB for s in runs))  # two whole frames each
            self.assertTrue({"host", "mixed"} & {s["gpuheap_tier"] for s in runs})  # evicted ones
            self.assertIn("device", {s["gpuheap_tier"] for s in runs})
            self.assertEqual(sum(s["allocated_size"] for s in snap["segments"]),
                             4 * 3 * MiB + sum(1000 + 512 * i for i in range(5) if i != 1))
            # The history: every alloc, the free, in order, with times.
            trace = snap["device_traces"][0]
            allocs = [e["addr"] for e in trace if e["action"] == "alloc"]
            self.assertEqual(allocs, big + small)
            frees = [e for e in trace if e["action"] == "free_requested"]
            self.assertEqual([(e["addr"], e["size"]) for e in frees], [(small[1], 1512)])
            times = [e["time_us"] for e in trace]
            self.assertEqual(times, sorted(times))
            self.assertEqual(memviz.torch_snapshot(m, include_traces=False)["device_traces"], [[]])
            self.assertEqual(len(memviz.torch_snapshot(m, device=2)["device_traces"]), 3)
            for p in big + small[:1] + small[2:]:
                m.free(p)
            m.empty_cache()
            done = [e["addr"] for e in memviz.torch_snapshot(m)["device_traces"][0] if e["action"] == "free_completed"]
            self.assertEqual(sorted(done), sorted(big + small))

    def test_graph_pool_blocks(self):
        """Blocks of CUDA graph pools are segments of their own with their
        pool's id, freed ones inactive; a frame shared with other tensors
        is cut around them; a pool's snapshot holds its segments alone."""
        with self._manager() as m:
            big = m.alloc(3 * MiB)
            small = [m.alloc(1000 + 512 * i) for i in range(5)]
            whole = memviz.torch_snapshot(m, pools={})
            pools = {small[1]: ((7, 1), 0), small[3]: ((7, 1), 1), small[4]: ((8, 0), 2), big: ((9, 0), 0),
                     0x10: ((7, 1), 0)}  # (a block of another manager: no tensor here, left out)
            snap = memviz.torch_snapshot(m, pools=pools)
            memviz.check_tiling(snap)
            segs = snap["segments"]
            for a, b in zip(segs, segs[1:]):
                self.assertLessEqual(a["address"] + a["total_size"], b["address"])  # no overlap
            self.assertEqual(sum(x["total_size"] for x in segs), sum(x["total_size"] for x in whole["segments"]))
            self.assertEqual(sum(x["allocated_size"] for x in segs),
                             sum(x["allocated_size"] for x in whole["segments"]) - (1000 + 512 * 3))
            by_pool = {}
            for x in segs:
                by_pool.setdefault(x["segment_pool_id"], []).append(x)
            self.assertEqual(sorted(by_pool), [(0, 0), (7, 1), (8, 0), (9, 0)])
            seven = by_pool[(7, 1)]
            self.assertEqual([x["address"] for x in seven], [small[1], small[3]])
            self.assertEqual([x["blocks"][0]["state"] for x in seven], ["active_allocated", "inactive"])
            self.assertEqual([x["blocks"][0]["requested_size"] for x in seven], [1512, 0])
            self.assertEqual(by_pool[(8, 0)][0]["blocks"][0]["state"], "active_allocated")  # adopted: held
            self.assertEqual(by_pool[(9, 0)][0]["address"], big)
            self.assertEqual(by_pool[(9, 0)][0]["segment_type"], "large")
            plain = {b["address"] for x in by_pool[(0, 0)] for b in x["blocks"] if b["state"] != "inactive"}
            self.assertEqual(plain, {small[0], small[2]})
            # The frame's pieces around the pool blocks still name the frame's tier.
            self.assertTrue(all(x["gpuheap_tier"] == "device" for x in by_pool[(0, 0)] + seven))
            only = memviz.torch_snapshot(m, pool=(7, 1), pools=pools)["segments"]
            self.assertEqual(only, seven)
            self.assertEqual(memviz.torch_snapshot(m, pool=(5, 5), pools=pools)["segments"], [])
            self.assertEqual(memviz.pool_blocks(), {})  # no graph pool in this process
            for p in [big] + small:
                m.free(p)

    def test_oom_entry(self):
        with gpuheap.Manager(backend="sim", device_budget=4 * MiB, host_budget=4 * MiB, host_pool_frames=0) as m:
            m.record_history(10)
            with self.assertRaises(gpuheap.Error):
                m.alloc(64 * MiB)
            trace = memviz.torch_snapshot(m)["device_traces"][0]
            self.assertEqual([e["action"] for e in trace], ["oom"])
            self.assertEqual(trace[0]["size"], 64 * MiB)
            self.assertGreater(trace[0]["device_free"], 0)

    def test_check_tiling_catches_gaps(self):
        seg = {"address": 0x1000, "total_size": 0x1000, "allocated_size": 0x10,
               "blocks": [{"address": 0x1000, "size": 0x800, "requested_size": 0x10, "state": "active_allocated"}]}
        with self.assertRaises(ValueError):
            memviz.check_tiling({"segments": [seg]})
        seg["blocks"].append({"address": 0x1800, "size": 0x800, "requested_size": 0, "state": "inactive"})
        memviz.check_tiling({"segments": [seg]})
        seg["allocated_size"] = 0x20
        with self.assertRaises(ValueError):
            memviz.check_tiling({"segments": [seg]})

    def test_pytorch_readers(self):
        """PyTorch's own summary and trace printers read the snapshot, and
        their accounting (segsum's) holds."""
        mv = _torch_memory_viz()
        if mv is None:
            self.skipTest("no PyTorch here")
        with self._manager() as m:
            m.record_history(100)
            ps = [m.alloc(n) for n in (3 * MiB, 5000, 7 * MiB, 100)]
            m.free(ps[1])
            snap = memviz.torch_snapshot(m)
            text = mv.segsum(snap)
            self.assertIn("total_reserved", text)
            self.assertIn(f"{len(ps) + 1} entries", mv.trace(snap))
            for p in ps[:1] + ps[2:]:
                m.free(p)


class TestAccumulated(unittest.TestCase):
    """gpuheap.torch.reset_accumulated_memory_stats (what
    torch.cuda.reset_accumulated_memory_stats does under enable()): the
    accumulated counters of memory_stats() restart from 0, the current
    values and the library's own counters do not."""

    def test_reset_accumulated(self):
        _lib_or_skip()
        import gpuheap.torch as ght
        with gpuheap.Manager(backend="sim", device_budget=4 * MiB, host_budget=64 * MiB, host_pool_frames=0) as m:
            ps = [m.alloc(3 * MiB) for _ in range(4)]  # past the device budget: evictions
            before = ght.memory_stats(m)
            self.assertGreater(before["gpuheap.evictions"], 0)
            self.assertGreater(before["gpuheap.bytes_evicted"], 0)
            ght.reset_accumulated_memory_stats(m)
            after = ght.memory_stats(m)
            for k in ght.ACCUMULATED_KEYS:
                self.assertEqual(after[k], 0, k)
            self.assertEqual(after["allocated_bytes.all.current"], before["allocated_bytes.all.current"])
            self.assertEqual(m.stats()["evictions"], before["gpuheap.evictions"])  # the library's go on
            for p in ps:
                m.prefetch(p)  # each back on the device evicts another
            later = ght.memory_stats(m)
            self.assertEqual(later["gpuheap.evictions"], m.stats()["evictions"] - before["gpuheap.evictions"])
            self.assertGreater(later["gpuheap.restores"], 0)
            for p in ps:
                m.free(p)


class TestMemoryHistory(unittest.TestCase):
    """_MemoryHistory over a stand-in torch, with PyTorch's allocation entry
    point (gh_torch_alloc) called from Python: the stacks it keeps, the
    snapshot's blocks and entries that carry them, turning it off, pruning,
    the memory fraction, the refusals. In a fresh interpreter: it sets the
    global manager and the library's tag function."""

    def test_through_the_torch_entry_point(self):
        _lib_or_skip()
        code = textwrap.dedent('''
            import ctypes, sys, types
            import gpuheap, gpuheap.torch as ght
            MiB = 1 << 20
            m = gpuheap.Manager(backend="sim", device_budget=16 * MiB, host_budget=16 * MiB, host_pool_frames=0)
            m.set_global()
            lib = gpuheap.library()
            C = types.SimpleNamespace(_cuda_memorySnapshot=None, _cuda_record_memory_history=None,
                                      _cuda_record_memory_history_legacy=None, _cuda_getMemoryFraction=None,
                                      _cuda_attach_out_of_memory_observer=None)
            props = types.SimpleNamespace(total_memory=64 * MiB)
            torch = types.SimpleNamespace(_C=C, cuda=types.SimpleNamespace(get_device_properties=lambda d: props))
            h = ght._MemoryHistory.install(torch, m, 0)
            assert C._cuda_memorySnapshot == h.snapshot and C._cuda_record_memory_history == h.record
            assert abs(C._cuda_getMemoryFraction(0) - 16 / 64) < 1e-9, C._cuda_getMemoryFraction(0)

            def make_tensor(n):
                return lib.gh_torch_alloc(n, 0, None)

            C._cuda_record_memory_history("all", "all", "all", 1000, False, False, False, [])
            p = make_tensor(3 * MiB)
            q = make_tensor(700)
            snap = C._cuda_memorySnapshot(None)
            blocks = {b["address"]: b for s in snap["segments"] for b in s["blocks"]}
            names = [f["name"] for f in blocks[p]["frames"]]
            assert names[:1] == ["make_tensor"] and "<module>" in names, names
            assert blocks[p]["frames"][0]["filename"] == "<string>", blocks[p]["frames"][0]
            trace = snap["device_traces"][0]
            assert [e["action"] for e in trace] == ["alloc", "alloc"], trace
            assert trace[0]["frames"][0]["name"] == "make_tensor" and trace[1]["addr"] == q
            lib.gh_torch_free(p, 3 * MiB, 0, None)
            trace = C._cuda_memorySnapshot((0, 0, True))["device_traces"][0]
            assert trace[-1]["action"] == "free_requested" and trace[-1]["frames"] == [], trace[-1]
            assert C._cuda_memorySnapshot((0, 0, False))["device_traces"] == [[]]
            assert C._cuda_memorySnapshot((1, 2, True))["segments"] == []  # a pool with no blocks

            # Pruning keeps the frames of live tensors and of history entries.
            h.prune_at = 0
            r = make_tensor(900)
            live = {t["context"] for t in m.tensor_map()} | {e["context"] for e in m.history()[0]}
            assert set(h.frames) <= live and len(h.frames) >= 3, (sorted(h.frames), sorted(live))
            h.prune_at = 1 << 16

            # context None: no stacks taken; "state": no history kept.
            C._cuda_record_memory_history("state", None, "python", 1000, False, False, False, [])
            s = make_tensor(800)
            blocks = {b["address"]: b for x in C._cuda_memorySnapshot(None)["segments"] for b in x["blocks"]}
            assert blocks[s]["frames"] == [] and C._cuda_memorySnapshot(None)["device_traces"] == [[]]
            # Off: history and frames dropped; the tag function unset.
            C._cuda_record_memory_history(None, None, "all", 0, False, False, False, [])
            assert h.frames == {} and not h.stacks_on and m.history() == ([], 0)
            u = make_tensor(700)  # no tag function: no stack kept
            assert [t["context"] for t in m.tensor_map() if t["ptr"] == u] == [0] and h.frames == {}
            lib.gh_torch_free(u, 0, 0, None)
            # The legacy form.
            C._cuda_record_memory_history_legacy(True, True, 50, False, False, False, False, False, [])
            t = make_tensor(600)
            assert C._cuda_memorySnapshot(None)["device_traces"][0][-1]["frames"][0]["name"] == "make_tensor"
            C._cuda_record_memory_history_legacy(False)
            for bad in (("sometimes",), ("all", "never"), ("all", "all", "cpp")):
                try:
                    C._cuda_record_memory_history(*bad)
                    raise AssertionError(bad)
                except RuntimeError:
                    pass
            # Out-of-memory observers, PyTorch's way: each called with (device,
            # bytes asked, bytes on the device, budget bytes not in use) before
            # the refusal; the manager's own observer set before first; one
            # that raises stops neither the others nor the refusal.
            seen = []
            m.set_oom_observer(lambda n, st: seen.append(("manager", n)))
            def bad(*a):
                raise ValueError("observer failure")
            C._cuda_attach_out_of_memory_observer(lambda *a: seen.append(("torch",) + a))
            C._cuda_attach_out_of_memory_observer(bad)
            C._cuda_attach_out_of_memory_observer(lambda *a: seen.append(("torch2", a[1])))
            assert lib.gh_torch_alloc(64 * MiB, 0, None) is None
            assert seen[0] == ("manager", 64 * MiB), seen
            assert seen[1][:3] == ("torch", 0, 64 * MiB) and seen[1][3] > 0 and 0 <= seen[1][4] <= 16 * MiB, seen
            assert seen[2] == ("torch2", 64 * MiB) and len(seen) == 3, seen
            try:
                C._cuda_attach_out_of_memory_observer(42)
                raise AssertionError("a non-callable observer was taken")
            except TypeError:
                pass
            for x in (q, r, s, t):
                lib.gh_torch_free(x, 0, 0, None)
            print("ok")
            ''')
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([PYDIR] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ok", p.stdout)


if __name__ == "__main__":
    unittest.main()
