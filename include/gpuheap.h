/* gpuheap: a GPU heap. Public host API (C; callable from C++).
 *
 * A heap is created on the host, handed to kernels as a device handle, and
 * destroyed on the host. Kernels allocate with gh_malloc / gh_free (see
 * gpuheap_device.cuh). Every function here returns an error code: GH_OK (0)
 * on success, a negative GH_ERR_* otherwise (gh_strerror names it), and
 * loses nothing on failure.
 */
#ifndef GPUHEAP_H
#define GPUHEAP_H

#include <stddef.h>
#include <stdint.h>

#define GPUHEAP_VERSION_MAJOR 0
#define GPUHEAP_VERSION_MINOR 1
#define GPUHEAP_VERSION_PATCH 0
#define GPUHEAP_VERSION (GPUHEAP_VERSION_MAJOR * 10000 + GPUHEAP_VERSION_MINOR * 100 + GPUHEAP_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: one table generates the enum, gh_strerror and gh_err_name. */
#define GH_ERRNO_MAP(X)                                                          \
  X(INVAL, -1, "invalid argument")                                               \
  X(NOMEM, -2, "out of host memory")                                             \
  X(DEVICE_NOMEM, -3, "out of device memory")                                    \
  X(CUDA, -4, "a CUDA call failed (gh_last_error_detail says which)")            \
  X(NO_DEVICE, -5, "no CUDA device is available")                                \
  X(FOREIGN, -6, "pointer does not belong to this heap")                         \
  X(DOUBLE_FREE, -7, "pointer was already freed")                                \
  X(BUDGET, -8, "the memory budget is exhausted")                                \
  X(UNSUPPORTED, -9, "operation not supported by this build or device")          \
  X(CORRUPT, -10, "metadata failed a consistency check, or moved data was lost") \
  X(BUSY, -11, "not finished yet (the stream has not reached it)")              \
  X(PINNED, -12, "the tensor is pinned")

typedef enum gh_errno_e {
  GH_OK = 0,
#define GH__ERR_ENUM(name, code, text) GH_ERR_##name = code,
  GH_ERRNO_MAP(GH__ERR_ENUM)
#undef GH__ERR_ENUM
  GH__ERR_END = -13
} gh_errno_t;

/* A message for an error code ("success" for GH_OK); never NULL. */
const char* gh_strerror(int err);
/* The code's name, e.g. "GH_ERR_INVAL"; never NULL. */
const char* gh_err_name(int err);
/* What the last failing call on this thread saw (e.g. the CUDA error), or "". */
const char* gh_last_error_detail(void);

/* The heap as the host sees it; device code sees it as a gh_dheap_t. */
typedef struct gh_heap_s gh_heap_t;
typedef struct gh_dheap_s gh_dheap_t;

typedef struct gh_heap_options_s {
  size_t page_bytes;     /* page size: a power of two, 4096..65536. Default 65536 */
  uint32_t slots;        /* hint slots per class; 0 = min(SM count, 64) (CPU: 8) */
  uint32_t probe_limit;  /* random search steps before the sweep; 0 = default (8) */
  uint32_t room_fill;    /* estimated fill (percent) from which the search looks for a page with
                            room in the whole heap before it opens a new page (0 = default:
                            100, off; lower trades throughput for memory: README) */
  uint32_t refill_min;   /* classes with at least this many chunks per page wait for their
                            slot's refill; the others search on (0 = default, 2048) */
  int device;            /* CUDA device ordinal; -1 = the current device */
} gh_heap_options_t;

/* Fill *opts with the defaults. */
void gh_heap_options_init(gh_heap_options_t* opts);

/* Create a heap of `bytes` of data (rounded down to 32 pages; at least 32
 * pages) on a device. opts may be NULL for the defaults. */
int gh_heap_create(gh_heap_t** heap, size_t bytes, const gh_heap_options_t* opts);
/* Destroy a heap; no kernel may be using it. NULL is accepted. */
int gh_heap_destroy(gh_heap_t* heap);
/* Free every allocation at once; no kernel may be using the heap. */
int gh_heap_reset(gh_heap_t* heap);
/* The handle kernels take (gh_heap_malloc and friends); NULL for NULL. */
gh_dheap_t* gh_heap_device(const gh_heap_t* heap);

/* Make `heap` the heap of gh_malloc / gh_free (and of the drop-in malloc of
 * gpuheap/malloc.cuh) in every CUDA translation unit of the program that
 * includes gpuheap_device.cuh, including units loaded later. NULL detaches.
 * No kernel that allocates may run while it changes. */
int gh_device_attach(const gh_heap_t* heap);

/* Internal to gpuheap_device.cuh: each CUDA unit registers the function that
 * sets its own copy of the default heap. */
typedef int (*gh_unit_attach_fn)(const gh_dheap_t* heap);
int gh_register_unit(gh_unit_attach_fn fn);

typedef struct gh_class_stats_s {
  uint32_t size;            /* chunk size, bytes */
  uint32_t pages;           /* pages formatted for the class */
  uint64_t chunks_used;
  uint64_t chunks_capacity;
} gh_class_stats_t;

