"""What CUDA graph pools hold: one program on PyTorch's allocator or on
gpuheap, and the bytes of its graph pools after it ran, from
torch.cuda.memory_snapshot()'s segments that name a pool (PyTorch's
private pools; gpuheap's graph pools, gpuheap.memviz), with each program's
results checked against eager PyTorch.

  python3 bench/graph_pools.py {torch,gpuheap} {shared,callables,trees} [--graphs K] [--dump FILE]

Programs (K graphs, each with a 32 MiB temporary and a 32 MiB output at
the defaults):
  shared     K torch.cuda.graph captures into one pool (graph_pool_handle),
             replayed in capture order, as PyTorch's docs allow
  callables  torch.cuda.make_graphed_callables over K modules at once (one
             pool for every forward and backward graph), trained 4 steps
  trees      torch.compile(mode="reduce-overhead") of each of K blocks, run
             one after the other (K forward and K backward graphs in the
             trees' pool), trained 6 steps; at device visit 36 this was one
             compiled module with a graph break after each block inside a
             loop, which Dynamo ran eagerly (no graph recorded); not run in
             this form yet

One line of JSON: the pool bytes (segments, and their blocks held and not
held), memory_reserved and max_memory_reserved, gpuheap's pool counts,
and the largest difference from eager (relative). --dump FILE writes the
pool segments with their blocks (size, state) as JSON and, on PyTorch's
allocator, the trace of its allocator's actions over the program (memory
history without stacks), from which a pool policy can be replayed."""
import argparse
import copy
import json
import os
import sys

import torch

D, BATCH = 2048, 4096  # (BATCH, D) float32: 32 MiB a tensor


def pool_bytes():
    segs = [s for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) != (0, 0)]
    held = sum(b["size"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated")
    return {"pool_segments": len(segs), "pool_bytes": sum(s["total_size"] for s in segs), "pool_held_bytes": held,
            "pools": len({tuple(s["segment_pool_id"]) for s in segs})}


def dump(path, torch_trace):
    snap = torch.cuda.memory._snapshot() if torch_trace else {"segments": torch.cuda.memory_snapshot()}
    segs = [{"address": s.get("address", 0), "total_size": s["total_size"], "stream": s.get("stream", 0),
             "pool": list(s["segment_pool_id"]),
             "blocks": [[b["size"], b["state"]] for b in s["blocks"]]} for s in snap["segments"]]
    trace = [[t.get("action"), t.get("addr"), t.get("size"), t.get("stream")]
             for dev in snap.get("device_traces", []) for t in dev]
    with open(path, "w") as f:
        json.dump({"segments": segs, "trace": trace}, f)


def rel(a, b):
    return float(((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item())


def shared(k):
    torch.manual_seed(0)
    ws = [(torch.randn(D, D, device="cuda") / D ** 0.5, torch.randn(D, D, device="cuda") / D ** 0.5) for _ in range(k)]
    xs = [torch.randn(BATCH, D, device="cuda") for _ in range(k)]
    pool = torch.cuda.graph_pool_handle()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up, as PyTorch's docs do
        for (w1, w2), x in zip(ws, xs):
            torch.relu(x @ w1) @ w2
    torch.cuda.current_stream().wait_stream(s)
    graphs, outs = [], []
    for i, ((w1, w2), x) in enumerate(zip(ws, xs)):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            y = torch.relu(x @ w1) @ w2  # the relu's output: the graph's temporary
        graphs.append(g)
        outs.append(y)
    diff = 0.0
    for r in range(3):
        for x in xs:
            x.normal_()
        for g in graphs:
            g.replay()
        torch.cuda.synchronize()
        for (w1, w2), x, y in zip(ws, xs, outs):
            diff = max(diff, rel(y, torch.relu(x @ w1) @ w2))
    return diff, (graphs, outs, ws, xs)


def block():
    return torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, D))


def callables(k):
    torch.manual_seed(0)
    mods = [block().cuda() for _ in range(k)]
    refs = copy.deepcopy(mods)
    samples = tuple((torch.randn(BATCH, D, device="cuda", requires_grad=True),) for _ in range(k))
    graphed = torch.cuda.make_graphed_callables(tuple(mods), samples)
    diff = 0.0
    for _ in range(4):
        x = torch.randn(BATCH, D, device="cuda")
        a, b = x.clone(), x.clone()
        for g, r in zip(graphed, refs):
            a, b = g(a), r(b)
        a.square().mean().backward()
        b.square().mean().backward()
        torch.cuda.synchronize()
        diff = max(diff, rel(a, b), max(rel(p.grad, q.grad) for m, n in zip(mods, refs)
                                         for p, q in zip(m.parameters(), n.parameters())))
        for m in mods + refs:
            m.zero_grad(set_to_none=True)
    return diff, (graphed, mods)


def trees(k):
    torch.manual_seed(0)
    m = torch.nn.Sequential(*(block() for _ in range(k))).cuda()
    e = copy.deepcopy(m)
    opt, opt_e = torch.optim.SGD(m.parameters(), lr=1e-3), torch.optim.SGD(e.parameters(), lr=1e-3)
    # Each block compiled on its own, run one after the other (eagerly):
    # K forward and K backward graphs in the trees' one pool, as graph
    # breaks between the blocks would give. (A graph break inside a loop
    # over the blocks makes Dynamo run the whole frame eagerly,
    # pytorch/pytorch#88857: visit 36's form recorded no graph.)
    parts = [torch.compile(b, mode="reduce-overhead") for b in m]

    def cm(x):
        for p in parts:
            x = p(x)
        return x

    g = torch.Generator(device="cuda").manual_seed(1)
    diff = 0.0
    for _ in range(6):
        x = torch.randn(BATCH, D, device="cuda", generator=g)
        losses = []
        for net, o in ((cm, opt), (e, opt_e)):
            loss = net(x).square().mean()
            loss.backward()
            o.step()
            o.zero_grad(set_to_none=True)
            losses.append(loss.detach())
        diff = max(diff, rel(losses[0], losses[1]))
    torch.cuda.synchronize()
    return diff, (parts, m)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("allocator", choices=("torch", "gpuheap"))
    ap.add_argument("program", choices=("shared", "callables", "trees"))
    ap.add_argument("--graphs", type=int, default=4, help="K (default 4)")
    ap.add_argument("--dump", metavar="FILE", help="the pool segments and (PyTorch's allocator) its trace, as JSON")
    a = ap.parse_args()
    if a.dump and a.allocator == "torch":
        torch.cuda.memory._record_memory_history("all", context=None, stacks="python")
    if a.allocator == "gpuheap":
        import gpuheap.torch
        gpuheap.torch.enable()
    diff, keep = {"shared": shared, "callables": callables, "trees": trees}[a.program](a.graphs)
    r = {"allocator": a.allocator, "program": a.program, "graphs": a.graphs,
         "share": os.environ.get("GPUHEAP_POOL_SHARE", ""), "max_rel_diff": diff}
    r.update(pool_bytes())
    r["reserved"] = torch.cuda.memory_reserved()
    r["max_reserved"] = torch.cuda.max_memory_reserved()
    if a.allocator == "gpuheap":
        r["gpuheap_pools"] = gpuheap.torch.graph_pools()
    if a.dump:
        dump(a.dump, a.allocator == "torch")
    print(json.dumps(r), flush=True)
    del keep
    return 0


if __name__ == "__main__":
    sys.exit(main())
