/* gpuheap: the tensor manager's internal header (not installed): its
 * design, constants and types, the provider-call macros, small helpers,
 * and the functions its files share, under the file that defines them.
 * The files:
 *   tensor.c       the public calls, and the allocation path behind them:
 *                  placement, same-stream reuse, frees, flush and reclaim,
 *                  the chunk that follows the tensors, the trace
 *   tensor_sync.c  streams and stream sets, ordered moves, the restore
 *                  stream's lanes, the mover, the sticky failure
 *   tensor_mem.c   the host pool, frame counts, device aliases and spares,
 *                  units' backing, vframe records, slabs, the cache
 *   tensor_move.c  moves, homeless units and held copies, cleaning, victims
 *                  (cold list, CLOCK), device room, restores
 *   tensor_test.c  hooks for tests and diagnostics, _gh_tmgr_check
 * What the tests and adapters see: tensor_internal.h. */

/* gpuheap: the tensor manager -- tensors for frameworks in frames of one
 * reserved range, from one device budget and one host budget; cold frames
 * are evicted to host frames mapped at the same address. host/TENSORS.md
 * tells the design at more length.
 *
 * Layout of the range (frames, from the provider):
 *
 *   [ device heap: heap_max | device staging: GH_TM_STAGE | host aliases | device aliases | tensors ... ]
 *
 * Glossary: a *vframe* is one frame-sized slot of the range, with its record
 * (gh_vframe_t: role, tier, the physical allocation mapped there and the
 * vframe's place in it, tensor counts); a *slab* is a vframe shared by small
 * tensors of one kind (a bitmap of 256-byte granules, first fit); a *run* is
 * the vframes of one large tensor; a *chunk* is up to tm->chunk (see gh_tm_chunk_learn) vframes
 * of a run, counted from the run's start, backed together and moved
 * together: one device allocation of its size, or in host memory one host
 * allocation of its size (single host frames when none can be had). A
 * *pa* is one physical allocation (frames.h) with its tier and, for host
 * memory, its *alias*: every host allocation stays mapped, from creation to
 * release, at a frame of the host-alias region, so an eviction copies
 * straight into it (a physical allocation may be mapped at two addresses).
 * A device allocation gets an alias too, in the device-alias region, the
 * first time it is moved (or filled by a restore), and keeps it until it is
 * released: a move copies between the two aliases, never through the home
 * address, so the home is remapped while the copy runs.
 * A *unit* is what one step of a move takes: a chunk, or a slab's vframe.
 *
 * Why chunks: the driver's access and unmap calls cost per allocation
 * mapped (bench/results/evict-h200.md: 35.6 us a 2 MiB device frame as 32
 * allocations, 1.1 us as one of 64 MiB), so moving 2 MiB allocations capped
 * evict / restore at 9-16 GB/s.
 * A tensor is LIVE until freed, then PENDING: its bytes go at once to an
 * allocation on the free's stream that fits them (handed over whole), or
 * to anyone once the event recorded on that stream at the next *flush*
 * completes (one event per stream covers all its frees since the last
 * flush). Reclaimed device memory stays mapped in the *cache*: a run's
 * device chunks as a cached run (role CACHE) that a later run of about
 * its size takes where it is, an emptied slab in its kind's list; host
 * frames go back to the host pool. The cache is the first thing given back
 * when device room is needed.
 *
 * Invariants (checked by _gh_tmgr_check):
 *   dev_used  == |device frames created| == frames[DEVICE] + heap_frames[DEVICE] + cached + spare_f (+ frames in transit, 0 between calls)
 *   cached    == |CACHE vframes| + |device slabs with no tensor| == sum of cached runs' frames + empty slabs
 *   host_used == frames[HOST] + heap_frames[HOST] + pool_n + pool_inflight     (all in frames)
 *   dev_used <= dev_budget_f,  host_used <= host_budget_f   (device room: dev_budget_f - (dev_used - spare_f))
 *   per vframe: live >= pending;  warm <= live - pending;  pins > 0 => tier == DEVICE
 *   per mapped vframe: poff < pn, and poff > 0 => the vframe before holds the same pa at poff - 1;
 *   tier == HOST => palias != GH_TM_NO_ALIAS (host alias); device: a device alias or none
 *   device aliases in use == the frames of the device allocations that hold one
 *
 * Synchronization.
 * - One manager mutex (mu) makes every public call atomic. A second mutex
 *   (pmu) serializes the provider, which is not thread-safe: every provider
 *   call takes it, inside mu, and the host-pool thread takes it alone while
 *   it creates a host frame (about 750 us of pinning on CUDA; a call of the
 *   manager that needs the provider meanwhile waits that long, which is
 *   accepted). Lock order: mu, then pmu; the pool thread never holds both.
 * - Remapping a frame (evict, restore) or reusing freed memory relies on the
 *   streams the manager knows: a tensor's alloc stream, the streams passed
 *   to prefetch, and the stream of its free. Before a frame is remapped an
 *   event is recorded on each such stream of each tensor in the frame and
 *   waited for. So every kernel that touches a tensor must be ordered on one
 *   of those streams -- the contract PyTorch's caching allocator has
 *   (record_stream); a tensor used on more streams than the manager records
 *   (GH_TM_TENSOR_STREAMS) is synchronized against every stream seen.
 * - Frees make no provider call. An allocation on the free's stream may
 *   take a freed run (all on the device, about its size) at once, before
 *   the free's event (gh_tm_reuse: stream order, cudaMallocAsync's rule;
 *   the run is never unmapped or moved in between). Otherwise every
 *   stream, the free's own included,
 *   gets the memory after the free's event: events are recorded (one per
 *   stream with new frees) when an allocation finds no mapped memory or
 *   finds GH_TM_FLUSH_FREES frees without one, when device room is short,
 *   and at maintain / empty_cache / destroy; they are queried at those
 *   points, at every GH_TM_RECLAIM_EVERY-th allocation and at every other
 *   call but free, and waited for only
 *   before a request is refused (and by empty_cache and destroy). So a
 *   stream that frees were made on must live until the next flush after
 *   them (gh_tmgr_maintain flushes): destroy it only after that.
 *
 * Policy. New frames are device frames while the device budget allows;
 * otherwise cold frames are evicted (in one batch: what the request needs,
 * or down to low_watermark of the budget when that is lower) and the new frames
 * take their place; otherwise they are host frames; otherwise the request
 * fails with GH_ERR_BUDGET after the OOM observer is told. Victims are
 * chosen by a generalized CLOCK over unpinned device tensor frames: touching
 * a frame (alloc, prefetch, pin, restore) gives it 1 + kind credits
 * (workspace 1 ... weights 4); the hand takes a credit per pass and evicts
 * at 0. Frames whose tensors are all marked cold (gh_tensor_advise,
 * gh_tensor_evict) go first, with no credit, in the order they were marked:
 * each mark takes the next number of tm->cold_seq, and a frame is cold
 * since its tensors' latest mark.
 */