typedef struct gh_heap_stats_s {
  uint64_t heap_bytes;       /* data region */
  uint64_t meta_bytes;       /* metadata (bitmaps, page words, hints) */
  uint32_t page_bytes;
  uint32_t pages_total;
  uint32_t pages_free;
  uint32_t pages_chunk;      /* formatted for a class */
  uint32_t pages_pinned;     /* chunk pages held by a hint slot */
  uint32_t pages_run;        /* in runs */
  uint32_t runs;
  uint32_t largest_free_run; /* pages */
  uint64_t bytes_in_use;     /* chunk sizes of used chunks + pages of runs */
  double fragmentation;      /* 1 - bytes_in_use / bytes of pages not free; 0 when none */
  uint64_t double_frees;     /* bad frees seen by the device (never corrupting) */
  uint64_t foreign_frees;
  uint32_t n_classes;
  gh_class_stats_t classes[64];
} gh_heap_stats_t;

/* Statistics computed on demand by a reduction over the heap's metadata.
 * Consistent when no kernel is using the heap; approximate while one runs. */
int gh_heap_stats(gh_heap_t* heap, gh_heap_stats_t* stats);

/* ------------------------------------------------------------------------
 * Tensor manager: tensors for frameworks from one memory budget, in 2 MiB
 * frames of a reserved virtual range. Frames of cold tensors are evicted to
 * pinned host memory mapped at the same address (pointers never change) and
 * restored on demand. The manager may also own a device heap (gh_tmgr_heap)
 * that lives at the start of the same range and grows by frames.
 * ------------------------------------------------------------------------ */

/* A CUDA stream (the same type as cudaStream_t); NULL is the default stream. */
typedef struct CUstream_st* gh_stream_t;

typedef enum gh_tier_e {
  GH_TIER_NONE = 0,   /* not backed (not mapped) */
  GH_TIER_DEVICE = 1, /* HBM */
  GH_TIER_HOST = 2,   /* pinned host memory mapped at the same address */
  GH_TIER_COUNT = 3
} gh_tier_t;

/* Where frames come from. DEFAULT: the CUDA virtual-memory API in the CUDA
 * library, the simulation in the CPU library. SIM: host memory standing in
 * for both tiers (tests, machines without a GPU). */
typedef enum gh_backend_e { GH_BACKEND_DEFAULT = 0, GH_BACKEND_CUDA_VMM = 1, GH_BACKEND_SIM = 2 } gh_backend_t;

/* What a tensor holds; sets its eviction priority (workspace and
 * activations go first, weights last). */
typedef enum gh_kind_e {
  GH_KIND_WORKSPACE = 0,
  GH_KIND_ACTIVATIONS = 1,
  GH_KIND_OPTIMIZER = 2,
  GH_KIND_WEIGHTS = 3,
  GH_KIND_COUNT = 4
} gh_kind_t;

typedef struct gh_tmgr_s gh_tmgr_t;

/* Flags of gh_tmgr_options_t. */
/* Kernels whose allocation with gh_malloc_grow / gh_heap_malloc_grow
 * (gpuheap_device.cuh) finds no room in the device heap ask the host to
 * grow it and wait in place (a thread of the manager's serves them;
 * include/gpuheap/grow.h); gh_malloc and gh_heap_malloc never wait. The host grows only with memory it can take
 * without waiting for the GPU: device frames left in the budget, then new
 * host frames within the host budget (slower for kernels, at the same
 * addresses); the growth at sync points (gh_heap_maintain) also evicts.
 * NULL then means the heap could not grow. Needs heap_max_bytes >
 * heap_bytes > 0 (else GH_ERR_INVAL). */
#define GH_TMGR_GROW_ON_DEMAND 1u

typedef struct gh_tmgr_options_s {
  int device;                /* CUDA device ordinal; -1 = the current device */
  gh_backend_t backend;
  size_t device_budget;      /* bytes of HBM for frames; 0 = free memory at creation minus device_reserve */
  size_t device_reserve;     /* left to others when device_budget is 0; default 1 GiB */
  size_t host_budget;        /* bytes of pinned host frames; 0 = default (half the device budget's size, at least 1 GiB) */
  size_t va_bytes;           /* reserved range; 0 = 4 x (device + host budgets) + heap_max_bytes */
  double low_watermark;      /* eviction frees device frames down to this fraction of the budget (at least
                                what the request needs); default 1.0: only that (bench/NOTES.md, host side, row 14) */
  double high_watermark;     /* device-heap occupancy that triggers growth; default 0.90 */
  size_t heap_bytes;         /* device heap: initial bytes (0 = no device heap) */
  size_t heap_max_bytes;     /* device heap: most it may grow to; 0 = heap_bytes (no growth) */
  gh_heap_options_t heap;    /* the device heap's own options (page size, slots, ...) */
  /* Host frames kept created ahead of need by a background thread: 16
   * single frames, the rest in chunk-sized slabs (8 frames), so that an
   * eviction never pins memory under the provider lock (~5 ms a 16 MiB
   * slab on CUDA). Default 64: 128 MiB of pinned host memory with 2 MiB
   * frames, taken from host_budget and created at startup; 0 = no thread.
   * Host memory that restores give back is kept too (within host_budget)
   * for later evictions, until gh_tmgr_empty_cache. */
  uint32_t host_pool_frames;
  uint32_t flags;            /* GH_TMGR_* */
} gh_tmgr_options_t;

