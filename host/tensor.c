/* gpuheap: the tensor manager -- tensors for frameworks in frames of one
 * reserved range, from one device budget and one host budget; cold frames
 * are evicted to host frames mapped at the same address. host/TENSORS.md
 * tells the design at more length.
 *
 * Layout of the range (frames, from the provider):
 *
 *   [ device heap: heap_max | staging window: GH_TM_STAGE | tensors ... ]
 *
 * Glossary: a *vframe* is one frame-sized slot of the range, with its record
 * (gh_vframe_t: role, tier, the physical frame mapped there, tensor counts);
 * a *slab* is a vframe shared by small tensors of one kind (a bitmap of
 * 256-byte granules, first fit); a *run* is the vframes of one large tensor.
 * A tensor is LIVE until freed, then PENDING until the event recorded on its
 * free's stream completes, then its bytes are reclaimed; a vframe whose
 * tensors are all reclaimed is unmapped and its physical frame released
 * (device) or returned to the host pool.
 *
 * Invariants (checked by _gh_tmgr_check):
 *   dev_used  == |device frames created| == frames[DEVICE] + heap_frames[DEVICE] (+ frames in transit, 0 between calls)
 *   host_used == frames[HOST] + heap_frames[HOST] + pool_n + pool_inflight
 *   dev_used <= dev_budget_f,  host_used <= host_budget_f
 *   per vframe: live >= pending;  warm <= live - pending;  pins > 0 => tier == DEVICE
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
 * - Freed memory is reused once the free's event completes (queried lazily
 *   at every call; all pending events are waited for before a request is
 *   refused for want of room). Reuse by an allocation on the same stream
 *   before the event completes would be stream-safe for the bytes, but not
 *   for unmapping an emptied frame, so it is not done: one rule for all.
 *
 * Policy. New frames are device frames while the device budget allows;
 * otherwise cold frames are evicted (in one batch, down to low_watermark of
 * the budget, so that each sync point moves many frames) and the new frames
 * take their place; otherwise they are host frames; otherwise the request
 * fails with GH_ERR_BUDGET after the OOM observer is told. Victims are
 * chosen by a generalized CLOCK over unpinned device tensor frames: touching
 * a frame (alloc, prefetch, pin, restore) gives it 1 + kind credits
 * (workspace 1 ... weights 4); the hand takes a credit per pass and evicts
 * at 0. Frames whose tensors are all marked cold go first, with no credit.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "frames_sim.h"
#include "internal.h"
#include "tensor_internal.h"

/* Frames of the staging window: the largest batch one copy step moves. */
#define GH_TM_STAGE ((size_t)16)
/* Streams remembered per tensor; beyond, all streams seen are used. */
#define GH_TM_TENSOR_STREAMS 4
/* Recently freed starts remembered to tell a double free from a foreign
 * pointer. */
#define GH_TM_FREED_RING 4096

enum { GH_VF_FREE = 0, GH_VF_SLAB, GH_VF_RUN, GH_VF_HEAP, GH_VF_STAGE };
enum { GH_T_LIVE = 0, GH_T_PENDING = 1 };

typedef struct gh_tensor_s gh_tensor_t;

struct gh_tensor_s {
  uint8_t* ptr;
  size_t bytes;  /* requested */
  size_t span;   /* rounded to GH_TM_ALIGN */
  size_t vf0, nvf;  /* its vframes */
  uint32_t pins;
  uint8_t kind, cold, state, nstreams, many_streams;
  gh_stream_t streams[GH_TM_TENSOR_STREAMS];
  gh_fevent_t free_event;
  gh_stream_t free_stream;
  gh_tensor_t* hnext;               /* hash chain (live tensors only) */
  gh_tensor_t *next, *prev;         /* the live or the pending list */
  gh_tensor_t *fnext, *fprev;       /* a slab's tensors */
};

typedef struct gh_vframe_s {
  gh_pframe_t pf;       /* mapped here when tier != NONE */
  uint8_t tier, role, kind;
  uint8_t clock;        /* CLOCK credits */
  uint8_t mark;         /* chosen as a victim in this batch */
  uint32_t live;        /* tensors with bytes here, pending ones included */
  uint32_t pending;     /* ... of which freed, waiting for their event */
  uint32_t warm;        /* live, not pending, not cold */
  uint32_t pins;        /* pinned tensors with bytes here */
  uint32_t free_granules;  /* slab */
  uint64_t* bits;          /* slab: granule bitmap (1 = used) */
  gh_tensor_t* tensors;    /* run: its tensor; slab: list of its tensors */
  size_t snext, sprev;     /* slab: the kind's slab list (SIZE_MAX = none) */
} gh_vframe_t;

struct gh_tmgr_s {
  pthread_mutex_t mu;   /* the manager */
  pthread_mutex_t pmu;  /* provider calls */
  pthread_cond_t pool_cv;       /* pool thread: work or stop */
  pthread_cond_t pool_done_cv;  /* a pool creation finished */
  pthread_t pool_thread;
  int pool_running, pool_stop;

  const gh_frames_ops_t* ops;
  gh_frames_t* fr;
  gh_tmgr_options_t opt;
  uint8_t* base;
  size_t frame, n_va;
  size_t heap_vf, stage_vf0, tensor_vf0;
  gh_vframe_t* vf;
  size_t free_hint;  /* no FREE tensor vframe below it */
  size_t hand;       /* CLOCK hand */
  size_t prot_lo, prot_hi;  /* vframes that may not be chosen as victims now */

  size_t dev_budget_f, host_budget_f;
  size_t dev_used, host_used;
  size_t nframes[GH_TIER_COUNT], heap_nframes[GH_TIER_COUNT];
  gh_pframe_t* pool;
  size_t pool_n, pool_cap, pool_target, pool_inflight;

  size_t slab_head[GH_KIND_COUNT];
  gh_stream_t copy_stream;
  gh_stream_t* streams;  /* every stream seen */
  size_t n_streams, cap_streams;

  gh_tensor_t** buckets;
  size_t n_buckets, n_live;
  gh_tensor_t *live_head;
  gh_tensor_t *pend_head, *pend_tail;  /* pending frees, oldest first */
  size_t n_pending;
  const void* freed[GH_TM_FREED_RING];
  size_t freed_pos;

  size_t tensors[GH_KIND_COUNT], tensor_bytes[GH_KIND_COUNT], pinned_tensors;
  uint64_t evictions, restores, bytes_evicted, bytes_restored, oom_events, heap_grows, heap_shrinks;
  gh_oom_fn oom;
  void* oom_user;

  gh_heap_t* heap;
  size_t heap_online_f, heap_initial_f;
};

/* ---------------------------------------------------------------- provider
 * Every provider call goes through these, under pmu. */
#define GH_P(tm, call)                      \
  ({                                        \
    pthread_mutex_lock(&(tm)->pmu);         \
    const int gh_prc_ = (call);             \
    pthread_mutex_unlock(&(tm)->pmu);       \
    gh_prc_;                                \
  })

static uint8_t* gh_tm_va(const gh_tmgr_t* tm, size_t v) { return tm->base + v * tm->frame; }
static size_t gh_tm_round(size_t x, size_t a) { return (x + a - 1) / a * a; }
static uint8_t gh_tm_credit(unsigned kind) { return (uint8_t)(1 + kind); }

/* ---------------------------------------------------------------- streams */
static int gh_tm_stream_seen(gh_tmgr_t* tm, gh_stream_t s) {
  for (size_t i = 0; i < tm->n_streams; i++)
    if (tm->streams[i] == s) return GH_OK;
  if (tm->n_streams == tm->cap_streams) {
    const size_t cap = tm->cap_streams ? 2 * tm->cap_streams : 8;
    gh_stream_t* p = realloc(tm->streams, cap * sizeof *p);
    if (!p) return _gh_error(GH_ERR_NOMEM, "tensor manager: out of memory");
    tm->streams = p, tm->cap_streams = cap;
  }
  tm->streams[tm->n_streams++] = s;
  return GH_OK;
}

static void gh_tm_tensor_add_stream(gh_tensor_t* t, gh_stream_t s) {
  for (unsigned i = 0; i < t->nstreams; i++)
    if (t->streams[i] == s) return;
  if (t->nstreams < GH_TM_TENSOR_STREAMS)
    t->streams[t->nstreams++] = s;
  else
    t->many_streams = 1;
}

/* A small set of streams to synchronize with. */
typedef struct gh_tm_sset_s {
  gh_stream_t* s;
  size_t n, cap;
  int all;
} gh_tm_sset_t;

