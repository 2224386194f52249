/* gpuheap: frames, the unit of physical backing (2 MiB on the H200), behind
 * one small interface. Two providers implement it:
 *
 *   "vmm.c"         the CUDA virtual-memory API (cuMemAddressReserve,
 *                   cuMemCreate at a device or host location, cuMemMap,
 *                   cuMemSetAccess, cuMemUnmap); the only file of the
 *                   library that calls cuMem*.
 *   "frames_sim.c"  host memory standing in for both tiers (a memfd per
 *                   tier, mapped with mmap(MAP_FIXED) into a reserved range),
 *                   so that the tensor manager's policy and bookkeeping run
 *                   on machines without a GPU, with real same-address
 *                   remapping.
 *
 * A provider reserves one virtual range; the caller places frames in it.
 * Physical allocations ("slabs") of one or more frames are created in a
 * tier and mapped whole at any frame-aligned address of the range, and the
 * same allocation may be mapped at two addresses at once (a staging alias
 * and its home), which is how data is copied from one tier to the other
 * before a remap. Why slabs: the driver's cuMemSetAccess and cuMemUnmap cost
 * per allocation mapped, not per byte (bench/results/evict-h200.md: 35.6 us
 * per 2 MiB device frame mapped as 32 allocations of 2 MiB, 1.1 us as one of
 * 64 MiB), so bulk memory is mapped in few large allocations.
 *
 * Mapping rules, the same in both providers (GH_ERR_INVAL before anything
 * is touched when one is broken):
 *   - map places whole allocations, back to back from va, each taking its
 *     own size; every frame it covers must be inside the range and unmapped;
 *   - unmap takes a frame range that covers whole mappings: it starts where
 *     a mapping starts, ends where one ends, and every frame in it is mapped
 *     (a range that would split a mapping is refused);
 *   - release takes an allocation mapped nowhere.
 *
 * Every function returns GH_OK or a GH_ERR_* code (having recorded the
 * detail with _gh_error or _gh_cuda_error) and leaves the state as it was on
 * failure. None of them is thread-safe: the tensor manager serializes calls.
 */
#ifndef GPUHEAP_HOST_FRAMES_H
#define GPUHEAP_HOST_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "gpuheap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gh_frames_s gh_frames_t;  /* one provider instance: a device and a reserved range */
/* A physical allocation of one or more frames (a CUmemGenericAllocationHandle,
 * or a run of slots of the simulation). */
typedef uint64_t gh_pframe_t;
typedef uintptr_t gh_fevent_t;           /* an event recorded on a stream; 0 = none */

