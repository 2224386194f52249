#!/usr/bin/env python3
"""plan_model: a frame-level model of the tensor manager's device tier, run
over a recorded trace (GPUHEAP_TRACE), to estimate what a placement planned
from the previous step would save before building it (bench/NOTES.md, host
side, row 59).

    python3 bench/plan_model.py TRACE [--budget-mib 706] [--policy all] [--chunk C]

The model keeps only what decides the device tier's page-table work:
tensors of at least 1 MiB (runs of 2 MiB frames; smaller ones live in slabs
and are left out), a device budget in frames, and per virtual frame whether
it is free, cached (device memory still mapped, no tensor) or a tensor's
(on the device or the host). A tensor's frames are mapped one by one (no
allocations, no chunks: the real manager maps whole allocations, so its
counts are higher), frees are immediate (no events), evictions take cold
tensors whole, oldest advice first, and prefetches bring a tensor back at
once. Device room comes from memory mapped nowhere, then from cached frames
(released: unmapped), then from evictions.

Policies (how a run gets its addresses, which cached frames go first):
  first-lru   the shortest cached range it fits (its prefix, as the
              manager's cache takes one), else first fit of free
              addresses; cached frames released oldest first. Close to the
              manager today.
  memo-lru    request i of a step takes the addresses request i of the
              previous step had (the period of run sizes is learnt as the
              manager's row-53 patch does) when they hold no tensor now;
              else as first-lru.
  memo-next   memo-lru, and cached frames released by their next planned
              use (the frame the memo gives a request furthest ahead goes
              first).
  overlap-lru the free window with the most cached frames in it (no plan).

--chunk C: the same at the manager's granularity (ChunkModel): runs start
on slots of C frames and a chunk reuses a cached allocation only of its
own size at its own slot (policies first-lru and overlap-lru).

Printed per step (the trace's steps after the first two periods): device
frames mapped and unmapped (a page-table entry each), frames evicted and
restored. A model, not the manager: compare the policies with each other.
"""
import argparse
import collections
import sys

FRAME = 2 << 20
SMALL = 1 << 20


def read(path):
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            w = line.split()
            if w:
                yield w


