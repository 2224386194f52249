/* gpuheap: what the tensor manager ("tensor.c" and its companions; their
 * own shared internals: "tensor_impl.h") shows its tests and the framework
 * adapters ("adapters.c"); not part of the public API. */
#ifndef GPUHEAP_HOST_TENSOR_INTERNAL_H
#define GPUHEAP_HOST_TENSOR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gpuheap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tensors of fewer bytes than this (after rounding to GH_TM_ALIGN) share
 * frames with tensors of the same kind; larger ones take runs of whole
 * frames. Half a 2 MiB frame: a packed tensor then wastes at most half a
 * frame, and a run tensor at most half of its last frame. */
#define GH_TM_SMALL_MAX ((size_t)1 << 20)
/* Alignment and rounding of every tensor. */
#define GH_TM_ALIGN ((size_t)256)
/* Frames of a chunk: the part of a large tensor backed by one device
 * allocation (or one pooled host slab) and moved as one; see tensor_impl.h. Per
 * 2 MiB, remapping one allocation of 64 MiB costs 1.1 us (device) / 22 us
 * (host, mostly per byte) against 35.6 / 76 us for 2 MiB allocations, and a
 * move remaps a chunk's home while its copy runs (device aliases): larger
 * chunks cost fewer driver calls, smaller ones move less of a tensor's
 * tail and pipeline batches of a few MiB. 16 (32 MiB): the training step
 * with half its memory on the host was ~5 ms faster than with 8, moving
 * ~2 % fewer bytes, and evict / restore stay at 47-49 / 54-55 GB/s from
 * 32 MiB up (bench/NOTES.md host side row 32; 32 frames: a 32 MiB batch
 * is one unit, 21 GB/s). GH_TM_CHUNK_MAX bounds it. */
#ifdef GH_CHUNK_MAX_FRAMES /* -DGH_CHUNK_MAX_FRAMES=n for comparisons (bench/NOTES.md, host side, rows 73, 80) */
#define GH_TM_CHUNK_MAX ((size_t)GH_CHUNK_MAX_FRAMES)
#else
#define GH_TM_CHUNK_MAX ((size_t)32)
#endif
#define GH_TM_CHUNK_DEFAULT ((size_t)16)
/* The chunk follows the tensors' sizes within [_LO, _HI] frames, chosen
 * every _EVERY runs of at least _LO frames, the counts halved every _DECAY
 * (tensor.c, gh_tm_chunk_learn). */
#define GH_TM_CHUNK_AUTO_LO ((size_t)12)
#define GH_TM_CHUNK_AUTO_HI ((size_t)24)
#define GH_TM_CHUNK_AUTO_EVERY 16u
#define GH_TM_CHUNK_AUTO_DECAY 256u

/* Tests only, on a manager whose provider is the simulation: set its
 * event lag and tier capacities (_gh_frames_sim_configure, taken under the
 * provider lock); GH_ERR_UNSUPPORTED for another provider. */
int _gh_tmgr_sim_configure(gh_tmgr_t* tm, uint32_t lag, size_t device_frames, size_t host_frames);
/* Tests only, simulation: defer its copies until something waits for them
 * (on) or copy at once (off, the default; the deferred ones run); see
 * frames_sim.c. _gh_tmgr_sim_run stands for "the work queued on `stream`
 * so far has run": the deferred copies it waits for run. _gh_tmgr_sim_counts:
 * deferred copies not run yet, and the provider's stream_wait calls. */
int _gh_tmgr_sim_defer(gh_tmgr_t* tm, int on);
/* Tests only, simulation: `stream` reads as capturing a CUDA graph (NULL: none). */
int _gh_tmgr_sim_capture(gh_tmgr_t* tm, gh_stream_t stream);
/* Tests only, simulation: the event records, stream waits and syncs and
 * copies made so far on the stream while it read as capturing (CUDA
 * forbids them, or makes them part of the graph). */
int _gh_tmgr_sim_capture_touches(gh_tmgr_t* tm, uint64_t* n);
/* Tests only: eager runs of deferred copies (seed; 0: off; see
 * _gh_frames_sim_eager), and the copies run early so far (runs may be NULL). */
int _gh_tmgr_sim_eager(gh_tmgr_t* tm, uint64_t seed, uint64_t* runs);
int _gh_tmgr_sim_run(gh_tmgr_t* tm, gh_stream_t stream);
int _gh_tmgr_sim_counts(gh_tmgr_t* tm, size_t* deferred, uint64_t* stream_waits);
/* Tests only, simulation: *held = 1 while `stream` waits for the mover's
 * word (a batch whose remaps are not done). */