/* The physical-memory calls the tensor manager makes, as its stats count
 * them (map includes the access call of the range mapped). */
typedef enum gh_vmm_op_e {
  GH_VMM_CREATE = 0,
  GH_VMM_RELEASE = 1,
  GH_VMM_MAP = 2,
  GH_VMM_UNMAP = 3,
  GH_VMM_OP_COUNT = 4
} gh_vmm_op_t;

typedef struct gh_tmgr_stats_s {
  size_t frame_bytes;
  size_t device_budget, host_budget;
  size_t frames[GH_TIER_COUNT];                   /* mapped tensor frames per tier (NONE: unused slots) */
  size_t heap_frames[GH_TIER_COUNT];              /* device-heap frames per tier */
  size_t tensors[GH_KIND_COUNT];                  /* live tensors per kind */
  size_t tensor_bytes[GH_KIND_COUNT];             /* their requested bytes */
  size_t tensor_bytes_tier[GH_KIND_COUNT][GH_TIER_COUNT]; /* ... by the tier of their frames */
  size_t pinned_tensors;
  size_t pending_frees;                           /* freed, waiting for their stream */
  size_t host_pool_frames;                        /* host frames created and not in use */
  uint64_t evictions, restores;                   /* frames moved */
  uint64_t bytes_evicted, bytes_restored;         /* bytes copied each way (GPUHEAP_CLEAN: a clean copy's
                                                     bytes when made, evicted later or not) */
  uint64_t oom_events;                            /* requests that found neither tier with room */
  uint64_t heap_grows, heap_shrinks;              /* frames */
  size_t cached_frames;      /* device frames mapped with no live or pending tensor, kept for reuse (in the budget) */
  size_t peak_tensor_bytes;  /* most requested bytes of live tensors at once (gh_tmgr_reset_peak) */
  /* Where the calling threads' time went (since creation): */
  uint64_t moves;            /* batches of frames to move between tiers (evictions, restores; attempted) */
  uint64_t move_ns;          /* host time in them, waits for streams and copies included */
  uint64_t stream_waits;     /* waits for the streams of tensors about to move or be reused */
  uint64_t stream_wait_ns;   /* host time in those waits (the GPU's queued work draining) */
  uint64_t host_placed_bytes; /* bytes of new tensors placed in host memory because the device
                                 budget had no room left after evicting (frames, for large ones) */
  uint64_t clock_victims[GH_KIND_COUNT]; /* frames chosen for eviction by CLOCK (not from the cold
                                            list), by the kind of the frame */
  uint64_t quiet_waits;      /* waits for the events of quiet tensors (GH_ADVICE_QUIET) before a
                                move, in place of waits for their streams (not in stream_waits) */
  uint64_t vmm_calls[GH_VMM_OP_COUNT]; /* calls of the physical-memory API (gh_vmm_op_t), both tiers,
                                          the host-pool thread's and the mover's included */
  uint64_t vmm_ns[GH_VMM_OP_COUNT];    /* host time in them */
  uint64_t vmm_move_ns;      /* the part of vmm_ns spent inside moves (in move_ns too) */
  size_t spare_frames;       /* device frames created and mapped nowhere, kept for the next allocation
                                of their size instead of released (in the budget, not in its room
                                taken; gh_tmgr_empty_cache releases them) */
  uint64_t ordered_moves;    /* moves (of those counted in moves) that did not wait for their copies:
                                their tensors' streams were made to wait instead (see gh_tensor_alloc
                                and gh_tensor_prefetch) */
  size_t chunk_frames;       /* frames of the chunks of new large tensors (the part of a tensor backed
                                by one physical allocation and moved as one): it follows the sizes of
                                recent large tensors, so that they split into whole chunks */
  uint64_t chunk_changes;    /* times chunk_frames changed */
  uint64_t heap_grow_asks;   /* GH_TMGR_GROW_ON_DEMAND: kernels' requests to grow the heap answered */
  uint64_t heap_grow_denied; /* ... of them, answered without growth (the heap at heap_max_bytes, both
                                budgets spent, or the manager busy for 20 ms): those lanes got NULL */
  uint64_t heap_grow_stale;  /* ... of them, answered by a growth made after the asking lane's search
                                (searched again; the heap not grown again for them) */
} gh_tmgr_stats_t;

/* Called (on the thread of the failing call) when a request cannot be met
 * in either tier, before the call returns GH_ERR_BUDGET. */
typedef void (*gh_oom_fn)(void* user, size_t bytes_wanted, const gh_tmgr_stats_t* stats);

void gh_tmgr_options_init(gh_tmgr_options_t* opts);
int gh_tmgr_create(gh_tmgr_t** tm, const gh_tmgr_options_t* opts);
/* Destroy: no stream may still use its tensors; the heap with it. */
int gh_tmgr_destroy(gh_tmgr_t* tm);