def period_of(sizes, match=32):
    """Smallest p such that the last max(p, match) sizes repeat the p before."""
    n = len(sizes)
    for p in range(1, n // 2 + 1):
        w = max(p, match)
        if w + p > n:
            break
        if all(sizes[n - i] == sizes[n - i - p] for i in range(1, w + 1)):
            return p
    return 0


class Advice:
    """Cold advice, kept in advice order (evictions take the oldest first)."""

    def advise(self, tid, cold):
        self.cold.pop(tid, None)
        if cold:
            self.cold[tid] = True


class Model(Advice):
    def __init__(self, budget, policy, period, va=1 << 16):
        self.B = budget
        self.policy = policy
        self.P = period
        self.va_n = va
        self.owner = [None] * va      # tensor id or None
        self.backing = [0] * va       # 0 none, 1 device, 2 host
        self.cached = collections.OrderedDict()  # frame -> True, oldest first
        self.dev_used = 0             # device frames backing something
        self.t = {}                   # id -> (v0, n)
        self.cold = collections.OrderedDict()   # id -> True, advice order
        self.memo = {}                # request index in the step -> v0
        self.req = 0
        self.maps = self.unmaps = self.evicted = self.restored = 0
        self.top = 0                  # highest frame used + 1

    # -- addresses
    def fits_free(self, v0, n):
        return v0 + n <= self.va_n and all(self.owner[v] is None for v in range(v0, v0 + n))

    def overlap_fit(self, n):
        """The window of n frames holding no tensor with the most cached
        frames in it (lowest address among equals); first fit when none has
        any."""
        hi = min(self.va_n, self.top + n + 1)
        best, best_c = None, 0
        v = 0
        while v < hi:
            if self.owner[v] is not None:
                v += 1
                continue
            e = v
            while e < hi and self.owner[e] is None:
                e += 1
            if e - v >= n:  # a free stretch [v, e): slide a window over it
                c = sum(1 for x in range(v, v + n) if self.backing[x] == 1)
                for s0 in range(v, e - n + 1):
                    if s0 > v:
                        c += (self.backing[s0 + n - 1] == 1) - (self.backing[s0 - 1] == 1)
                    if c > best_c:
                        best, best_c = s0, c
            v = e
        return best if best is not None else self.first_fit(n)

    def first_fit(self, n):
        """The shortest cached range of at least n frames (its first n taken:
        frame by frame a prefix wastes nothing, the manager's n / 4 rule
        always holds); else first fit of unowned, unbacked frames."""
        best = None
        runs = sorted(self.cached)  # cached ranges: runs of consecutive frames
        i = 0
        while i < len(runs):
            j = i
            while j + 1 < len(runs) and runs[j + 1] == runs[j] + 1:
                j += 1
            length = j - i + 1
            if length >= n and (best is None or length < best[1]):
                best = (runs[i], length)
            i = j + 1
        if best:
            return best[0]
        v = 0
        while v + n <= self.va_n:
            k = 0
            while k < n and self.owner[v + k] is None and self.backing[v + k] == 0:
                k += 1
            if k == n:
                return v
            v += k + 1
        raise RuntimeError("virtual range full")

    # -- device room
    def next_use(self, f):
        """Requests ahead until the memo gives frame f to one (P + 1: none)."""
        for d in range(1, self.P + 1):
            i = (self.req + d - 1) % self.P
            v0n = self.memo.get(i)
            if v0n and v0n[0] <= f < v0n[0] + v0n[1]:
                return d
        return self.P + 1

    def room(self, k, keep):
        """Make device room for k more frames (keep: a tensor id not to evict)."""
        while self.dev_used + k > self.B and self.cached:
            if self.policy == "memo-next" and self.P:
                f = max(self.cached, key=self.next_use)
            else:
                f = next(iter(self.cached))
            del self.cached[f]
            self.backing[f] = 0
            self.dev_used -= 1
            self.unmaps += 1
        for tid in list(self.cold):
            if self.dev_used + k <= self.B:
                break
            if tid == keep:
                continue
            self.evict(tid)
        return self.dev_used + k <= self.B

    def evict(self, tid):
        v0, n = self.t[tid]
        for v in range(v0, v0 + n):
            if self.backing[v] == 1:
                self.backing[v] = 2
                self.dev_used -= 1
                self.unmaps += 1
                self.evicted += 1
        self.cold.pop(tid, None)

    # -- calls
    def alloc(self, tid, n):
        v0 = None
        i = self.req % self.P if self.P else None
        if self.policy.startswith("memo") and i is not None and i in self.memo:
            m0, mn = self.memo[i]
            if mn == n and self.fits_free(m0, n):
                v0 = m0
        if v0 is None:
            v0 = self.overlap_fit(n) if self.policy.startswith("overlap") else self.first_fit(n)
        self.top = max(self.top, v0 + n)
        if i is not None:
            self.memo[i] = (v0, n)
        self.req += 1
        need = sum(1 for v in range(v0, v0 + n) if self.backing[v] != 1)
        for v in range(v0, v0 + n):  # its cached frames are its own now
            self.cached.pop(v, None)
        for v in range(v0, v0 + n):
            self.owner[v] = tid
        self.t[tid] = (v0, n)
        self.room(need, tid)
        for v in range(v0, v0 + n):
            if self.backing[v] != 1:
                if self.dev_used < self.B:
                    self.backing[v] = 1
                    self.dev_used += 1
                    self.maps += 1
                else:
                    self.backing[v] = 2  # placed in host memory

    def free(self, tid):
        v0, n = self.t.pop(tid)
        self.cold.pop(tid, None)
        for v in range(v0, v0 + n):
            self.owner[v] = None
            if self.backing[v] == 1:
                self.cached[v] = True
            else:
                self.backing[v] = 0

    def prefetch(self, tid):
        self.cold.pop(tid, None)
        v0, n = self.t[tid]
        need = [v for v in range(v0, v0 + n) if self.backing[v] == 2]
        if not need:
            return
        self.room(len(need), tid)
        for v in need:
            if self.dev_used >= self.B:
                break
            self.backing[v] = 1
            self.dev_used += 1
            self.maps += 1
            self.restored += 1


def run(path, budget, policy, period, chunk=0):
    m = ChunkModel(budget, policy, chunk) if chunk else Model(budget, policy, period)
    ids = {}
    nid = 0
    runs_seen = 0
    marks = []
    for w in read(path):
        op = w[0]
        if op == "a" and int(w[-1]) == 0:
            n_bytes = int(w[2])
            if n_bytes < SMALL:
                continue
            nid += 1
            ids[w[1]] = nid
            m.alloc(nid, (n_bytes + FRAME - 1) // FRAME)
            runs_seen += 1
            if period and runs_seen % period == 0:
                marks.append((m.maps, m.unmaps, m.evicted, m.restored))
        elif op == "f" and w[1] in ids:
            m.free(ids.pop(w[1]))
        elif op == "c" and w[1] in ids:
            m.advise(ids[w[1]], int(w[2]) != 0)
        elif op in ("p", "h") and w[1] in ids:
            m.prefetch(ids[w[1]])
        elif op == "e" and w[1] in ids:
            m.evict(ids[w[1]])
    return marks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--budget-mib", type=int, default=706)
    ap.add_argument("--policy", default="all", choices=["all", "first-lru", "memo-lru", "memo-next", "overlap-lru"])
    ap.add_argument("--chunk", type=int, default=0, help="frames an allocation (0: frame by frame); with it, "
                    "the policies first-lru and overlap-lru only")
    a = ap.parse_args()
    sizes = [(int(w[2]) + FRAME - 1) // FRAME for w in read(a.trace)
             if w[0] == "a" and int(w[-1]) == 0 and int(w[2]) >= SMALL]
    p = period_of(sizes)
    print(f"plan_model: {len(sizes)} run requests, period {p}, budget {a.budget_mib} MiB")
    pols = ["first-lru", "memo-lru", "memo-next", "overlap-lru"] if not a.chunk else ["first-lru", "overlap-lru"]
    for pol in (pols if a.policy == "all" else [a.policy]):
        marks = run(a.trace, a.budget_mib * (1 << 20) // FRAME, pol, p, a.chunk)
        if len(marks) < 4:
            print(f"{pol}: too few steps")
            continue
        (m0, u0, e0, r0), (m1, u1, e1, r1) = marks[2], marks[-1]
        k = len(marks) - 3
        print(f"{pol:10s} per step: device frames mapped {(m1 - m0) / k:7.1f}, unmapped {(u1 - u0) / k:7.1f}, "
              f"evicted {(e1 - e0) / k:6.1f}, restored {(r1 - r0) / k:6.1f} ({k} steps)")
    return 0



class ChunkModel(Advice):
    """The same at the manager's granularity: addresses in slots of c frames
    (tensors start on a slot), a tensor's chunk i an allocation of
    min(c, n - i c) frames at slot s + i, a cached slot reusable only by a
    chunk of its allocation's size. Policies first-lru (the cache's n / 4
    rule over whole cached runs, else the lowest free slots) and
    overlap-lru (the free window of slots whose cached allocations serve
    the most of its chunks)."""

    def __init__(self, budget, policy, c, slots=1 << 13):
        self.B, self.policy, self.c, self.S = budget, policy, c, slots
        self.owner = [None] * slots
        self.size = [0] * slots       # frames of the allocation mapped there (0: none)
        self.dev = [False] * slots    # ... device memory (else host, for a tensor's)
        self.cached = collections.OrderedDict()  # slot -> True, oldest first
        self.dev_used = 0
        self.t = {}
        self.cold = collections.OrderedDict()
        self.maps = self.unmaps = self.evicted = self.restored = 0
        self.top = 0

    def need(self, n):
        c = self.c
        return [min(c, n - i * c) for i in range((n + c - 1) // c)]

    def place(self, n):
        k = self.need(n)
        best, best_r = None, -1
        hi = min(self.S, self.top + len(k) + 1)
        for s0 in range(0, hi - len(k) + 1):
            if any(self.owner[s0 + i] is not None for i in range(len(k))):
                continue
            r = sum(k[i] for i in range(len(k)) if s0 + i in self.cached and self.size[s0 + i] == k[i])
            if self.policy == "first-lru":
                # a cached run it fits whole (all its slots cached, right sizes), else the lowest free window
                whole = all(s0 + i in self.cached and self.size[s0 + i] == k[i] for i in range(len(k)))
                if whole:
                    return s0
                if best is None and all(self.size[s0 + i] == 0 for i in range(len(k))):
                    best = s0
                continue
            if r > best_r:
                best, best_r = s0, r
        if best is None:
            raise RuntimeError("slots full")
        return best

    def room(self, k, keep):
        while self.dev_used + k > self.B and self.cached:
            s = next(iter(self.cached))
            del self.cached[s]
            self.unmaps += self.size[s]
            self.dev_used -= self.size[s]
            self.size[s] = 0
        for tid in list(self.cold):
            if self.dev_used + k <= self.B:
                break
            if tid != keep:
                self.evict(tid)

    def evict(self, tid):
        s0, k = self.t[tid]
        for i, f in enumerate(k):
            if self.dev[s0 + i]:
                self.dev[s0 + i] = False
                self.dev_used -= f
                self.unmaps += f
                self.evicted += f
        self.cold.pop(tid, None)

    def alloc(self, tid, n):
        k = self.need(n)
        s0 = self.place(n)
        self.top = max(self.top, s0 + len(k))
        fresh = []
        for i, f in enumerate(k):
            s = s0 + i
            self.owner[s] = tid
            if s in self.cached and self.size[s] == f:
                del self.cached[s]  # reused as it is
                continue
            if s in self.cached:  # another size: unmapped
                del self.cached[s]
                self.unmaps += self.size[s]
                self.dev_used -= self.size[s]
            self.size[s] = 0
            fresh.append((s, f))
        self.t[tid] = (s0, k)
        self.room(sum(f for _, f in fresh), tid)
        for s, f in fresh:
            self.size[s] = f
            if self.dev_used + f <= self.B:
                self.dev[s] = True
                self.dev_used += f
                self.maps += f
            else:
                self.dev[s] = False

    def free(self, tid):
        s0, k = self.t.pop(tid)
        self.cold.pop(tid, None)
        for i in range(len(k)):
            s = s0 + i
            self.owner[s] = None
            if self.dev[s]:
                self.cached[s] = True
            else:
                self.size[s] = 0

    def prefetch(self, tid):
        self.cold.pop(tid, None)
        s0, k = self.t[tid]
        need = [(s0 + i, f) for i, f in enumerate(k) if not self.dev[s0 + i]]
        if not need:
            return
        self.room(sum(f for _, f in need), tid)
        for s, f in need:
            if self.dev_used + f > self.B:
                break
            self.dev[s] = True
            self.dev_used += f
            self.maps += f
            self.restored += f


if __name__ == "__main__":
    sys.exit(main())