static void gh_tm_sset_add(gh_tm_sset_t* ss, gh_stream_t s) {
  for (size_t i = 0; i < ss->n; i++)
    if (ss->s[i] == s) return;
  if (ss->n == ss->cap) {
    const size_t cap = ss->cap ? 2 * ss->cap : 8;
    gh_stream_t* p = realloc(ss->s, cap * sizeof *p);
    if (!p) {  /* out of memory: fall back to every stream seen */
      ss->all = 1;
      return;
    }
    ss->s = p, ss->cap = cap;
  }
  ss->s[ss->n++] = s;
}

static void gh_tm_sset_tensor(gh_tm_sset_t* ss, const gh_tensor_t* t) {
  if (t->many_streams) ss->all = 1;
  for (unsigned i = 0; i < t->nstreams; i++) gh_tm_sset_add(ss, t->streams[i]);
}

/* Wait until every stream of the set has reached the present: record an
 * event on each and wait for it (not the whole device). */
static int gh_tm_sset_sync(gh_tmgr_t* tm, gh_tm_sset_t* ss) {
  int rc = GH_OK;
  const gh_stream_t* list = ss->all ? tm->streams : ss->s;
  const size_t n = ss->all ? tm->n_streams : ss->n;
  for (size_t i = 0; i < n && rc == GH_OK; i++) {
    gh_fevent_t e = 0;
    rc = GH_P(tm, tm->ops->event_record(tm->fr, list[i], &e));
    if (rc == GH_OK) {
      rc = GH_P(tm, tm->ops->event_sync(tm->fr, e));
      GH_P(tm, tm->ops->event_destroy(tm->fr, e));
    }
  }
  free(ss->s);
  memset(ss, 0, sizeof *ss);
  return rc;
}

/* The streams of every tensor with bytes in vframe v. */
static void gh_tm_sset_vframe(const gh_tmgr_t* tm, gh_tm_sset_t* ss, size_t v) {
  const gh_vframe_t* f = &tm->vf[v];
  if (f->role == GH_VF_RUN) {
    if (f->tensors) gh_tm_sset_tensor(ss, f->tensors);
  } else {
    for (const gh_tensor_t* t = f->tensors; t; t = t->fnext) gh_tm_sset_tensor(ss, t);
  }
}