#ifndef GPUHEAP_HOST_TENSOR_IMPL_H
#define GPUHEAP_HOST_TENSOR_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "frames.h"
#include "internal.h"
#include "tensor_internal.h"

/* Units of a move in flight: copies queued on the copy stream while this
 * thread remaps the oldest (depth 2 would suffice when a remap always takes
 * less than a copy; 3 absorbs the remaps that take longer). */
#define GH_TM_DEPTH ((size_t)3)
/* Device staging: a window of a chunk for each unit in flight. */
#define GH_TM_STAGE (GH_TM_DEPTH * GH_TM_CHUNK_MAX)
/* Single host frames the pool keeps (of host_pool_frames) for slabs, tails
 * and the heap; the rest of its target is kept in whole chunks. */
#define GH_TM_POOL_ONES ((size_t)16)
/* Copies held back while a tensor's run is placed (_gh_tm_held_flush). */
#define GH_TM_HELD_MAX ((size_t)64)
/* Most frames one heap growth maps. */
#define GH_TM_HEAP_STEP ((size_t)64)
#define GH_TM_NO_ALIAS UINT32_MAX
/* Streams remembered per tensor; beyond, all streams seen are used. */
#define GH_TM_TENSOR_STREAMS 4
/* Recently freed starts remembered to tell a double free from a foreign
 * pointer. */
#define GH_TM_FREED_RING 4096
/* Frees batched under one event per stream before an allocation records
 * it, and allocations between looks at the completed ones. */
#define GH_TM_FLUSH_FREES ((size_t)16)
#define GH_TM_RECLAIM_EVERY 8u
/* Quiet tensors waiting to be cleaned (GPUHEAP_CLEAN=ready). */
#define GH_TM_CLEAN_Q 64
/* Empty slabs kept mapped per kind (the cache of small tensors). */
#define GH_TM_SLAB_KEEP 2
/* Pending frees an allocation looks through (newest first) for a run freed
 * on its own stream (gh_tm_reuse). */
#define GH_TM_REUSE_SCAN 64
/* Which cached run is released first for room (gh_tm_cache_victim), and
 * how many newer runs cached make a run stale (released first whatever
 * its length). */
enum { GH_TM_RELEASE_SHORTEST = 0, GH_TM_RELEASE_OLDEST, GH_TM_RELEASE_NEWEST };
#define GH_TM_CACHE_STALE 256u

/* Roles of a vframe. CACHE: mapped device memory of a reclaimed run, kept
 * for reuse (see "the cache", tensor_mem.c). */
enum { GH_VF_FREE = 0, GH_VF_SLAB, GH_VF_RUN, GH_VF_HEAP, GH_VF_STAGE, GH_VF_CACHE };
enum { GH_T_LIVE = 0, GH_T_PENDING = 1 };
/* A free leaves its frames' counts to the manager's next call (_gh_tm_lock),
 * so that its cost does not grow with the tensor's frames. */
enum { GH_TM_UNSETTLED = 1, GH_TM_UNSETTLED_WARM = 2, GH_TM_UNSETTLED_PINNED = 4 };

typedef struct gh_tensor_s gh_tensor_t;

/* A copy held back (_gh_tm_held_flush): a homeless unit's eviction, device
 * allocation pf read at src (its alias) into dst (host memory's alias). */
typedef struct gh_tm_held_s {
  gh_pframe_t pf;
  void* dst;
  const void* src;
  size_t bytes;
} gh_tm_held_t;

/* One event recorded on a stream for every free on it since the last
 * flush; refs: the pending tensors that wait for it. */
typedef struct gh_tm_fbatch_s {
  gh_fevent_t ev;   /* 0: none (the stream was synchronized instead) */
  size_t refs;
  uint64_t pass;    /* the reclaim pass that last asked */
  int done;
} gh_tm_fbatch_t;

/* A cached run: n mapped device vframes from v0 (role CACHE), allocations
 * of ch frames back to back, the last one ch frames or fewer; a prefix
 * that ends at an allocation boundary can back a tensor whose chunks are
 * ch frames. */
typedef struct gh_tm_crun_s {
  size_t v0, n, ch;
  uint64_t seq;  /* when it was cached (tm->cache_seq): the oldest of a length is released first */
} gh_tm_crun_t;

