#!/usr/bin/env python3
"""How compressible are the bytes an offload moves? A census of the tensors
that autograd saves in gpu_train.py's forward (the same network, data and
seeds), by zero words.

For every storage saved in one forward (each counted once, in the order the
forward first saves it) the census counts its 32-bit words that are zero
(all bits clear; ReLU's outputs below zero are +0.0) and the bytes it would
take in a block format that drops them: for each block of B words, a mask
of B bits and the words not zero, or the B words as they are where that is
smaller (a dense block costs no more than its own bytes; the one bit saying
which form a block took is left out of the count).

The offload evicts the forward's earliest saved tensors first, so the
census also gives the ratio over the earliest share of the saved bytes.

  python3 bench/saved_census.py --width 256 --device cpu

Prints one JSON object per forward counted. Needs PyTorch; a CPU is enough
(the zeros come from the network, not the device: the figures on a GPU
differ by rounding only).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))

BLOCKS = (32, 128, 1024)        # words per block of the compressed form
SHARES = (0.25, 0.5, 0.75, 1.0)  # the earliest share of the saved bytes


def block_bytes(torch, words, b):
    """Bytes of `words` (a flat int32 tensor) in the B-word block format."""
    n = words.numel()
    full = n // b
    total = 0
    if full:
        nz = (words[: full * b].view(full, b) != 0).sum(dim=1)
        total += int(torch.minimum(nz * 4 + b // 8, torch.full_like(nz, b * 4)).sum())
    rest = n - full * b
    if rest:
        nz = int((words[full * b:] != 0).sum())
        total += min(nz * 4 + (rest + 7) // 8, rest * 4)
    return total


def census(torch, saved):
    """The figures of one forward's saved storages, in order of first save."""
    rows, total, zeros = [], 0, 0
    comp = {b: 0 for b in BLOCKS}
    for t in saved:
        nbytes = t.untyped_storage().nbytes()
        words = torch.empty(0, dtype=torch.int32, device=t.device).set_(t.untyped_storage()).view(-1) \
            if nbytes % 4 == 0 else None
        if words is None:            # odd-sized storages: counted as dense
            z, cb = 0, {b: nbytes for b in BLOCKS}
        else:
            z = int((words == 0).sum())
            cb = {b: block_bytes(torch, words, b) for b in BLOCKS}
        rows.append((nbytes, cb))
        total += nbytes
        zeros += 4 * z
        for b in BLOCKS:
            comp[b] += cb[b]
    out = {"storages": len(rows), "saved_bytes": total, "zero_word_bytes": zeros,
           "zero_fraction": zeros / total if total else 0.0,
           "ratio": {str(b): comp[b] / total for b in BLOCKS}, "earliest": {}}
    for share in SHARES:
        limit, acc, acc_c = share * total, 0, {b: 0 for b in BLOCKS}
        for nbytes, cb in rows:
            if acc >= limit:
                break
            acc += nbytes
            for b in BLOCKS:
                acc_c[b] += cb[b]
        out["earliest"][str(share)] = {str(b): acc_c[b] / acc for b in BLOCKS} if acc else {}
    return out


def main(argv=None):
    import gpu_train
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=2, help="forwards counted (an SGD step between them)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave it)")
    own, rest = ap.parse_known_args(argv)
    a = gpu_train.parse_args(rest)
    import torch
    if own.threads:
        torch.set_num_threads(own.threads)
    dev = torch.device(own.device)
    torch.manual_seed(a.seed)
    model = gpu_train.build(torch, a).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs, ys = gpu_train.data(torch, a)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    for step in range(own.steps):
        saved, seen = [], set(params)    # weights are not activations: left out

        def pack(t):
            key = t.untyped_storage().data_ptr()
            if key not in seen:
                seen.add(key)
                saved.append(t)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = torch.nn.functional.cross_entropy(model(xs[step % len(xs)].to(dev)), ys[step % len(ys)].to(dev))
        with torch.no_grad():
            out = census(torch, saved)
        out.update(step=step, width=a.width, batch=a.batch, image=a.image, blocks=a.blocks, device=own.device,
                   torch=torch.__version__, loss=float(loss.detach()))
        print(json.dumps(out), flush=True)
        saved.clear()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
