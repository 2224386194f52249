"""bench/plan_model.py: the model on traces whose answers follow by hand
(no GPU, no torch)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench import load_bench  # noqa: E402

MIB = 1 << 20


def load():
    return load_bench("plan_model")


class PlanModel(unittest.TestCase):
    def setUp(self):
        self.pm = load()
        self.paths = []

    def tearDown(self):
        for p in self.paths:
            os.unlink(p)

    def trace(self, step, steps=20):
        """A trace of `steps` steps; step(i) gives a step's lines."""
        fd, path = tempfile.mkstemp(suffix=".ghtrace")
        self.paths.append(path)
        with os.fdopen(fd, "w") as f:
            f.write("# gpuheap-trace 1 0 0 1.000000 0 64\n")
            for i in range(steps):
                f.write(step(i))
        return path

    def per_step(self, path, budget, policy, chunk=0):
        sizes = [(int(w[2]) + self.pm.FRAME - 1) // self.pm.FRAME for w in self.pm.read(path) if w[0] == "a"]
        p = self.pm.period_of(sizes)
        marks = self.pm.run(path, budget, policy, p, chunk)
        (m0, u0, e0, r0), (m1, u1, e1, r1) = marks[2], marks[-1]
        k = len(marks) - 3
        return p, (m1 - m0) / k, (u1 - u0) / k, (e1 - e0) / k, (r1 - r0) / k

    def test_cached_prefix_is_reused(self):
        # A (2 frames) then C (3), each freed before the next, budget 4:
        # after the first step A takes the first two of C's cached frames,
        # and C finds A's two and its own third together: nothing mapped.
        path = self.trace(lambda i: f"a {0x1000 + i:x} {4 * MIB} 1 0 0\nf {0x1000 + i:x} 0 0\n"
                                    f"a {0x9000 + i:x} {6 * MIB} 1 0 0\nf {0x9000 + i:x} 0 0\n")
        for policy in ("first-lru", "overlap-lru"):
            for chunk in (0, 1):
                self.assertEqual(self.per_step(path, 4, policy, chunk), (2, 0, 0, 0, 0), (policy, chunk))

    def test_cold_tensor_evicted_and_restored(self):
        # A (2 frames, advised cold), B (3), then C (1) on a budget of 5:
        # C's frame evicts A whole; B and C freed; A prefetched back. Each
        # step moves A's two frames out and back, whatever the placement.
        path = self.trace(lambda i: f"a {0x1000 + i:x} {4 * MIB} 1 0 0\nc {0x1000 + i:x} 1 0\n"
                                    f"a {0x5000 + i:x} {6 * MIB} 1 0 0\na {0x9000 + i:x} {2 * MIB} 1 0 0\n"
                                    f"f {0x5000 + i:x} 0 0\nf {0x9000 + i:x} 0 0\n"
                                    f"p {0x1000 + i:x} 0 0\nf {0x1000 + i:x} 0 0\n")
        for policy in ("first-lru", "overlap-lru"):
            for chunk in (0, 1):
                p, _, _, evicted, restored = self.per_step(path, 5, policy, chunk)
                self.assertEqual((p, evicted, restored), (3, 2, 2), (policy, chunk))

    def test_period(self):
        self.assertEqual(self.pm.period_of([2, 3] * 20), 2)
        self.assertEqual(self.pm.period_of(list(range(40))), 0)


if __name__ == "__main__":
    unittest.main()