/* ---------------------------------------------------------------- hash map ptr -> live tensor */
static size_t gh_tm_hash(const gh_tmgr_t* tm, const void* p) {
  return (size_t)((((uintptr_t)p >> 8) * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & (tm->n_buckets - 1);
}

static gh_tensor_t* gh_tm_find(const gh_tmgr_t* tm, const void* p) {
  for (gh_tensor_t* t = tm->buckets[gh_tm_hash(tm, p)]; t; t = t->hnext)
    if (t->ptr == p) return t;
  return NULL;
}

/* Room for one more entry (load factor <= 1), so that the insert after a
 * placement cannot fail. */
static int gh_tm_hash_reserve(gh_tmgr_t* tm) {
  if (tm->n_live + 1 <= tm->n_buckets) return GH_OK;
  const size_t nb = 2 * tm->n_buckets;
  gh_tensor_t** b = calloc(nb, sizeof *b);
  if (!b) return _gh_error(GH_ERR_NOMEM, "tensor manager: out of memory");
  gh_tensor_t** old = tm->buckets;
  const size_t ob = tm->n_buckets;
  tm->buckets = b, tm->n_buckets = nb;
  for (size_t i = 0; i < ob; i++)
    for (gh_tensor_t *u = old[i], *n; u; u = n) {
      n = u->hnext;
      const size_t h = gh_tm_hash(tm, u->ptr);
      u->hnext = b[h], b[h] = u;
    }
  free(old);
  return GH_OK;
}

static void gh_tm_hash_insert(gh_tmgr_t* tm, gh_tensor_t* t) {
  const size_t h = gh_tm_hash(tm, t->ptr);
  t->hnext = tm->buckets[h], tm->buckets[h] = t;
  tm->n_live++;
}

static void gh_tm_hash_remove(gh_tmgr_t* tm, gh_tensor_t* t) {
  for (gh_tensor_t** pp = &tm->buckets[gh_tm_hash(tm, t->ptr)]; *pp; pp = &(*pp)->hnext)
    if (*pp == t) {
      *pp = t->hnext;
      tm->n_live--;
      return;
    }
}

static void gh_tm_list_push(gh_tensor_t** head, gh_tensor_t* t) {
  t->prev = NULL, t->next = *head;
  if (*head) (*head)->prev = t;
  *head = t;
}
static void gh_tm_list_unlink(gh_tensor_t** head, gh_tensor_t* t) {
  if (t->prev) t->prev->next = t->next; else *head = t->next;
  if (t->next) t->next->prev = t->prev;
  t->next = t->prev = NULL;
}

/* A bad pointer: freed already (recently) or no tensor's start. */
static int gh_tm_bad_ptr(const gh_tmgr_t* tm, const void* p, const char* what) {
  if (!p) return _gh_error(GH_ERR_INVAL, "%s: NULL pointer", what);
  for (size_t i = 0; i < GH_TM_FREED_RING; i++)
    if (tm->freed[i] == p) return _gh_error(GH_ERR_DOUBLE_FREE, "%s: %p was freed already", what, p);
  return _gh_error(GH_ERR_FOREIGN, "%s: %p is no live tensor's start", what, p);
}

/* ---------------------------------------------------------------- host pool */
/* A host frame: from the pool, else created now within the host budget. */
static int gh_tm_host_get(gh_tmgr_t* tm, gh_pframe_t* out) {
  int rc;
  if (tm->pool_n) {
    *out = tm->pool[--tm->pool_n];
    rc = GH_OK;
  } else if (tm->host_used < tm->host_budget_f) {
    rc = GH_P(tm, tm->ops->create(tm->fr, GH_TIER_HOST, out));
    if (rc == GH_OK) tm->host_used++;
  } else {
    rc = _gh_error(GH_ERR_BUDGET, "host budget of %zu frames spent", tm->host_budget_f);
  }
  if (tm->pool_running) pthread_cond_signal(&tm->pool_cv);
  return rc;
}

/* A host frame mapped nowhere goes back to the pool (kept up to twice its
 * target), else is released. */
static void gh_tm_host_put(gh_tmgr_t* tm, gh_pframe_t pf) {
  if (tm->pool_n < 2 * tm->pool_target && tm->pool_n < tm->pool_cap) {
    tm->pool[tm->pool_n++] = pf;
    return;
  }
  GH_P(tm, tm->ops->release(tm->fr, pf));
  tm->host_used--;
}

/* The pool thread: keeps pool_target host frames created ahead of need.
 * It holds mu only to look at and hand over the pool, and pmu (alone) while
 * it creates a frame. */
static void* gh_tm_pool_main(void* arg) {
  gh_tmgr_t* tm = arg;
  pthread_mutex_lock(&tm->mu);
  while (!tm->pool_stop) {
    if (tm->pool_n + tm->pool_inflight < tm->pool_target && tm->host_used < tm->host_budget_f &&
        tm->pool_n < tm->pool_cap) {
      tm->host_used++, tm->pool_inflight++;  /* reserve the budget first */
      pthread_mutex_unlock(&tm->mu);
      gh_pframe_t pf = 0;
      const int rc = GH_P(tm, tm->ops->create(tm->fr, GH_TIER_HOST, &pf));
      pthread_mutex_lock(&tm->mu);
      tm->pool_inflight--;
      if (rc == GH_OK && tm->pool_n < tm->pool_cap) {
        tm->pool[tm->pool_n++] = pf;
      } else {
        if (rc == GH_OK) GH_P(tm, tm->ops->release(tm->fr, pf));
        tm->host_used--;
        pthread_cond_broadcast(&tm->pool_done_cv);
        if (!tm->pool_stop) pthread_cond_wait(&tm->pool_cv, &tm->mu);  /* failed: wait for a change */
        continue;
      }
      pthread_cond_broadcast(&tm->pool_done_cv);
    } else {
      pthread_cond_wait(&tm->pool_cv, &tm->mu);
    }
  }
  pthread_mutex_unlock(&tm->mu);
  return NULL;
}

/* Wait (under mu) until no pool creation holds host budget in flight. */
static void gh_tm_pool_quiesce(gh_tmgr_t* tm) {
  while (tm->pool_inflight) pthread_cond_wait(&tm->pool_done_cv, &tm->mu);
}

/* ---------------------------------------------------------------- frames */
static void gh_tm_count(gh_tmgr_t* tm, const gh_vframe_t* f, int delta) {
  if (f->tier == GH_TIER_NONE) return;
  if (f->role == GH_VF_HEAP)
    tm->heap_nframes[f->tier] += (size_t)delta;
  else
    tm->nframes[f->tier] += (size_t)delta;
}

/* Release a physical frame mapped nowhere. */
static void gh_tm_pf_drop(gh_tmgr_t* tm, gh_tier_t tier, gh_pframe_t pf) {
  if (tier == GH_TIER_HOST) {
    gh_tm_host_put(tm, pf);
  } else {
    GH_P(tm, tm->ops->release(tm->fr, pf));
    tm->dev_used--;
  }
}

/* Physical frames for n vframes: `dev` device frames (within the budget,
 * checked by the caller), the rest host frames. All or nothing. */
static int gh_tm_pf_get(gh_tmgr_t* tm, size_t n, size_t dev, gh_pframe_t* pfs, uint8_t* tiers) {
  size_t i = 0;
  int rc = GH_OK;
  for (; i < n; i++) {
    if (i < dev) {
      rc = GH_P(tm, tm->ops->create(tm->fr, GH_TIER_DEVICE, &pfs[i]));
      if (rc == GH_OK) tm->dev_used++;
      tiers[i] = GH_TIER_DEVICE;
    } else {
      rc = gh_tm_host_get(tm, &pfs[i]);
      tiers[i] = GH_TIER_HOST;
    }
    if (rc != GH_OK) break;
  }
  if (rc == GH_OK) return GH_OK;
  while (i-- > 0) gh_tm_pf_drop(tm, (gh_tier_t)tiers[i], pfs[i]);
  return rc;
}

/* Unmap vframes [v, v + n) (all mapped) and release their frames. */
static void gh_tm_vframes_drop(gh_tmgr_t* tm, size_t v, size_t n) {
  GH_P(tm, tm->ops->unmap(tm->fr, gh_tm_va(tm, v), n));
  for (size_t i = v; i < v + n; i++) {
    gh_vframe_t* f = &tm->vf[i];
    gh_tm_count(tm, f, -1);
    gh_tm_pf_drop(tm, (gh_tier_t)f->tier, f->pf);
    free(f->bits);
    memset(f, 0, sizeof *f);
    f->snext = f->sprev = SIZE_MAX;
    if (i >= tm->tensor_vf0 && i < tm->free_hint) tm->free_hint = i;
  }
}

/* First fit: n consecutive FREE vframes in the tensor region, or SIZE_MAX. */
static size_t gh_tm_find_run(gh_tmgr_t* tm, size_t n) {
  size_t i = tm->free_hint;
  while (i < tm->n_va && tm->vf[i].role != GH_VF_FREE) i++;
  tm->free_hint = i;
  while (i + n <= tm->n_va) {
    size_t j = 0;
    while (j < n && tm->vf[i + j].role == GH_VF_FREE) j++;
    if (j == n) return i;
    i += j + 1;
    while (i < tm->n_va && tm->vf[i].role != GH_VF_FREE) i++;
  }
  return SIZE_MAX;
}

/* Move vframes idx[0..n) (ascending, all mapped in the other tier) to tier
 * `to`, in steps of at most GH_TM_STAGE frames: new frames mapped at the
 * staging window, one copy per contiguous run on the copy stream, a sync,
 * then home unmapped and the new frames mapped there (one map call per
 * contiguous run), the old frames released. Device frames for a restore are
 * within the budget (checked by the caller). Returns the frames moved
 * (fewer when the target tier ran out). */
static size_t gh_tm_move(gh_tmgr_t* tm, const size_t* idx, size_t n, gh_tier_t to) {
  if (n == 0) return 0;
  gh_tm_sset_t ss = {0};
  for (size_t i = 0; i < n; i++) gh_tm_sset_vframe(tm, &ss, idx[i]);
  if (gh_tm_sset_sync(tm, &ss) != GH_OK) return 0;
  size_t moved = 0, done = 0;
  const gh_tier_t from = to == GH_TIER_DEVICE ? GH_TIER_HOST : GH_TIER_DEVICE;
  uint8_t* stage = gh_tm_va(tm, tm->stage_vf0);
  gh_pframe_t pfs[GH_TM_STAGE];
  uint8_t tiers[GH_TM_STAGE];
  while (moved < n) {
    const size_t* c = idx + moved;
    size_t k = n - moved < GH_TM_STAGE ? n - moved : GH_TM_STAGE;
    /* New frames, as many as the tier gives. */
    size_t got = 0;
    for (; got < k; got++) {
      if (gh_tm_pf_get(tm, 1, to == GH_TIER_DEVICE ? 1 : 0, &pfs[got], &tiers[got]) != GH_OK) break;
    }
    if (got == 0) break;
    k = got;
    int rc = GH_P(tm, tm->ops->map(tm->fr, stage, pfs, k));
    if (rc == GH_OK) {
      for (size_t i = 0; i < k && rc == GH_OK;) {  /* one copy per contiguous run */
        size_t j = i + 1;
        while (j < k && c[j] == c[j - 1] + 1) j++;
        rc = GH_P(tm, tm->ops->copy(tm->fr, stage + i * tm->frame, gh_tm_va(tm, c[i]), (j - i) * tm->frame,
                                     tm->copy_stream));
        i = j;
      }
      if (rc == GH_OK) rc = GH_P(tm, tm->ops->stream_sync(tm->fr, tm->copy_stream));
      GH_P(tm, tm->ops->unmap(tm->fr, stage, k));
    }
    if (rc != GH_OK) {
      for (size_t i = 0; i < k; i++) gh_tm_pf_drop(tm, (gh_tier_t)tiers[i], pfs[i]);
      break;
    }
    for (size_t i = 0; i < k;) {
      size_t j = i + 1;
      while (j < k && c[j] == c[j - 1] + 1) j++;
      uint8_t* home = gh_tm_va(tm, c[i]);
      rc = GH_P(tm, tm->ops->unmap(tm->fr, home, j - i));
      if (rc == GH_OK) {
        rc = GH_P(tm, tm->ops->map(tm->fr, home, &pfs[i], j - i));
        if (rc != GH_OK) {  /* put the old frames back */
          gh_pframe_t old[GH_TM_STAGE];
          for (size_t u = i; u < j; u++) old[u - i] = tm->vf[c[u]].pf;
          GH_P(tm, tm->ops->map(tm->fr, home, old, j - i));
        }
      }
      for (size_t u = i; u < j; u++) {
        gh_vframe_t* f = &tm->vf[c[u]];
        if (rc != GH_OK) {
          gh_tm_pf_drop(tm, (gh_tier_t)tiers[u], pfs[u]);
          continue;
        }
        done++;
        gh_tm_count(tm, f, -1);
        gh_tm_pf_drop(tm, from, f->pf);
        f->pf = pfs[u];
        f->tier = (uint8_t)to;
        gh_tm_count(tm, f, +1);
        if (to == GH_TIER_HOST) {
          tm->evictions++, tm->bytes_evicted += tm->frame;
        } else {
          tm->restores++, tm->bytes_restored += tm->frame;
          f->clock = gh_tm_credit(f->kind);
        }
      }
      i = j;
    }
    moved += k;
    if (k < GH_TM_STAGE && moved < n) break;  /* the target tier ran out */
  }
  return done;
}

static int gh_tm_victim_ok(const gh_tmgr_t* tm, size_t v) {
  const gh_vframe_t* f = &tm->vf[v];
  return f->tier == GH_TIER_DEVICE && (f->role == GH_VF_SLAB || f->role == GH_VF_RUN) && f->pins == 0 &&
         f->live > f->pending && !f->mark && (v < tm->prot_lo || v >= tm->prot_hi);
}

static int gh_tm_cmp_size(const void* a, const void* b) {
  const size_t x = *(const size_t*)a, y = *(const size_t*)b;
  return x < y ? -1 : x > y;
}

/* Evict `want` device tensor frames (fewer if fewer can go): all-cold
 * frames first, then by CLOCK. Returns the frames evicted. */
static size_t gh_tm_evict(gh_tmgr_t* tm, size_t want) {
  if (want == 0) return 0;
  size_t* idx = malloc(want * sizeof *idx);
  if (!idx) return 0;
  size_t n = 0;
  for (size_t v = tm->tensor_vf0; v < tm->n_va && n < want; v++)
    if (gh_tm_victim_ok(tm, v) && tm->vf[v].warm == 0) idx[n++] = v, tm->vf[v].mark = 1;
  const size_t region = tm->n_va - tm->tensor_vf0;
  /* Each pass takes a credit from every candidate: at most 1 + max credit passes. */
  for (size_t step = 0; n < want && step < region * (size_t)(2 + gh_tm_credit(GH_KIND_WEIGHTS)); step++) {
    if (tm->hand < tm->tensor_vf0 || tm->hand >= tm->n_va) tm->hand = tm->tensor_vf0;
    const size_t v = tm->hand++;
    if (!gh_tm_victim_ok(tm, v)) continue;
    if (tm->vf[v].clock) {
      tm->vf[v].clock--;
    } else {
      idx[n++] = v, tm->vf[v].mark = 1;
    }
  }
  for (size_t i = 0; i < n; i++) tm->vf[idx[i]].mark = 0;
  qsort(idx, n, sizeof *idx, gh_tm_cmp_size);
  const size_t moved = gh_tm_move(tm, idx, n, GH_TIER_HOST);
  free(idx);
  return moved;
}

/* Make room for k new device frames: evict if the budget is spent, in one
 * batch down to the low watermark. Returns how many of the k fit now. */
static size_t gh_tm_device_room(gh_tmgr_t* tm, size_t k) {
  if (tm->dev_used + k > tm->dev_budget_f) {
    const size_t low = (size_t)(tm->opt.low_watermark * (double)tm->dev_budget_f);
    size_t want = tm->dev_used + k - tm->dev_budget_f;
    if (tm->dev_used + k > low && tm->dev_used + k - low > want) want = tm->dev_used + k - low;
    gh_tm_evict(tm, want);
  }
  const size_t avail = tm->dev_budget_f > tm->dev_used ? tm->dev_budget_f - tm->dev_used : 0;
  return avail < k ? avail : k;
}

/* Bring the host frames of vframes [v0, v0 + n) to the device (evicting
 * others, never these). GH_OK when all of them are on the device. */
static int gh_tm_restore_range(gh_tmgr_t* tm, size_t v0, size_t n) {
  size_t* idx = malloc(n * sizeof *idx);
  if (!idx) return _gh_error(GH_ERR_NOMEM, "tensor manager: out of memory");
  size_t m = 0;
  for (size_t v = v0; v < v0 + n; v++)
    if (tm->vf[v].tier == GH_TIER_HOST) idx[m++] = v;
  int rc = GH_OK;
  if (m) {
    tm->prot_lo = v0, tm->prot_hi = v0 + n;
    const size_t room = gh_tm_device_room(tm, m);
    tm->prot_lo = tm->prot_hi = 0;
    const size_t moved = gh_tm_move(tm, idx, room, GH_TIER_DEVICE);
    if (moved < m) rc = _gh_error(GH_ERR_BUDGET, "restore: %zu of %zu frames found no device room", m - moved, m);
  }
  free(idx);
  return rc;
}

/* ---------------------------------------------------------------- slabs */
static void gh_tm_slab_link(gh_tmgr_t* tm, size_t v, unsigned kind) {
  gh_vframe_t* f = &tm->vf[v];
  f->sprev = SIZE_MAX, f->snext = tm->slab_head[kind];
  if (f->snext != SIZE_MAX) tm->vf[f->snext].sprev = v;
  tm->slab_head[kind] = v;
}
static void gh_tm_slab_unlink(gh_tmgr_t* tm, size_t v) {
  gh_vframe_t* f = &tm->vf[v];
  if (f->sprev != SIZE_MAX) tm->vf[f->sprev].snext = f->snext; else tm->slab_head[f->kind] = f->snext;
  if (f->snext != SIZE_MAX) tm->vf[f->snext].sprev = f->sprev;
  f->snext = f->sprev = SIZE_MAX;
}

static int gh_tm_bit(const uint64_t* b, size_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1); }
static void gh_tm_bits_set(uint64_t* b, size_t i, size_t n, int on) {
  for (size_t j = i; j < i + n; j++) {
    if (on) b[j >> 6] |= UINT64_C(1) << (j & 63);
    else b[j >> 6] &= ~(UINT64_C(1) << (j & 63));
  }
}

/* First fit of g granules in a slab; SIZE_MAX when none. */
static size_t gh_tm_slab_fit(const gh_tmgr_t* tm, const gh_vframe_t* f, size_t g) {
  const size_t n = tm->frame / GH_TM_ALIGN;
  if (f->free_granules < g) return SIZE_MAX;
  size_t i = 0;
  while (i + g <= n) {
    if (f->bits[i >> 6] == UINT64_MAX && (i & 63) == 0) {
      i += 64;
      continue;
    }
    size_t j = 0;
    while (j < g && !gh_tm_bit(f->bits, i + j)) j++;
    if (j == g) return i;
    i += j + 1;
  }
  return SIZE_MAX;
}

/* A slab of `kind` in `tier` with room for g granules (first fit); its
 * granule in *at. SIZE_MAX when none. */
static size_t gh_tm_slab_find(const gh_tmgr_t* tm, unsigned kind, gh_tier_t tier, size_t g, size_t* at) {
  for (size_t s = tm->slab_head[kind]; s != SIZE_MAX; s = tm->vf[s].snext)
    if (tm->vf[s].tier == tier && (*at = gh_tm_slab_fit(tm, &tm->vf[s], g)) != SIZE_MAX) return s;
  return SIZE_MAX;
}

/* ---------------------------------------------------------------- tensors */
static void gh_tm_tensor_frames(gh_tmgr_t* tm, gh_tensor_t* t, int live_d, int warm_d, int pins_d, int pend_d) {
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
    gh_vframe_t* f = &tm->vf[v];
    f->live += (uint32_t)live_d, f->warm += (uint32_t)warm_d, f->pins += (uint32_t)pins_d;
    f->pending += (uint32_t)pend_d;
  }
}

