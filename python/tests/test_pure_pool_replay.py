"""bench/pool_replay.py: graph pool logs whose replays follow by hand (no
GPU, no torch)."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench import load_bench  # noqa: E402

MiB = 1 << 20


def load():
    return load_bench("pool_replay")


def log(*lines):
    return "".join(f"gpuheap pool: {line}\n" for line in lines)


# make_graphed_callables' shape, one module: the forward keeps its saved
# activation (0xa0) and its output (placed on 0x90, its first layer's
# output, a temporary freed before it); the backward frees the saved activation (dead there: its
# temporary) and asks for two 16 MiB weight gradients, which only a split
# could place in the freed 32 MiB blocks; a later capture asks for 32 MiB.
CALLABLES = log(
    "begin pool 0,1 (active 1, uses 1)",
    f"new 0x90 {32 * MiB} stream 0x1 pool 0,1 owner 1",
    f"new 0xa0 {32 * MiB} stream 0x1 pool 0,1 owner 1",
    "free 0x90",
    f"again 0x90 {32 * MiB} (block {32 * MiB}) stream 0x1 pool 0,1",
    "end pool 0,1 (active 0)",
    "begin pool 0,1 (active 1, uses 2)",
    f"new 0xc0 {32 * MiB} stream 0x1 pool 0,1 owner 2",
    "free 0xa0: dead in a later capture, its temporary",
    "free 0xa0",
    f"new 0xd0 {16 * MiB} stream 0x1 pool 0,1 owner 2",
    f"new 0xe0 {16 * MiB} stream 0x1 pool 0,1 owner 2",
    "free 0xc0",
    "end pool 0,1 (active 0)",
    "begin pool 0,1 (active 1, uses 3)",
    f"again 0xa0 {32 * MiB} (block {32 * MiB}) stream 0x1 pool 0,1",
    "end pool 0,1 (active 0)",
)


class TestPoolReplay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = load()
        cls.dir = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def write(self, text, name="pool.log"):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_main(self, *args):
        out, err = io.StringIO(), io.StringIO()
        argv = sys.argv
        sys.argv = ["pool_replay.py", *args]
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = self.m.main()
        finally:
            sys.argv = argv
        return rc, json.loads(out.getvalue()), err.getvalue()

    def test_rules_follow_the_log(self):
        rc, r, err = self.run_main(self.write(CALLABLES), "--check")
        self.assertEqual(rc, 0, err)
        self.assertEqual(r["requests"], 7)
        self.assertEqual(r["rules"]["choices_unlike_log"], 0)
        # 0x90, 0xa0, 0xc0 (32 MiB) and 0xd0, 0xe0 (16 MiB)
        self.assertEqual(r["rules"]["pool_bytes"], 128 * MiB)
        self.assertEqual(r["rules"]["segments"], 5)

    def test_split_places_the_gradients_in_freed_blocks(self):
        rc, r, _ = self.run_main(self.write(CALLABLES))
        self.assertEqual(rc, 0)
        # the two 16 MiB gradients split 0xa0 (freed in the backward before
        # them); 0xc0, freed at the end, serves the last capture's 32 MiB
        self.assertEqual(r["split"]["pool_bytes"], 96 * MiB)
        self.assertEqual(r["split"]["segments"], 3)
        self.assertEqual(r["split"]["held_bytes"], r["rules"]["held_bytes"])

    def test_split_pieces_merge_back(self):
        text = log(
            "begin pool 0,1 (active 1, uses 1)",
            f"new 0xa0 {32 * MiB} stream 0x1 pool 0,1 owner 1",
            "free 0xa0",
            f"new 0xb0 {16 * MiB} stream 0x1 pool 0,1 owner 1",
            f"new 0xc0 {16 * MiB} stream 0x1 pool 0,1 owner 1",
            "free 0xb0",
            "free 0xc0",
            f"again 0xa0 {32 * MiB} (block {32 * MiB}) stream 0x1 pool 0,1",
            "end pool 0,1 (active 0)")
        _, r, _ = self.run_main(self.write(text))
        self.assertEqual(r["split"]["pool_bytes"], 32 * MiB)  # split in two, merged, taken whole
        self.assertEqual(r["rules"]["pool_bytes"], 64 * MiB)

    def test_other_streams_and_kept_blocks_are_not_taken(self):
        text = log(
            "begin pool 0,1 (active 1, uses 1)",                  # a warm-up
            f"new 0x90 {32 * MiB} stream 0x1 pool 0,1 owner 0",   # an input copy: held at the capture's start
            "end pool 0,1 (active 0)",
            "begin pool 0,1 (active 1, uses 2)",
            f"new 0xa0 {32 * MiB} stream 0x1 pool 0,1 owner 2",   # the graph's output: held at its end
            f"new 0xb0 {32 * MiB} stream 0x2 pool 0,1 owner 2",
            "free 0xb0",                                           # a temporary of stream 0x2
            "end pool 0,1 (active 0)",
            "free 0x90",                                           # the input: stays the graph's
            "free 0xa0",                                           # the output, dropped after: the same
            "begin pool 0,1 (active 1, uses 3)",
            f"new 0xc0 {16 * MiB} stream 0x1 pool 0,1 owner 3",
            f"new 0xd0 {16 * MiB} stream 0x1 pool 0,1 owner 3",
            f"new 0xe0 {16 * MiB} stream 0x1 pool 0,1 owner 3",
            "end pool 0,1 (active 0)")
        rc, r, err = self.run_main(self.write(text), "--check")
        self.assertEqual(rc, 0, err)
        self.assertEqual(r["rules"]["pool_bytes"], 144 * MiB)
        self.assertEqual(r["split"]["pool_bytes"], 144 * MiB)  # 0x90, 0xa0 and 0xb0 untouched

    def test_a_choice_unlike_the_log_is_reported(self):
        text = CALLABLES.replace(f"again 0xa0 {32 * MiB} (block {32 * MiB}) stream 0x1 pool 0,1",
                                 f"new 0xf0 {32 * MiB} stream 0x1 pool 0,1 owner 3")
        rc, r, err = self.run_main(self.write(text, "unlike.log"), "--check")
        self.assertEqual(rc, 1)
        self.assertEqual(r["rules"]["choices_unlike_log"], 1)
        self.assertIn("new 0xf0", err)

    def test_older_rules(self):
        # without 2f9e9c4 the saved activation stays the forward's: the
        # last capture's 32 MiB is a new block; with GPUHEAP_POOL_SHARE=0
        # the backward's temporary 0xc0 stays its graph's too
        _, r, _ = self.run_main(self.write(CALLABLES))
        self.assertEqual(r["before_2f9e9c4"]["pool_bytes"], 128 * MiB)
        self.assertEqual(r["before_2f9e9c4"]["segments"], 5)  # 0xc0 serves the last capture
        self.assertEqual(r["keep"]["pool_bytes"], 160 * MiB)
        rc, r, err = self.run_main(self.write(CALLABLES), "--check", "keep")
        self.assertEqual((rc, r["keep"]["choices_unlike_log"]), (1, 1))  # the log's last "again" is the rules'
        self.assertIn("keep made another choice", err)

    def test_warm_ups_and_freed_outputs(self):
        # CUDA graph trees' shape: an output dropped after its graph stays
        # its graph's; a block only a warm-up used goes to anything. The
        # outputs policy gives the output to the later capture
        text = log(
            "begin pool 0,1 (active 1, uses 1)",
            f"new 0xa0 {32 * MiB} stream 0x1 pool 0,1 owner 1",
            "end pool 0,1 (active 0)",
            "free 0xa0 (no capture)",
            "begin pool 0,1 (active 1, uses 2)",
            f"new 0xb0 {32 * MiB} stream 0x1 pool 0,1 owner 0",
            "free 0xb0 (no capture)",
            "end pool 0,1 (active 0)",
            "begin pool 0,1 (active 1, uses 3)",
            f"again 0xb0 {32 * MiB} (block {32 * MiB}) stream 0x1 pool 0,1",
            f"new 0xc0 {32 * MiB} stream 0x1 pool 0,1 owner 3",
            "end pool 0,1 (active 0)")
        rc, r, err = self.run_main(self.write(text, "warm.log"), "--check")
        self.assertEqual(rc, 0, err)
        self.assertEqual(r["rules"]["pool_bytes"], 96 * MiB)
        self.assertEqual(r["outputs"]["pool_bytes"], 64 * MiB)  # 0xa0, then 0xb0, to the last capture
        rc, r, err = self.run_main(self.write(text, "warm.log"), "--check", "outputs")
        self.assertEqual((rc, r["outputs"]["choices_unlike_log"]), (1, 2))

    def test_logs_it_cannot_read_are_refused(self):
        text = log("begin pool 0,1 (active 1, uses 1)", f"new 0xa0 {MiB} stream 0x1 pool 0,1")  # no owner
        with self.assertRaises(SystemExit):
            self.run_main(self.write(text, "old.log"))
        text = log(f"new 0xa0 {MiB} stream 0x1 pool 0,1 owner 1")  # no begin
        with self.assertRaises(SystemExit):
            self.run_main(self.write(text, "nobegin.log"))


if __name__ == "__main__":
    unittest.main()
