"""Room in a training step's backward, from a call trace (GPUHEAP_TRACE).

    python3 bench/trace_room.py TRACE[.xz] [--step N] [--evicted-gb G]

A backward frees its saved activations as it runs and allocates their
gradients and its workspaces. At a full budget, a restore can start early
without evicting anything only into the room the backward has freed since
its start and keeps free until the restored tensor is used. This reads the
trace's allocations and frees (the logical bytes live, whatever the tier),
and for step N's backward (from its first prefetch to the next forward's
first cold advice) prints:

- the room curve: how far the live bytes have fallen since the backward's
  start, every tenth of the backward's calls, with its minimum over the
  rest of the backward from there (what a tensor brought back there could
  keep);
- for the tensors the forward evicted (taken as its earliest saved ones,
  G GB in all: the bytes a step moves one way, halved from the run's
  "GB moved/step"), in the order the backward uses them: the call where
  each is used, where the trace's prefetch ahead of it came, and the
  earliest call from which it could be on the device with no eviction
  (greedy, in order of use, each one's bytes held from its start to its
  use).

The trace says nothing of time: a call index is a place in the step, and
bench/NOTES.md (row 132) ties it to the GPU's split by phase.
"""
import argparse
import lzma
import sys


def read(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        return [line.split() for line in f if line.strip() and not line.startswith("#")]


def steps(calls):
    """(forward start, backward start) per step: a forward is a run of
    cold advices ('c') after prefetches; a backward begins at the first
    prefetch ('p' or 'h') after a forward's advices."""
    out, fwd, seen_c = [], None, False
    for i, t in enumerate(calls):
        if t[0] == "c" and not seen_c:
            fwd, seen_c = i, True
        elif t[0] in "ph" and seen_c:
            out.append((fwd, i))
            seen_c = False
    return out


def analyse(calls, step=-2, evicted_gb=2.78):
    """The room of one step's backward: a dict with the step's index and
    call bounds ("step", "forward", "backward", "end"), the live bytes at
    the backward's start ("live0"), per backward call the bytes fallen
    since its start ("drop") and their minimum from there on ("keep"),
    and the evicted tensors in order of use ("tensors": size, the call
    that uses it, the call of its prefetch ahead or None, the earliest call
    from which it could be back with no eviction). ValueError where the
    trace has too few steps or the step is out of range."""
    st = steps(calls)
    if len(st) < 2:
        raise ValueError("fewer than two steps in the trace")
    k = step if step >= 0 else len(st) + step
    if not 0 <= k < len(st) - 1:
        raise ValueError(f"step {step} out of range (0..{len(st) - 2})")
    fwd, bwd = st[k]
    end = st[k + 1][0]
    since = st[k - 1][1] if k else 0  # the forward's first tensors come before its first advice
    live, saved, tot = {}, {}, 0  # saved: the tensors made since the last backward, in order (an address reused: its last)
    drop, used, ahead = [], {}, {}
    for i, t in enumerate(calls[:end]):
        if t[0] == "a":
            live[t[1]] = int(t[2])
            tot += int(t[2])
            if since <= i < bwd:
                saved.pop(t[1], None)
                saved[t[1]] = int(t[2])
        elif t[0] == "f":
            tot -= live.pop(t[1], 0)
        if i == bwd - 1:
            live0, alive = tot, set(live)
        if i < bwd:
            continue
        if t[0] == "p" and t[1] in alive:
            used.setdefault(t[1], i - bwd)
        elif t[0] == "h":
            ahead.setdefault(t[1], i - bwd)
        drop.append(live0 - tot)
    n = len(drop)
    keep = drop[:]
    for j in range(n - 2, -1, -1):
        keep[j] = min(keep[j], keep[j + 1])
    ev, acc = [], 0
    for p, s in saved.items():
        if acc >= evicted_gb * 1e9:
            break
        if p in alive and p in used and s > (1 << 20):
            ev.append(p)
            acc += s
    ev.sort(key=lambda p: used[p])
    held, tensors = [0] * n, []
    for p in ev:
        u, s = used[p], saved[p]
        i = u
        while i > 0 and drop[i - 1] - held[i - 1] >= s:
            i -= 1
        for j in range(i, u):
            held[j] += s
        tensors.append((s, u, ahead.get(p), i))
    return {"step": k, "forward": fwd, "backward": bwd, "end": end, "live0": live0,
            "drop": drop, "keep": keep, "tensors": tensors}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--step", type=int, default=-2, help="which step's backward (default: the last whole one)")
    ap.add_argument("--evicted-gb", type=float, default=2.78, help="bytes the forward evicts, GB (default: width 256's)")
    a = ap.parse_args(argv)
    try:
        r = analyse(read(a.trace), a.step, a.evicted_gb)
    except ValueError as e:
        sys.exit(f"trace_room: {e}")
    drop, keep, n = r["drop"], r["keep"], len(r["drop"])
    print(f"step {r['step']}: forward from call {r['forward']}, backward {r['backward']}-{r['end']} ({n} calls), "
          f"{r['live0'] / 1e9:.3f} GB live at its start")
    print("room since the backward's start, GB (fallen / kept from there on):")
    for q in range(10):
        j = q * n // 10
        print(f"  call {j:4d} ({q * 10:2d} %): {drop[j] / 1e9:6.3f} / {keep[j] / 1e9:6.3f}")
    total = sum(t[0] for t in r["tensors"])
    print(f"the forward's earliest {len(r['tensors'])} saved tensors ({total / 1e9:.2f} GB), in the order the backward uses them:")
    for s, u, h, i in r["tensors"]:
        print(f"  {s / 1e6:6.0f} MB used at call {u:4d}, prefetched ahead at {'-' if h is None else h:>4}, "
              f"could be back from call {i:4d}")


if __name__ == "__main__":
    main()