/* Place a tensor of `span` bytes; GH_ERR_BUDGET when neither tier has
 * room (nothing changed then). */
static int gh_tm_place(gh_tmgr_t* tm, gh_tensor_t* t) {
  const unsigned kind = t->kind;
  if (t->span < GH_TM_SMALL_MAX) {
    const size_t g = t->span / GH_TM_ALIGN;
    size_t at = SIZE_MAX;
    /* 1. A device slab of the kind with room; 2. a new frame on the device
     * (evicting for it); 3. a host slab with room; 4. a new host frame. */
    size_t v = gh_tm_slab_find(tm, kind, GH_TIER_DEVICE, g, &at);
    if (v == SIZE_MAX) {
      const size_t nv = gh_tm_find_run(tm, 1);
      if (nv == SIZE_MAX) return _gh_error(GH_ERR_BUDGET, "the virtual range is full");
      const size_t dev = gh_tm_device_room(tm, 1);
      gh_pframe_t pf = 0;
      uint8_t tier = GH_TIER_NONE;
      int rc = dev ? gh_tm_pf_get(tm, 1, 1, &pf, &tier) : GH_ERR_BUDGET;
      if (rc != GH_OK) {
        v = gh_tm_slab_find(tm, kind, GH_TIER_HOST, g, &at);
        if (v == SIZE_MAX) rc = gh_tm_pf_get(tm, 1, 0, &pf, &tier);
      }
      if (v == SIZE_MAX) {
        if (rc != GH_OK) return _gh_error(GH_ERR_BUDGET, "no room for %zu bytes in either tier", t->bytes);
        const size_t words = (tm->frame / GH_TM_ALIGN + 63) / 64;
        uint64_t* bits = calloc(words, sizeof *bits);
        rc = bits ? GH_P(tm, tm->ops->map(tm->fr, gh_tm_va(tm, nv), &pf, 1)) : GH_ERR_NOMEM;
        if (rc != GH_OK) {
          free(bits);
          gh_tm_pf_drop(tm, (gh_tier_t)tier, pf);
          return _gh_error(GH_ERR_NOMEM, "cannot map a frame for %zu bytes", t->bytes);
        }
        gh_vframe_t* f = &tm->vf[nv];
        f->pf = pf, f->tier = tier, f->role = GH_VF_SLAB, f->kind = (uint8_t)kind;
        f->bits = bits, f->free_granules = (uint32_t)(tm->frame / GH_TM_ALIGN);
        gh_tm_count(tm, f, +1);
        gh_tm_slab_link(tm, nv, kind);
        v = nv, at = 0;
      }
    }
    gh_vframe_t* f = &tm->vf[v];
    gh_tm_bits_set(f->bits, at, g, 1);
    f->free_granules -= (uint32_t)g;
    t->ptr = gh_tm_va(tm, v) + at * GH_TM_ALIGN;
    t->vf0 = v, t->nvf = 1;
    t->fprev = NULL, t->fnext = f->tensors;
    if (f->tensors) f->tensors->fprev = t;
    f->tensors = t;
  } else {
    const size_t n = (t->span + tm->frame - 1) / tm->frame;
    const size_t v = gh_tm_find_run(tm, n);
    if (v == SIZE_MAX) return _gh_error(GH_ERR_BUDGET, "the virtual range has no run of %zu frames", n);
    gh_pframe_t* pfs = malloc(n * (sizeof *pfs + 1));
    if (!pfs) return _gh_error(GH_ERR_NOMEM, "out of memory");
    uint8_t* tiers = (uint8_t*)(pfs + n);
    const size_t dev = gh_tm_device_room(tm, n);
    int rc = gh_tm_pf_get(tm, n, dev, pfs, tiers);
    if (rc == GH_ERR_DEVICE_NOMEM) rc = gh_tm_pf_get(tm, n, 0, pfs, tiers);  /* the provider refused */
    if (rc == GH_OK && GH_P(tm, tm->ops->map(tm->fr, gh_tm_va(tm, v), pfs, n)) != GH_OK) {
      for (size_t i = 0; i < n; i++) gh_tm_pf_drop(tm, (gh_tier_t)tiers[i], pfs[i]);
      rc = GH_ERR_NOMEM;
    }
    if (rc != GH_OK) {
      free(pfs);
      return rc == GH_ERR_NOMEM ? _gh_error(rc, "cannot map %zu frames", n)
                                : _gh_error(GH_ERR_BUDGET, "no room for %zu bytes in either tier", t->bytes);
    }
    for (size_t i = 0; i < n; i++) {
      gh_vframe_t* f = &tm->vf[v + i];
      f->pf = pfs[i], f->tier = tiers[i], f->role = GH_VF_RUN, f->kind = (uint8_t)kind;
      f->tensors = t;
      gh_tm_count(tm, f, +1);
    }
    free(pfs);
    t->ptr = gh_tm_va(tm, v);
    t->vf0 = v, t->nvf = n;
  }
  gh_tm_tensor_frames(tm, t, +1, +1, 0, 0);
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++)
    if (tm->vf[v].clock < gh_tm_credit(kind)) tm->vf[v].clock = gh_tm_credit(kind);
  return GH_OK;
}