int _gh_tmgr_sim_held(gh_tmgr_t* tm, gh_stream_t stream, int* held);
/* Tests only, simulation: the nth physical-memory map call from now (the
 * mover's included) fails as a driver out of page-table memory would;
 * 0 cancels. */
int _gh_tmgr_sim_fail_map(gh_tmgr_t* tm, uint32_t nth);
/* Tests only, simulation: the nth copy from now fails as a failing
 * cudaMemcpyAsync would; 0 cancels. */
int _gh_tmgr_sim_fail_copy(gh_tmgr_t* tm, uint32_t nth);
/* Tests only, simulation: the nth event, stream or device sync from now fails as
 * one reporting a copy that failed on the GPU would (the copies it covers
 * write nothing); 0 cancels. */
int _gh_tmgr_sim_fail_sync(gh_tmgr_t* tm, uint32_t nth);
/* Tests only, simulation: the nth event record from now fails, and every
 * one after it; 0 cancels. */
int _gh_tmgr_sim_fail_events_from(gh_tmgr_t* tm, uint32_t nth);
/* Tests only, simulation: *armed = 1 while a failure asked for (map, copy,
 * event record, sync) has not happened yet. */
int _gh_tmgr_sim_fail_armed(gh_tmgr_t* tm, int* armed);
/* Tests only, simulation: *n = copies made by the provider's copy_to_host
 * so far (evictions copied by a kernel: gh_tm_copy_out). */
int _gh_tmgr_sim_copies_to_host(gh_tmgr_t* tm, uint64_t* n);
/* Simulation: frames of `tier`'s memory mapped and unmapped so far (either
 * pointer may be NULL). */
int _gh_tmgr_sim_frames(gh_tmgr_t* tm, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped);
/* Simulation: allocations of `tier`'s memory mapped and unmapped so far
 * (_gh_frames_sim_allocs; either pointer may be NULL). */
int _gh_tmgr_sim_allocs(gh_tmgr_t* tm, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped);
/* Tests only, simulation: the nth event record from now fails as a failing
 * cudaEventRecord would; 0 cancels. *recorded (may be NULL): the event
 * records that succeeded so far, to count those a call makes. */
int _gh_tmgr_sim_fail_event(gh_tmgr_t* tm, uint32_t nth, uint64_t* recorded);
/* Tests and replay_trace: homeless units evicted for a tensor's run whose
 * copies waited for the run's map (tensor_move.c, _gh_tm_held_flush). */
int _gh_tmgr_held_copies(gh_tmgr_t* tm, uint64_t* units);
/* Diagnostics: with GPUHEAP_CALL_TIMES=1 in the environment at creation,
 * the public calls made so far and their host time in ns, from entry (the
 * wait for the manager's mutex included) to exit, by kind: 0 alloc, 1 free,
 * 2 advise, 3 prefetch, 4 prefetch_ahead, 5 prefetch_many, 6 evict, 7 pin,
 * unpin, set_kind and tier; zeros without it. */
int _gh_tmgr_call_times(gh_tmgr_t* tm, uint64_t n[8], uint64_t ns[8]);
/* Diagnostics: runs placed on a cached run that the frees reclaimed while
 * making their room brought (tensor_move.c, _gh_tm_device_room's `take`). */
int _gh_tmgr_freed_taken(gh_tmgr_t* tm, uint64_t* runs);
/* Diagnostics, the same switch: the provider's calls other than the
 * physical-memory ones (stats vmm_calls / vmm_ns) and their host time in
 * ns, by kind: 0 copies (by the engine or by kernel), 1 event records,
 * 2 event queries, 3 event syncs, 4 event destroys, 5 stream syncs, 6
 * stream waits (for events or for a word), 7 others; 8 the waits of every
 * provider call for the provider's mutex (pool thread and mover
 * included); zeros without it. */
int _gh_tmgr_op_times(gh_tmgr_t* tm, uint64_t n[9], uint64_t ns[9]);
/* The host's waits for the GPU (event and stream syncs) and, with
 * GPUHEAP_CALL_TIMES=1, their time in ns, by the rule that made them
 * (counted always: bench/replay_trace prints them): 0 a move's
 * streams drained, 1 a quiet move's advice events, 2 a spare's eviction
 * copy (before its release or its use by the host), 3 the latest ordered
 * batch (a stream that could not wait on the GPU), 4 a move's or a held
 * copy's users that could not wait on the GPU, 5 a move's own copies, 6
 * room waiting for pending frees, 7 a reclaim of every pending free, 8
 * others; the times zeros without the switch. */