/* A tensor of `bytes` (> 0), 256-byte aligned, usable on `stream` in stream
 * order. Small tensors share frames; large ones take runs of frames. When
 * the device budget is spent, cold frames are evicted for it without the
 * host waiting for their copies (ordered moves): the streams the evicted
 * tensors were used on (allocated, prefetched or freed on) wait for the
 * copies on the GPU, and so does `stream` where it takes their memory. A
 * tensor used on a stream the manager was never told of must be ordered
 * after one it knows (as with cudaFreeAsync). GPUHEAP_ORDERED_MOVES=0 makes
 * every move wait on the host. */
int gh_tensor_alloc(gh_tmgr_t* tm, size_t bytes, gh_kind_t kind, gh_stream_t stream, void** ptr);
/* Free, with no CUDA call (but see below); its memory is reused at once by allocations on
 * `stream` (stream order makes that safe, as with cudaMallocAsync), and by
 * other streams once `stream` reaches this point (other streams that used
 * it must be ordered before, as with cudaFreeAsync). A freed large
 * tensor's device memory stays mapped in a cache (see cached_frames). The
 * event that orders other streams after the free is recorded on `stream`
 * later (gh_tmgr_maintain, an allocation that needs the memory, or one that
 * finds 16 frees waiting for their event), so
 * `stream` must live until gh_tmgr_maintain has run after the free. (A
 * free on a stream the tensor was never used on, while an ordered move is
 * still copying, makes that stream wait for it: the one CUDA call a free
 * can make.) GH_ERR_FOREIGN for a pointer that is no tensor's start,
 * GH_ERR_DOUBLE_FREE for one freed already. */
int gh_tensor_free(gh_tmgr_t* tm, void* ptr, gh_stream_t stream);
/* The tensor is used on `stream` too, and its memory must not be reused
 * before the work queued on `stream` up to the tensor's free is done
 * (PyTorch's record_stream). Its free then makes the free's stream wait
 * on the GPU for that work (the host waits where the GPU cannot), one
 * event a stream so named; its moves wait for `stream` as for its other
 * streams. A tensor that uses more streams than the manager tracks for it
 * (4) waits at its free for every stream the manager has seen, each of
 * which must still exist (a failure there fails the free, nothing freed).
 * GH_ERR_FOREIGN / GH_ERR_DOUBLE_FREE as gh_tensor_free. */
int gh_tensor_record_stream(gh_tmgr_t* tm, void* ptr, gh_stream_t stream);
/* Hints: bring the tensor's frames to the device now (evicting others if
 * needed), or mark it cold and move its frames to the host now. Frames
 * shared with other tensors move only when all of them are cold.
 * gh_tensor_prefetch also clears a cold mark (GH_ADVICE_NORMAL); on a
 * tensor whose frames are all on the device it moves nothing and waits for
 * no stream. A prefetch is stream-ordered: it returns once its copies are
 * queued, and the work queued afterwards on `stream` and on the tensor's
 * other streams finds the tensor on the device (they wait for the copies
 * on the GPU); a stream new to the tensor also waits for the latest moves
 * still copying. gh_tensor_evict and gh_tensor_pin return once the data is
 * where they put it. gh_tensor_evict ends a quiet advice (gh_tensor_advise):
 * host memory of the tensor evicted under it is mapped at its address
 * first, and when the driver refuses that map the call fails with
 * GH_ERR_DEVICE_NOMEM, nothing changed. A full tier moves fewer frames (a
 * prefetch: GH_ERR_BUDGET; an evict: GH_OK). A copy, map or sync that CUDA
 * fails stops the move with that error (GH_ERR_CUDA, GH_ERR_DEVICE_NOMEM):
 * the units not moved stay where they were, with their data. A wait for the
 * GPU that fails (CUDA reports a failed copy, or any earlier failure, at
 * the next sync) is sticky besides: copies queued before it may not have
 * run, so from then on allocations, prefetches, evictions, a first pin and
 * gh_tmgr_maintain fail with GH_ERR_CORRUPT saying which wait failed;
 * frees and gh_tmgr_destroy still give everything back. */
int gh_tensor_prefetch(gh_tmgr_t* tm, void* ptr, gh_stream_t stream);
int gh_tensor_evict(gh_tmgr_t* tm, void* ptr);
/* gh_tensor_prefetch of n tensors in one batch: one wait for their streams
 * and one pipeline for all their host frames (a frame they share moves
 * once), none of them evicted to make the room. Every pointer is checked
 * first: NULL (GH_ERR_INVAL) or unknown (GH_ERR_FOREIGN / GH_ERR_DOUBLE_FREE) fails the call
 * before anything changes. A pointer may repeat. GH_ERR_BUDGET when the
 * device budget cannot hold them all (those that fit have moved). */
int gh_tensor_prefetch_many(gh_tmgr_t* tm, void* const* ptrs, size_t n, gh_stream_t stream);
/* gh_tensor_prefetch for a tensor needed later: its frames start for the
 * device now, but no stream is made to wait for their copies yet. The
 * caller promises that nothing touches the tensor (no kernel, copy or host
 * access, on any stream) until its next gh_tensor_prefetch,
 * gh_tensor_prefetch_many or gh_tensor_pin, which make `stream` and the
 * tensor's streams wait for the copies on the GPU (and move nothing more
 * if its frames are still on the device), or its gh_tensor_free (after
 * which its memory goes to others only once the copies are done). So the
 * work queued between the two calls runs beside the copies instead of
 * after them. Breaking the promise can make a kernel read memory still
 * being written. A tensor that shares its frames (under 1 MiB) is
 * prefetched as by gh_tensor_prefetch. Errors as gh_tensor_prefetch. */