struct gh_tensor_s {
  uint8_t* ptr;
  size_t bytes;  /* requested */
  size_t span;   /* rounded to GH_TM_ALIGN */
  size_t vf0, nvf;  /* its vframes */
  size_t chunk;     /* run: frames of its chunks (tm->chunk, less when it only fit split finer) */
  uint32_t pins;
  uint64_t cold_seq;  /* cold: when it was marked (tm->cold_seq then) */
  uint8_t kind, cold, state, nstreams, many_streams;
  uint8_t quiet;  /* advised GH_ADVICE_QUIET: its moves wait for quiet_ev[0..quiet), not its streams */
  uint8_t unsettled;  /* freed, its frames' counts not updated yet: GH_TM_UNSETTLED | _WARM | _PINNED */
  uint8_t clean_wait; /* in tm->clean_q: to be cleaned once its advice's events are complete */
  uint8_t rec;        /* bit i: streams[i] was named by gh_tensor_record_stream */
  uint8_t rec_many;   /* one such stream did not fit streams[]: the free waits for every stream seen */
  uint64_t hist_ctx;  /* the history tag at its allocation (gh_hist_context) */
  gh_stream_t streams[GH_TM_TENSOR_STREAMS];
  gh_fevent_t quiet_ev[GH_TM_TENSOR_STREAMS]; /* recorded on its streams at the advice */
  gh_fevent_t ahead_ev;            /* prefetched ahead: after its copies; its users wait at the next use (_gh_tm_ahead_join) */
  gh_tm_fbatch_t* batch;           /* pending: its free's event; NULL until the next flush */
  gh_stream_t free_stream;
  gh_tensor_t* hnext;               /* hash chain (live tensors only) */
  gh_tensor_t *next, *prev;         /* the live or the pending list */
  gh_tensor_t *fnext, *fprev;       /* a slab's tensors */
  gh_tensor_t *cnext, *cprev;       /* the cold list (live, cold tensors), oldest mark first */
};

/* A physical allocation, as the manager holds it. */
typedef struct gh_tm_pa_s {
  gh_pframe_t pf;
  uint32_t n;      /* frames */
  uint32_t alias;  /* host: its alias, in frames from alias_vf0; device: in frames from dalias_vf0, or GH_TM_NO_ALIAS */
  uint8_t tier;
  gh_fevent_t ev;  /* the event after an ordered move's copy that may still read it (a spare's, kept until
                      the allocation backs a tensor: _gh_tm_pa_commit), or 0 */
  uint64_t stamp;  /* with a restore stream: host memory a restore gave back, its copy's stamp there (an
                      eviction that takes it waits for that copy: _gh_tm_host_ready); 0 otherwise */
} gh_tm_pa_t;

/* With a restore stream (the default; GPUHEAP_RESTORE_STREAM=0: off; see "the restore
 * stream", tensor_sync.c), each of the two copy streams is a lane: the units whose
 * copies it queued are numbered (stamps), and a ring of events recorded
 * on it, each after the copies up to its cover, says which event a wait
 * for a given stamp needs (_gh_tm_lane_wait). */
#define GH_TM_LANE_RING 32
typedef struct gh_tm_lane_s {
  gh_stream_t s;
  uint64_t issued;                   /* stamps given so far: the latest unit's copies queued on s */
  uint64_t done;                     /* the copies up to this stamp are known complete */
  gh_fevent_t ev[GH_TM_LANE_RING];   /* the ring, oldest first from head: events not known complete */
  uint64_t cover[GH_TM_LANE_RING];   /* ... each after the copies up to this stamp */
  size_t head, n;
} gh_tm_lane_t;
enum { GH_TM_LANE_EVICT, GH_TM_LANE_RESTORE };
#define GH_TM_STAMP_LATEST UINT64_MAX  /* a stamp for every copy queued on the lane so far */

/* A home remap for the mover (_gh_tm_mover_main): unmap k frames at home,
 * map pfs[0..n) there; seq != 0 on the last job of a batch. */
typedef struct gh_tm_job_s {
  uint8_t* home;
  size_t k, n;
  gh_pframe_t pfs[GH_TM_CHUNK_MAX];
  uint64_t seq;
} gh_tm_job_t;

typedef struct gh_vframe_s {
  gh_pframe_t pf;       /* the allocation mapped here when tier != NONE */
  uint32_t palias;      /* its alias (host; device: or GH_TM_NO_ALIAS) */
  uint32_t pn, poff;    /* its frames, and this vframe's place in it */
  uint8_t tier, role, kind;
  uint8_t clock;        /* CLOCK credits */
  uint8_t mark;         /* chosen as a victim in this batch */
  uint8_t homeless;     /* on the host with its home unmapped (a quiet run's unit: gh_tm_homeless_ok) */
  uint8_t clean;        /* on the device with a copy of its unit's bytes in host memory (see "cleaning", tensor_move.c) */
  uint32_t born;        /* the eviction batch (tm->evict_gen) in which it last got device memory */
  uint64_t xstamp;      /* with a restore stream: the stamp of the last move's copies on its lane (a restore's
                           on the restore stream when on the device, an eviction's on copy_stream when on the
                           host); the next move the other way waits for them (_gh_tm_lane_wait) */
  uint32_t live;        /* tensors with bytes here, pending ones included */
  uint32_t pending;     /* ... of which freed, waiting for their event */
  uint32_t warm;        /* live, not pending, not cold */
  uint32_t pins;        /* pinned tensors with bytes here */
  uint32_t free_granules;  /* slab */
  uint64_t* bits;          /* slab: granule bitmap (1 = used) */
  gh_tensor_t* tensors;    /* run: its tensor; slab: list of its tensors */
  size_t snext, sprev;     /* slab: the kind's slab list (SIZE_MAX = none) */
  /* A clean unit's first vframe: the host allocation holding the copy, the
   * event after the copy and its stamp on the eviction lane. */
  gh_tm_pa_t cpa;
  gh_fevent_t cev;
  uint64_t cstamp;
} gh_vframe_t;

/* The calls _gh_tmgr_call_times counts (GPUHEAP_CALL_TIMES=1). */
enum {
  GH_TM_CALL_ALLOC, GH_TM_CALL_FREE, GH_TM_CALL_ADVISE, GH_TM_CALL_PREFETCH, GH_TM_CALL_PREFETCH_AHEAD,
  GH_TM_CALL_PREFETCH_MANY, GH_TM_CALL_EVICT, GH_TM_CALL_OTHER, GH_TM_CALLS
};
/* The provider calls _gh_tmgr_op_times counts (GPUHEAP_CALL_TIMES=1), all
 * but the physical-memory calls (stats vmm_calls), and the waits for pmu. */
