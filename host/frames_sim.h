/* gpuheap: test-only helpers of the simulated frame provider
 * ("frames_sim.c"); the provider itself is declared in frames.h. */
#ifndef GPUHEAP_HOST_FRAMES_SIM_H
#define GPUHEAP_HOST_FRAMES_SIM_H

#include <stddef.h>

#include "frames.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Frame size of the simulation: 2 MiB, the VMM granularity on the H200. */
#define GH_SIM_FRAME_BYTES ((size_t)2 << 20)

/* Physical frames of `tier` (DEVICE or HOST) created and not released, in
 * one instance. */
size_t _gh_frames_sim_live(gh_frames_t* f, gh_tier_t tier);
/* Over all instances of the process: frames created and not yet released,
 * and frames (or events, streams) that a close had to clean up because the
 * caller still held them -- a leak of the caller. */
size_t _gh_frames_sim_live_total(void);
size_t _gh_frames_sim_leaked_total(void);
/* Defer copies until something waits for them (on), or run the deferred
 * ones and copy at once again (off, the default): see frames_sim.c. */
void _gh_frames_sim_defer(gh_frames_t* f, int on);
/* Tests: `stream` reads as capturing a CUDA graph from now on (NULL: none). */
void _gh_frames_sim_capture(gh_frames_t* f, gh_stream_t stream);
/* Operations on that stream while it captured (event records, stream
 * waits and syncs, copies): what the manager must not make. */
uint64_t _gh_frames_sim_capture_touches(gh_frames_t* f);
/* With copies deferred: also run, at random moments (seeded; 0: off, the
 * default), a queued copy that a GPU could run already though nothing
 * waits for it yet (see frames_sim.c); and the copies run so early so far.
 * A copy queued while this is on carries what it waits for; one queued
 * before never runs early. */
void _gh_frames_sim_eager(gh_frames_t* f, uint64_t seed);
uint64_t _gh_frames_sim_eager_runs(gh_frames_t* f);
/* Tests: run what the work queued on `stream` so far waits for, as the
 * stream's kernels would (not a sync of the provider's: a failure armed
 * with _gh_frames_sim_fail_sync is not taken here). GH_ERR_CORRUPT while
 * the stream waits for a word not written yet. */
int _gh_frames_sim_run_stream(gh_frames_t* f, gh_stream_t stream);
/* Deferred copies not run yet, and stream_wait calls so far (either may be NULL). */
void _gh_frames_sim_counts(gh_frames_t* f, size_t* deferred, uint64_t* stream_waits);
/* stream_wait_value calls so far; whether `stream` now waits for a word
 * short of its value. */
uint64_t _gh_frames_sim_value_waits(gh_frames_t* f);
/* copy_to_host calls so far that copied something. */
uint64_t _gh_frames_sim_copies_to_host(gh_frames_t* f);
/* Frames of `tier`'s memory mapped and unmapped so far (a page-table entry
 * each). */
void _gh_frames_sim_frames(gh_frames_t* f, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped);
/* Allocations of `tier`'s memory mapped and unmapped so far (a mapping
 * each, whatever its frames): what the driver's map, access and unmap
 * calls cost by on the H200, more than by frame or by call
 * (bench/NOTES.md, host side, row 88). */
void _gh_frames_sim_allocs(gh_frames_t* f, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped);
/* Tests: the nth map call from now (1: the next) fails with
 * GH_ERR_DEVICE_NOMEM and maps nothing, as a driver out of memory for
 * page tables would; 0 cancels. */
void _gh_frames_sim_fail_map(gh_frames_t* f, uint32_t nth);
/* Tests: the nth copy from now (1: the next) fails with GH_ERR_CUDA and
 * copies nothing, as a failing cudaMemcpyAsync would; 0 cancels. */
void _gh_frames_sim_fail_copy(gh_frames_t* f, uint32_t nth);
/* Tests: the nth event record from now (1: the next) fails with
 * GH_ERR_CUDA and records nothing, as a failing cudaEventRecord would; 0
 * cancels. Returns the event records that succeeded so far. */
uint64_t _gh_frames_sim_fail_event(gh_frames_t* f, uint32_t nth);
/* Tests: the nth event or stream sync from now (1: the next) fails with
 * GH_ERR_CUDA, as cudaEventSynchronize reporting a copy that failed on the
 * GPU: the queued copies it covers are dropped (they write nothing); 0
 * cancels. */
void _gh_frames_sim_fail_sync(gh_frames_t* f, uint32_t nth);
/* Tests: 1 while a map, copy, event record or sync failure asked for has
 * not happened yet. */
int _gh_frames_sim_fail_armed(gh_frames_t* f);
/* Tests: the nth stream creation from now (1: the next), on any simulated
 * frames of the process, fails with GH_ERR_CUDA and creates nothing, as a
 * failing cudaStreamCreate would; 0 cancels. Process-wide because a
 * manager creates its streams inside gh_tmgr_create, before a test can
 * reach its frames. */
void _gh_frames_sim_fail_stream(uint32_t nth);
/* Tests: the nth word allocation (word_alloc: a manager's growth channel,
 * its mover's word) from now on, in any frames of the process, fails with
 * GH_ERR_NOMEM and allocates nothing; 0 cancels. */
void _gh_frames_sim_fail_word(uint32_t nth);
/* Tests: words allocated and not freed, in all frames of the process. */
size_t _gh_frames_sim_words_live(void);
/* Tests: as _gh_frames_sim_fail_event, and every event record after the
 * nth fails too (a GPU whose events stopped working); 0 cancels. */
void _gh_frames_sim_fail_events_from(gh_frames_t* f, uint32_t nth);
/* Tests: whether the frame holding va (frame-aligned or not) is mapped. */
int _gh_frames_sim_mapped(gh_frames_t* f, const void* va);
int _gh_frames_sim_held(gh_frames_t* f, gh_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_HOST_FRAMES_SIM_H */
