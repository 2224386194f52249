"""Replay a CUDA graph pool log (GPUHEAP_POOL_LOG=1's lines on stderr) under
gpuheap's pool rules and under a variant that splits freed blocks, and
print each one's pool bytes: what splitting would save a program before it
is built (bench/NOTES.md, host side, row 143).

  python3 bench/pool_replay.py LOG [--pool ID] [--torch-dump FILE] [--check [POLICY]]

LOG: a file of the program's stderr (plain, .gz or .xz); only lines
starting "gpuheap pool: " are read. A begin is a capture where one of its
allocations was logged as made in a capture, else a warm-up (CUDA graph
trees allocate to their pool with no capture underway: warm-ups and
input copies); a free while a capture's begin is underway is taken to be
in that capture (the log does not say).

Policies, each over the log's requests (sizes, streams, frees, begins,
ends) with its own placement:
  rules  host/adapters_torch.cc's: a freed block goes again to a request of
         its stream from its size less a fifth to its size, in its capture,
         and after the capture's end to any capture if it was a temporary
         (made or given and freed in the capture, or kept by an earlier
         graph and dead in this one, in a pool with no warm-up); blocks held
         when a capture began or ended (inputs, outputs) stay that graph's
  split  the same, but where no block fits so, a request over 1 MiB takes
         the smallest freed block of its stream it may take that leaves at
         least 1 MiB, split there (the rest a freed block of the same
         segment); adjacent freed blocks of one segment with the same owner
         merge; the pool's bytes are its segments'
  outputs  the rules, and an output (a block a capture made or was given
         and held at its end) that the program frees with no capture
         underway after that end, or whose adoption is given up, goes to
         later captures (not to warm-ups), as PyTorch's pools give it.
         Not the library's: at device visit 38 it made gpu_edges.py's
         compile_mid compute wrong gradients (bench/results/logs-visit38/)
  outputs_warm  outputs, and to warm-ups too
  before_2f9e9c4  the rules without 2f9e9c4's (a block an earlier graph
         kept stays its graph's wherever it is freed): visit 36's
  keep   GPUHEAP_POOL_SHARE=0: every block a capture used stays its graph's

--check [POLICY]: that policy (rules unless named; keep for a log made
with GPUHEAP_POOL_SHARE=0, outputs for device visit 38's trees log)
must make the log's own choices (each "new" a new block, each "again" the
block logged); exits 1 where it does not. Adoptions (CUDA graph trees'
checkpoint restores: "adopt:", "unadopt") take a block out of reach until
given up, as the library does.
--torch-dump: bench/graph_pools.py --dump's file from PyTorch's allocator:
its pool segments' bytes, for comparison."""
import argparse
import gzip
import json
import lzma
import re
import sys

MiB = 1 << 20
LINE = re.compile(r"gpuheap pool: (\w+:?) (.*)$")