int _gh_tmgr_wait_times(gh_tmgr_t* tm, uint64_t n[9], uint64_t ns[9]);
/* Cleaning (GPUHEAP_CLEAN; tensor_move.c, "cleaning"): n[0] frames cleaned
 * (copied to the host at a quiet advice, left on the device), n[1] of
 * them evicted clean (no copy at the eviction), n[2] clean copies dropped
 * (the promise ended first, or the host budget needed them), n[3] frames
 * left unclean (beyond the target, no alias or no host memory, or with
 * GPUHEAP_CLEAN=prefill after the cycle's first eviction); the frames
 * clean now and the cycle's target (either may be NULL). */
int _gh_tmgr_clean_counts(gh_tmgr_t* tm, uint64_t n[4], size_t* clean_frames, size_t* target_frames);
/* Tests only: cleaning's target, in frames, fixed from now on (cycles no
 * longer set it). */
int _gh_tmgr_set_clean_target(gh_tmgr_t* tm, size_t frames);
/* Tests only: frames evicted homeless so far (a quiet tensor's home left
 * unmapped: gh_tm_homeless_ok). */
int _gh_tmgr_homeless(gh_tmgr_t* tm, uint64_t* frames);
/* Tests only, simulation: *mapped = 1 when the frame holding p is mapped
 * (a homeless tensor's home is not). */
int _gh_tmgr_sim_mapped(gh_tmgr_t* tm, const void* p, int* mapped);
/* Tests only: hold every other free frame of the host-alias region of
 * allocations of several frames (on), so that none finds an alias by first
 * fit and host memory comes as single frames (the fall back of a
 * fragmented region), or let them go (off). */
int _gh_tmgr_alias_fragment(gh_tmgr_t* tm, int on);
/* Tests only: hold the mover (it takes no job; a call that must wait for
 * it then waits until released) or let it go on. GH_ERR_UNSUPPORTED when
 * the manager runs no mover (GPUHEAP_MOVER). */
int _gh_tmgr_mover_hold(gh_tmgr_t* tm, int hold);
/* Tests only: physical frames the provider holds for this manager in
 * `tier` (simulation: its live count; other providers: GH_ERR_UNSUPPORTED). */
int _gh_tmgr_sim_live(gh_tmgr_t* tm, gh_tier_t tier, size_t* frames);
/* Tests and bench_evict only: make large tensors' chunks (the frames backed by one device
 * allocation, or one host allocation, and moved together; GH_TM_CHUNK_DEFAULT)
 * `frames` long, 2 .. 32, so that small budgets exercise multi-frame
 * allocations. Only while the manager holds no tensor (GH_ERR_INVAL
 * otherwise); the pool's chunk-sized host allocations, the cached runs and
 * the spare device allocations are given back. */
int _gh_tmgr_set_chunk(gh_tmgr_t* tm, size_t frames);
/* Tests only: shrink the device-alias region to its first `frames` frames
 * (GH_ERR_INVAL while an alias is in use, or beyond its size), so that a
 * test reaches a full region: the spares give back their aliases, then
 * moves stage the allocations that find none. */
int _gh_tmgr_set_dalias_frames(gh_tmgr_t* tm, size_t frames);
/* Tests only: how many times the manager has waited for a stream of its
 * tensors (an event recorded on it and synchronized, before frames are
 * remapped); marks such as gh_tensor_advise, and a prefetch with nothing to
 * move, add none. */
int _gh_tmgr_waits(gh_tmgr_t* tm, uint64_t* waits);
/* Tests only: the waits so far of one copy stream's work for the other's
 * copies that were not known complete (with GPUHEAP_RESTORE_STREAM=1), and
 * whether restores have a stream of their own (split may be NULL). */
int _gh_tmgr_lane_waits(gh_tmgr_t* tm, uint64_t* waits, int* split);
/* Check the manager's invariants (frame counts against the per-frame
 * records, budgets, tensor counts, allocations against chunks, the pool and
 * the host aliases, the cold list); GH_ERR_CORRUPT with the detail recorded
 * when one fails. O(frames + tensors). */
int _gh_tmgr_check(gh_tmgr_t* tm);
/* GH_OK, or the manager's sticky failure as GH_ERR_CORRUPT (what later
 * allocations and moves return; _gh_tmgr_check returns it too, once the
 * accounts hold). */
int _gh_tmgr_sticky(gh_tmgr_t* tm);
/* Tests, CPU library only: the CPU core's heap that is a manager's heap
 * (gh_tmgr_heap), for gh_cpu_malloc / gh_cpu_free; NULL for NULL. */
struct gh_cpu_heap_s* _gh_heap_cpu(gh_heap_t* heap);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_HOST_TENSOR_INTERNAL_H */