int gh_tensor_prefetch_ahead(gh_tmgr_t* tm, void* ptr, gh_stream_t stream);
/* gh_tensor_prefetch_ahead, under the same promise, only where the device
 * budget has room for the tensor's frames on the host and `reserve` bytes
 * more without evicting anything or waiting for the GPU: completed frees
 * are reclaimed (by queries) and cached frames count as room. Otherwise
 * GH_ERR_BUDGET, and nothing changed. For restoring further ahead than
 * the next tensor while memory is free (a backward pass whose late stages
 * free room before the early stages' activations are needed), without
 * taking room that the work in between needs (`reserve`). Other errors as
 * gh_tensor_prefetch. */
int gh_tensor_prefetch_room(gh_tmgr_t* tm, void* ptr, gh_stream_t stream, size_t reserve);
/* gh_tensor_evict for a tensor not needed for a while, under the promise
 * of GH_ADVICE_QUIET (which it advises unless the tensor is quiet already):
 * nothing touches it (no kernel, copy or host access, on any stream) until
 * its next prefetch, pin, advice or free. Its copies are queued after the
 * work queued on its streams at its quiet advice (the host waits for those
 * events, as for any quiet move) and the call returns without waiting for
 * them; no stream is made to wait, so the work queued next runs beside the
 * copies, and whatever later takes the device memory they free waits for
 * them. Its address is left unmapped while it is on the host (as a quiet
 * tensor's). Moves only a tensor with frames of its own (1 MiB or more) on
 * no more streams than the manager tracks, while no mover runs; otherwise
 * the advice alone. Best effort: frames the host budget cannot take stay.
 * GH_ERR_PINNED on a pinned tensor; other errors as gh_tensor_evict (the
 * quiet advice stays given: a move that failed may leave frames evicted). */
int gh_tensor_evict_ahead(gh_tmgr_t* tm, void* ptr);

/* Advice about a tensor's future use (gh_tensor_advise). */
typedef enum gh_advice_e {
  GH_ADVICE_NORMAL = 0, /* its kind's usual eviction priority (what prefetch, pin and alloc imply) */
  GH_ADVICE_COLD = 1,   /* not needed for a while: evict it first when device room is short */
  GH_ADVICE_QUIET = 2,  /* cold, and no work touches it until its next prefetch or advice but the
                           work queued on its streams now: its moves wait for that work only
                           (events recorded now), not for the streams' present */
  GH_ADVICE_COUNT = 3
} gh_advice_t;

/* Mark a tensor cold (or normal again) without moving anything and without
 * waiting for any stream. The frames of cold tensors are the first eviction
 * victims when the manager needs device room, in advice order: a tensor
 * advised cold earlier goes before one advised later (advising again counts
 * from the new advice; a frame shared by small tensors is a victim only
 * once all of them are cold, from the last one's advice); only then does
 * the kind-biased CLOCK pick among the others. GH_ADVICE_QUIET on a tensor
 * that is cold already keeps its place in the advice order. Pinned tensors may be
 * advised cold but stay on the device until unpinned. GH_ADVICE_QUIET is
 * cold plus a promise the manager cannot check: nothing will touch the
 * tensor (no kernel, copy or host access) until its next prefetch, pin,
 * advice or free, except what is queued on its streams at the call (one
 * event is recorded on each; a tensor used on more streams than the manager
 * tracks is only cold). Moving it then waits for those events instead of
 * draining its streams, so a move in the middle of queued work does not
 * stall that work, and a large tensor (of whole frames) evicted under it
 * leaves its address unmapped while on the host instead of mapping the
 * host memory there, which costs the driver ~57 us a 2 MiB frame out and
 * back: breaking the promise can make a kernel read memory being remapped,
 * or fault on the unmapped address. gh_tensor_prefetch (whose move still
 * counts on the promise) and gh_tensor_pin make a tensor normal again; any
 * other advice maps its host memory at its address first (GH_ERR_DEVICE_NOMEM
 * if the driver refuses, the tensor then still quiet). GPUHEAP_HOMELESS=0
 * maps it as any tensor's. Quiet moves do not drain the streams, so the
 * caller can run ahead of its frees: while it restores (a prefetch came
 * after its last GH_ADVICE_COLD, as in a backward pass) and a quiet tensor
 * is among the first cold ones, room waits for pending frees before
 * evicting (GPUHEAP_WAIT_FREES=1 always, =0 never). With GPUHEAP_CLEAN=1
 * (off by default; host/TENSORS.md, "Cleaning"), a quiet tensor's bytes
 * are also copied to host memory now while it stays on the device, so that
 * its eviction later makes no copy; a copy the provider refuses leaves it
 * unclean and is returned (the advice holds; with GPUHEAP_CLEAN=ready the
 * copy is made at a later allocation, and a refusal there is not reported).
 * GH_ERR_INVAL for an
 * unknown advice; GH_ERR_FOREIGN / GH_ERR_DOUBLE_FREE as gh_tensor_free. */