enum {
  GH_TM_OP_COPY, GH_TM_OP_RECORD, GH_TM_OP_QUERY, GH_TM_OP_EVENT_SYNC, GH_TM_OP_EVENT_DESTROY,
  GH_TM_OP_STREAM_SYNC, GH_TM_OP_STREAM_WAIT, GH_TM_OP_OTHER, GH_TM_OP_PMU_WAIT, GH_TM_OPS
};
/* Why the host waited for the GPU (_gh_tmgr_wait_times; times with GPUHEAP_CALL_TIMES=1):
 * the event syncs and stream syncs of the manager by the rule that made
 * them. Taking one kind of wait away has moved the host's waits to
 * another (bench/NOTES.md, host side, rows 68, 72-74, 82, 95): these say
 * where they went. */
enum {
  GH_TM_W_DRAIN,    /* a move's streams drained (_gh_tm_sset_sync) */
  GH_TM_W_QUIET,    /* a quiet move's advice events (_gh_tm_sset_sync) */
  GH_TM_W_SPARE,    /* a spare's eviction copy, before it is released or handed to the host */
  GH_TM_W_ORDERED,  /* the latest ordered batch, for a stream that could not wait on the GPU */
  GH_TM_W_USERS,    /* a move's or a held copy's users that could not wait on the GPU */
  GH_TM_W_MOVE,     /* a move's own copies (moves not ordered) */
  GH_TM_W_FREES,    /* room waiting for pending frees (_gh_tm_device_room) */
  GH_TM_W_RECLAIM,  /* every pending free (a reclaim that syncs) */
  GH_TM_W_OTHER,
  GH_TM_WAITS
};

struct gh_tmgr_s {
  pthread_mutex_t mu;   /* the manager */
  pthread_mutex_t pmu;  /* provider calls */
  pthread_cond_t pool_cv;       /* pool thread: work or stop */
  pthread_cond_t pool_done_cv;  /* a pool creation finished */
  pthread_t pool_thread;
  int pool_running, pool_stop;

  const gh_frames_ops_t* ops;
  gh_frames_t* fr;
  int device;                   /* the frames' device ordinal (ops->device) */
  gh_tmgr_options_t opt;
  uint8_t* base;
  size_t frame, n_va;
  size_t heap_vf, stage_vf0, alias_vf0, tensor_vf0;
  size_t chunk;                 /* frames of a new run's chunks, <= GH_TM_CHUNK_MAX (gh_tm_chunk_learn) */
  int chunk_fixed;              /* set by GPUHEAP_CHUNK_FRAMES, GPUHEAP_CHUNK_AUTO=0 or _gh_tmgr_set_chunk */
  uint32_t chunk_tails[GH_TM_CHUNK_AUTO_HI + 1]; /* recent runs that chunks of c frames would leave a tail */
  uint32_t chunk_runs;          /* runs counted (gh_tm_chunk_learn) */
  uint64_t chunk_changes;       /* stats: chunk_changes */
  size_t alias_big_f;           /* alias region: [0, alias_big_f) for host allocations of 2 frames or more ... */
  size_t alias_one_f;           /* ... then alias_one_f single frames */
  size_t alias_big_hint, alias_one_hint; /* first fit starts: no free alias frame below */
  uint8_t* alias_used;          /* per alias frame */
  uint8_t* alias_frag;          /* tests: alias frames held to fragment the region (_gh_tmgr_alias_fragment) */
  size_t alias_held;            /* how many */
  size_t dalias_vf0, dalias_f;  /* device-alias region */
  size_t dalias_hint;           /* no free device-alias frame below it */
  size_t dalias_n;              /* device-alias frames in use */
  uint8_t* dalias_used;         /* per device-alias frame */
  gh_vframe_t* vf;
  size_t free_hint;  /* no FREE tensor vframe below it */
  size_t hand;       /* CLOCK hand */
  uint64_t cold_seq; /* cold marks made so far: their order */
  uint64_t waits;    /* streams of tensors waited for (test hook; stats: stream_waits) */
  uint64_t wait_ns, moves, move_ns; /* stats: stream_wait_ns, moves, move_ns */
  uint64_t host_placed; /* stats: host_placed_bytes */
  uint64_t clock_victims[GH_KIND_COUNT]; /* stats: clock_victims */
  uint64_t quiet_waits;  /* stats: quiet_waits */
  uint64_t vmm_calls[GH_VMM_OP_COUNT], vmm_ns[GH_VMM_OP_COUNT], vmm_move_ns; /* stats (under pmu) */
  uint32_t evict_gen;   /* eviction batches so far (vframe born) */
  int young_last;       /* CLOCK takes frames born in this batch only when no other is left */
  size_t prot_lo, prot_hi;  /* vframes that may not be chosen as victims now */

  size_t dev_budget_f, host_budget_f;
  size_t dev_used, host_used;
  size_t nframes[GH_TIER_COUNT], heap_nframes[GH_TIER_COUNT];
  gh_tm_pa_t* pool;             /* host allocations created ahead, mapped at their aliases only */
  size_t pool_cnt, pool_cap;    /* entries */
  size_t pool_n, pool_inflight; /* frames: in the pool, being created by the pool thread */
  size_t pool_target, pool_ones_target, pool_bigs_target;  /* frames; single frames; chunk allocations */
  size_t pool_ones, pool_bigs;  /* entries of each size in the pool or being created */

