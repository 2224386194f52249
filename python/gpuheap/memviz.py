"""A manager's memory in the format of PyTorch's memory snapshots
(torch.cuda.memory._snapshot()), so that PyTorch's tools read it:
torch.cuda.memory._dump_snapshot's pickle for pytorch.org/memory_viz, and
torch.cuda._memory_viz (segsum, trace, segments, trace_plot).

    from gpuheap import memviz
    snap = memviz.torch_snapshot(manager)            # a dict, as _snapshot() returns
    m.record_history(100000)                         # then device_traces has the calls

gpuheap.torch.enable() serves torch.cuda.memory_snapshot(),
torch.cuda.memory._snapshot(), _dump_snapshot() and
_record_memory_history() from here. Pure Python: PyTorch is not imported.

How gpuheap's memory reads in PyTorch's terms:

  segment  a tensor's run of whole 2 MiB frames (segment_type "large",
           the tensor's stream), or one frame shared by small tensors
           ("small", stream 0), or one mapped frame with no tensor (a cached
           frame: one inactive block), or one frame of the device heap (one
           active block: the heap is in use by kernels, whatever it holds)
  block    a tensor: "active_allocated", or "active_pending_free" once
           freed while its stream may still use it; size is the bytes it
           holds (its request rounded to 512), requested_size its request;
           the rest of a segment is "inactive" blocks

A block of a CUDA graph pool (gpuheap.torch.enable serves torch.cuda.graph
and torch.compile's reduce-overhead from graph pools) is a segment of its
own, its segment_pool_id the pool's id (a frame shared with other small
tensors is cut around it), "active_allocated" while PyTorch or a storage
holds it and "inactive" while its pool keeps it for reuse, as the blocks
of PyTorch's private pools read: memory_snapshot(mempool_id=...) and CUDA
graph trees' checks of a pool (torch/_inductor/cudagraph_trees.py's
get_cudagraph_segments) select segments by that id.

Each segment and block also carries gpuheap's own keys, which PyTorch's
tools ignore: "gpuheap_tier" ("device", "host" or "mixed": where its bytes
are now; eviction moves frames without changing any address),
"gpuheap_device_bytes", and for blocks "gpuheap_kind" and
"gpuheap_pinned".

History entries (device_traces) come from Manager.history(): "alloc",
"free_requested", "free_completed" and "oom", with the address, size,
stream and time_us PyTorch's entries have, and the frames of the stack
that made the allocation where a tag function recorded them
(frames_by_context). gpuheap has no segment_alloc / segment_free entries:
frames are mapped and evicted underneath the tensors, which keep their
addresses."""

def _tier(device_bytes, total):
    return "device" if device_bytes >= total else ("host" if device_bytes == 0 else "mixed")


def _block(addr, size, state, requested=0, frames=(), **extra):
    b = {"address": addr, "size": size, "requested_size": requested if state != "inactive" else 0,
         "state": state, "frames": list(frames)}
    b.update(extra)
    return b


def _segment(device, addr, total, stream, seg_type, blocks, tier, device_bytes, pool=(0, 0)):
    allocated = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {"device": device, "address": addr, "total_size": total, "allocated_size": allocated,
            "active_size": active, "requested_size": sum(b["requested_size"] for b in blocks),
            "stream": stream, "segment_type": seg_type, "segment_pool_id": tuple(pool), "is_expandable": False,
            "frames": [], "blocks": blocks, "gpuheap_tier": tier, "gpuheap_device_bytes": device_bytes}


POOL_BLOCK_FREED = 1  # gh_torch_pool_list's state of a block its pool keeps for reuse


def _tensor_block(t, frames_by_context, pool_state=None):
    state = "active_pending_free" if t["pending"] else "active_allocated"
    if pool_state == POOL_BLOCK_FREED:
        state = "inactive"
    frames = frames_by_context.get(t["context"], ()) if t["context"] else ()
    return _block(t["ptr"], t["span"], state, t["bytes"], frames, gpuheap_kind=t["kind"],
                  gpuheap_pinned=t["pinned"], gpuheap_device_bytes=t["device_bytes"])


def pool_blocks(lib=None):
    """{block address: ((pool id 0, pool id 1), state)} of every CUDA
    graph pool's block now (gh_torch_pool_list), {} from a libgpuheap
    without graph pools."""
    if lib is None:
        import gpuheap
        lib = gpuheap.library()
    if getattr(lib, "gh_torch_pool_list", None) is None:
        return {}
    import ctypes
    n = lib.gh_torch_pool_list(None, None, None, 0)
    while True:
        ptrs, ids, states = (ctypes.c_size_t * max(n, 1))(), (ctypes.c_ulonglong * max(2 * n, 2))(), \
            (ctypes.c_int * max(n, 1))()
        m = lib.gh_torch_pool_list(ptrs, ids, states, n)
        if m <= n:  # (blocks made between the two calls: listed again)
            return {ptrs[i]: ((ids[2 * i], ids[2 * i + 1]), states[i]) for i in range(m)}
        n = m


def _fill(seg_addr, seg_size, blocks):
    """blocks (sorted, inside the segment) with inactive blocks in their
    gaps, so that the blocks tile the segment."""
    out, at = [], seg_addr
    for b in blocks:
        if b["address"] > at:
            out.append(_block(at, b["address"] - at, "inactive"))
        out.append(b)
        at = b["address"] + b["size"]
    if at < seg_addr + seg_size:
        out.append(_block(at, seg_addr + seg_size - at, "inactive"))
    return out