int gh_tensor_advise(gh_tmgr_t* tm, void* ptr, gh_advice_t advice);
/* Pinned tensors stay on the device: a pinned tensor on the host is brought
 * back first. Pins nest. gh_tensor_evict on a pinned tensor: GH_ERR_PINNED. */
int gh_tensor_pin(gh_tmgr_t* tm, void* ptr);
int gh_tensor_unpin(gh_tmgr_t* tm, void* ptr);
int gh_tensor_set_kind(gh_tmgr_t* tm, void* ptr, gh_kind_t kind);
/* Where a tensor's first byte lives now. */
int gh_tensor_tier(gh_tmgr_t* tm, const void* ptr, gh_tier_t* tier);
int gh_tmgr_stats(gh_tmgr_t* tm, gh_tmgr_stats_t* stats);
/* Start peak_tensor_bytes again from the bytes live now. */
int gh_tmgr_reset_peak(gh_tmgr_t* tm);

/* One mapped frame of a manager's range, for snapshots and pictures. */
typedef struct gh_frame_info_s {
  uint64_t va;        /* the frame's address */
  uint8_t tier;       /* gh_tier_t */
  uint8_t kind;       /* gh_kind_t of its tensors; 255 for device-heap frames */
  uint8_t pinned;     /* 1 if a pinned tensor lies in it */
  uint8_t heap;       /* 1 for a frame of the device heap */
  uint32_t tensors;   /* live tensors in it */
  uint64_t used_bytes; /* bytes of its tensors in this frame */
} gh_frame_info_t;

/* The mapped frames in address order: at most cap into out (which may be
 * NULL when cap is 0); *count receives how many there are in all. Frames of
 * the device heap and of tensors, cached frames included (tensors 0);
 * host aliases and staging windows are not listed. */
int gh_tmgr_frame_map(gh_tmgr_t* tm, gh_frame_info_t* out, size_t cap, size_t* count);

/* One tensor of a manager, for snapshots (gh_tmgr_tensor_map). */
typedef struct gh_tensor_info_s {
  uint64_t ptr;
  uint64_t bytes;        /* requested */
  uint64_t span;         /* the bytes it holds: `bytes` rounded to the manager's alignment */
  uint64_t extent;       /* the bytes no other tensor may take with it: its run of whole frames
                            (a run may be up to a quarter longer than it needs when its memory was
                            reused), or `span` for a small tensor sharing a frame */
  uint64_t device_bytes; /* of `span`, the bytes on the device now (the rest on the host) */
  uint64_t stream;       /* the stream it was allocated on (its free's stream once pending) */
  uint8_t kind;          /* gh_kind_t */
  uint8_t pinned;        /* 1 while pinned */
  uint8_t cold;          /* 1 while advised cold (or quiet) */
  uint8_t pending;       /* 1: freed, its stream not known to be past the free yet */
  uint8_t run;           /* 1: it has whole frames of its own (extent); 0: it shares a frame */
  uint8_t reserved[3];
  uint64_t context;      /* the history tag of its allocation (gh_hist_context), 0 if none */
} gh_tensor_info_t;

/* The manager's tensors in address order, live ones and those freed but
 * still pending: at most cap into out (which may be NULL when cap is 0);
 * *count receives how many there are in all. GH_ERR_NOMEM when the list
 * cannot be sorted. */
int gh_tmgr_tensor_map(gh_tmgr_t* tm, gh_tensor_info_t* out, size_t cap, size_t* count);

/* A manager's history of tensor calls, for debugging (what PyTorch's
 * torch.cuda.memory._record_memory_history keeps): a ring of the latest
 * entries, off by default. */
typedef enum {
  GH_HIST_ALLOC = 0,          /* a tensor allocated (addr, size: requested bytes) */
  GH_HIST_FREE_REQUESTED = 1, /* gh_tensor_free called for it */
  GH_HIST_FREE_COMPLETED = 2, /* its memory free for reuse: its stream past the free, or the memory handed
                                 whole to the next allocation on that stream */
  GH_HIST_OOM = 3,            /* an allocation refused for want of room (GH_ERR_BUDGET); addr 0 */
} gh_hist_action_t;

typedef struct gh_hist_entry_s {
  uint64_t time_ns;     /* CLOCK_MONOTONIC */
  uint64_t addr;
  uint64_t size;
  uint64_t stream;
  uint64_t context;     /* the calling thread's tag (gh_hist_context) at the call, 0 if none */
  uint64_t device_free; /* GH_HIST_OOM: the device budget's bytes not in use then */
  uint8_t action;       /* gh_hist_action_t */
  uint8_t kind;         /* gh_kind_t of the tensor (of the request for GH_HIST_OOM) */
  uint8_t reserved[6];
} gh_hist_entry_t;