  size_t slab_head[GH_KIND_COUNT];
  size_t slab_empty[GH_KIND_COUNT];  /* slabs kept mapped with no tensor (cached), per kind */
  gh_tm_crun_t* cache;               /* cached runs */
  size_t n_cache, cap_cache;
  size_t cached;                     /* device frames held by the cache: CACHE vframes + empty slabs */
  uint64_t cache_seq;                /* runs cached so far */
  int cache_release;                 /* GH_TM_RELEASE_*: which cached run goes first (gh_tm_cache_victim) */
  int same_stream_reuse;             /* gh_tm_reuse (GPUHEAP_SAME_STREAM_REUSE=0: off) */
  int take_freed_off;                /* GPUHEAP_TAKE_FREED=0: _gh_tm_device_room releases what frees bring */
  int quiet_first_off;               /* GPUHEAP_QUIET_FIRST=0: cold victims in mark order alone (gh_tm_evict) */
  uint64_t freed_taken;              /* runs placed on a run their room's frees brought (_gh_tmgr_freed_taken) */
  /* Spare device allocations: created, mapped nowhere, kept for the next
   * allocation of the same size instead of released (in dev_used). */
  gh_tm_pa_t* spare;
  size_t n_spare, cap_spare, spare_f;
  int spares_off;                    /* GPUHEAP_DEVICE_SPARES=0 */
  int dalias_off;                    /* GPUHEAP_DEVICE_ALIASES=0: moves stage every device allocation */
  int homeless_off;                  /* GPUHEAP_HOMELESS=0: quiet tensors' homes are mapped as others' */
  int hold_off;                      /* GPUHEAP_HOLD_COPIES=0: homeless evictions copy at once */
  int copy_kernel;                   /* evictions copy by a kernel: 0 none (default), -1 homeless units',
                                        1 every unit's (GPUHEAP_COPY_KERNEL; gh_tm_copy_out) */
  int wait_frees;                    /* room waits for pending frees before evicting: -1 while restoring with
                                        a quiet tensor among the first cold ones (default), 1 always, 0 never
                                        (GPUHEAP_WAIT_FREES) */
  int restoring;                     /* a prefetch came after the last cold advice (a backward pass) */
  int time_calls;                    /* GPUHEAP_CALL_TIMES=1: calls timed from entry to exit (gh_tm_call_end) */
  uint64_t call_n[GH_TM_CALLS], call_ns[GH_TM_CALLS]; /* ... their counts and host time (_gh_tmgr_call_times) */
  uint64_t op_n[GH_TM_OPS], op_ns[GH_TM_OPS]; /* ... and the provider's other calls (_gh_tmgr_op_times; under pmu) */
  uint64_t hwait_n[GH_TM_WAITS], hwait_ns[GH_TM_WAITS]; /* the host's waits by rule, always counted, timed with the
                                                         switch (_gh_tmgr_wait_times; under mu) */
  int holding;                       /* a run is being placed: its homeless evictions hold their copies */
  gh_tm_held_t held[GH_TM_HELD_MAX]; /* ... these, queued by _gh_tm_held_flush */
  size_t held_v0[GH_TM_HELD_MAX], held_k[GH_TM_HELD_MAX], n_held_units; /* with a restore stream: their units
                                        (first vframe, frames), stamped when the copies are queued */
  size_t n_held;
  uint64_t held_copies;              /* units whose copy was held (_gh_tmgr_held_copies) */
  uint64_t homeless_frames;          /* frames evicted with their homes left unmapped (_gh_tmgr_homeless) */
  /* Cleaning (see "cleaning", tensor_move.c): GPUHEAP_CLEAN=1 (the copy engine),
   * =kernel, =ready or =prefill; off by default. */
  int clean_mode;                    /* 0 off, 1 engine, 2 kernel, 3 engine once the advice's events are complete,
                                        4 engine until the cycle's first eviction */
  gh_tensor_t* clean_q[GH_TM_CLEAN_Q]; /* mode 3: quiet tensors waiting for their advice's events, oldest first */
  size_t clean_qn;
  int clean_polling;                 /* _gh_tm_clean_poll is cleaning one of them */
  int cleaning;                      /* a clean is taking host memory: _gh_tm_host_get drops no clean copy */
  size_t clean_f;                    /* host frames holding clean copies (in host_used) */
  size_t clean_target_f;             /* frames on the host at the previous cycle's peak: what cleaning may cover */
  size_t clean_peak_f;               /* ... and this cycle's so far */
  int cycle_evicted;                 /* this cycle moved units to the host (mode 4 cleans no more) */
  int clean_fixed;                   /* tests: the target set (_gh_tmgr_set_clean_target), cycles leave it */
  uint64_t clean_n[4];               /* frames cleaned, evicted clean, dropped, skipped (_gh_tmgr_clean_counts) */
  /* Ordered moves (gh_tm_move_units): the calls that allow them set
   * `ordered` for their duration; ordered_ev is the event after the
   * copies of the latest ordered batch (0 once seen complete), which host
   * memory given back by an ordered restore waits for before any use but
   * the copy stream's. */
  int ordered, ordered_off;          /* GPUHEAP_ORDERED_MOVES=0: off */
  gh_tensor_t* ahead;                /* gh_tensor_prefetch_ahead's tensor: its streams do not wait for the move */
  int ahead_moved;                   /* ... and an ordered batch moved some of its frames */
  gh_fevent_t ordered_ev;
  uint64_t ordered_moves;            /* stats: ordered_moves */
  /* The mover: a thread that remaps the homes of ordered moves (see
   * _gh_tm_mover_main). Jobs [jhead, jn) of `jobs` wait; batches 1..jseq
   * were queued, and *word is the last one done (for the GPU). All under
   * jmu. */
  pthread_mutex_t jmu;
  pthread_cond_t jcv, jdone_cv;
  pthread_t mover;
  int mover_on, mover_stop, mover_off; /* running; told to stop; GPUHEAP_MOVER=0 */
  gh_tm_job_t* jobs;
  size_t jhead, jn, jcap;
  uint64_t jseq;
  int mover_busy;                    /* the mover is remapping (a job taken off the list) */
  int mover_hold;                    /* tests: the mover takes no job (_gh_tmgr_mover_hold) */
  uint32_t* word;
  int mover_err;                     /* the first failure that cannot be undone (sticky, _gh_tm_sticky: the
                                        mover's, a held copy's, a wait for the GPU), and what failed */
  char mover_what[192];
  int move_rc;                       /* this call's moves' first failure that was not the budget's (a
                                        copy, map or sync the provider refused: the unit stayed where it
                                        was), or GH_OK, and what failed */
  char move_what[192];
  gh_stream_t copy_stream;
  /* CUDA graph captures (tensor_sync.c, "captures"): how many a framework
   * adapter says are underway (atomic), and a stream of the manager's own
   * made at the first (the streams of tensors that capture are not touched
   * while they do: events meant for them are recorded here). */
  int captures;
  gh_stream_t side_stream;
  /* Restores' copies: restore_stream, copy_stream itself unless
   * GPUHEAP_RESTORE_STREAM=0 (else split); then the two lanes (evictions on
   * copy_stream, restores on restore_stream) order what ordered_ev did. */
  gh_stream_t restore_stream;
  int split;
  gh_tm_lane_t lane[2];           /* [GH_TM_LANE_EVICT], [GH_TM_LANE_RESTORE]: their streams always, the rest
                                     split only (gh_tm_lane_to) */
  uint64_t lane_waits;            /* waits of one lane's work for the other's copies (_gh_tmgr_lane_waits) */
  gh_stream_t* streams;  /* every stream seen */
  size_t n_streams, cap_streams;