/* Give back a pending tensor's bytes; frames left empty go. */
static void gh_tm_reclaim_tensor(gh_tmgr_t* tm, gh_tensor_t* t) {
  gh_tm_tensor_frames(tm, t, -1, 0, 0, -1);
  gh_vframe_t* f = &tm->vf[t->vf0];
  if (f->role == GH_VF_SLAB) {
    const size_t at = (size_t)(t->ptr - gh_tm_va(tm, t->vf0)) / GH_TM_ALIGN, g = t->span / GH_TM_ALIGN;
    gh_tm_bits_set(f->bits, at, g, 0);
    f->free_granules += (uint32_t)g;
    if (t->fprev) t->fprev->fnext = t->fnext; else f->tensors = t->fnext;
    if (t->fnext) t->fnext->fprev = t->fprev;
    if (f->live == 0) {
      gh_tm_slab_unlink(tm, t->vf0);
      gh_tm_vframes_drop(tm, t->vf0, 1);
    }
  } else {
    gh_tm_vframes_drop(tm, t->vf0, t->nvf);
  }
  free(t);
}

static void gh_tm_pend_push(gh_tmgr_t* tm, gh_tensor_t* t) {
  t->next = NULL, t->prev = tm->pend_tail;
  if (tm->pend_tail) tm->pend_tail->next = t; else tm->pend_head = t;
  tm->pend_tail = t;
}
static void gh_tm_pend_unlink(gh_tmgr_t* tm, gh_tensor_t* t) {
  if (t->prev) t->prev->next = t->next; else tm->pend_head = t->next;
  if (t->next) t->next->prev = t->prev; else tm->pend_tail = t->prev;
  t->next = t->prev = NULL;
}

/* Reclaim pending frees whose events completed (sync: wait for all). The
 * list is oldest first and a stream reaches its events in order, so once
 * one event of a stream is not complete the later ones of that stream are
 * not asked: a call costs one query per stream with pending frees, not one
 * per pending free. */
static void gh_tm_reclaim(gh_tmgr_t* tm, int sync) {
  gh_tm_sset_t busy = {0};
  for (gh_tensor_t *t = tm->pend_head, *n; t; t = n) {
    n = t->next;
    int blocked = 0;
    for (size_t i = 0; i < busy.n && !blocked; i++) blocked = busy.s[i] == t->free_stream;
    if (blocked) continue;
    const int rc = t->free_event ? GH_P(tm, sync ? tm->ops->event_sync(tm->fr, t->free_event)
                                                 : tm->ops->event_query(tm->fr, t->free_event))
                                 : GH_OK;
    if (rc != GH_OK) {
      gh_tm_sset_add(&busy, t->free_stream);
      continue;
    }
    if (t->free_event) GH_P(tm, tm->ops->event_destroy(tm->fr, t->free_event));
    gh_tm_pend_unlink(tm, t);
    tm->n_pending--;
    gh_tm_reclaim_tensor(tm, t);
  }
  free(busy.s);
}

static void gh_tm_snapshot(gh_tmgr_t* tm, gh_tmgr_stats_t* s);

/* ---------------------------------------------------------------- public */
void gh_tmgr_options_init(gh_tmgr_options_t* o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->device = -1;
  o->backend = GH_BACKEND_DEFAULT;
  o->device_reserve = (size_t)1 << 30;
  o->low_watermark = 0.85;
  o->high_watermark = 0.90;
  gh_heap_options_init(&o->heap);
  o->host_pool_frames = 16;
}

static void gh_tm_free_all(gh_tmgr_t* tm);

int gh_tmgr_create(gh_tmgr_t** out, const gh_tmgr_options_t* opts) {
  if (!out) return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: NULL result pointer");
  *out = NULL;
  gh_tmgr_options_t o;
  if (opts) o = *opts; else gh_tmgr_options_init(&o);
  if (!(o.low_watermark > 0 && o.low_watermark <= 1) || !(o.high_watermark > 0 && o.high_watermark <= 1))
    return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: watermarks must lie in (0, 1]");
  if (o.heap_max_bytes == 0) o.heap_max_bytes = o.heap_bytes;
  if (o.heap.device < 0) o.heap.device = o.device;
  if (o.heap_max_bytes < o.heap_bytes) return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: heap_max_bytes < heap_bytes");
  const gh_frames_ops_t* ops = _gh_frames_select(o.backend);
  if (!ops) return o.backend == GH_BACKEND_CUDA_VMM ? GH_ERR_UNSUPPORTED : GH_ERR_INVAL;

  /* The default budgets need the device's free memory: ask a provider of
   * one frame's range first. */
  gh_frames_t* fr = NULL;
  uint8_t* base = NULL;
  size_t frame = 0;
  int rc = ops->open(&fr, o.device, 1, &base, &frame);
  if (rc != GH_OK) return rc;
  if (o.device_budget == 0) {
    size_t fb = 0, tb = 0;
    rc = ops->device_free(fr, &fb, &tb);
    if (rc != GH_OK) {
      ops->close(fr);
      return rc;
    }
    o.device_budget = fb > o.device_reserve ? fb - o.device_reserve : 0;
  }
  ops->close(fr);
  fr = NULL;
  if (o.host_budget == 0) o.host_budget = o.device_budget / 2 > ((size_t)1 << 30) ? o.device_budget / 2 : (size_t)1 << 30;
  if (o.device_budget < frame) return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: device budget below one frame");
  const size_t heap_vf = (o.heap_max_bytes + frame - 1) / frame;
  const size_t fixed = (heap_vf + GH_TM_STAGE) * frame;
  if (o.va_bytes == 0) o.va_bytes = 4 * (o.device_budget + o.host_budget) + fixed;
  if (o.va_bytes < fixed + frame) return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: va_bytes too small");

  gh_tmgr_t* tm = calloc(1, sizeof *tm);
  if (!tm) return _gh_error(GH_ERR_NOMEM, "gh_tmgr_create: out of memory");
  tm->opt = o;
  tm->ops = ops;
  pthread_mutex_init(&tm->mu, NULL);
  pthread_mutex_init(&tm->pmu, NULL);
  pthread_cond_init(&tm->pool_cv, NULL);
  pthread_cond_init(&tm->pool_done_cv, NULL);
  for (unsigned k = 0; k < GH_KIND_COUNT; k++) tm->slab_head[k] = SIZE_MAX;
  rc = ops->open(&tm->fr, o.device, o.va_bytes, &tm->base, &tm->frame);
  if (rc != GH_OK) goto fail;
  tm->n_va = o.va_bytes / tm->frame;
  tm->heap_vf = heap_vf;
  tm->stage_vf0 = heap_vf;
  tm->tensor_vf0 = heap_vf + GH_TM_STAGE;
  tm->free_hint = tm->hand = tm->tensor_vf0;
  tm->dev_budget_f = o.device_budget / tm->frame;
  tm->host_budget_f = o.host_budget / tm->frame;
  tm->pool_target = o.host_pool_frames < tm->host_budget_f ? o.host_pool_frames : tm->host_budget_f;
  tm->pool_cap = 2 * tm->pool_target + 1;
  tm->vf = calloc(tm->n_va, sizeof *tm->vf);
  tm->pool = calloc(tm->pool_cap, sizeof *tm->pool);
  tm->n_buckets = 256;
  tm->buckets = calloc(tm->n_buckets, sizeof *tm->buckets);
  if (!tm->vf || !tm->pool || !tm->buckets) {
    rc = _gh_error(GH_ERR_NOMEM, "gh_tmgr_create: out of memory");
    goto fail;
  }
  for (size_t v = 0; v < tm->n_va; v++) tm->vf[v].snext = tm->vf[v].sprev = SIZE_MAX;
  for (size_t v = 0; v < heap_vf; v++) tm->vf[v].role = GH_VF_HEAP;
  for (size_t v = tm->stage_vf0; v < tm->tensor_vf0; v++) tm->vf[v].role = GH_VF_STAGE;
  rc = ops->stream_create(tm->fr, &tm->copy_stream);
  if (rc != GH_OK) goto fail;

  if (o.heap_bytes) {
    const size_t nf = (o.heap_bytes + tm->frame - 1) / tm->frame;
    if (nf > tm->dev_budget_f) {
      rc = _gh_error(GH_ERR_BUDGET, "gh_tmgr_create: the device heap (%zu frames) exceeds the device budget", nf);
      goto fail;
    }
    gh_pframe_t* pfs = malloc(nf * (sizeof *pfs + 1));
    if (!pfs) {
      rc = _gh_error(GH_ERR_NOMEM, "gh_tmgr_create: out of memory");
      goto fail;
    }
    uint8_t* tiers = (uint8_t*)(pfs + nf);
    rc = gh_tm_pf_get(tm, nf, nf, pfs, tiers);
    if (rc == GH_OK) {
      rc = ops->map(tm->fr, tm->base, pfs, nf);
      if (rc != GH_OK)
        for (size_t i = 0; i < nf; i++) gh_tm_pf_drop(tm, (gh_tier_t)tiers[i], pfs[i]);
    }
    if (rc == GH_OK)
      for (size_t i = 0; i < nf; i++) {
        tm->vf[i].pf = pfs[i], tm->vf[i].tier = tiers[i];
        gh_tm_count(tm, &tm->vf[i], +1);
      }
    free(pfs);
    if (rc != GH_OK) goto fail;
    tm->heap_online_f = tm->heap_initial_f = nf;
    rc = _gh_heap_create_managed(&tm->heap, tm, tm->base, heap_vf * tm->frame, nf * tm->frame, &o.heap);
    if (rc != GH_OK) goto fail;
  }
  if (tm->pool_target) {
    if (pthread_create(&tm->pool_thread, NULL, gh_tm_pool_main, tm) == 0) tm->pool_running = 1;
  }
  *out = tm;
  return GH_OK;
fail:
  gh_tm_free_all(tm);
  return rc;
}