def open_log(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt")
    if path.endswith(".xz"):
        return lzma.open(path, "rt")
    return open(path)


def events(path):
    """The log as (kind, fields) tuples: begin/end/release (pool), new/again
    (ptr, want, stream, pool[, block]), free (ptr), record (ptr). Each
    begin's fields say whether it is a capture (see the module's text)."""
    out = []
    with open_log(path) as f:
        for line in f:
            m = LINE.search(line)
            if not m:
                continue
            kind, rest = m.groups()
            w = rest.split()
            if kind in ("begin", "end"):
                out.append((kind, {"pool": w[1]}))
            elif kind == "release":  # "release pool ID (uses N)": the last use goes at N = 1
                out.append((kind, {"pool": w[1], "last": w[3].rstrip(")") == "1"}))
            elif kind == "new":  # owner 0: made with no capture underway
                if len(w) < 8:
                    raise SystemExit("pool_replay: a log without blocks' owners (before f024ed1): "
                                     "warm-ups cannot be told from captures")
                out.append(("new", {"ptr": w[0], "want": int(w[1]), "stream": w[3], "pool": w[5],
                                    "warm": w[7] == "0"}))
            elif kind == "again":
                out.append(("again", {"ptr": w[0], "want": int(w[1]), "block": int(w[3].rstrip(")")),
                                      "stream": w[5], "pool": w[7], "warm": "(no capture)" in rest}))
            elif kind == "free" and not w[0].endswith(":"):
                # whether a capture was underway on its stream: "(no capture)"
                # or "(capture)" since 75c6a32's logs, unknown (None) before
                flag = False if "(no capture)" in rest else True if "(capture)" in rest else None
                out.append(("free", {"ptr": w[0], "capturing": flag}))
            elif kind == "adopt:":  # a checkpoint restore's "adopt: PTR (state)" or "adopt: PTR given up"
                out.append(("give_up" if "given up" in rest else "adopt", {"ptr": w[0]}))
            elif kind == "unadopt":
                out.append(("give_up", {"ptr": w[0]}))
            elif kind == "record_stream":
                out.append(("record", {"ptr": w[0]}))
    underway = {}  # pool -> its begins' fields, oldest first
    for kind, f in out:
        if kind == "begin":
            f["capture"] = False
            underway.setdefault(f["pool"], []).append(f)
        elif kind == "end" and underway.get(f["pool"]):
            underway[f["pool"]].pop(0)
        elif kind in ("new", "again") and not f["warm"] and underway.get(f["pool"]):
            underway[f["pool"]][0]["capture"] = True
    return out


class Block:
    def __init__(self, seg, off, size, stream, pool):
        self.seg, self.off, self.size, self.stream, self.pool = seg, off, size, stream, pool
        self.held, self.owner, self.kept, self.shared = True, 0, False, False
        self.captures_only = False  # (outputs) freed by the program after its graph's end
        self.adopted = False        # a checkpoint restore's storage over it
        self.input = False          # held when the capture that keeps it began


class Pools:
    """One policy's pools. alloc() returns a block; free() takes one."""

    def __init__(self, split=False, share=True, dead_later=True, outputs=None):
        self.split, self.share, self.dead_later, self.outputs = split, share, dead_later, outputs
        self.blocks = []          # every block, freed or not
        self.reusable = {}        # freed blocks that may go again -> the order they became so
        self.seq = 0
        self.begins = {}          # pool -> [(serial, capture), ...] underway
        self.serial = 0
        self.segments = {}        # segment id -> bytes
        self.warmed = set()       # pools allocated to with no capture underway

    def first(self, pool):
        """The oldest begin of pool underway: (serial, capture), or (0, False)."""
        active = self.begins.get(pool)
        return active[0] if active else (0, False)

    def own_held(self, pool, serial, start=False):
        for b in self.blocks:
            if b.pool == pool and (b.held or b.adopted) and b.owner in (0, serial):
                if start or not b.kept:
                    b.input = start
                b.owner, b.kept = serial, True

    def begin(self, pool, capture=True):
        self.serial += 1
        self.begins.setdefault(pool, []).append((self.serial, capture))
        if capture:
            self.own_held(pool, self.serial, start=True)

    def end(self, pool):
        serial, capture = self.begins[pool].pop(0)
        if not capture:
            return
        self.own_held(pool, serial)
        for b in list(self.reusable):
            if b.pool == pool and b.owner == serial:
                if b.kept or not self.share:
                    del self.reusable[b]
                else:
                    b.owner = 0
        self.merge_all()

    def may_take(self, b, pool, stream, serial):
        """serial: the capture asking, 0 for a warm-up."""
        if b.captures_only and not serial:
            return False
        return b.pool == pool and b.stream == stream and (b.owner == 0 or b.owner == serial != 0)

    def alloc(self, pool, want, stream):
        serial, capture = self.first(pool)
        if not capture:
            serial = 0
            self.warmed.add(pool)
        fits = [b for b in self.reusable if self.may_take(b, pool, stream, serial) and want <= b.size <= want + want // 4]
        if fits:
            b = min(fits, key=lambda b: (b.size, self.reusable[b]))
        elif self.split and want > MiB:
            room = [b for b in self.reusable if self.may_take(b, pool, stream, serial) and b.size >= want + MiB]
            if not room:
                return self.new(pool, want, stream, serial)
            b = min(room, key=lambda b: (b.size, self.reusable[b]))
            take = -(-want // 512) * 512
            rest = Block(b.seg, b.off + take, b.size - take, stream, pool)
            rest.held, rest.owner = False, b.owner
            self.blocks.append(rest)
            self.keep(rest)
            b.size = take
        else:
            return self.new(pool, want, stream, serial)
        del self.reusable[b]
        b.held, b.captures_only = True, False
        if serial:
            b.owner = serial
        return b

    def keep(self, b):
        self.seq += 1
        self.reusable[b] = self.seq

    def new(self, pool, want, stream, serial):
        seg = len(self.segments)
        self.segments[seg] = want
        b = Block(seg, 0, want, stream, pool)
        b.owner = serial
        self.blocks.append(b)
        return b

    def release(self, pool):
        """pool's last use gone: its freed blocks given back, the rest
        retired as they are freed (a later pool of that id is another)."""
        self.begins.pop(pool, None)
        self.warmed.discard(pool)
        for b in self.blocks:
            if b.pool == pool:
                self.reusable.pop(b, None)
                b.pool = ("released", pool)

    def free(self, b, capturing=None):
        """capturing: whether a capture was underway on the freeing stream
        (None where the log does not say: then its pool's oldest begin
        underway says, and another pool's capture where it has none)."""
        b.held = False
        if isinstance(b.pool, tuple):  # its pool is gone: retired
            return
        serial, capture = self.first(b.pool)
        if capturing and serial and not capture:  # the capture seen at a free
            self.begins[b.pool][0] = (serial, True)
            self.own_held(b.pool, serial, start=True)
            capture = True
        active = [s for s, _ in self.begins.get(b.pool, [])]
        if capturing is None:
            elsewhere = not capture and any(c for begins in self.begins.values() for _, c in begins)
        else:
            elsewhere, capture = capturing and not capture, capturing and capture
        if elsewhere:  # in another pool's capture (the log has one stream): neither rule
            pass
        elif capture:
            if b.owner == 0:
                b.owner = serial
            elif (b.owner != serial and b.kept and self.share and self.dead_later
                  and b.pool not in self.warmed):
                b.owner, b.kept = serial, False
        elif not b.adopted:
            self.dead_output(b)
        if not b.adopted:
            self.done(b)

    def dead_output(self, b):
        active = [s for s, _ in self.begins.get(b.pool, [])]
        if self.outputs and b.kept and not b.input and b.owner not in active:
            b.owner, b.kept, b.captures_only = 0, False, self.outputs == "captures"

    def done(self, b):
        """b, neither held nor adopted: kept for reuse where it may go again."""
        active = [s for s, _ in self.begins.get(b.pool, [])]
        if not b.shared and (b.owner == 0 or b.owner in active):
            self.keep(b)
            self.merge_all()

    def adopt(self, b):
        self.reusable.pop(b, None)
        b.adopted = True

    def give_up(self, b):
        b.adopted = False
        if b.held or isinstance(b.pool, tuple):
            return
        if not any(self.begins.values()):  # (no capture of any pool underway)
            self.dead_output(b)
        self.done(b)

    def merge_all(self):
        if not self.split:
            return
        by_seg = {}
        for b in self.reusable:
            by_seg.setdefault(b.seg, []).append(b)
        for parts in by_seg.values():
            parts.sort(key=lambda b: b.off)
            for a, c in zip(parts, parts[1:]):
                if a in self.reusable and a.off + a.size == c.off and a.owner == c.owner and a.stream == c.stream:
                    c.off, c.size = a.off, a.size + c.size
                    del self.reusable[a]
                    self.blocks.remove(a)

    def bytes(self):
        return sum(self.segments.values())


POLICIES = {"rules": {}, "split": {"split": True}, "outputs": {"outputs": "captures"},
            "outputs_warm": {"outputs": "all"}, "before_2f9e9c4": {"dead_later": False},
            "keep": {"share": False, "dead_later": False}}


def replay(evs, policy, check=False):
    """One policy of POLICIES over the events; (its Pools, how many choices
    differed from the log's)."""
    P = Pools(**POLICIES[policy])
    live = {}  # the log's pointer -> this policy's block
    bad = 0
    for kind, f in evs:
        if kind == "begin":
            P.begin(f["pool"], f.get("capture", True))
        elif kind == "end":
            P.end(f["pool"])
        elif kind == "release" and f["last"]:
            P.release(f["pool"])
        elif kind in ("new", "again"):
            if not P.begins.get(f["pool"]):
                raise SystemExit(f"pool_replay: pool {f['pool']}: an allocation with no begin underway")
            n = len(P.segments)
            b = P.alloc(f["pool"], f["want"], f["stream"])
            if check:
                made = len(P.segments) > n
                if (kind == "new") != made or (kind == "again" and live.get(("was", f["ptr"])) is not b):
                    bad += 1
                    print(f"pool_replay: {kind} {f['ptr']} {f['want']}: {policy} made another choice", file=sys.stderr)
            live[f["ptr"]] = b
            live[("was", f["ptr"])] = b
        elif kind == "free" and f["ptr"] in live:
            P.free(live.pop(f["ptr"]), f.get("capturing"))
        elif kind == "record" and f["ptr"] in live:
            live[f["ptr"]].shared = True
        elif kind in ("adopt", "give_up") and ("was", f["ptr"]) in live:
            getattr(P, kind)(live[("was", f["ptr"])])
    return P, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--torch-dump", metavar="FILE")
    ap.add_argument("--check", nargs="?", const="rules", choices=sorted(POLICIES), metavar="POLICY")
    ap.add_argument("--pool", metavar="ID", help="only this pool's events (its id as the log writes it, e.g. 0,1)")
    a = ap.parse_args()
    evs = events(a.log)
    if a.pool:
        evs = [e for e in evs if e[1].get("pool", a.pool) == a.pool]
    r = {"requests": sum(k in ("new", "again") for k, _ in evs), "logged_new": sum(k == "new" for k, _ in evs)}
    for name in POLICIES:
        P, bad = replay(evs, name, a.check == name)
        r[name] = {"pool_bytes": P.bytes(), "segments": len(P.segments),
                   "held_bytes": sum(b.size for b in P.blocks if b.held)}
        if a.check == name:
            r[name]["choices_unlike_log"] = bad
    if a.torch_dump:
        with open(a.torch_dump) as f:
            segs = [s for s in json.load(f)["segments"] if tuple(s["pool"]) != (0, 0)]
        r["torch"] = {"pool_bytes": sum(s["total_size"] for s in segs), "segments": len(segs)}
    print(json.dumps(r))
    return 1 if a.check and r[a.check]["choices_unlike_log"] else 0


if __name__ == "__main__":
    sys.exit(main())