/* Keep the latest max_entries entries from now on (the ones held so far
 * kept up to that many, the oldest dropped); 0 stops recording and drops
 * them all. The ring's memory grows as entries come, up to max_entries
 * (an entry is 48 bytes); where it cannot grow, the oldest entries are
 * overwritten sooner. GH_ERR_NOMEM leaves the recording as it was. */
int gh_tmgr_record_history(gh_tmgr_t* tm, size_t max_entries);
/* The entries held, oldest first: at most cap into out (NULL when cap is
 * 0); *count receives how many are held; *dropped (may be NULL) how many
 * were overwritten since recording began. */
int gh_tmgr_history(gh_tmgr_t* tm, gh_hist_entry_t* out, size_t cap, size_t* count, uint64_t* dropped);
/* The tag this thread's next entries carry (e.g. a stack trace's id that
 * the caller keeps), until changed; 0 for none. */
void gh_hist_context(uint64_t context);
/* Give back frames that hold no live tensor (cached or freed), as
 * torch.cuda.empty_cache does: waits for every pending free's stream to
 * reach it, then unmaps and releases every cached frame, and releases the
 * host memory that restores gave back beyond host_pool_frames; tensors are
 * not moved. */
int gh_tmgr_empty_cache(gh_tmgr_t* tm);
/* Change the device budget to `bytes` (whole frames; at least one). A
 * lower budget than the device memory in use makes room at once, as an
 * allocation would: completed frees reclaimed, cached and spare frames
 * released, cold then CLOCK-chosen frames evicted (down to low_watermark
 * of the new budget). Where pinned tensors, the device heap or a full host
 * budget keep more than `bytes` on the device, GH_ERR_BUDGET and the old
 * budget stays (frames evicted on the way stay evicted); a copy or map the
 * provider refuses on the way fails the call with its error
 * (GH_ERR_CUDA, GH_ERR_DEVICE_NOMEM), the budget kept. A higher budget
 * lets later allocations and prefetches use the device memory it adds
 * (memory the device has: the budget is not checked against it). */
int gh_tmgr_set_device_budget(gh_tmgr_t* tm, size_t bytes);
int gh_tmgr_set_oom_observer(gh_tmgr_t* tm, gh_oom_fn fn, void* user);
/* A sync point: reclaim completed frees, restore/evict to the watermarks,
 * grow the device heap past its high watermark, give back its trailing free
 * frames (a frame whose only claimed pages are empty pages that hint slots
 * keep for their size classes counts as free: those pages are taken from
 * the slots). Every tensor call does the cheap part of this. After the
 * manager's sticky failure (see gh_tensor_evict) it still reclaims frees,
 * moves nothing and returns GH_ERR_CORRUPT. */
int gh_tmgr_maintain(gh_tmgr_t* tm);
/* The manager's device heap (NULL when it has none). */
gh_heap_t* gh_tmgr_heap(gh_tmgr_t* tm);
/* Grow or shrink the heap of a manager now (gh_tmgr_maintain for the heap's
 * manager); GH_ERR_INVAL for a heap that no manager owns. */
int gh_heap_maintain(gh_heap_t* heap);

/* The process-wide manager used by the framework entry points below: made
 * on first use with the defaults (or set once by gh_tmgr_set_global). */
int gh_tmgr_set_global(gh_tmgr_t* tm);
gh_tmgr_t* gh_tmgr_global(void);

/* PyTorch's CUDAPluggableAllocator entry points (kind: activations unless
 * changed with gh_tensor_set_kind). Size 0: NULL, no error. Memory for
 * another device than the manager's is refused (GH_ERR_INVAL).
 * gh_torch_alloc returns NULL on failure, its detail in
 * gh_last_error_detail(). gh_torch_alloc_or_throw, the one to give
 * PyTorch, throws a C++ exception instead (derived from std::bad_alloc; its
 * message "gpuheap: out of memory (...)" when the budgets are spent,
 * "gpuheap: GH_ERR_... (...)" otherwise, then the detail): PyTorch turns it
 * into a Python RuntimeError, where a NULL would become a tensor at address
 * 0. Call it only from C++ (an exception cannot cross C frames). */
void* gh_torch_alloc(ptrdiff_t size, int device, gh_stream_t stream);
void* gh_torch_alloc_or_throw(ptrdiff_t size, int device, gh_stream_t stream);
/* PyTorch's record-stream callback (set_record_stream_fn of the pluggable
 * allocator): gh_tensor_record_stream on the global manager; a failure is
 * ignored, its detail recorded. Without it PyTorch's record_stream does
 * nothing under a pluggable allocator, and the memory of a tensor used on
 * a side stream could be reused while that stream still writes it. */
void gh_torch_record_stream(void* ptr, gh_stream_t stream);
void gh_torch_free(void* ptr, ptrdiff_t size, int device, gh_stream_t stream);
/* History tags for PyTorch's allocations (gh_tmgr_record_history): fn,
 * when set, is called at the start of each gh_torch_alloc and
 * gh_torch_alloc_or_throw with the size asked for, on the allocating
 * thread and with no lock of gpuheap's held, and what it returns tags
 * the history's entries of that allocation (gh_hist_context). NULL (the
 * default) calls nothing. */