  gh_tensor_t** buckets;
  size_t n_buckets, n_live;
  gh_tensor_t *live_head;
  gh_tensor_t *cold_head, *cold_tail;  /* live cold tensors in the order of their marks */
  gh_tensor_t *pend_head, *pend_tail;  /* pending frees, oldest first */
  size_t n_pending;
  size_t n_unflushed;  /* pending tensors with no event yet */
  size_t n_unsettled;  /* ... of which with their frames' counts still to update (the newest) */
  unsigned alloc_tick; /* allocations, for GH_TM_RECLAIM_EVERY */
  uint64_t pass;       /* reclaim passes */
  size_t live_bytes, peak_bytes;  /* requested bytes of live tensors, and their peak */
  const void* freed[GH_TM_FREED_RING];
  size_t freed_pos;

  size_t tensors[GH_KIND_COUNT], tensor_bytes[GH_KIND_COUNT], pinned_tensors;
  uint64_t evictions, restores, bytes_evicted, bytes_restored, oom_events, heap_grows, heap_shrinks;
  gh_oom_fn oom;
  void* oom_user;

  gh_heap_t* heap;
  size_t heap_online_f, heap_initial_f;
  /* Growth on demand (GH_TMGR_GROW_ON_DEMAND, include/gpuheap/grow.h):
   * the channel (the provider's word_alloc), the thread serving it, and
   * the requests it answered (denied: without growth; stale: by a growth
   * made after the asking lane's search). */
  uint32_t* grow_words;
  pthread_t grow_thread;
  int grow_running, grow_stop;
  uint64_t grow_asks, grow_denied, grow_stale;
  FILE* trace;  /* GPUHEAP_TRACE: the calls, one line each (gh_tm_trace) */
  /* gh_tmgr_record_history: a ring of at most hist_cap entries (0: off),
   * hist_alloc of them allocated (grown as entries come, until it wraps),
   * the oldest at hist_next once it is full (hist_n == hist_alloc). */
  gh_hist_entry_t* hist;
  size_t hist_cap, hist_alloc, hist_n, hist_next;
  uint64_t hist_dropped;
};

/* A small set of streams to synchronize with. */
typedef struct gh_tm_sset_s {
  gh_stream_t* s;
  size_t n, cap;
  int all;
  const gh_fevent_t* ev[8]; /* quiet tensors: their events (owned by them) */
  size_t nev[8], nq;
} gh_tm_sset_t;

/* A unit (see the glossary): vframes [v0, v0 + k), moved together. */
typedef struct gh_tm_unit_s {
  size_t v0, k;
} gh_tm_unit_t;

/* A cached run taken by _gh_tm_device_room for a run being placed. */
typedef struct gh_tm_take_s {
  int got;
  size_t v0, n, ch;
} gh_tm_take_t;

/* ---------------------------------------------------------------- helpers
 * Small ones that several files use. */

static inline uint8_t* gh_tm_va(const gh_tmgr_t* tm, size_t v) { return tm->base + v * tm->frame; }
static inline uint8_t gh_tm_credit(unsigned kind) { return (uint8_t)(1 + kind); }

static inline uint64_t gh_tm_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint8_t* gh_tm_alias_va(const gh_tmgr_t* tm, uint32_t alias) { return gh_tm_va(tm, tm->alias_vf0 + alias); }
static inline uint8_t* gh_tm_dalias_va(const gh_tmgr_t* tm, uint32_t a) { return gh_tm_va(tm, tm->dalias_vf0 + a); }
static inline int gh_tm_pa_big(const gh_tmgr_t* tm, const gh_tm_pa_t* pa) { return pa->alias < tm->alias_big_f; }

/* A device vframe held by the cache: a cached run's, or a slab with no
 * tensor (kept mapped). */
static inline int gh_tm_vf_cached(const gh_vframe_t* f) {
  return f->tier == GH_TIER_DEVICE && (f->role == GH_VF_CACHE || (f->role == GH_VF_SLAB && f->live == 0));
}

/* Device frames in use: created, less the spares. */
static inline size_t gh_tm_dev_busy(const gh_tmgr_t* tm) { return tm->dev_used - tm->spare_f; }

/* The lane whose stream copies into tier `to` (restores: the restore
 * stream's; evictions: copy_stream's), and the other one. Their streams
 * are set with or without a restore stream (then both copy_stream); their
 * stamps and rings are used only with one. */
static inline gh_tm_lane_t* gh_tm_lane_to(gh_tmgr_t* tm, gh_tier_t to) {
  return &tm->lane[to == GH_TIER_DEVICE ? GH_TM_LANE_RESTORE : GH_TM_LANE_EVICT];
}
static inline gh_tm_lane_t* gh_tm_lane_from(gh_tmgr_t* tm, gh_tier_t to) {
  return &tm->lane[to == GH_TIER_DEVICE ? GH_TM_LANE_EVICT : GH_TM_LANE_RESTORE];
}