/* Tear down everything (no pool thread running). */
static void gh_tm_free_all(gh_tmgr_t* tm) {
  if (tm->fr) {
    for (gh_tensor_t* t = tm->pend_head; t; t = t->next)
      if (t->free_event) {
        GH_P(tm, tm->ops->event_sync(tm->fr, t->free_event));
        GH_P(tm, tm->ops->event_destroy(tm->fr, t->free_event));
        t->free_event = 0;
      }
    gh_tm_reclaim(tm, 1);
    /* Live tensors: mark them pending with no event and reclaim them. */
    while (tm->live_head) {
      gh_tensor_t* t = tm->live_head;
      gh_tm_list_unlink(&tm->live_head, t);
      gh_tm_hash_remove(tm, t);
      gh_tm_tensor_frames(tm, t, 0, t->cold ? 0 : -1, t->pins ? -1 : 0, +1);
      gh_tm_reclaim_tensor(tm, t);
    }
    if (tm->heap) _gh_heap_destroy_managed(tm->heap);
    tm->heap = NULL;
    for (size_t v = 0; v < tm->heap_vf; v++)
      if (tm->vf[v].tier != GH_TIER_NONE) {
        tm->ops->unmap(tm->fr, gh_tm_va(tm, v), 1);
        gh_tm_count(tm, &tm->vf[v], -1);
        gh_tm_pf_drop(tm, (gh_tier_t)tm->vf[v].tier, tm->vf[v].pf);
        tm->vf[v].tier = GH_TIER_NONE;
      }
    tm->pool_target = 0;
    while (tm->pool_n) {
      tm->ops->release(tm->fr, tm->pool[--tm->pool_n]);
      tm->host_used--;
    }
    if (tm->copy_stream) tm->ops->stream_destroy(tm->fr, tm->copy_stream);
    tm->ops->close(tm->fr);
  }
  free(tm->vf);
  free(tm->pool);
  free(tm->buckets);
  free(tm->streams);
  pthread_cond_destroy(&tm->pool_cv);
  pthread_cond_destroy(&tm->pool_done_cv);
  pthread_mutex_destroy(&tm->pmu);
  pthread_mutex_destroy(&tm->mu);
  free(tm);
}

int gh_tmgr_destroy(gh_tmgr_t* tm) {
  if (!tm) return GH_OK;
  pthread_mutex_lock(&tm->mu);
  tm->pool_stop = 1;
  pthread_cond_broadcast(&tm->pool_cv);
  pthread_mutex_unlock(&tm->mu);
  if (tm->pool_running) pthread_join(tm->pool_thread, NULL);
  tm->pool_running = 0;
  gh_tm_free_all(tm);
  return GH_OK;
}

int gh_tensor_alloc(gh_tmgr_t* tm, size_t bytes, gh_kind_t kind, gh_stream_t stream, void** ptr) {
  if (ptr) *ptr = NULL;
  if (!tm || !ptr) return _gh_error(GH_ERR_INVAL, "gh_tensor_alloc: NULL argument");
  if (bytes == 0) return _gh_error(GH_ERR_INVAL, "gh_tensor_alloc: size 0");
  if ((unsigned)kind >= GH_KIND_COUNT) return _gh_error(GH_ERR_INVAL, "gh_tensor_alloc: kind %d", (int)kind);
  if (bytes > SIZE_MAX / 4) return _gh_error(GH_ERR_INVAL, "gh_tensor_alloc: size %zu overflows", bytes);
  gh_tensor_t* t = calloc(1, sizeof *t);
  if (!t) return _gh_error(GH_ERR_NOMEM, "gh_tensor_alloc: out of memory");
  t->bytes = bytes;
  t->span = gh_tm_round(bytes, GH_TM_ALIGN);
  t->kind = (uint8_t)kind;
  t->streams[0] = stream, t->nstreams = 1;
  gh_tmgr_stats_t snap;
  pthread_mutex_lock(&tm->mu);
  int rc = gh_tm_stream_seen(tm, stream);
  if (rc == GH_OK) rc = gh_tm_hash_reserve(tm);
  if (rc == GH_OK) {
    gh_tm_reclaim(tm, 0);
    const size_t budget = (tm->dev_budget_f + tm->host_budget_f) * tm->frame;
    if (t->span > budget) {
      rc = _gh_error(GH_ERR_BUDGET, "gh_tensor_alloc: %zu bytes exceed both budgets (%zu)", bytes, budget);
    } else {
      rc = gh_tm_place(tm, t);
      if (rc == GH_ERR_BUDGET && (tm->pend_head || tm->pool_inflight)) {
        /* Wait for the pending frees and the pool, then try again. */
        gh_tm_reclaim(tm, 1);
        gh_tm_pool_quiesce(tm);
        rc = gh_tm_place(tm, t);
      }
    }
    if (rc == GH_OK) {
      gh_tm_hash_insert(tm, t);
      gh_tm_list_push(&tm->live_head, t);
      tm->tensors[kind]++, tm->tensor_bytes[kind] += bytes;
      *ptr = t->ptr;
    } else if (rc == GH_ERR_BUDGET) {
      tm->oom_events++;
      if (tm->oom) gh_tm_snapshot(tm, &snap);
    }
  }
  const gh_oom_fn oom = tm->oom;
  void* user = tm->oom_user;
  pthread_mutex_unlock(&tm->mu);
  if (rc != GH_OK) {
    free(t);
    if (rc == GH_ERR_BUDGET && oom) {
      char detail[256];
      strncpy(detail, gh_last_error_detail(), sizeof detail - 1);
      detail[sizeof detail - 1] = 0;
      oom(user, bytes, &snap);  /* outside the lock: the observer may call the manager */
      _gh_error(rc, "%s", detail);
    }
  }
  return rc;
}

