"""bench/trace_room.py: the room of a backward on traces whose answers
follow by hand (no GPU, no torch)."""
import lzma
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench import load_bench  # noqa: E402

MB = 10**6


def load():
    return load_bench("trace_room")


# One step: a forward saves A, B, C (100 MB each) and advises them cold;
# the backward uses C, then B, makes a gradient G (50 MB), prefetches A
# ahead, takes a 200 MB workspace W for a moment, then uses A. The live
# bytes fallen since the backward's start, call by call:
#   0 p C: 0     1 f C: 100   2 a G: 50    3 p B: 50    4 f B: 150
#   5 h A: 150   6 a W: -50   7 f W: 150   8 p A: 150   9 f A: 250
#  10 f G: 300, then the next step's A, B, C: 200, 100, 0.
STEP = [f"a A {100 * MB} 1 0 0", f"a B {100 * MB} 1 0 0", f"a C {100 * MB} 1 0 0",
        "c A 1 0", "c B 1 0", "c C 1 0",
        "p C 0 0", "f C 0 0", f"a G {50 * MB} 1 0 0", "p B 0 0", "f B 0 0", "h A 0 0",
        f"a W {200 * MB} 1 0 0", "f W 0 0", "p A 0 0", "f A 0 0", "f G 0 0"]
DROP = [0, 100, 50, 50, 150, 150, -50, 150, 150, 250, 300, 200, 100, 0]


class TraceRoom(unittest.TestCase):
    def setUp(self):
        self.tr = load()

    def calls(self, steps=3):
        return [line.split() for line in STEP * steps]

    def test_steps(self):
        self.assertEqual(self.tr.steps(self.calls()), [(3, 6), (20, 23), (37, 40)])

    def test_room_curve(self):
        r = self.tr.analyse(self.calls(), evicted_gb=0.1)
        self.assertEqual((r["step"], r["forward"], r["backward"], r["end"]), (1, 20, 23, 37))
        self.assertEqual(r["live0"], 300 * MB)
        self.assertEqual(r["drop"], [d * MB for d in DROP])
        # the minimum from each call on: the workspace's -50 until call 6, then the step's end
        self.assertEqual(r["keep"], [-50 * MB] * 7 + [0] * 7)

    def test_earliest_start(self):
        # A alone evicted: it may come back from call 7, after the workspace
        # is freed (at call 6 the room is -50 MB), where the trace prefetched
        # it at call 5.
        r = self.tr.analyse(self.calls(), evicted_gb=0.1)
        self.assertEqual(r["tensors"], [(100 * MB, 8, 5, 7)])
        # A and B: B (used at 3, no prefetch ahead) cannot come earlier
        # (the room at call 2 is 50 MB); A as before, in order of use.
        r = self.tr.analyse(self.calls(), evicted_gb=0.2)
        self.assertEqual(r["tensors"], [(100 * MB, 3, None, 3), (100 * MB, 8, 5, 7)])

    def test_held_room_is_shared(self):
        # A forward saves A, E, B, C (100 MB each); the backward uses C and
        # B, takes a 50 MB workspace, then uses E and A. Fallen since its
        # start: 0 p C: 0, 1 f C: 100, 2 p B: 100, 3 f B: 200, 4 a W: 150,
        # 5 p E: 150, 6 f E: 250, 7 p A: 250, ... E (used first) may come
        # back from call 1 and holds 100 MB of calls 1-4, so A, which
        # alone could too, may only from call 5.
        step = [f"a {p} {100 * MB} 1 0 0" for p in "AEBC"] + [f"c {p} 1 0" for p in "AEBC"] + [
            "p C 0 0", "f C 0 0", "p B 0 0", "f B 0 0", f"a W {50 * MB} 1 0 0",
            "p E 0 0", "f E 0 0", "p A 0 0", "f A 0 0", "f W 0 0"]
        calls = [line.split() for line in step * 3]
        r = self.tr.analyse(calls, evicted_gb=0.2)
        self.assertEqual(r["drop"][:8], [d * MB for d in (0, 100, 100, 200, 150, 150, 250, 250)])
        self.assertEqual(r["tensors"], [(100 * MB, 5, None, 1), (100 * MB, 7, None, 5)])

    def test_errors(self):
        with self.assertRaises(ValueError):
            self.tr.analyse(self.calls(1))
        with self.assertRaises(ValueError):
            self.tr.analyse(self.calls(), step=2)

    def test_reads_xz(self):
        fd, path = tempfile.mkstemp(suffix=".ghtrace.xz")
        os.close(fd)
        try:
            with lzma.open(path, "wt") as f:
                f.write("# gpuheap-trace 1 0 0 1.0 0 64\n" + "\n".join(STEP * 3) + "\n")
            self.assertEqual(self.tr.read(path), self.calls())
        finally:
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