typedef struct gh_frames_ops_s {
  const char* name;
  /* Reserve va_bytes (rounded up to frames) on `device` (-1: the calling
   * thread's current device; the simulation ignores it); *base is the start
   * of the range and *frame_bytes the granularity (2 MiB on the H200). */
  int (*open)(gh_frames_t** f, int device, size_t va_bytes, uint8_t** base, size_t* frame_bytes);
  /* Unmap what is still mapped, release the range and the provider. Physical
   * frames still held by the caller are released too. */
  int (*close)(gh_frames_t* f);
  /* Free bytes of the device (cudaMemGetInfo), for the default budget. */
  int (*device_free)(gh_frames_t* f, size_t* free_bytes, size_t* total_bytes);
  /* The ordinal of the device the frames are on (the simulation: the one
   * open was given, 0 for -1). */
  int (*device)(gh_frames_t* f);

  /* Physical allocations: create one of `frames` frames (>= 1) in `tier`
   * (GH_TIER_DEVICE or GH_TIER_HOST); release one that is mapped nowhere. */
  int (*create)(gh_frames_t* f, gh_tier_t tier, size_t frames, gh_pframe_t* out);
  int (*release)(gh_frames_t* f, gh_pframe_t pf);
  /* Map the n allocations pfs[0..n) back to back from va (each its own
   * size; all inside the range, all unmapped there) and make them readable
   * and writable by the device (and, in the simulation, by the host): one
   * access call for the whole range. */
  int (*map)(gh_frames_t* f, uint8_t* va, const gh_pframe_t* pfs, size_t n);
  /* Unmap `frames` frames from va on, covering whole mappings (see above);
   * the allocations stay valid. */
  int (*unmap)(gh_frames_t* f, uint8_t* va, size_t frames);

  /* Streams and events. stream NULL is the legacy default stream. copy is
   * asynchronous on `stream` (the simulation copies at once). */
  int (*stream_create)(gh_frames_t* f, gh_stream_t* out);
  int (*stream_destroy)(gh_frames_t* f, gh_stream_t s);
  int (*copy)(gh_frames_t* f, void* dst, const void* src, size_t bytes, gh_stream_t stream);
  /* As copy, from device memory to host memory, by a kernel instead of the
   * copy engine (vmm: host/copy_kernel.cu says why); dst, src and bytes
   * frame-aligned. */
  int (*copy_to_host)(gh_frames_t* f, void* dst, const void* src, size_t bytes, gh_stream_t stream);
  int (*stream_sync)(gh_frames_t* f, gh_stream_t stream);
  /* *capturing: whether `stream` is capturing a CUDA graph (or is the
   * legacy stream while another stream captures). Safe without the
   * provider lock (the framework adapters ask before each allocation). */
  int (*stream_capturing)(gh_frames_t* f, gh_stream_t stream, int* capturing);
  /* Record an event on stream (the provider allocates it); query returns
   * GH_OK when the stream has reached it, GH_ERR_BUSY while not; sync waits;
   * destroy frees it. */
  int (*event_record)(gh_frames_t* f, gh_stream_t stream, gh_fevent_t* out);
  int (*event_query)(gh_frames_t* f, gh_fevent_t e);
  int (*event_sync)(gh_frames_t* f, gh_fevent_t e);
  int (*event_destroy)(gh_frames_t* f, gh_fevent_t e);
  /* Make the work queued on `stream` from now on wait until event e is
   * reached (cudaStreamWaitEvent; the host does not wait). e may be
   * destroyed right after. */
  int (*stream_wait)(gh_frames_t* f, gh_stream_t stream, gh_fevent_t e);
  /* A 32-bit word of host memory that the device can read (pinned and
   * mapped: cudaHostAlloc), 0 at first; and its release. */
  int (*word_alloc)(gh_frames_t* f, uint32_t** out);
  int (*word_free)(gh_frames_t* f, uint32_t* w);
  /* Make the work that `stream` queues from now on wait until *w >= value
   * (cuStreamWaitValue32; the host does not wait). The host writes the
   * word (an atomic store). Syncing a stream (or an event recorded after
   * the wait) before the word reaches the value waits for that write: the
   * caller must not hold what the writer needs. */
  int (*stream_wait_value)(gh_frames_t* f, gh_stream_t stream, uint32_t* w, uint32_t value);

  /* CUDA graph captures (host/TENSORS.md, "CUDA graphs"). capture_mode
   * exchanges the calling thread's capture interaction mode
   * (cudaThreadExchangeStreamCaptureMode): *mode in is the mode to take
   * (GH_FRAMES_CAPTURE_RELAXED, or a value an earlier call gave back), out
   * the one the thread had; a relaxed thread may make the driver calls a
   * capture in another thread would otherwise forbid (creating, mapping,
   * synchronizing). The simulation keeps the mode per thread and enforces
   * nothing. device_sync waits for all work on the device
   * (cudaDeviceSynchronize; the simulation runs every stream). No provider
   * lock for capture_mode. */
  int (*capture_mode)(gh_frames_t* f, int* mode);
  int (*device_sync)(gh_frames_t* f);
} gh_frames_ops_t;

/* cudaStreamCaptureModeRelaxed, for capture_mode. */
#define GH_FRAMES_CAPTURE_RELAXED 2

/* The providers. _gh_frames_vmm exists only in the CUDA library. */
extern const gh_frames_ops_t _gh_frames_vmm;
extern const gh_frames_ops_t _gh_frames_sim;

/* The provider a backend name selects in this library build: NULL (and
 * GH_ERR_UNSUPPORTED recorded) when the build lacks it. Defined once per
 * library ("frames_select_cuda.c", "frames_select_cpu.c"). */
const gh_frames_ops_t* _gh_frames_select(gh_backend_t backend);

/* Simulation knobs for tests (frames_sim.c only): events complete only
 * after `lag` further queries, so that stream-ordered reuse is exercised;
 * the device tier holds at most `device_frames` frames (create fails with
 * GH_ERR_DEVICE_NOMEM beyond), the host tier at most `host_frames` (frames,
 * not allocations). */
void _gh_frames_sim_configure(gh_frames_t* f, uint32_t lag, size_t device_frames, size_t host_frames);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_HOST_FRAMES_H */