typedef uint64_t (*gh_hist_tag_fn)(size_t size);
void gh_torch_set_history_context(gh_hist_tag_fn fn);
/* CUDA graphs (torch.cuda.graph): gh_torch_alloc_or_throw serves a
 * capture from a graph pool when PyTorch was given gpuheap's pool
 * callbacks (host/adapters_torch.h; gpuheap.torch.enable installs them):
 * its memory pinned on the device and kept from other use until the graph
 * is gone. A capture without them, and gh_torch_alloc during any capture,
 * are refused (GH_ERR_UNSUPPORTED): its memory would be reused while every
 * replay still writes it. gh_torch_empty_cache, PyTorch's empty-cache
 * callback (set_reset_fn): the blocks of graphs gone given back (none
 * while a capture is underway), then gh_tmgr_empty_cache of the global
 * manager. gh_torch_pool_counts: the graph pools now, each pointer may be
 * NULL: pools, the blocks they own, of which freed by PyTorch and kept,
 * and blocks of graphs gone not given back yet. */
void gh_torch_empty_cache(void);
void gh_torch_pool_counts(size_t* pools, size_t* blocks, size_t* freed, size_t* retired);
/* PyTorch's memory-fraction callback (set_memory_fraction_fn, which
 * torch.cuda.set_per_process_memory_fraction calls): the global manager's
 * device budget becomes `fraction` (0, 1] of the device's memory, at most
 * its free memory and the manager's own less device_reserve (as the default
 * budget: a budget past what the device has would fail allocations instead
 * of evicting) (gh_tmgr_set_device_budget: beyond it tensors are evicted
 * to the host, not refused). Throws a C++ exception (std::runtime_error) on failure,
 * which PyTorch raises as a RuntimeError: call it only from C++. */
void gh_torch_set_memory_fraction(double fraction, int device);
/* CUDA graph trees (torch.compile's mode="reduce-overhead"), through the
 * torch._C functions gpuheap.torch.enable replaces (PyTorch's pluggable
 * allocator refuses them): a graph pool's blocks are live (held by a
 * tensor PyTorch allocated), freed (kept by the pool for reuse) or adopted
 * (live again, held by a storage PyTorch made over a replay's output
 * without a deleter, which is what restoring a checkpointed pool state
 * means here). A pool is named by the two halves of PyTorch's MempoolId_t.
 * gh_torch_pool_blocks: the pool's blocks, up to cap of them into ptrs and
 * states (either may be NULL); returns how many it has.
 * gh_torch_pool_list: every graph pool's blocks, up to cap of them into
 * ptrs, pools (each block's pool id, its two halves) and states (any may be
 * NULL), in one consistent view; returns how many there are (memory
 * snapshots name each block's pool with it).
 * gh_torch_pool_block_state: one block's state, -1 for memory of no pool.
 * gh_torch_pool_adopt: the n blocks named become adopted (freed ones taken
 * out of reuse) and the pool's other adopted blocks no longer are; each must
 * be a block of the pool, else GH_ERR_FOREIGN and nothing changes.
 * gh_torch_pool_unadopt: an adopted block no longer is (its storage is gone
 * or gave it up); GH_ERR_INVAL for anything else. A block both held by a
 * tensor and adopted is freed once both have let it go; a freed block of a
 * released pool goes back to the manager. */
typedef enum gh_pool_block_state_e {
  GH_POOL_BLOCK_LIVE = 0,
  GH_POOL_BLOCK_FREED = 1,
  GH_POOL_BLOCK_ADOPTED = 2
} gh_pool_block_state_t;
size_t gh_torch_pool_blocks(unsigned long long id0, unsigned long long id1, uintptr_t* ptrs, int* states,
                            size_t cap);
size_t gh_torch_pool_list(uintptr_t* ptrs, unsigned long long* pools, int* states, size_t cap);
int gh_torch_pool_block_state(const void* ptr);
int gh_torch_pool_adopt(unsigned long long id0, unsigned long long id1, const uintptr_t* ptrs, size_t n);
int gh_torch_pool_unadopt(const void* ptr);
/* PyTorch's cacheInfo (what cuDNN's benchmark mode asks of the allocator:
 * the largest workspace it may take): the bytes the global manager's device
 * budget has free now, what a request gets without evicting a tensor; 0 on
 * failure (its detail recorded) or for another device. gh_torch_serve_cache_info
 * makes PyTorch's pluggable allocator, once it is the current allocator,
 * answer cacheInfo with it (torch.backends.cudnn.benchmark raises
 * otherwise): that allocator object's table of virtual functions is
 * replaced by a copy whose cacheInfo entry is gpuheap's. It checks first
 * that the current allocator is a CUDAPluggableAllocator, found by its
 * exported symbols in the loaded libc10_cuda and libtorch_cuda, and
 * returns GH_ERR_UNSUPPORTED, changing nothing, where it is not or where
 * they are missing; GH_OK also when done already. */
size_t gh_torch_cache_info(int device);
int gh_torch_serve_cache_info(void);
/* CuPy's CFunctionAllocator entry points (param: unused, may be NULL). */
void* gh_cupy_malloc(void* param, size_t size, int device);
void gh_cupy_free(void* param, void* ptr, int device);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_H */
