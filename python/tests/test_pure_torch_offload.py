"""gpuheap.torch.offload()'s hooks on real PyTorch autograd, on the CPU: which
saved tensors its test of "only autograd reaches it" lets be advised quiet
or prefetched ahead, under the patterns that read saved tensors outside
their own backward node. Needs PyTorch (a CPU build is enough) and no GPU
and no library: the manager is test_pure's FakeManager. Skipped without PyTorch.

    PYTHONPATH=python python3 -m unittest python/tests/test_pure_torch_offload.py

A quiet tensor's address is unmapped while it is evicted, and a tensor
prefetched ahead may still be on its way in: either is read safely only
after its own unpack, which prefetches it plainly (its streams wait). So:
a tensor the program still holds (a variable, a view) is never advised
quiet nor prefetched ahead; a checkpointed region's input is recomputed
from only after a plain prefetch of it; and some tensors are advised quiet
(so the checks above are not empty).
"""
import os
import sys
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

try:
    import torch
    from torch.utils.checkpoint import checkpoint
except Exception as e:  # no PyTorch: the whole module is skipped
    raise unittest.SkipTest(f"PyTorch does not import ({e})")

import gpuheap  # noqa: E402
import gpuheap.torch as ght  # noqa: E402
from test_pure import FakeManager  # noqa: E402  (records the hints)

Q = gpuheap.Advice.QUIET


def ptr_of(t):
    return t.untyped_storage().data_ptr()


class TestOffloadOnTorch(unittest.TestCase):
    W = 64

    def setUp(self):
        torch.manual_seed(0)
        self.layers = [torch.nn.Linear(self.W, self.W) for _ in range(8)]
        self.params = {ptr_of(p) for lin in self.layers for p in lin.parameters()}
        self.rec = FakeManager()

        def info(t):  # CPU tensors stand for CUDA ones; parameters (and their views) are skipped
            p = ptr_of(t)
            return None if p in self.params or not p else (p, t.untyped_storage().nbytes())

        self.off = ght.Offload(manager=self.rec, tensor_info=info, tensor_ptr=ptr_of, stream=lambda: None,
                               min_bytes=0, keep_last=1)

    def quiet_or_ahead(self, p):
        return [c for c in self.rec.calls if (c[0] == "advise" and c[1] == p and c[2] == Q)
                or (c[0] == "prefetch_ahead" and c[1] == p)]

    def test_the_counts_are_calibrated(self):
        cal = ght._torch_alone_calibration(torch.device("cpu"))
        self.assertIsNotNone(cal, ght._ALONE_WHY.get(torch.device("cpu")))
        self.assertEqual(len(cal), 3)

    def test_held_tensors_are_never_quiet_nor_ahead(self):
        L = self.layers
        x = torch.randn(32, self.W, requires_grad=True)
        with self.off:
            h = torch.relu(L[0](x))
            kept = h  # a variable: read by the hook in backward
            h = torch.relu(L[1](h))
            view_of = torch.relu(L[2](h))
            v = view_of[:, : self.W // 2]  # a view holds its storage
            h = torch.relu(L[3](view_of))
            for lin in L[4:]:
                h = torch.relu(lin(h))
            h.register_hook(lambda g: g * (1.0 + kept.mean()))
            out = h.sum() + v.sum()
        held = {ptr_of(kept): "kept", ptr_of(view_of): "view"}
        del h, view_of
        out.backward()
        for p, name in held.items():
            self.assertEqual(self.quiet_or_ahead(p), [], name)
        quiet = [c for c in self.rec.calls if c[0] == "advise" and c[2] == Q]
        self.assertGreater(len(quiet), 0, "nothing was advised quiet: the checks above are empty")
        self.assertGreater(self.off.counters["prefetched_ahead"], 0)

    def checkpointed(self, reentrant):
        L, rec = self.layers, self.rec
        phase = {"backward": False}

        def region(a):
            if phase["backward"]:
                rec.calls.append(("mark", "recompute"))
            return torch.relu(L[3](torch.relu(L[2](a))))

        x = torch.randn(32, self.W, requires_grad=True)
        with self.off:
            h = torch.relu(L[0](x))
            h = torch.relu(L[1](h))
            inp = ptr_of(h)
            h = checkpoint(region, h, use_reentrant=reentrant)
            for lin in L[4:]:
                h = torch.relu(lin(h))
            out = h.sum()
        del h
        phase["backward"] = True
        out.backward()
        return inp

    def check_recompute_after_use(self, reentrant):
        inp = self.checkpointed(reentrant)
        calls = self.rec.calls
        at = [i for i, c in enumerate(calls) if c == ("mark", "recompute")]
        self.assertEqual(len(at), 1, calls)
        # With PyTorch 2.11 the input is advised quiet and prefetched ahead in
        # both variants (they save it through the hooks and unpack it before
        # recomputing); then a plain prefetch of it must come first.
        if self.quiet_or_ahead(inp):
            uses = [i for i, c in enumerate(calls) if c == ("prefetch", inp)]
            self.assertTrue(uses and uses[0] < at[0], calls)

    def test_checkpoint_reentrant(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the reentrant variant warns about its inputs' requires_grad
            self.check_recompute_after_use(True)

    def test_checkpoint_non_reentrant(self):
        self.check_recompute_after_use(False)

    def test_partial_grad_then_backward(self):
        """torch.autograd.grad for the last layer (retain_graph), then the
        full backward: every saved tensor is prefetched (plainly, at its
        unpack) once the backward over the whole graph has run."""
        L = self.layers
        x = torch.randn(32, self.W, requires_grad=True)
        with self.off:
            h = x
            for lin in L:
                h = torch.relu(lin(h))
            out = h.sum()
        del h
        torch.autograd.grad(out, [L[-1].weight], retain_graph=True)
        out.backward()
        advised = {c[1] for c in self.rec.calls if c[0] == "advise"}
        used = {c[1] for c in self.rec.calls if c[0] == "prefetch"}
        self.assertTrue(advised)
        self.assertLessEqual(advised, used)


if __name__ == "__main__":
    unittest.main()