def _frame_piece(segs, device, f, start, end, blocks):
    """Frame f's bytes [start, end) with its plain small tensors `blocks`,
    appended to segs as one segment (none when empty)."""
    if end > start:
        segs.append(_segment(device, start, end - start, 0, "small" if blocks else "large",
                             _fill(start, end - start, blocks), f["tier"],
                             end - start if f["tier"] == "device" else 0))


def segments(frames, tensors, frame_bytes, device=0, frames_by_context=None, pools=None):
    """PyTorch-style segments from Manager.frame_map() and
    Manager.tensor_map() (lists of dicts), in address order; pools as
    pool_blocks() gives them (the tensors that are graph pools' blocks)."""
    frames_by_context = frames_by_context or {}
    pools = pools or {}
    segs = []
    runs = [t for t in tensors if t["run"]]
    small = sorted((t for t in tensors if not t["run"]), key=lambda t: t["ptr"])
    in_run = set()
    for t in runs:
        first = t["ptr"] // frame_bytes
        in_run.update(range(first, first + t["extent"] // frame_bytes))
        pool, pstate = pools.get(t["ptr"], ((0, 0), None))
        blocks = _fill(t["ptr"], t["extent"], [_tensor_block(t, frames_by_context, pstate)])
        segs.append(_segment(device, t["ptr"], t["extent"], t["stream"], "large", blocks,
                             _tier(t["device_bytes"], t["span"]), t["device_bytes"], pool))
    i = 0
    for f in frames:
        if f["va"] // frame_bytes in in_run:
            continue
        on_device = frame_bytes if f["tier"] == "device" else 0
        if f["heap"]:
            blocks = [_block(f["va"], frame_bytes, "active_allocated", frame_bytes, gpuheap_kind="heap",
                             gpuheap_pinned=True, gpuheap_device_bytes=on_device)]
            segs.append(_segment(device, f["va"], frame_bytes, 0, "large", blocks, f["tier"], on_device))
            continue
        while i < len(small) and small[i]["ptr"] < f["va"]:
            i += 1
        mine, at = [], f["va"]
        while i < len(small) and small[i]["ptr"] < f["va"] + frame_bytes:
            t = small[i]
            i += 1
            if t["ptr"] not in pools:
                mine.append(_tensor_block(t, frames_by_context))
                continue
            # A graph pool's block: a segment of its own, the frame cut around it.
            _frame_piece(segs, device, f, at, t["ptr"], mine)
            pool, pstate = pools[t["ptr"]]
            segs.append(_segment(device, t["ptr"], t["span"], t["stream"], "small",
                                 [_tensor_block(t, frames_by_context, pstate)], f["tier"],
                                 t["span"] if on_device else 0, pool))
            mine, at = [], t["ptr"] + t["span"]
        _frame_piece(segs, device, f, at, f["va"] + frame_bytes, mine)
    segs.sort(key=lambda s: s["address"])
    return segs


def trace_entries(history, frames_by_context=None, device_free=None):
    """PyTorch-style trace entries from Manager.history()'s entries."""
    frames_by_context = frames_by_context or {}
    out = []
    for e in history:
        d = {"action": e["action"], "addr": e["addr"], "size": e["size"], "stream": e["stream"],
             "time_us": e["time_ns"] // 1000,
             "frames": list(frames_by_context.get(e["context"], ())) if e["context"] else [],
             "gpuheap_kind": e["kind"]}
        if e["action"] == "oom":
            d["device_free"] = e.get("device_free", 0)
        out.append(d)
    return out


def torch_snapshot(manager, device=0, include_traces=True, frames_by_context=None, pool=None, pools=None):
    """The manager's memory as torch.cuda.memory._snapshot() returns it:
    {"segments", "device_traces", "allocator_settings"}, device_traces a
    list with one list per device up to `device`, the history's entries in
    the last (empty when nothing is recorded or include_traces is
    False). pool: only the segments of that CUDA graph pool (its id, a
    pair), as _snapshot(mempool_id) gives them; pools: the graph pools'
    blocks (pool_blocks(), read from the library when None)."""
    frame_bytes = manager.stats()["frame_bytes"]
    if pools is None:
        pools = pool_blocks()
    segs = segments(manager.frame_map(), manager.tensor_map(), frame_bytes, device, frames_by_context, pools)
    if pool is not None:
        segs = [s for s in segs if s["segment_pool_id"] == tuple(pool)]
    entries = trace_entries(manager.history()[0], frames_by_context) if include_traces else []
    traces = [[] for _ in range(device)] + [entries]
    return {"segments": segs, "device_traces": traces,
            "allocator_settings": {"gpuheap": True, "frame_bytes": frame_bytes}}


def check_tiling(snap):
    """The checks PyTorch's segsum makes of a snapshot: each segment's
    blocks tile it in address order, and its sizes add up. Raises
    ValueError naming the first segment that fails."""
    for s in snap["segments"]:
        at = s["address"]
        for b in s["blocks"]:
            if b["address"] != at or b["size"] <= 0 or b["requested_size"] > b["size"]:
                raise ValueError(f"segment {s['address']:#x}: block {b['address']:#x} ({b['size']} bytes) "
                                 f"where {at:#x} was due")
            at += b["size"]
        if at != s["address"] + s["total_size"]:
            raise ValueError(f"segment {s['address']:#x}: blocks end at {at:#x}, the segment at "
                             f"{s['address'] + s['total_size']:#x}")
        alloc = sum(b["requested_size"] for b in s["blocks"] if b["state"] == "active_allocated")
        if alloc != s["allocated_size"]:
            raise ValueError(f"segment {s['address']:#x}: allocated_size {s['allocated_size']} != {alloc}")