/* ---------------------------------------------------------------- provider
 * Every provider call goes through these, under pmu. */
/* Under pmu, with GPUHEAP_CALL_TIMES=1: a provider call waited for pmu from
 * w0 to t0 (_gh_tmgr_op_times' last kind). */
static inline void gh_tm_pmu_waited(gh_tmgr_t* tm, uint64_t w0, uint64_t t0) {
  tm->op_n[GH_TM_OP_PMU_WAIT]++, tm->op_ns[GH_TM_OP_PMU_WAIT] += t0 - w0;
}

/* With GPUHEAP_CALL_TIMES=1 each call is timed by its kind, found once a
 * call site from the call's text (gh_tm_op_kind), and so is the wait for
 * pmu (_gh_tmgr_op_times). */
#define GH_P(tm, call)                                                          \
  ({                                                                            \
    static int gh_pk_ = -1; /* this site's kind, under pmu */                   \
    const uint64_t gh_pw0_ = (tm)->time_calls ? gh_tm_now_ns() : 0;             \
    pthread_mutex_lock(&(tm)->pmu);                                             \
    const uint64_t gh_pt0_ = gh_pw0_ ? gh_tm_now_ns() : 0;                      \
    const int gh_prc_ = (call);                                                 \
    if (gh_pw0_) _gh_tm_op_time((tm), &gh_pk_, #call, gh_pw0_, gh_pt0_);        \
    pthread_mutex_unlock(&(tm)->pmu);                                           \
    gh_prc_;                                                                    \
  })

/* GH_P for a call that waits for the GPU (an event or stream sync),
 * counted under `site`, one of GH_TM_W_*, and timed (the wait for pmu
 * included) with GPUHEAP_CALL_TIMES=1; under mu. A wait that fails is
 * recorded as the manager's sticky failure (_gh_tm_wait_failed). */
#define GH_PW(tm, site, call)                                               \
  ({                                                                        \
    const uint64_t gh_ww0_ = (tm)->time_calls ? gh_tm_now_ns() : 0;         \
    const int gh_wrc_ = GH_P(tm, call);                                     \
    (tm)->hwait_n[site]++;                                                  \
    if (gh_wrc_ != GH_OK) _gh_tm_wait_failed((tm), (site));                 \
    if (gh_ww0_) (tm)->hwait_ns[site] += gh_tm_now_ns() - gh_ww0_;          \
    gh_wrc_;                                                                \
  })

extern _Thread_local int _gh_tm_in_move; /* this thread is moving frames (vmm_move_ns; tensor_sync.c) */
/* The same for the physical-memory calls, counted and timed (stats
 * vmm_calls / vmm_ns) under pmu. */
/* An unmap or a release waits for the mover first: it may be of memory
 * or addresses the mover has yet to remap (see _gh_tm_mover_drain). */
#define GH_PV(tm, op, call)                                       \
  ({                                                              \
    if ((op) == GH_VMM_UNMAP || (op) == GH_VMM_RELEASE)           \
      _gh_tm_mover_drain(tm);                                     \
    const uint64_t gh_pw0_ = (tm)->time_calls ? gh_tm_now_ns() : 0; \
    pthread_mutex_lock(&(tm)->pmu);                               \
    const uint64_t gh_pt0_ = gh_tm_now_ns();                      \
    if (gh_pw0_) gh_tm_pmu_waited((tm), gh_pw0_, gh_pt0_);        \
    const int gh_prc_ = (call);                                   \
    const uint64_t gh_pdt_ = gh_tm_now_ns() - gh_pt0_;            \
    (tm)->vmm_calls[op]++, (tm)->vmm_ns[op] += gh_pdt_;           \
    if (_gh_tm_in_move) (tm)->vmm_move_ns += gh_pdt_;             \
    pthread_mutex_unlock(&(tm)->pmu);                             \
    gh_prc_;                                                      \
  })

/* "tensor.c" */
void _gh_tm_chunk_set(gh_tmgr_t* tm, size_t c);
void _gh_tm_lock(gh_tmgr_t* tm);
void _gh_tm_flush(gh_tmgr_t* tm);
void _gh_tm_reclaim(gh_tmgr_t* tm, int sync);

/* "tensor_sync.c" */
size_t _gh_tm_sidx(const gh_tmgr_t* tm, gh_stream_t s);
int _gh_tm_stream_seen(gh_tmgr_t* tm, gh_stream_t s);
void _gh_tm_op_time(gh_tmgr_t* tm, int* kind, const char* call, uint64_t w0, uint64_t t0);
int _gh_tm_sset_sync(gh_tmgr_t* tm, gh_tm_sset_t* ss);
void _gh_tm_sset_vframe(const gh_tmgr_t* tm, gh_tm_sset_t* ss, size_t v);
void _gh_tm_sset_users(const gh_tmgr_t* tm, gh_tm_sset_t* ss, size_t v);
void _gh_tm_wait_for(gh_tmgr_t* tm, gh_fevent_t e, gh_stream_t on, const gh_stream_t* user, int site);
/* Captures (tensor_sync.c): 1 when a capture is underway and `s` is
 * capturing (or cannot be asked), so that nothing may be queued on it nor
 * wait for it; and the stream to record an event of s's work on (s, or
 * the side stream while s captures). Under pmu or not. */
int _gh_tm_capturing(gh_tmgr_t* tm, gh_stream_t s);
static inline gh_stream_t gh_tm_rec_stream(gh_tmgr_t* tm, gh_stream_t s) {
  return _gh_tm_capturing(tm, s) ? tm->side_stream : s;
}
void _gh_tm_lane_drop(gh_tmgr_t* tm, gh_tm_lane_t* l, size_t i, int done);
gh_fevent_t _gh_tm_lane_mark(gh_tmgr_t* tm, gh_tm_lane_t* l);
void _gh_tm_lane_wait(gh_tmgr_t* tm, gh_tm_lane_t* l, uint64_t stamp, const gh_stream_t* user, int site);
int _gh_tm_ordered_done(gh_tmgr_t* tm);
void _gh_tm_ordered_set(gh_tmgr_t* tm, gh_tm_lane_t* l, gh_fevent_t e);
void _gh_tm_pa_ready(gh_tmgr_t* tm, gh_tm_pa_t* pa, const gh_stream_t* user);
void _gh_tm_pa_commit(gh_tmgr_t* tm, gh_tm_pa_t* pas, size_t n);
void _gh_tm_stream_join(gh_tmgr_t* tm, gh_tensor_t* t, gh_stream_t stream);
void _gh_tm_tensor_wait(gh_tmgr_t* tm, const gh_tensor_t* t, const gh_stream_t* stream, gh_fevent_t e,
                        gh_stream_t on);
void _gh_tm_ahead_join(gh_tmgr_t* tm, gh_tensor_t* t, const gh_stream_t* stream);
void _gh_tm_host_ready(gh_tmgr_t* tm, const gh_tm_pa_t* pa, const gh_stream_t* user);
void _gh_tm_mover_drain(gh_tmgr_t* tm);
void _gh_tm_sticky(gh_tmgr_t* tm, int rc, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void _gh_tm_wait_failed(gh_tmgr_t* tm, int site);
void* _gh_tm_mover_main(void* arg);
int _gh_tm_mover_reserve(gh_tmgr_t* tm, size_t n);
void _gh_tm_mover_push(gh_tmgr_t* tm, uint8_t* home, size_t k, const gh_tm_pa_t* pas, size_t n, uint64_t seq);
uint64_t _gh_tm_mover_seal(gh_tmgr_t* tm);
int _gh_tm_mover_failed(gh_tmgr_t* tm);

/* "tensor_mem.c" */
void _gh_tm_pool_release_last(gh_tmgr_t* tm);
int _gh_tm_host_get(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out, const gh_stream_t* user);
void _gh_tm_host_put(gh_tmgr_t* tm, const gh_tm_pa_t* pa);
void* _gh_tm_pool_main(void* arg);
void _gh_tm_pool_quiesce(gh_tmgr_t* tm);
void _gh_tm_count(gh_tmgr_t* tm, const gh_vframe_t* f, int delta);
int _gh_tm_dalias_get(gh_tmgr_t* tm, gh_tm_pa_t* pa);
void _gh_tm_spare_release(gh_tmgr_t* tm, size_t i);
void _gh_tm_pa_drop(gh_tmgr_t* tm, const gh_tm_pa_t* pa);
void _gh_tm_pas_drop(gh_tmgr_t* tm, const gh_tm_pa_t* pas, size_t n);
int _gh_tm_dev_get(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out, const gh_stream_t* user);
/* The same, created now and waiting for nothing: no spare or pooled
 * memory, nothing given back for the budget (growth on demand). */
int _gh_tm_dev_new(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out);
int _gh_tm_host_new(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out);
int _gh_tm_unit_get(gh_tmgr_t* tm, size_t k, int device, gh_tm_pa_t* pas, size_t* npas, const gh_stream_t* user);
void _gh_tm_vf_set(gh_tmgr_t* tm, size_t v, const gh_tm_pa_t* pas, size_t n);
size_t _gh_tm_vf_pas(const gh_tmgr_t* tm, size_t v, size_t k, gh_tm_pa_t* out);
void _gh_tm_vframes_drop(gh_tmgr_t* tm, size_t v, size_t n);
size_t _gh_tm_find_run(gh_tmgr_t* tm, size_t n);
void _gh_tm_slab_link(gh_tmgr_t* tm, size_t v, unsigned kind);
void _gh_tm_slab_unlink(gh_tmgr_t* tm, size_t v);
void _gh_tm_bits_set(uint64_t* b, size_t i, size_t n, int on);
size_t _gh_tm_slab_find(const gh_tmgr_t* tm, unsigned kind, gh_tier_t tier, size_t g, size_t* at);
int _gh_tm_cache_add(gh_tmgr_t* tm, size_t v0, size_t n, size_t ch);
int _gh_tm_cache_take(gh_tmgr_t* tm, size_t n, size_t* v0, size_t* got, size_t* ch);
size_t _gh_tm_cache_release(gh_tmgr_t* tm, size_t want);

/* "tensor_move.c" */
gh_tm_unit_t _gh_tm_unit_of(const gh_tmgr_t* tm, size_t v);
int _gh_tm_home_back(gh_tmgr_t* tm, gh_tensor_t* t);
size_t _gh_tm_move(gh_tmgr_t* tm, const gh_tm_unit_t* u, size_t n, gh_tier_t to);
int _gh_tm_move_rc(const gh_tmgr_t* tm, const char* what);
void _gh_tm_clean_unqueue(gh_tmgr_t* tm, gh_tensor_t* t);
void _gh_tm_clean_drop(gh_tmgr_t* tm, const gh_tensor_t* t);
void _gh_tm_clean_drop_all(gh_tmgr_t* tm);
int _gh_tm_clean(gh_tmgr_t* tm, gh_tensor_t* t);
void _gh_tm_clean_poll(gh_tmgr_t* tm);
size_t _gh_tm_device_room(gh_tmgr_t* tm, size_t k, gh_tm_take_t* take);
int _gh_tm_restore_units(gh_tmgr_t* tm, const gh_tm_unit_t* u, size_t nu, size_t m);
size_t _gh_tm_host_units(const gh_tmgr_t* tm, size_t v0, size_t n, gh_tm_unit_t* u, size_t* m);
int _gh_tm_restore_range(gh_tmgr_t* tm, size_t v0, size_t n);
void _gh_tm_held_flush(gh_tmgr_t* tm, const gh_stream_t* user);

#endif /* GPUHEAP_HOST_TENSOR_IMPL_H */