int gh_tensor_free(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_free: NULL manager");
  if (!ptr) return GH_OK;  /* as free(NULL) */
  pthread_mutex_lock(&tm->mu);
  gh_tm_reclaim(tm, 0);
  gh_tensor_t* t = ptr ? gh_tm_find(tm, ptr) : NULL;
  int rc = t ? gh_tm_stream_seen(tm, stream) : gh_tm_bad_ptr(tm, ptr, "gh_tensor_free");
  if (rc == GH_OK) {
    gh_tm_hash_remove(tm, t);
    gh_tm_list_unlink(&tm->live_head, t);
    tm->tensors[t->kind]--, tm->tensor_bytes[t->kind] -= t->bytes;
    if (t->pins) tm->pinned_tensors--;
    gh_tm_tensor_frames(tm, t, 0, t->cold ? 0 : -1, t->pins ? -1 : 0, +1);
    t->pins = 0;
    t->state = GH_T_PENDING;
    t->free_stream = stream;
    gh_tm_tensor_add_stream(t, stream);
    if (GH_P(tm, tm->ops->event_record(tm->fr, stream, &t->free_event)) != GH_OK) {
      /* No event: wait for the stream now instead. */
      t->free_event = 0;
      GH_P(tm, tm->ops->stream_sync(tm->fr, stream));
    }
    gh_tm_pend_push(tm, t);
    tm->n_pending++;
    tm->freed[tm->freed_pos] = ptr;
    tm->freed_pos = (tm->freed_pos + 1) % GH_TM_FREED_RING;
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* Look up a live tensor under mu, with the lazy reclaim every call does. */
static gh_tensor_t* gh_tm_enter(gh_tmgr_t* tm, const void* ptr, const char* what, int* rc) {
  pthread_mutex_lock(&tm->mu);
  gh_tm_reclaim(tm, 0);
  gh_tensor_t* t = ptr ? gh_tm_find(tm, ptr) : NULL;
  *rc = t ? GH_OK : gh_tm_bad_ptr(tm, ptr, what);
  return t;
}

int gh_tensor_prefetch(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_prefetch: NULL manager");
  int rc;
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_prefetch", &rc);
  if (rc == GH_OK) rc = gh_tm_stream_seen(tm, stream);
  if (rc == GH_OK) {
    gh_tm_tensor_add_stream(t, stream);
    if (t->cold) {
      t->cold = 0;
      gh_tm_tensor_frames(tm, t, 0, +1, 0, 0);
    }
    for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++)
      if (tm->vf[v].clock < gh_tm_credit(GH_KIND_WEIGHTS)) tm->vf[v].clock = gh_tm_credit(GH_KIND_WEIGHTS);
    rc = gh_tm_restore_range(tm, t->vf0, t->nvf);
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_evict(gh_tmgr_t* tm, void* ptr) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_evict: NULL manager");
  int rc;
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_evict", &rc);
  if (rc == GH_OK && t->pins) rc = _gh_error(GH_ERR_PINNED, "gh_tensor_evict: %p is pinned", ptr);
  if (rc == GH_OK) {
    if (!t->cold) {
      t->cold = 1;
      gh_tm_tensor_frames(tm, t, 0, -1, 0, 0);
    }
    size_t idx[64], n = 0;
    for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
      gh_vframe_t* f = &tm->vf[v];
      f->clock = 0;
      if (f->tier == GH_TIER_DEVICE && f->warm == 0 && f->pins == 0) idx[n++] = v;
      if (n == 64 || (n && v + 1 == t->vf0 + t->nvf)) {  /* best effort: a full host tier moves fewer */
        gh_tm_move(tm, idx, n, GH_TIER_HOST);
        n = 0;
      }
    }
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_pin(gh_tmgr_t* tm, void* ptr) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_pin: NULL manager");
  int rc;
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_pin", &rc);
  if (rc == GH_OK && t->pins == UINT32_MAX) rc = _gh_error(GH_ERR_INVAL, "gh_tensor_pin: too many pins");
  if (rc == GH_OK) {
    if (t->pins == 0) {
      rc = gh_tm_restore_range(tm, t->vf0, t->nvf);
      if (rc == GH_OK) {
        gh_tm_tensor_frames(tm, t, 0, 0, +1, 0);
        tm->pinned_tensors++;
      }
    }
    if (rc == GH_OK) t->pins++;
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_unpin(gh_tmgr_t* tm, void* ptr) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_unpin: NULL manager");
  int rc;
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_unpin", &rc);
  if (rc == GH_OK && t->pins == 0) rc = _gh_error(GH_ERR_INVAL, "gh_tensor_unpin: %p is not pinned", ptr);
  if (rc == GH_OK && --t->pins == 0) {
    gh_tm_tensor_frames(tm, t, 0, 0, -1, 0);
    tm->pinned_tensors--;
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_set_kind(gh_tmgr_t* tm, void* ptr, gh_kind_t kind) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_set_kind: NULL manager");
  if ((unsigned)kind >= GH_KIND_COUNT) return _gh_error(GH_ERR_INVAL, "gh_tensor_set_kind: kind %d", (int)kind);
  int rc;
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_set_kind", &rc);
  if (rc == GH_OK) {
    tm->tensors[t->kind]--, tm->tensor_bytes[t->kind] -= t->bytes;
    t->kind = (uint8_t)kind;
    tm->tensors[kind]++, tm->tensor_bytes[kind] += t->bytes;
    /* A run's frames take the new kind; a shared frame keeps its slab's. */
    if (tm->vf[t->vf0].role == GH_VF_RUN)
      for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) tm->vf[v].kind = (uint8_t)kind;
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_tier(gh_tmgr_t* tm, const void* ptr, gh_tier_t* tier) {
  if (!tm || !tier) return _gh_error(GH_ERR_INVAL, "gh_tensor_tier: NULL argument");
  int rc;
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_tier", &rc);
  if (rc == GH_OK) *tier = (gh_tier_t)tm->vf[t->vf0].tier;
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

static void gh_tm_snapshot(gh_tmgr_t* tm, gh_tmgr_stats_t* s) {
  memset(s, 0, sizeof *s);
  s->frame_bytes = tm->frame;
  s->device_budget = tm->dev_budget_f * tm->frame;
  s->host_budget = tm->host_budget_f * tm->frame;
  for (int k = 1; k < GH_TIER_COUNT; k++) s->frames[k] = tm->nframes[k], s->heap_frames[k] = tm->heap_nframes[k];
  s->frames[GH_TIER_NONE] = tm->n_va - tm->tensor_vf0 - tm->nframes[GH_TIER_DEVICE] - tm->nframes[GH_TIER_HOST];
  for (int k = 0; k < GH_KIND_COUNT; k++) s->tensors[k] = tm->tensors[k], s->tensor_bytes[k] = tm->tensor_bytes[k];
  for (const gh_tensor_t* t = tm->live_head; t; t = t->next) {
    /* Bytes of the tensor in each of its frames, by the frame's tier. */
    const uint8_t* end = t->ptr + t->bytes;
    for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
      const uint8_t* lo = gh_tm_va(tm, v) > t->ptr ? gh_tm_va(tm, v) : t->ptr;
      const uint8_t* hi = gh_tm_va(tm, v + 1) < end ? gh_tm_va(tm, v + 1) : end;
      if (hi > lo) s->tensor_bytes_tier[t->kind][tm->vf[v].tier] += (size_t)(hi - lo);
    }
  }
  s->pinned_tensors = tm->pinned_tensors;
  s->pending_frees = tm->n_pending;
  s->host_pool_frames = tm->pool_n;
  s->evictions = tm->evictions, s->restores = tm->restores;
  s->bytes_evicted = tm->bytes_evicted, s->bytes_restored = tm->bytes_restored;
  s->oom_events = tm->oom_events;
  s->heap_grows = tm->heap_grows, s->heap_shrinks = tm->heap_shrinks;
}

int gh_tmgr_stats(gh_tmgr_t* tm, gh_tmgr_stats_t* stats) {
  if (!tm || !stats) return _gh_error(GH_ERR_INVAL, "gh_tmgr_stats: NULL argument");
  pthread_mutex_lock(&tm->mu);
  gh_tm_snapshot(tm, stats);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int gh_tmgr_set_oom_observer(gh_tmgr_t* tm, gh_oom_fn fn, void* user) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_set_oom_observer: NULL manager");
  pthread_mutex_lock(&tm->mu);
  tm->oom = fn, tm->oom_user = user;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

/* The device heap: grow past the high watermark (device frames within the
 * budget, evicting tensor frames for them; host frames when the budget is
 * spent), or give back trailing free frames down to what keeps occupancy
 * below the high watermark (never below the initial size). */
static int gh_tm_heap_maintain(gh_tmgr_t* tm) {
  size_t used = 0, online = 0;
  int rc = _gh_heap_usage(tm->heap, &used, &online);
  if (rc != GH_OK) return rc;
  const double high = tm->opt.high_watermark;
  if ((double)used > high * (double)online && tm->heap_online_f < tm->heap_vf) {
    size_t k = tm->heap_online_f / 4 ? tm->heap_online_f / 4 : 1;
    if (k > tm->heap_vf - tm->heap_online_f) k = tm->heap_vf - tm->heap_online_f;
    if (k > GH_TM_STAGE * 4) k = GH_TM_STAGE * 4;
    gh_pframe_t pfs[GH_TM_STAGE * 4];
    uint8_t tiers[GH_TM_STAGE * 4];
    const size_t dev = gh_tm_device_room(tm, k);
    size_t got = 0;
    for (; got < k; got++)
      if (gh_tm_pf_get(tm, 1, got < dev, &pfs[got], &tiers[got]) != GH_OK) break;
    if (got == 0) return _gh_error(GH_ERR_BUDGET, "heap growth: no frame in either tier");
    const size_t v0 = tm->heap_online_f;
    rc = GH_P(tm, tm->ops->map(tm->fr, gh_tm_va(tm, v0), pfs, got));
    if (rc != GH_OK) {
      for (size_t i = 0; i < got; i++) gh_tm_pf_drop(tm, (gh_tier_t)tiers[i], pfs[i]);
      return rc;
    }
    for (size_t i = 0; i < got; i++) {
      tm->vf[v0 + i].pf = pfs[i], tm->vf[v0 + i].tier = tiers[i];
      gh_tm_count(tm, &tm->vf[v0 + i], +1);
    }
    rc = _gh_heap_online(tm->heap, (v0 + got) * tm->frame);
    if (rc != GH_OK) {  /* not published: take the frames back */
      GH_P(tm, tm->ops->unmap(tm->fr, gh_tm_va(tm, v0), got));
      for (size_t i = 0; i < got; i++) {
        gh_tm_count(tm, &tm->vf[v0 + i], -1);
        gh_tm_pf_drop(tm, (gh_tier_t)tiers[i], pfs[i]);
        tm->vf[v0 + i].tier = GH_TIER_NONE;
      }
      return rc;
    }
    tm->heap_online_f = v0 + got;
    tm->heap_grows += got;
    return GH_OK;
  }
  size_t keep = (size_t)((double)used / high) + tm->frame;
  keep = gh_tm_round(keep, tm->frame);
  if (keep < tm->heap_initial_f * tm->frame) keep = tm->heap_initial_f * tm->frame;
  if (keep >= online) return GH_OK;
  size_t now = online;
  rc = _gh_heap_offline_tail(tm->heap, keep, &now);
  if (rc != GH_OK) return rc;
  const size_t nf = now / tm->frame;
  if (nf < tm->heap_online_f) {
    for (size_t v = nf; v < tm->heap_online_f; v++) {
      GH_P(tm, tm->ops->unmap(tm->fr, gh_tm_va(tm, v), 1));
      gh_tm_count(tm, &tm->vf[v], -1);
      gh_tm_pf_drop(tm, (gh_tier_t)tm->vf[v].tier, tm->vf[v].pf);
      tm->vf[v].tier = GH_TIER_NONE;
    }
    tm->heap_shrinks += tm->heap_online_f - nf;
    tm->heap_online_f = nf;
  }
  return GH_OK;
}

int gh_tmgr_maintain(gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_maintain: NULL manager");
  pthread_mutex_lock(&tm->mu);
  gh_tm_reclaim(tm, 0);
  int rc = GH_OK;
  if (tm->heap) rc = gh_tm_heap_maintain(tm);
  /* Restore warm host frames while the device stays below the low watermark. */
  const size_t low = (size_t)(tm->opt.low_watermark * (double)tm->dev_budget_f);
  size_t idx[GH_TM_STAGE], n = 0;
  for (size_t v = tm->tensor_vf0; v < tm->n_va && tm->dev_used + n < low; v++) {
    const gh_vframe_t* f = &tm->vf[v];
    if (f->tier == GH_TIER_HOST && f->warm > 0) idx[n++] = v;
    if (n == GH_TM_STAGE) {
      const size_t moved = gh_tm_move(tm, idx, n, GH_TIER_DEVICE);
      n = 0;
      if (moved < GH_TM_STAGE) break;
    }
  }
  if (n) gh_tm_move(tm, idx, n, GH_TIER_DEVICE);
  if (tm->pool_running) pthread_cond_signal(&tm->pool_cv);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

gh_heap_t* gh_tmgr_heap(gh_tmgr_t* tm) { return tm ? tm->heap : NULL; }

int gh_heap_maintain(gh_heap_t* heap) {
  gh_tmgr_t* tm = heap ? _gh_heap_manager(heap) : NULL;
  return tm ? gh_tmgr_maintain(tm) : _gh_error(GH_ERR_INVAL, "gh_heap_maintain: the heap has no manager");
}

/* ---------------------------------------------------------------- tests */
int _gh_tmgr_sim_configure(gh_tmgr_t* tm, uint32_t lag, size_t device_frames, size_t host_frames) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  if (tm->ops != &_gh_frames_sim) return _gh_error(GH_ERR_UNSUPPORTED, "the manager's provider is not the simulation");
  pthread_mutex_lock(&tm->mu);
  pthread_mutex_lock(&tm->pmu);
  _gh_frames_sim_configure(tm->fr, lag, device_frames, host_frames);
  pthread_mutex_unlock(&tm->pmu);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_sim_live(gh_tmgr_t* tm, gh_tier_t tier, size_t* frames) {
  if (!tm || !frames) return _gh_error(GH_ERR_INVAL, "NULL argument");
  if (tm->ops != &_gh_frames_sim) return _gh_error(GH_ERR_UNSUPPORTED, "the manager's provider is not the simulation");
  pthread_mutex_lock(&tm->mu);
  pthread_mutex_lock(&tm->pmu);
  *frames = _gh_frames_sim_live(tm->fr, tier);
  pthread_mutex_unlock(&tm->pmu);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_check(gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  pthread_mutex_lock(&tm->mu);
  int rc = GH_OK;
  size_t nf[GH_TIER_COUNT] = {0}, hf[GH_TIER_COUNT] = {0};
  for (size_t v = 0; v < tm->n_va && rc == GH_OK; v++) {
    const gh_vframe_t* f = &tm->vf[v];
    if (f->role == GH_VF_HEAP) hf[f->tier]++;
    if (f->role == GH_VF_SLAB || f->role == GH_VF_RUN) nf[f->tier]++;
    if (f->live < f->pending || f->warm > f->live - f->pending)
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: live %u pending %u warm %u", v, f->live, f->pending, f->warm);
    else if (f->pins && f->tier != GH_TIER_DEVICE)
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: pinned but in tier %u", v, f->tier);
    else if ((f->role == GH_VF_SLAB || f->role == GH_VF_RUN) && (f->live == 0 || f->tier == GH_TIER_NONE))
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: a tensor frame with no tensor or no backing", v);
  }
  if (rc == GH_OK) {
    for (int k = 1; k < GH_TIER_COUNT && rc == GH_OK; k++)
      if (nf[k] != tm->nframes[k] || hf[k] != tm->heap_nframes[k])
        rc = _gh_error(GH_ERR_CORRUPT, "tier %d: %zu+%zu frames counted, %zu+%zu found", k, tm->nframes[k],
                       tm->heap_nframes[k], nf[k], hf[k]);
  }
  if (rc == GH_OK && tm->dev_used != nf[GH_TIER_DEVICE] + hf[GH_TIER_DEVICE])
    rc = _gh_error(GH_ERR_CORRUPT, "dev_used %zu != %zu", tm->dev_used, nf[GH_TIER_DEVICE] + hf[GH_TIER_DEVICE]);
  if (rc == GH_OK && tm->host_used != nf[GH_TIER_HOST] + hf[GH_TIER_HOST] + tm->pool_n + tm->pool_inflight)
    rc = _gh_error(GH_ERR_CORRUPT, "host_used %zu != %zu + %zu + %zu", tm->host_used,
                   nf[GH_TIER_HOST] + hf[GH_TIER_HOST], tm->pool_n, tm->pool_inflight);
  if (rc == GH_OK && (tm->dev_used > tm->dev_budget_f || tm->host_used > tm->host_budget_f))
    rc = _gh_error(GH_ERR_CORRUPT, "over budget: device %zu/%zu host %zu/%zu", tm->dev_used, tm->dev_budget_f,
                   tm->host_used, tm->host_budget_f);
  size_t nt = 0, np = 0;
  for (const gh_tensor_t* t = tm->live_head; t; t = t->next) nt++;
  for (const gh_tensor_t* t = tm->pend_head; t; t = t->next) np++;
  if (rc == GH_OK && (nt != tm->n_live || np != tm->n_pending))
    rc = _gh_error(GH_ERR_CORRUPT, "tensor lists: %zu live (%zu counted), %zu pending (%zu)", nt, tm->n_live, np,
                   tm->n_pending);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}
