/* gpuheap: the tensor manager's public calls (gh_tmgr_*, gh_tensor_*) and
 * the allocation path behind them: the live tensors' map and lists,
 * placement, same-stream reuse, frees with their flush and reclaim, the
 * chunk that follows the tensors, the trace. The design, the types and
 * what the files share: tensor_impl.h; host/TENSORS.md at more length. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuheap/grow.h"
#include "tensor_impl.h"

/* ---------------------------------------------------------------- trace
 * GPUHEAP_TRACE=path (a "%d" in it becomes the process id): every call
 * that changes tensors or memory is written there under mu, one line each,
 * with its result, so that bench/replay_trace can run the same sequence on
 * the simulated provider (policy work without a GPU: bench/NOTES.md, host
 * side, "Next"). Lines (pointers as the caller saw them, streams as their
 * order of first use, 0 = the first stream seen):
 *   # gpuheap-trace 1 <device_budget> <host_budget> <low_watermark> <chunk frames, 0: following the tensors> <host pool frames>
 *   a <ptr> <bytes> <kind> <stream> <rc>     alloc (ptr 0 when it failed)
 *   f <ptr> <stream> <rc>                    free
 *   c <ptr> <advice> <rc>                    advise
 *   p <ptr> <stream> <rc>                    prefetch
 *   h <ptr> <stream> <rc>                    prefetch_ahead
 *   r <ptr> <stream> <reserve> <rc>          prefetch_room (reserve in bytes, whole frames)
 *   n <stream> <rc> <count> <ptr>...         prefetch_many
 *   e <ptr> <rc>                             evict
 *   o <ptr> <rc>                             evict_ahead
 *   P <ptr> <rc> / U <ptr> <rc>              pin / unpin
 *   k <ptr> <kind> <rc>                      set_kind
 *   t <ptr> <rc>                             tier (no change but its reclaim)
 *   m <rc> / x <rc>                          maintain / empty_cache
 *   b <bytes> <rc>                           set_device_budget */
__attribute__((format(printf, 2, 3))) static void gh_tm_trace(gh_tmgr_t* tm, const char* fmt, ...) {
  if (!tm->trace) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(tm->trace, fmt, ap);
  va_end(ap);
}
#define GH_TM_TP(p) ((unsigned long long)(uintptr_t)(p)) /* a pointer as the trace writes it (hex) */
static void gh_tm_trace_many(gh_tmgr_t* tm, void* const* ptrs, size_t n, gh_stream_t stream, int rc) {
  if (!tm->trace) return;
  fprintf(tm->trace, "n %zu %d %zu", _gh_tm_sidx(tm, stream), rc, ptrs ? n : 0);
  for (size_t i = 0; ptrs && i < n; i++) fprintf(tm->trace, " %llx", GH_TM_TP(ptrs[i]));
  fputc('\n', tm->trace);
}

static size_t gh_tm_round(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ---------------------------------------------------------------- history
 * gh_tmgr_record_history's ring, under mu. The tag is the calling
 * thread's (gh_hist_context). */
static __thread uint64_t gh_hist_tag;
#define GH_TM_HIST_FIRST 4096 /* entries a ring starts with */

void gh_hist_context(uint64_t context) { gh_hist_tag = context; }

static void gh_tm_hist(gh_tmgr_t* tm, uint8_t action, const void* addr, size_t size, gh_stream_t stream,
                       uint8_t kind) {
  if (!tm->hist_cap) return;
  if (tm->hist_n == tm->hist_alloc && tm->hist_alloc < tm->hist_cap && tm->hist_next == 0) {
    /* Not wrapped yet: grow (a failure leaves it to wrap sooner). */
    const size_t want = tm->hist_alloc * 2 < tm->hist_cap ? tm->hist_alloc * 2 : tm->hist_cap;
    gh_hist_entry_t* g = _gh_realloc(tm->hist, want * sizeof *g);
    if (g) tm->hist = g, tm->hist_alloc = want;
  }
  gh_hist_entry_t* e;
  if (tm->hist_n < tm->hist_alloc) {
    e = &tm->hist[(tm->hist_next + tm->hist_n++) % tm->hist_alloc];
  } else {
    e = &tm->hist[tm->hist_next];
    tm->hist_next = (tm->hist_next + 1) % tm->hist_alloc;
    tm->hist_dropped++;
  }
  memset(e, 0, sizeof *e);
  e->time_ns = gh_tm_now_ns();
  e->addr = (uint64_t)(uintptr_t)addr;
  e->size = size;
  e->stream = (uint64_t)(uintptr_t)stream;
  e->context = gh_hist_tag;
  e->action = action;
  e->kind = kind;
  if (action == GH_HIST_OOM) {
    const size_t used = tm->dev_used * tm->frame, budget = tm->dev_budget_f * tm->frame;
    e->device_free = budget > used ? budget - used : 0;
  }
}

/* GPUHEAP_CALL_TIMES=1: a public call's host time, from its entry (the
 * wait for the mutex included) to its exit, by kind (_gh_tmgr_call_times);
 * under mu. Off by default: two clock reads are about as long as a free. */
static uint64_t gh_tm_call_t0(const gh_tmgr_t* tm) { return tm->time_calls ? gh_tm_now_ns() : 0; }
static void gh_tm_call_end(gh_tmgr_t* tm, int k, uint64_t t0) {
  if (t0) tm->call_n[k]++, tm->call_ns[k] += gh_tm_now_ns() - t0;
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
  gh_tensor_t** b = _gh_calloc(nb, sizeof *b);
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

/* The cold list: live cold tensors, oldest mark first. */
static void gh_tm_cold_unlink(gh_tmgr_t* tm, gh_tensor_t* t) {
  if (t->cprev) t->cprev->cnext = t->cnext; else tm->cold_head = t->cnext;
  if (t->cnext) t->cnext->cprev = t->cprev; else tm->cold_tail = t->cprev;
  t->cnext = t->cprev = NULL;
}
static void gh_tm_tensor_frames(gh_tmgr_t* tm, gh_tensor_t* t, int live_d, int warm_d, int pins_d, int pend_d);

/* Forget a quiet advice (its events). remap: a live tensor's promise ends,
 * so its homeless units get their host memory mapped at home first
 * (_gh_tm_home_back); when that fails the advice stays (the tensor still
 * quiet, its error returned). A freed tensor's need no remap. */
static int gh_tm_unquiet(gh_tmgr_t* tm, gh_tensor_t* t, int remap) {
  if (!t->quiet) return GH_OK;
  if (remap) {
    const int rc = _gh_tm_home_back(tm, t);
    if (rc != GH_OK) return rc;
  }
  _gh_tm_clean_unqueue(tm, t);
  _gh_tm_clean_drop(tm, t);  /* its clean copies go (the promise kept them valid) */
  for (unsigned i = 0; i < t->quiet; i++) GH_P(tm, tm->ops->event_destroy(tm->fr, t->quiet_ev[i]));
  memset(t->quiet_ev, 0, sizeof t->quiet_ev);
  t->quiet = 0;
  return GH_OK;
}

/* Mark a live tensor cold (a new mark: to the tail of the cold list, also
 * when it was cold already) or warm again, keeping its frames' warm counts. */
static int gh_tm_set_cold(gh_tmgr_t* tm, gh_tensor_t* t, int cold) {
  const int rc = gh_tm_unquiet(tm, t, 1);  /* any new advice or use ends a quiet one */
  if (rc != GH_OK) return rc;
  if (t->cold) gh_tm_cold_unlink(tm, t);
  if (t->cold != !!cold) gh_tm_tensor_frames(tm, t, 0, cold ? -1 : +1, 0, 0);
  t->cold = (uint8_t)!!cold;
  if (!cold) {
    t->cold_seq = 0;
    return GH_OK;
  }
  t->cold_seq = ++tm->cold_seq;
  t->cnext = NULL, t->cprev = tm->cold_tail;
  if (tm->cold_tail) tm->cold_tail->cnext = t; else tm->cold_head = t;
  tm->cold_tail = t;
  return GH_OK;
}

/* A bad pointer: freed already (recently) or no tensor's start. */
static int gh_tm_bad_ptr(const gh_tmgr_t* tm, const void* p, const char* what) {
  if (!p) return _gh_error(GH_ERR_INVAL, "%s: NULL pointer", what);
  for (size_t i = 0; i < GH_TM_FREED_RING; i++)
    if (tm->freed[i] == p) return _gh_error(GH_ERR_DOUBLE_FREE, "%s: %p was freed already", what, p);
  return _gh_error(GH_ERR_FOREIGN, "%s: %p is no live tensor's start", what, p);
}

/* ---------------------------------------------------------------- tensors */
static void gh_tm_tensor_frames(gh_tmgr_t* tm, gh_tensor_t* t, int live_d, int warm_d, int pins_d, int pend_d) {
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
    gh_vframe_t* f = &tm->vf[v];
    f->live += (uint32_t)live_d, f->warm += (uint32_t)warm_d, f->pins += (uint32_t)pins_d;
    f->pending += (uint32_t)pend_d;
  }
}

/* Tensor t (its kind set) takes the cached run tk, mapped where it is. */
static void gh_tm_run_taken(gh_tmgr_t* tm, gh_tensor_t* t, const gh_tm_take_t* tk) {
  for (size_t v = tk->v0; v < tk->v0 + tk->n; v++) {
    gh_vframe_t* f = &tm->vf[v];
    _gh_tm_count(tm, f, -1);
    f->role = GH_VF_RUN, f->kind = t->kind, f->tensors = t;
    _gh_tm_count(tm, f, +1);
  }
  t->ptr = gh_tm_va(tm, tk->v0);
  t->vf0 = tk->v0, t->nvf = tk->n, t->chunk = tk->ch;
}

/* Place a tensor of `span` bytes; GH_ERR_BUDGET when neither tier has
 * room (nothing changed then). fast: only memory mapped on the device
 * already (a slab with room, a cached run), GH_ERR_BUSY when none. */
static int gh_tm_place(gh_tmgr_t* tm, gh_tensor_t* t, int fast) {
  const unsigned kind = t->kind;
  size_t slab = SIZE_MAX;
  if (t->span < GH_TM_SMALL_MAX) {
    const size_t g = t->span / GH_TM_ALIGN;
    size_t at = SIZE_MAX;
    int fresh = 0;
    /* 1. A device slab of the kind with room (cached empty ones included);
     * 2. a new frame on the device (evicting for it); 3. a host slab with
     * room; 4. a new host frame. */
    size_t v = _gh_tm_slab_find(tm, kind, GH_TIER_DEVICE, g, &at);
    if (v == SIZE_MAX && fast) return GH_ERR_BUSY;
    if (v == SIZE_MAX) {
      const size_t nv = _gh_tm_find_run(tm, 1);
      if (nv == SIZE_MAX) return _gh_error(GH_ERR_BUDGET, "the virtual range is full");
      const size_t dev = _gh_tm_device_room(tm, 1, NULL);
      gh_tm_pa_t pa = {0, 0, GH_TM_NO_ALIAS, GH_TIER_NONE, 0, 0};
      int rc = dev ? _gh_tm_dev_get(tm, 1, &pa, &t->streams[0]) : GH_ERR_BUDGET;
      if (rc != GH_OK) {
        v = _gh_tm_slab_find(tm, kind, GH_TIER_HOST, g, &at);
        if (v == SIZE_MAX) rc = _gh_tm_host_get(tm, 1, &pa, &t->streams[0]);
      }
      if (v == SIZE_MAX) {
        if (rc != GH_OK) return _gh_error(GH_ERR_BUDGET, "no room for %zu bytes in either tier", t->bytes);
        const size_t words = (tm->frame / GH_TM_ALIGN + 63) / 64;
        uint64_t* bits = _gh_calloc(words, sizeof *bits);
        rc = bits ? GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, gh_tm_va(tm, nv), &pa.pf, 1)) : GH_ERR_NOMEM;
        if (rc != GH_OK) {
          free(bits);
          _gh_tm_pa_drop(tm, &pa);
          return _gh_error(GH_ERR_NOMEM, "cannot map a frame for %zu bytes", t->bytes);
        }
        _gh_tm_vf_set(tm, nv, &pa, 1);
        _gh_tm_pa_commit(tm, &pa, 1);
        gh_vframe_t* f = &tm->vf[nv];
        f->role = GH_VF_SLAB, f->kind = (uint8_t)kind;
        f->bits = bits, f->free_granules = (uint32_t)(tm->frame / GH_TM_ALIGN);
        _gh_tm_count(tm, f, +1);
        _gh_tm_slab_link(tm, nv, kind);
        v = nv, at = 0, fresh = 1;
      }
    }
    gh_vframe_t* f = &tm->vf[v];
    if (f->tier == GH_TIER_HOST) tm->host_placed += t->bytes;
    if (f->live == 0) {  /* an empty slab (a new one, or one of the cache) leaves the cache */
      _gh_tm_count(tm, f, -1);
      if (!fresh) tm->slab_empty[kind]--;
      slab = v;
    }
    _gh_tm_bits_set(f->bits, at, g, 1);
    f->free_granules -= (uint32_t)g;
    t->ptr = gh_tm_va(tm, v) + at * GH_TM_ALIGN;
    t->vf0 = v, t->nvf = 1, t->chunk = 1;
    t->fprev = NULL, t->fnext = f->tensors;
    if (f->tensors) f->tensors->fprev = t;
    f->tensors = t;
  } else {
    const size_t n = (t->span + tm->frame - 1) / tm->frame;
    gh_tm_take_t tk = {0, 0, 0, 0};
    if (_gh_tm_cache_take(tm, n, &tk.v0, &tk.n, &tk.ch)) {  /* a cached run, mapped where it is */
      gh_tm_run_taken(tm, t, &tk);
      goto placed;
    }
    if (fast) return GH_ERR_BUSY;
    const size_t v = _gh_tm_find_run(tm, n);
    if (v == SIZE_MAX) return _gh_error(GH_ERR_BUDGET, "the virtual range has no run of %zu frames", n);
    /* Chunk by chunk from the run's start: one device allocation while the
     * budget has room for the whole chunk (the provider may still refuse),
     * else host memory (a big allocation, or single frames for a tail). A
     * tensor that fits only split finer between the tiers (nearly full
     * budgets) is tried again with chunks of half the size, down to single
     * frames. */
    gh_tm_pa_t* pas = _gh_malloc(n * sizeof *pas);
    gh_pframe_t* pfs = _gh_malloc(n * sizeof *pfs);
    if (!pas || !pfs) {
      free(pas), free(pfs);
      return _gh_error(GH_ERR_NOMEM, "out of memory");
    }
    tm->holding = !tm->hold_off && tm->ordered && !tm->ordered_off && !tm->mover_on;
    const size_t dev0 = _gh_tm_device_room(tm, n, tm->take_freed_off ? NULL : &tk);
    if (tk.got) {  /* nothing evicted for it: no copy held */
      tm->holding = 0;
      free(pas), free(pfs);
      tm->freed_taken++;
      gh_tm_run_taken(tm, t, &tk);
      goto placed;
    }
    size_t npa = 0;
    int rc = GH_OK;
    for (size_t ch = tm->chunk;; ch /= 2) {
      size_t dev = dev0;
      rc = GH_OK, npa = 0;
      for (size_t c = 0; c < n && rc == GH_OK; c += ch) {
        const size_t k = n - c < ch ? n - c : ch;
        size_t got = 0;
        rc = dev >= k ? _gh_tm_unit_get(tm, k, 1, pas + npa, &got, &t->streams[0]) : GH_ERR_BUDGET;
        if (rc == GH_OK) dev -= k;
        else rc = _gh_tm_unit_get(tm, k, 0, pas + npa, &got, &t->streams[0]);
        npa += got;
      }
      if (rc == GH_OK) {
        t->chunk = ch;
        break;
      }
      _gh_tm_pas_drop(tm, pas, npa);
      npa = 0;
      if (ch == 1) break;
    }
    for (size_t i = 0; i < npa; i++) pfs[i] = pas[i].pf;
    const int map_rc = rc == GH_OK ? GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, gh_tm_va(tm, v), pfs, npa)) : GH_OK;
    tm->holding = 0;
    _gh_tm_held_flush(tm, &t->streams[0]);
    if (rc != GH_OK || map_rc != GH_OK) {
      _gh_tm_pas_drop(tm, pas, npa);
      free(pas), free(pfs);
      return map_rc != GH_OK ? _gh_error(GH_ERR_NOMEM, "cannot map %zu frames", n)
                             : _gh_error(GH_ERR_BUDGET, "no room for %zu bytes in either tier", t->bytes);
    }
    _gh_tm_vf_set(tm, v, pas, npa);
    _gh_tm_pa_commit(tm, pas, npa);
    for (size_t i = 0; i < npa; i++)
      if (pas[i].tier == GH_TIER_HOST) tm->host_placed += pas[i].n * tm->frame;
    for (size_t i = 0; i < n; i++) {
      gh_vframe_t* f = &tm->vf[v + i];
      f->role = GH_VF_RUN, f->kind = (uint8_t)kind;
      f->tensors = t;
      _gh_tm_count(tm, f, +1);
    }
    free(pas), free(pfs);
    t->ptr = gh_tm_va(tm, v);
    t->vf0 = v, t->nvf = n;
  }
placed:
  gh_tm_tensor_frames(tm, t, +1, +1, 0, 0);
  if (slab != SIZE_MAX) _gh_tm_count(tm, &tm->vf[slab], +1);
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
    if (tm->vf[v].clock < gh_tm_credit(kind)) tm->vf[v].clock = gh_tm_credit(kind);
    if (tm->vf[v].tier == GH_TIER_DEVICE) tm->vf[v].born = tm->evict_gen;
  }
  return GH_OK;
}

/* ---------------------------------------------------------------- chunks
 * Chunks that follow the tensors. A run whose length is no multiple of its
 * chunk ends in a tail: an allocation of another size, which the spares
 * and the pool seldom hold, so it is created and released, and in host
 * memory it is single frames, each mapped on its own (bench/NOTES.md, host
 * side, row 35: with chunks that divide every large tensor of the training
 * run, a quarter fewer maps and 11 % off the step). The manager counts, for
 * each chunk c of GH_TM_CHUNK_AUTO_LO .. _HI frames, the recent runs of at
 * least _LO frames that c would leave a tail; every GH_TM_CHUNK_AUTO_EVERY
 * such runs (early in a program's first step: the sooner the chunk is
 * right, the fewer runs of the old one it made) it takes the c with the
 * fewest (among equals the closest to GH_TM_CHUNK_DEFAULT, then the
 * larger) if that leaves at most three quarters of the current chunk's
 * tails; every GH_TM_CHUNK_AUTO_DECAY runs it halves the counts, so that
 * older runs weigh less but a choice rests on many runs (a step's stages
 * may each prefer another size). Live runs keep their chunks (the pool
 * entries of their size serve them), but a freed run of another chunk (of
 * at least _LO frames) is neither cached nor handed to the next allocation
 * on its stream (gh_tm_chunk_stale): the same sizes are asked for every
 * step, so cached runs kept the old chunk alive for steps, and the pool
 * thread created host memory of the new size at every step in between,
 * ~30 ms an allocation with the provider held (bench/NOTES.md, host side,
 * row 36). */
void _gh_tm_chunk_set(gh_tmgr_t* tm, size_t c) {
  _gh_tm_pool_quiesce(tm);  /* the pool thread counts its creation by tm->chunk */
  tm->chunk = c;
  tm->pool_bigs = 0;
  for (size_t i = 0; i < tm->pool_cnt; i++) tm->pool_bigs += tm->pool[i].n == c;
  tm->pool_bigs_target = (tm->pool_target - tm->pool_ones_target) / c;
  if (tm->pool_running) pthread_cond_signal(&tm->pool_cv);
}

/* A run whose chunks the manager no longer makes. */
static int gh_tm_chunk_stale(const gh_tmgr_t* tm, const gh_tensor_t* t) {
  return !tm->chunk_fixed && t->chunk != tm->chunk && t->nvf >= GH_TM_CHUNK_AUTO_LO;
}

/* The chunk the manager starts with is one it may choose (the tail counts
 * are indexed by the chunk). */
_Static_assert(GH_TM_CHUNK_DEFAULT >= GH_TM_CHUNK_AUTO_LO && GH_TM_CHUNK_DEFAULT <= GH_TM_CHUNK_AUTO_HI &&
                   GH_TM_CHUNK_AUTO_HI <= GH_TM_CHUNK_MAX,
               "the default chunk lies in the range the chunk follows");

static size_t gh_tm_chunk_dist(size_t c) {
  return c > GH_TM_CHUNK_DEFAULT ? c - GH_TM_CHUNK_DEFAULT : GH_TM_CHUNK_DEFAULT - c;
}

static void gh_tm_chunk_learn(gh_tmgr_t* tm, size_t n) {
  if (tm->chunk_fixed || n < GH_TM_CHUNK_AUTO_LO) return;
  uint32_t* tails = tm->chunk_tails;
  for (size_t c = GH_TM_CHUNK_AUTO_LO; c <= GH_TM_CHUNK_AUTO_HI; c++) tails[c] += n % c != 0;
  if (++tm->chunk_runs % GH_TM_CHUNK_AUTO_EVERY) return;
  size_t best = tm->chunk;
  for (size_t c = GH_TM_CHUNK_AUTO_LO; c <= GH_TM_CHUNK_AUTO_HI; c++)
    if (tails[c] < tails[best] ||
        (tails[c] == tails[best] && (gh_tm_chunk_dist(c) < gh_tm_chunk_dist(best) ||
                                     (gh_tm_chunk_dist(c) == gh_tm_chunk_dist(best) && c > best))))
      best = c;
  if (best != tm->chunk && 4 * (uint64_t)tails[best] <= 3 * (uint64_t)tails[tm->chunk]) {
    _gh_tm_chunk_set(tm, best);
    tm->chunk_changes++;
  }
  if (tm->chunk_runs % GH_TM_CHUNK_AUTO_DECAY == 0)
    for (size_t c = GH_TM_CHUNK_AUTO_LO; c <= GH_TM_CHUNK_AUTO_HI; c++) tails[c] /= 2;
}

/* Give back a pending tensor's bytes. A slab left empty stays mapped in
 * the cache (up to GH_TM_SLAB_KEEP per kind, device only), else goes; a
 * run's device chunks become cached runs, its host chunks go back to the
 * pool. */
static void gh_tm_reclaim_tensor(gh_tmgr_t* tm, gh_tensor_t* t) {
  gh_vframe_t* f = &tm->vf[t->vf0];
  gh_tm_hist(tm, GH_HIST_FREE_COMPLETED, t->ptr, t->bytes, t->free_stream, t->kind);
  if (f->role == GH_VF_SLAB) {
    _gh_tm_count(tm, f, -1);
    gh_tm_tensor_frames(tm, t, -1, 0, 0, -1);
    _gh_tm_count(tm, f, +1);
    const size_t at = (size_t)(t->ptr - gh_tm_va(tm, t->vf0)) / GH_TM_ALIGN, g = t->span / GH_TM_ALIGN;
    _gh_tm_bits_set(f->bits, at, g, 0);
    f->free_granules += (uint32_t)g;
    if (t->fprev) t->fprev->fnext = t->fnext; else f->tensors = t->fnext;
    if (t->fnext) t->fnext->fprev = t->fprev;
    if (f->live == 0) {
      if (f->tier == GH_TIER_DEVICE && tm->slab_empty[f->kind] < GH_TM_SLAB_KEEP) {
        tm->slab_empty[f->kind]++;  /* kept: counted as cached now */
      } else {
        _gh_tm_slab_unlink(tm, t->vf0);
        _gh_tm_vframes_drop(tm, t->vf0, 1);
      }
    }
  } else {
    gh_tm_tensor_frames(tm, t, -1, 0, 0, -1);
    const size_t end = t->vf0 + t->nvf;
    size_t run = SIZE_MAX;  /* start of the device chunks in a row */
    for (size_t v = t->vf0; v <= end;) {
      const size_t k = v == end ? 0 : (end - v < t->chunk ? end - v : t->chunk);
      const int dev = v < end && tm->vf[v].tier == GH_TIER_DEVICE;
      if (!dev && run != SIZE_MAX) {
        if (gh_tm_chunk_stale(tm, t) || _gh_tm_cache_add(tm, run, v - run, t->chunk) != GH_OK)
          _gh_tm_vframes_drop(tm, run, v - run);
        run = SIZE_MAX;
      }
      if (v == end) break;
      if (dev) {
        if (run == SIZE_MAX) run = v;
        for (size_t w = v; w < v + k; w++) {
          gh_vframe_t* c = &tm->vf[w];
          _gh_tm_count(tm, c, -1);
          c->role = GH_VF_CACHE, c->tensors = NULL, c->clock = 0;
          _gh_tm_count(tm, c, +1);
        }
      } else {
        _gh_tm_vframes_drop(tm, v, k);
      }
      v += k;
    }
  }
  free(t);
}

/* Update the frame counts of the frees that left them (the newest pending
 * tensors, all without an event yet). */
static void gh_tm_settle(gh_tmgr_t* tm) {
  for (gh_tensor_t* t = tm->pend_tail; t && tm->n_unsettled; t = t->prev) {
    if (!t->unsettled) continue;
    gh_tm_tensor_frames(tm, t, 0, (t->unsettled & GH_TM_UNSETTLED_WARM) ? -1 : 0,
                        (t->unsettled & GH_TM_UNSETTLED_PINNED) ? -1 : 0, +1);
    t->unsettled = 0;
    tm->n_unsettled--;
  }
}
/* Every public call but gh_tensor_free enters through this. */
void _gh_tm_lock(gh_tmgr_t* tm) {
  pthread_mutex_lock(&tm->mu);
  tm->move_rc = GH_OK;  /* (this call's moves' first failure, _gh_tm_move_rc) */
  gh_tm_settle(tm);
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

/* A pending tensor leaves the list (reclaimed or reused): drop its hold on
 * its event. */
static void gh_tm_pend_remove(gh_tmgr_t* tm, gh_tensor_t* t) {
  gh_tm_pend_unlink(tm, t);
  tm->n_pending--;
  gh_tm_fbatch_t* b = t->batch;
  t->batch = NULL;
  if (!b) {
    tm->n_unflushed--;
  } else if (--b->refs == 0) {
    if (b->ev) GH_P(tm, tm->ops->event_destroy(tm->fr, b->ev));
    free(b);
  }
}

/* Record one event on every stream with frees since the last flush; those
 * frees wait for it. (A stream whose event cannot be recorded is
 * synchronized instead.) */
void _gh_tm_flush(gh_tmgr_t* tm) {
  if (!tm->n_unflushed) return;
  gh_tm_settle(tm);
  gh_tm_fbatch_t** sb = _gh_calloc(tm->n_streams ? tm->n_streams : 1, sizeof *sb);
  /* The frees with no event are the newest: a suffix of the list. */
  for (gh_tensor_t *t = tm->pend_tail, *pv; t && tm->n_unflushed; t = pv) {
    pv = t->prev;
    if (t->batch) break;
    size_t i = 0;
    while (i < tm->n_streams && tm->streams[i] != t->free_stream) i++;
    gh_tm_fbatch_t* b = sb && i < tm->n_streams ? sb[i] : NULL;
    if (!b) {
      b = _gh_calloc(1, sizeof *b);
      if (!b || GH_P(tm, tm->ops->event_record(tm->fr, gh_tm_rec_stream(tm, t->free_stream), &b->ev)) != GH_OK) {
        _gh_tm_mover_drain(tm);  /* the stream may wait for the mover's word */
        if (!_gh_tm_capturing(tm, t->free_stream))
          GH_PW(tm, GH_TM_W_FREES, tm->ops->stream_sync(tm->fr, t->free_stream));
        if (b) b->ev = 0, b->done = 1;
      }
      if (!b) {  /* out of memory: the stream is synchronized, reclaim now */
        gh_tm_pend_remove(tm, t);
        gh_tm_reclaim_tensor(tm, t);
        continue;
      }
      if (sb && i < tm->n_streams) sb[i] = b;
    }
    b->refs++;
    t->batch = b;
    tm->n_unflushed--;
  }
  free(sb);
}

/* Reclaim pending frees whose events completed (sync: wait for them). Each
 * event is asked once per pass, whatever the number of frees it covers;
 * frees not flushed yet (the newest: the list is those with an event, then
 * those without) are left. */
void _gh_tm_reclaim(gh_tmgr_t* tm, int sync) {
  if (tm->n_pending == tm->n_unflushed) return;
  if (sync) _gh_tm_mover_drain(tm);  /* the frees' streams may wait for the mover's word */
  const uint64_t pass = ++tm->pass;
  for (gh_tensor_t *t = tm->pend_head, *nx; t; t = nx) {
    nx = t->next;
    gh_tm_fbatch_t* b = t->batch;
    if (!b) break;  /* the rest have no event yet */
    if (!b->done && b->pass != pass) {
      b->pass = pass;
      b->done = (sync ? GH_PW(tm, GH_TM_W_RECLAIM, tm->ops->event_sync(tm->fr, b->ev))
                      : GH_P(tm, tm->ops->event_query(tm->fr, b->ev))) == GH_OK;
    }
    if (!b->done) continue;
    gh_tm_pend_remove(tm, t);
    gh_tm_reclaim_tensor(tm, t);
  }
}

/* Same-stream reuse: a run freed on the allocation's own stream, its event
 * completed or not, all of it on the device, of n frames to n + n / 4, is
 * handed over whole to tensor t (the rule of cudaMallocAsync and PyTorch's
 * caching allocator: the stream runs t's kernels after the free, and other
 * streams that used the old tensor were ordered before its free). The
 * memory stays mapped where it is and is never unmapped or moved in
 * between: a pending run is no victim and is in no cache, and a later move
 * of t first waits for t's streams, the free's stream among them. 1 when
 * done. */
static int gh_tm_reuse(gh_tmgr_t* tm, gh_tensor_t* t, gh_stream_t s) {
  if (t->span < GH_TM_SMALL_MAX) return 0;
  const size_t n = (t->span + tm->frame - 1) / tm->frame;
  gh_tensor_t* o = NULL;
  gh_tensor_t* c = tm->pend_tail;
  for (size_t k = 0; c && !o && k < GH_TM_REUSE_SCAN; c = c->prev, k++) {
    if (c->free_stream != s || tm->vf[c->vf0].role != GH_VF_RUN || c->nvf < n || c->nvf - n > n / 4 ||
        gh_tm_chunk_stale(tm, c))
      continue;
    size_t v = c->vf0;
    while (v < c->vf0 + c->nvf && tm->vf[v].tier == GH_TIER_DEVICE) v++;
    if (v == c->vf0 + c->nvf) o = c;
  }
  if (!o) return 0;  /* (a scan that ends at its limit finds nothing: the 2e5794f version took the next one) */
  gh_tm_pend_remove(tm, o);
  gh_tm_hist(tm, GH_HIST_FREE_COMPLETED, o->ptr, o->bytes, o->free_stream, o->kind);
  t->ptr = o->ptr, t->vf0 = o->vf0, t->nvf = o->nvf, t->chunk = o->chunk;  /* (t keeps its own span) */
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
    gh_vframe_t* f = &tm->vf[v];
    f->tensors = t, f->kind = t->kind, f->born = tm->evict_gen;
    if (f->clock < gh_tm_credit(t->kind)) f->clock = gh_tm_credit(t->kind);
  }
  gh_tm_tensor_frames(tm, t, 0, +1, 0, -1);
  free(o);
  return 1;
}

static void gh_tm_snapshot(gh_tmgr_t* tm, gh_tmgr_stats_t* s);

/* ---------------------------------------------------------------- public */
void gh_tmgr_options_init(gh_tmgr_options_t* o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->device = -1;
  o->backend = GH_BACKEND_DEFAULT;
  o->device_reserve = (size_t)1 << 30;
  o->low_watermark = 1.0;
  o->high_watermark = 0.90;
  gh_heap_options_init(&o->heap);
  o->host_pool_frames = 64;
}

static void gh_tm_free_all(gh_tmgr_t* tm);
static int gh_tm_grow_start(gh_tmgr_t* tm);
static void gh_tm_grow_stop(gh_tmgr_t* tm);

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
  if (o.flags & ~GH_TMGR_GROW_ON_DEMAND) return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: unknown flags %#x", o.flags);
  if ((o.flags & GH_TMGR_GROW_ON_DEMAND) && !(o.heap_bytes > 0 && o.heap_max_bytes > o.heap_bytes))
    return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: GH_TMGR_GROW_ON_DEMAND needs a heap that can grow "
                                   "(heap_max_bytes > heap_bytes > 0)");
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
  /* Host aliases: room for twice the host budget in allocations of 2
   * frames or more (first fit's holes: they come in sizes up to
   * GH_TM_CHUNK_MAX) and for the budget in single frames. */
  const size_t host_f = o.host_budget / frame;
  const size_t alias_big_f = 2 * host_f + GH_TM_CHUNK_MAX;
  /* Device aliases: twice the budget, for first fit's holes (the spares
   * give theirs back when a fit is not found; a move stages without one). */
  const size_t dalias_f = 2 * (o.device_budget / frame) + GH_TM_CHUNK_MAX;
  const size_t fixed = (heap_vf + GH_TM_STAGE + alias_big_f + host_f + dalias_f) * frame;
  if (o.va_bytes == 0) o.va_bytes = 4 * (o.device_budget + o.host_budget) + fixed;
  if (o.va_bytes < fixed + frame) return _gh_error(GH_ERR_INVAL, "gh_tmgr_create: va_bytes too small");

  gh_tmgr_t* tm = _gh_calloc(1, sizeof *tm);
  if (!tm) return _gh_error(GH_ERR_NOMEM, "gh_tmgr_create: out of memory");
  tm->opt = o;
  tm->ops = ops;
  {
    /* GPUHEAP_EVICT_YOUNG_LAST=1: CLOCK leaves the frames that got device
     * memory since the last batch for last. Off by default: it helped with
     * a low watermark of 0.85 and cost 3-5 ms a step with 1.0 (bench/NOTES.md,
     * host side, rows 13 and 15). */
    const char* y = getenv("GPUHEAP_EVICT_YOUNG_LAST");
    tm->young_last = y && *y && *y != '0';
    /* Switches for measuring the device spares and the cache's release
     * order against what they replaced (bench/NOTES.md, host side, row 19). */
    const char* sp = getenv("GPUHEAP_DEVICE_SPARES");
    tm->spares_off = sp && *sp == '0';
    /* GPUHEAP_CACHE_RELEASE=oldest|newest: the cache's former release
     * orders (rows 19 and 41); GPUHEAP_CACHE_RELEASE_NEWEST=1 is newest. */
    const char* cr = getenv("GPUHEAP_CACHE_RELEASE");
    const char* cn = getenv("GPUHEAP_CACHE_RELEASE_NEWEST");
    tm->cache_release = cr && !strcmp(cr, "oldest")               ? GH_TM_RELEASE_OLDEST
                        : (cr && !strcmp(cr, "newest")) || (cn && *cn && *cn != '0') ? GH_TM_RELEASE_NEWEST
                                                                                        : GH_TM_RELEASE_SHORTEST;
    /* GPUHEAP_DEVICE_ALIASES=0: moves map every device allocation at a
     * staging window (the former way), for comparisons (bench/NOTES.md,
     * host side, row 23). */
    const char* da = getenv("GPUHEAP_DEVICE_ALIASES");
    tm->dalias_off = da && *da == '0';
    const char* hl = getenv("GPUHEAP_HOMELESS");
    tm->homeless_off = hl && *hl == '0';
    /* GPUHEAP_HOLD_COPIES=0: a homeless unit evicted for a tensor's run
     * copies at once, and the run's map then waits in the driver for that
     * copy (bench/NOTES.md, host side, rows 46 and 48). */
    const char* hc = getenv("GPUHEAP_HOLD_COPIES");
    tm->hold_off = hc && *hc == '0';
    /* GPUHEAP_COPY_KERNEL=1: every eviction copies by kernel,
     * =homeless: homeless units' (row 51's rule), =0 or unset: none
     * (gh_tm_copy_out; rows 103-104). */
    const char* ck = getenv("GPUHEAP_COPY_KERNEL");
    tm->copy_kernel = !ck || !*ck || *ck == '0' ? 0 : strcmp(ck, "homeless") == 0 ? -1 : 1;
    /* GPUHEAP_CLEAN=1: quiet tensors' units copied to the host at their
     * advice (see "cleaning"), =kernel: by the provider's kernel, =ready:
     * once the advice's events are complete, =prefill: until the cycle's
     * first eviction; off unless set. */
    const char* cl = getenv("GPUHEAP_CLEAN");
    tm->clean_mode = !cl || !*cl || *cl == '0'      ? 0
                     : strcmp(cl, "kernel") == 0 ? 2
                     : strcmp(cl, "ready") == 0  ? 3
                     : strcmp(cl, "prefill") == 0 ? 4
                                                 : 1;
    const char* wf = getenv("GPUHEAP_WAIT_FREES");
    tm->wait_frees = wf && *wf ? *wf != '0' : -1;
    const char* ct = getenv("GPUHEAP_CALL_TIMES");
    tm->time_calls = ct && *ct == '1';
    /* A run freed on a stream goes to the next allocation of about its
     * size on that stream before its event (gh_tm_reuse);
     * GPUHEAP_SAME_STREAM_REUSE=0 turns it off, for comparisons
     * (bench/NOTES.md, host side, row 29). */
    const char* ss = getenv("GPUHEAP_SAME_STREAM_REUSE");
    tm->same_stream_reuse = !(ss && *ss == '0');
    /* GPUHEAP_TAKE_FREED=0: a run that no cached run fits maps new memory
     * even where the frees its room reclaimed bring one that fits, for
     * comparisons (bench/NOTES.md, host side, row 63). */
    const char* tf = getenv("GPUHEAP_TAKE_FREED");
    tm->take_freed_off = tf && *tf == '0';
    /* GPUHEAP_QUIET_FIRST=0: cold victims in the order of their marks
     * alone, quiet or not, for comparisons (bench/NOTES.md, host side,
     * row 68). */
    const char* qf = getenv("GPUHEAP_QUIET_FIRST");
    tm->quiet_first_off = qf && *qf == '0';
    /* Moves for allocations and prefetches do not wait for their copies
     * (gh_tm_move_units); GPUHEAP_ORDERED_MOVES=0 makes them wait, for
     * comparisons (bench/NOTES.md, host side, row 30). */
    const char* om = getenv("GPUHEAP_ORDERED_MOVES");
    tm->ordered_off = om && *om == '0';
    /* GPUHEAP_MOVER=1: ordered moves remap homes on the mover thread. Off
     * by default: it made (c) slower, not faster (bench/NOTES.md, host
     * side, row 31): the remaps are the step's longest serial work, and the
     * GPU and the calling thread then both wait for the mover. */
    const char* mv = getenv("GPUHEAP_MOVER");
    tm->mover_off = !(mv && *mv && *mv != '0');
  }
  pthread_mutex_init(&tm->mu, NULL);
  pthread_mutex_init(&tm->pmu, NULL);
  pthread_mutex_init(&tm->jmu, NULL);
  pthread_cond_init(&tm->jcv, NULL);
  pthread_cond_init(&tm->jdone_cv, NULL);
  pthread_cond_init(&tm->pool_cv, NULL);
  pthread_cond_init(&tm->pool_done_cv, NULL);
  for (unsigned k = 0; k < GH_KIND_COUNT; k++) tm->slab_head[k] = SIZE_MAX;
  rc = ops->open(&tm->fr, o.device, o.va_bytes, &tm->base, &tm->frame);
  if (rc != GH_OK) goto fail;
  tm->device = ops->device(tm->fr);
  tm->n_va = o.va_bytes / tm->frame;
  tm->heap_vf = heap_vf;
  tm->stage_vf0 = heap_vf;
  tm->alias_vf0 = heap_vf + GH_TM_STAGE;
  tm->alias_big_f = alias_big_f;
  tm->alias_one_f = host_f;
  tm->alias_one_hint = alias_big_f;
  tm->dalias_vf0 = tm->alias_vf0 + alias_big_f + host_f;
  tm->dalias_f = dalias_f;
  tm->tensor_vf0 = tm->dalias_vf0 + dalias_f;
  tm->chunk = GH_TM_CHUNK_DEFAULT;
  {
    /* GPUHEAP_CHUNK_FRAMES=n (2 .. GH_TM_CHUNK_MAX): chunks of n frames, for
     * comparisons (bench/NOTES.md, host side, row 20). */
    const char* c = getenv("GPUHEAP_CHUNK_FRAMES");
    const long n = c ? strtol(c, NULL, 10) : 0;
    if (n >= 2 && n <= (long)GH_TM_CHUNK_MAX) tm->chunk = (size_t)n, tm->chunk_fixed = 1;
    /* GPUHEAP_CHUNK_AUTO=0: the chunk stays GH_TM_CHUNK_DEFAULT instead of
     * following the tensors' sizes (gh_tm_chunk_learn), for comparisons
     * (bench/NOTES.md, host side, row 36). */
    const char* ca = getenv("GPUHEAP_CHUNK_AUTO");
    if (ca && *ca == '0') tm->chunk_fixed = 1;
  }
  tm->free_hint = tm->hand = tm->tensor_vf0;
  tm->dev_budget_f = o.device_budget / tm->frame;
  tm->host_budget_f = host_f;
  tm->pool_target = o.host_pool_frames < tm->host_budget_f ? o.host_pool_frames : tm->host_budget_f;
  tm->pool_ones_target = tm->pool_target < GH_TM_POOL_ONES ? tm->pool_target : GH_TM_POOL_ONES;
  tm->pool_bigs_target = (tm->pool_target - tm->pool_ones_target) / tm->chunk;
  tm->pool_cap = tm->host_budget_f + 1; /* every pooled allocation holds a frame of the host budget */
  {
    const char* tp = getenv("GPUHEAP_TRACE");
    if (tp && *tp) {
      /* The n-th manager of the process (from 0) writes to path, ".n" added
       * from the second on. */
      static unsigned managers;
      const unsigned nth = __atomic_fetch_add(&managers, 1, __ATOMIC_RELAXED);
      char path[4096], suffix[16] = "";
      if (nth) snprintf(suffix, sizeof suffix, ".%u", nth);
      const char* pid = strstr(tp, "%d");
      if (pid && strlen(tp) < sizeof path - 40)
        snprintf(path, sizeof path, "%.*s%ld%s%s", (int)(pid - tp), tp, (long)getpid(), pid + 2, suffix);
      else
        snprintf(path, sizeof path, "%s%s", tp, suffix);
      tm->trace = fopen(path, "w");
      if (!tm->trace)  /* asked for by the user, who would otherwise find no file and no reason */
        fprintf(stderr, "gpuheap: GPUHEAP_TRACE: cannot open %s; no trace\n", path);
      else
        fprintf(tm->trace, "# gpuheap-trace 1 %zu %zu %.6f %zu %zu\n", tm->dev_budget_f * tm->frame,
                tm->host_budget_f * tm->frame, o.low_watermark, tm->chunk_fixed ? tm->chunk : 0, tm->pool_target);
    }
  }
  tm->vf = _gh_calloc(tm->n_va, sizeof *tm->vf);
  tm->pool = _gh_calloc(tm->pool_cap, sizeof *tm->pool);
  tm->alias_used = _gh_calloc(alias_big_f + host_f + 1, 1);
  tm->dalias_used = _gh_calloc(dalias_f, 1);
  tm->n_buckets = 256;
  tm->buckets = _gh_calloc(tm->n_buckets, sizeof *tm->buckets);
  if (!tm->vf || !tm->pool || !tm->buckets || !tm->alias_used || !tm->dalias_used) {
    rc = _gh_error(GH_ERR_NOMEM, "gh_tmgr_create: out of memory");
    goto fail;
  }
  for (size_t v = 0; v < tm->n_va; v++) tm->vf[v].snext = tm->vf[v].sprev = SIZE_MAX;
  for (size_t v = 0; v < heap_vf; v++) tm->vf[v].role = GH_VF_HEAP;
  for (size_t v = tm->stage_vf0; v < tm->tensor_vf0; v++) tm->vf[v].role = GH_VF_STAGE;
  rc = ops->stream_create(tm->fr, &tm->copy_stream);
  if (rc != GH_OK) goto fail;
  tm->restore_stream = tm->copy_stream;
  tm->lane[GH_TM_LANE_EVICT].s = tm->lane[GH_TM_LANE_RESTORE].s = tm->copy_stream;
  {
    /* Restores on a copy stream of their own (see "the restore stream";
     * not with the mover); GPUHEAP_RESTORE_STREAM=0: on the copy stream. */
    const char* rs = getenv("GPUHEAP_RESTORE_STREAM");
    if (!(rs && *rs == '0') && tm->mover_off) {
      rc = ops->stream_create(tm->fr, &tm->restore_stream);
      if (rc != GH_OK) goto fail;
      tm->split = 1;
      tm->lane[GH_TM_LANE_RESTORE].s = tm->restore_stream;
    }
  }

  if (o.heap_bytes) {
    const size_t nf = (o.heap_bytes + tm->frame - 1) / tm->frame;
    if (nf > tm->dev_budget_f) {
      rc = _gh_error(GH_ERR_BUDGET, "gh_tmgr_create: the device heap (%zu frames) exceeds the device budget", nf);
      goto fail;
    }
    /* Single device frames: the heap shrinks a frame at a time. */
    gh_tm_pa_t* pas = _gh_malloc(nf * sizeof *pas);
    gh_pframe_t* pfs = _gh_malloc(nf * sizeof *pfs);
    if (!pas || !pfs) {
      free(pas), free(pfs);
      rc = _gh_error(GH_ERR_NOMEM, "gh_tmgr_create: out of memory");
      goto fail;
    }
    size_t got = 0;
    for (rc = GH_OK; got < nf && rc == GH_OK; got++) {
      rc = _gh_tm_dev_get(tm, 1, &pas[got], NULL);
      pfs[got] = pas[got].pf;
      if (rc != GH_OK) break;
    }
    if (rc == GH_OK) rc = ops->map(tm->fr, tm->base, pfs, nf);
    if (rc != GH_OK) {
      _gh_tm_pas_drop(tm, pas, got);
    } else {
      _gh_tm_vf_set(tm, 0, pas, nf);
      for (size_t i = 0; i < nf; i++) _gh_tm_count(tm, &tm->vf[i], +1);
    }
    free(pas), free(pfs);
    if (rc != GH_OK) goto fail;
    tm->heap_online_f = tm->heap_initial_f = nf;
    rc = _gh_heap_create_managed(&tm->heap, tm, tm->base, heap_vf * tm->frame, nf * tm->frame, &o.heap);
    if (rc != GH_OK) goto fail;
  }
  if (tm->pool_target) {
    if (pthread_create(&tm->pool_thread, NULL, _gh_tm_pool_main, tm) == 0) tm->pool_running = 1;
  }
  if (o.flags & GH_TMGR_GROW_ON_DEMAND) {
    rc = gh_tm_grow_start(tm);
    if (rc != GH_OK) goto fail;
  }
  /* The mover, where the provider can make a stream wait for a word (else,
   * or if it cannot start, ordered moves remap on the calling thread). */
  if (!tm->mover_off && ops->stream_wait_value && ops->word_alloc(tm->fr, &tm->word) == GH_OK) {
    if (pthread_create(&tm->mover, NULL, _gh_tm_mover_main, tm) == 0) {
      tm->mover_on = 1;
    } else {
      ops->word_free(tm->fr, tm->word);
      tm->word = NULL;
    }
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
    gh_tm_settle(tm);
    /* Frees with an event: wait for it. Frees with none yet: no stream
     * uses them any more (destroy's contract), and their streams may be
     * gone, so no event is recorded on them. */
    _gh_tm_reclaim(tm, 1);
    while (tm->pend_head) {
      gh_tensor_t* t = tm->pend_head;
      gh_tm_pend_remove(tm, t);
      gh_tm_reclaim_tensor(tm, t);
    }
    /* Live tensors: mark them pending with no event and reclaim them. */
    tm->cold_head = tm->cold_tail = NULL;
    while (tm->live_head) {
      gh_tensor_t* t = tm->live_head;
      gh_tm_list_unlink(&tm->live_head, t);
      gh_tm_hash_remove(tm, t);
      gh_tm_unquiet(tm, t, 0);
      if (t->ahead_ev) GH_P(tm, tm->ops->event_destroy(tm->fr, t->ahead_ev));  /* its copy: before ordered_ev's */
      gh_tm_tensor_frames(tm, t, 0, t->cold ? 0 : -1, t->pins ? -1 : 0, +1);
      gh_tm_reclaim_tensor(tm, t);
    }
    _gh_tm_cache_release(tm, SIZE_MAX);
    if (tm->ordered_ev) {  /* no copy may still run when memory goes */
      GH_PW(tm, GH_TM_W_OTHER, tm->ops->event_sync(tm->fr, tm->ordered_ev));
      GH_P(tm, tm->ops->event_destroy(tm->fr, tm->ordered_ev));
      tm->ordered_ev = 0;
    }
    for (int d = 0; tm->split && d < 2; d++) {  /* (with a restore stream: the lanes') */
      gh_tm_lane_t* l = &tm->lane[d];
      GH_PW(tm, GH_TM_W_OTHER, tm->ops->stream_sync(tm->fr, l->s));
      if (l->n) _gh_tm_lane_drop(tm, l, l->n - 1, 1);
    }
    if (tm->heap) _gh_heap_destroy_managed(tm->heap);
    tm->heap = NULL;
    for (size_t v = 0; tm->vf && v < tm->heap_vf; v++)  /* (no vf: a creation that failed before it) */
      if (tm->vf[v].tier != GH_TIER_NONE) _gh_tm_vframes_drop(tm, v, 1);  /* single frames */
    tm->spares_off = 1;
    while (tm->n_spare) _gh_tm_spare_release(tm, tm->n_spare - 1);
    tm->pool_target = 0;
    while (tm->pool_cnt) _gh_tm_pool_release_last(tm);
    if (tm->split) tm->ops->stream_destroy(tm->fr, tm->restore_stream);
    if (tm->copy_stream) tm->ops->stream_destroy(tm->fr, tm->copy_stream);
    if (tm->side_stream) tm->ops->stream_destroy(tm->fr, tm->side_stream);
    if (tm->word) tm->ops->word_free(tm->fr, tm->word);
    if (tm->grow_words) tm->ops->word_free(tm->fr, tm->grow_words);
    tm->ops->close(tm->fr);
  }
  free(tm->vf);
  free(tm->pool);
  free(tm->alias_used);
  free(tm->alias_frag);
  free(tm->dalias_used);
  free(tm->buckets);
  free(tm->streams);
  if (tm->trace) fclose(tm->trace);
  free(tm->hist);
  free(tm->cache);
  free(tm->spare);
  free(tm->jobs);
  pthread_cond_destroy(&tm->jcv);
  pthread_cond_destroy(&tm->jdone_cv);
  pthread_mutex_destroy(&tm->jmu);
  pthread_cond_destroy(&tm->pool_cv);
  pthread_cond_destroy(&tm->pool_done_cv);
  pthread_mutex_destroy(&tm->pmu);
  pthread_mutex_destroy(&tm->mu);
  free(tm);
}

int gh_tmgr_destroy(gh_tmgr_t* tm) {
  if (!tm) return GH_OK;
  gh_tm_grow_stop(tm);
  if (tm->mover_on) {
    pthread_mutex_lock(&tm->jmu);
    tm->mover_stop = 1;  /* it finishes the jobs queued first */
    pthread_cond_signal(&tm->jcv);
    pthread_mutex_unlock(&tm->jmu);
    pthread_join(tm->mover, NULL);
    tm->mover_on = 0;
  }
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
  gh_tensor_t* t = _gh_calloc(1, sizeof *t);
  if (!t) return _gh_error(GH_ERR_NOMEM, "gh_tensor_alloc: out of memory");
  t->bytes = bytes;
  t->span = gh_tm_round(bytes, GH_TM_ALIGN);
  t->kind = (uint8_t)kind;
  t->streams[0] = stream, t->nstreams = 1;
  gh_tmgr_stats_t snap;
  const uint64_t t0 = gh_tm_call_t0(tm);
  _gh_tm_lock(tm);
  tm->ordered = 1;  /* evictions for it: the victims' streams wait for the copies */
  int rc = _gh_tm_mover_failed(tm);
  if (rc == GH_OK) rc = _gh_tm_stream_seen(tm, stream);
  if (rc == GH_OK) rc = gh_tm_hash_reserve(tm);
  if (rc == GH_OK) {
    const size_t budget = (tm->dev_budget_f + tm->host_budget_f) * tm->frame;
    if (t->span > budget) {
      rc = _gh_error(GH_ERR_BUDGET, "gh_tensor_alloc: %zu bytes exceed both budgets (%zu)", bytes, budget);
    } else {
      /* A run freed on this stream, before its event (gh_tm_reuse); else
       * freed memory once its stream has reached the free (its event
       * completed): memory mapped already (no provider call); else record events for
       * the new frees, reclaim the completed ones, place with new frames
       * if need be; else wait for every pending free and the pool, give
       * back the whole cache, and try once more. */
      /* Frees get their events in batches of GH_TM_FLUSH_FREES, and
       * completed ones are looked at every GH_TM_RECLAIM_EVERY allocations,
       * so that freed memory comes back to the cache while allocations
       * still find it there: waiting for a miss to do both left each miss
       * creating new memory, and the cache growing by ~0.9 GB a step in a
       * training run with an ample budget (bench/NOTES.md, host side,
       * rows 21-22). */
      if (t->span >= GH_TM_SMALL_MAX) gh_tm_chunk_learn(tm, (t->span + tm->frame - 1) / tm->frame);
      if (tm->same_stream_reuse && gh_tm_reuse(tm, t, stream)) {
        rc = GH_OK;
      } else {
        if (tm->n_unflushed >= GH_TM_FLUSH_FREES) _gh_tm_flush(tm);
        if (tm->n_pending > tm->n_unflushed && ++tm->alloc_tick % GH_TM_RECLAIM_EVERY == 0) _gh_tm_reclaim(tm, 0);
        rc = gh_tm_place(tm, t, 1);
        if (rc != GH_OK) {
          _gh_tm_flush(tm);
          _gh_tm_reclaim(tm, 0);
          rc = gh_tm_place(tm, t, 0);
        }
        if (rc == GH_ERR_BUDGET && (tm->pend_head || tm->pool_inflight || tm->cached)) {
          _gh_tm_flush(tm);
          _gh_tm_reclaim(tm, 1);
          _gh_tm_pool_quiesce(tm);
          _gh_tm_cache_release(tm, SIZE_MAX);
          rc = gh_tm_place(tm, t, 0);
        }
      }
    }
    if (rc == GH_OK) {
      gh_tm_hash_insert(tm, t);
      gh_tm_list_push(&tm->live_head, t);
      tm->tensors[kind]++, tm->tensor_bytes[kind] += bytes;
      tm->live_bytes += bytes;
      if (tm->live_bytes > tm->peak_bytes) tm->peak_bytes = tm->live_bytes;
      *ptr = t->ptr;
      t->hist_ctx = gh_hist_tag;
      gh_tm_hist(tm, GH_HIST_ALLOC, t->ptr, bytes, stream, (uint8_t)kind);
    } else if (rc == GH_ERR_BUDGET) {
      tm->oom_events++;
      gh_tm_hist(tm, GH_HIST_OOM, NULL, bytes, stream, (uint8_t)kind);
      if (tm->oom) gh_tm_snapshot(tm, &snap);
    }
  }
  tm->ordered = 0;
  _gh_tm_clean_poll(tm);  /* after this allocation's maps (=ready) */
  gh_tm_trace(tm, "a %llx %zu %u %zu %d\n", GH_TM_TP(rc == GH_OK ? t->ptr : NULL), bytes, (unsigned)kind,
              _gh_tm_sidx(tm, stream), rc);
  const gh_oom_fn oom = tm->oom;
  void* user = tm->oom_user;
  gh_tm_call_end(tm, GH_TM_CALL_ALLOC, t0);
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

/* Before t's free on `stream`: that stream waits (on the GPU; the host
 * where it cannot) for the work queued so far on the streams
 * gh_tensor_record_stream named, so that whatever takes the memory after
 * the free, on `stream` or after its event, comes after that work. An
 * error leaves everything as it was (the waits queued so far only delay
 * `stream`). */
static int gh_tm_free_after_recorded(gh_tmgr_t* tm, const gh_tensor_t* t, gh_stream_t stream) {
  const gh_stream_t* s = t->rec_many ? tm->streams : t->streams;
  const size_t n = t->rec_many ? tm->n_streams : t->nstreams;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == stream || (!t->rec_many && !(t->rec & (1u << i)))) continue;
    gh_fevent_t e = 0;
    int rc = GH_P(tm, tm->ops->event_record(tm->fr, gh_tm_rec_stream(tm, s[i]), &e));
    if (rc == GH_OK) {
      if (_gh_tm_capturing(tm, stream) || (rc = GH_P(tm, tm->ops->stream_wait(tm->fr, stream, e))) != GH_OK)
        rc = GH_P(tm, tm->ops->event_sync(tm->fr, e));
      GH_P(tm, tm->ops->event_destroy(tm->fr, e));
    }
    if (rc != GH_OK) return rc;
  }
  return GH_OK;
}

int gh_tensor_free(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_free: NULL manager");
  if (!ptr) return GH_OK;  /* as free(NULL) */
  const uint64_t t0 = gh_tm_call_t0(tm);
  pthread_mutex_lock(&tm->mu);
  gh_tensor_t* t = ptr ? gh_tm_find(tm, ptr) : NULL;
  int rc = t ? _gh_tm_stream_seen(tm, stream) : gh_tm_bad_ptr(tm, ptr, "gh_tensor_free");
  if (rc == GH_OK && (t->rec || t->rec_many)) rc = gh_tm_free_after_recorded(tm, t, stream);
  if (rc == GH_OK) {
    gh_tm_hash_remove(tm, t);
    gh_tm_list_unlink(&tm->live_head, t);
    tm->tensors[t->kind]--, tm->tensor_bytes[t->kind] -= t->bytes;
    tm->live_bytes -= t->bytes;
    if (t->pins) tm->pinned_tensors--;
    if (t->cold) gh_tm_cold_unlink(tm, t);
    gh_tm_unquiet(tm, t, 0);  /* freed: its homeless units stay unmapped until reclaimed */
    t->unsettled = GH_TM_UNSETTLED | (t->cold ? 0 : GH_TM_UNSETTLED_WARM) | (t->pins ? GH_TM_UNSETTLED_PINNED : 0);
    tm->n_unsettled++;
    t->pins = 0;
    t->state = GH_T_PENDING;
    t->free_stream = stream;
    _gh_tm_stream_join(tm, t, stream);
    _gh_tm_ahead_join(tm, t, &stream);  /* its memory goes to others after the free: after its copies */
    /* No provider call: the event comes at the next flush. */
    t->batch = NULL;
    gh_tm_pend_push(tm, t);
    tm->n_pending++, tm->n_unflushed++;
    tm->freed[tm->freed_pos] = ptr;
    tm->freed_pos = (tm->freed_pos + 1) % GH_TM_FREED_RING;
    gh_tm_hist(tm, GH_HIST_FREE_REQUESTED, ptr, t->bytes, stream, t->kind);
  }
  gh_tm_trace(tm, "f %llx %zu %d\n", GH_TM_TP(ptr), _gh_tm_sidx(tm, stream), rc);
  gh_tm_call_end(tm, GH_TM_CALL_FREE, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* Look up a live tensor under mu, with the lazy reclaim every call does. */
static gh_tensor_t* gh_tm_enter(gh_tmgr_t* tm, const void* ptr, const char* what, int* rc) {
  _gh_tm_lock(tm);
  _gh_tm_reclaim(tm, 0);
  gh_tensor_t* t = ptr ? gh_tm_find(tm, ptr) : NULL;
  *rc = t ? GH_OK : gh_tm_bad_ptr(tm, ptr, what);
  return t;
}

int gh_tensor_record_stream(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_record_stream: NULL manager");
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_record_stream", &rc);
  if (rc == GH_OK) rc = _gh_tm_stream_seen(tm, stream);
  if (rc == GH_OK) {
    _gh_tm_stream_join(tm, t, stream);  /* its moves wait for this stream too */
    unsigned i = 0;
    while (i < t->nstreams && t->streams[i] != stream) i++;
    if (i < t->nstreams)
      t->rec |= (uint8_t)(1u << i);
    else
      t->rec_many = 1;  /* streams[] was full */
  }
  /* Not in the call trace: a replay runs without the streams' work. */
  gh_tm_call_end(tm, GH_TM_CALL_OTHER, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* What a prefetch does to a tensor once its frames moved (its stream was
 * added before, a quiet advice counted for the move): the cold mark and a
 * quiet advice go, its frames get the most credits. */
static int gh_tm_prefetch_mark(gh_tmgr_t* tm, gh_tensor_t* t) {
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++)
    if (tm->vf[v].clock < gh_tm_credit(GH_KIND_WEIGHTS)) tm->vf[v].clock = gh_tm_credit(GH_KIND_WEIGHTS);
  return gh_tm_set_cold(tm, t, 0);  /* fails only where a unit stayed homeless and could not be mapped */
}

/* gh_tensor_prefetch_room's test: whether the device budget has room for
 * t's frames on the host and `reserve` more frames without evicting or
 * waiting: completed frees are reclaimed first (queries only), and cached
 * frames count as room (releasing them unmaps, copies nothing). */
static int gh_tm_room_for(gh_tmgr_t* tm, const gh_tensor_t* t, size_t reserve) {
  size_t m = 0;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) m += tm->vf[v].tier == GH_TIER_HOST;
  if (m == 0) return 1;
  if (tm->n_pending) {
    _gh_tm_flush(tm);
    _gh_tm_reclaim(tm, 0);
  }
  const size_t busy = gh_tm_dev_busy(tm);
  const size_t room = (tm->dev_budget_f > busy ? tm->dev_budget_f - busy : 0) + tm->cached;
  return room >= m && room - m >= reserve;
}

/* gh_tensor_prefetch, and with `ahead` gh_tensor_prefetch_ahead: when the
 * tensor has frames of its own (a run) and its moves are ordered with no
 * mover, its streams are not made to wait for its copies: the copies'
 * event stays with the tensor (ahead_ev), and its next use
 * (gh_tensor_prefetch, prefetch_many, pin, free) makes its streams wait for
 * it (_gh_tm_ahead_join). Tensors sharing its frames (a slab's) wait as
 * with a prefetch. gh_tensor_prefetch_room (ahead == 2) is the latter
 * where gh_tm_room_for says so (reserve in frames), else GH_ERR_BUDGET. */
static int gh_tm_prefetch(gh_tmgr_t* tm, void* ptr, gh_stream_t stream, int ahead, size_t reserve) {
  const char* what = ahead == 2 ? "gh_tensor_prefetch_room"
                     : ahead    ? "gh_tensor_prefetch_ahead"
                                : "gh_tensor_prefetch";
  if (!tm) return _gh_error(GH_ERR_INVAL, "%s: NULL manager", what);
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, what, &rc);
  if (rc == GH_OK) rc = _gh_tm_mover_failed(tm);
  if (rc == GH_OK) rc = _gh_tm_stream_seen(tm, stream);
  if (rc == GH_OK && ahead == 2 && !gh_tm_room_for(tm, t, reserve))
    rc = _gh_error(GH_ERR_BUDGET, "%s: no room for the tensor and %zu frames more without evicting", what, reserve);
  else if (rc == GH_OK) {
    tm->restoring = 1;
    /* Frames all on the device: no move, no stream waited for. A quiet
     * tensor moves after its advice's events, and is a use from then on. */
    _gh_tm_stream_join(tm, t, stream);
    const int defer = ahead && tm->vf[t->vf0].role == GH_VF_RUN && !tm->mover_on;
    if (!defer) _gh_tm_ahead_join(tm, t, &stream);
    tm->ordered = 1;
    tm->ahead = defer ? t : NULL;
    tm->ahead_moved = 0;
    rc = _gh_tm_restore_range(tm, t->vf0, t->nvf);
    tm->ordered = 0;
    tm->ahead = NULL;
    if (tm->ahead_moved) {
      /* After every copy of the move (the copy stream's order); a failure
       * to record one makes the users wait now instead. */
      gh_fevent_t ev = 0;
      if (GH_P(tm, tm->ops->event_record(tm->fr, tm->restore_stream, &ev)) == GH_OK) {
        if (t->ahead_ev) GH_P(tm, tm->ops->event_destroy(tm->fr, t->ahead_ev));  /* an earlier copy's */
        t->ahead_ev = ev;
      } else {  /* the latest batch */
        _gh_tm_ahead_join(tm, t, &stream);
        const gh_fevent_t e = tm->split ? _gh_tm_lane_mark(tm, &tm->lane[GH_TM_LANE_RESTORE])
                                        : (_gh_tm_ordered_done(tm) ? 0 : tm->ordered_ev);
        if (e) _gh_tm_tensor_wait(tm, t, &stream, e, tm->restore_stream);
      }
    }
    const int mrc = gh_tm_prefetch_mark(tm, t);
    if (rc == GH_OK) rc = mrc;
  }
  if (ahead == 2)
    gh_tm_trace(tm, "r %llx %zu %zu %d\n", GH_TM_TP(ptr), _gh_tm_sidx(tm, stream), reserve * tm->frame, rc);
  else
    gh_tm_trace(tm, "%c %llx %zu %d\n", ahead ? 'h' : 'p', GH_TM_TP(ptr), _gh_tm_sidx(tm, stream), rc);
  gh_tm_call_end(tm, ahead ? GH_TM_CALL_PREFETCH_AHEAD : GH_TM_CALL_PREFETCH, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}
int gh_tensor_prefetch(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) { return gh_tm_prefetch(tm, ptr, stream, 0, 0); }
int gh_tensor_prefetch_ahead(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) {
  return gh_tm_prefetch(tm, ptr, stream, 1, 0);
}
int gh_tensor_prefetch_room(gh_tmgr_t* tm, void* ptr, gh_stream_t stream, size_t reserve) {
  const size_t f = tm && tm->frame ? tm->frame : 1;
  return gh_tm_prefetch(tm, ptr, stream, 2, reserve / f + (reserve % f != 0));
}

static int gh_tm_cmp_unit(const void* a, const void* b) {
  const gh_tm_unit_t *x = a, *y = b;
  return x->v0 < y->v0 ? -1 : x->v0 > y->v0;
}

int gh_tensor_prefetch_many(gh_tmgr_t* tm, void* const* ptrs, size_t n, gh_stream_t stream) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_prefetch_many: NULL manager");
  if (n && !ptrs) return _gh_error(GH_ERR_INVAL, "gh_tensor_prefetch_many: %zu tensors at NULL", n);
  if (n == 0) return GH_OK;
  const uint64_t t0 = gh_tm_call_t0(tm);
  _gh_tm_lock(tm);
  _gh_tm_reclaim(tm, 0);
  int rc = _gh_tm_mover_failed(tm);
  if (rc == GH_OK) rc = _gh_tm_stream_seen(tm, stream);
  gh_tensor_t** ts = rc == GH_OK ? _gh_malloc(n * sizeof *ts) : NULL;
  if (rc == GH_OK && !ts) rc = _gh_error(GH_ERR_NOMEM, "gh_tensor_prefetch_many: out of memory");
  /* Every pointer first: a bad one fails the call before anything changes. */
  size_t frames = 0;
  for (size_t i = 0; rc == GH_OK && i < n; i++) {
    ts[i] = ptrs[i] ? gh_tm_find(tm, ptrs[i]) : NULL;
    if (!ts[i]) rc = gh_tm_bad_ptr(tm, ptrs[i], "gh_tensor_prefetch_many");
    else frames += ts[i]->nvf;
  }
  gh_tm_unit_t* units = rc == GH_OK ? _gh_malloc(frames * sizeof *units) : NULL;
  if (rc == GH_OK && !units) rc = _gh_error(GH_ERR_NOMEM, "gh_tensor_prefetch_many: out of memory");
  if (rc == GH_OK) {
    /* Their frames are marked, so that making room evicts none of them; the
     * host units of all of them move in one batch. */
    tm->restoring = 1;
    size_t nu = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
      _gh_tm_stream_join(tm, ts[i], stream);
      _gh_tm_ahead_join(tm, ts[i], &stream);
      for (size_t v = ts[i]->vf0; v < ts[i]->vf0 + ts[i]->nvf; v++) tm->vf[v].mark = 1;
    }
    for (size_t i = 0; i < n; i++) nu += _gh_tm_host_units(tm, ts[i]->vf0, ts[i]->nvf, units + nu, &m);
    /* Tensors sharing a frame found its unit once each. */
    qsort(units, nu, sizeof *units, gh_tm_cmp_unit);
    size_t k = 0;
    m = 0;
    for (size_t i = 0; i < nu; i++)
      if (k == 0 || units[k - 1].v0 != units[i].v0) units[k++] = units[i], m += units[i].k;
    tm->ordered = 1;
    rc = _gh_tm_restore_units(tm, units, k, m);
    tm->ordered = 0;
    for (size_t i = 0; i < n; i++) {
      for (size_t v = ts[i]->vf0; v < ts[i]->vf0 + ts[i]->nvf; v++) tm->vf[v].mark = 0;
      const int mrc = gh_tm_prefetch_mark(tm, ts[i]);
      if (rc == GH_OK) rc = mrc;
    }
  }
  free(units);
  free(ts);
  gh_tm_trace_many(tm, ptrs, n, stream, rc);
  gh_tm_call_end(tm, GH_TM_CALL_PREFETCH_MANY, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* The units of t on the device that an eviction of t may move (a shared
 * frame only once all its tensors are cold, no pinned frame), in address
 * order, into units (room for t->nvf); returns how many. */
static size_t gh_tm_evict_units(const gh_tmgr_t* tm, const gh_tensor_t* t, gh_tm_unit_t* units) {
  size_t n = 0;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf;) {
    const gh_vframe_t* f = &tm->vf[v];
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
    if (f->tier == GH_TIER_DEVICE && f->warm == 0 && f->pins == 0) units[n++] = u;
    v = u.v0 + u.k;
  }
  return n;
}

int gh_tensor_evict(gh_tmgr_t* tm, void* ptr) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_evict: NULL manager");
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_evict", &rc);
  if (rc == GH_OK && t->pins) rc = _gh_error(GH_ERR_PINNED, "gh_tensor_evict: %p is pinned", ptr);
  if (rc == GH_OK) rc = _gh_tm_mover_failed(tm);
  if (rc == GH_OK) rc = gh_tm_set_cold(tm, t, 1);
  if (rc == GH_OK) {
    /* Its units whose tensors are all cold, in one pipelined batch (best
     * effort: a full host tier moves fewer). */
    gh_tm_unit_t* units = _gh_malloc(t->nvf * sizeof *units);
    for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) tm->vf[v].clock = 0;
    if (units) {
      _gh_tm_move(tm, units, gh_tm_evict_units(tm, t, units), GH_TIER_HOST);
      rc = _gh_tm_move_rc(tm, "gh_tensor_evict");
    } else {
      rc = _gh_error(GH_ERR_NOMEM, "gh_tensor_evict: out of memory");
    }
    free(units);
  }
  gh_tm_trace(tm, "e %llx %d\n", GH_TM_TP(ptr), rc);
  gh_tm_call_end(tm, GH_TM_CALL_EVICT, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* gh_tensor_advise on a found tensor (under mu). */
static int gh_tm_advise(gh_tmgr_t* tm, gh_tensor_t* t, gh_advice_t advice) {
  /* A mark only: nothing moves and no stream is waited for (a homeless
   * tensor's host memory is mapped at home first: its quiet advice ends).
   * Cold: its frames lose their CLOCK credits (a shared frame with a warm
   * neighbour then goes early in the CLOCK order); normal: they get their
   * kind's. */
  const int cold = advice != GH_ADVICE_NORMAL;
  int rc;
  if (advice == GH_ADVICE_QUIET && t->cold)
    rc = gh_tm_unquiet(tm, t, 1); /* cold already: quiet keeps its place in the cold order (row 43) */
  else
    rc = gh_tm_set_cold(tm, t, cold);
  if (rc != GH_OK) return rc;
  if (tm->nframes[GH_TIER_HOST] > tm->clean_peak_f) tm->clean_peak_f = tm->nframes[GH_TIER_HOST];
  if (advice == GH_ADVICE_COLD && tm->restoring) {  /* a new cycle (a forward pass): cleaning's target */
    if (!tm->clean_fixed) tm->clean_target_f = tm->clean_peak_f;
    tm->clean_peak_f = tm->nframes[GH_TIER_HOST];
    tm->cycle_evicted = 0;
  }
  if (advice == GH_ADVICE_COLD) tm->restoring = 0;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
    gh_vframe_t* f = &tm->vf[v];
    if (cold) f->clock = 0;
    else if (f->clock < gh_tm_credit(t->kind)) f->clock = gh_tm_credit(t->kind);
  }
  /* Quiet: an event on each of its streams now; its moves wait for these.
   * Without them (too many streams, a failed record) it is cold. */
  if (advice == GH_ADVICE_QUIET && !t->many_streams) {
    unsigned n = 0;
    while (n < t->nstreams &&
           GH_P(tm, tm->ops->event_record(tm->fr, gh_tm_rec_stream(tm, t->streams[n]), &t->quiet_ev[n])) == GH_OK)
      n++;
    if (n == t->nstreams) {
      t->quiet = (uint8_t)n;
      return _gh_tm_clean(tm, t);
    }
    while (n) GH_P(tm, tm->ops->event_destroy(tm->fr, t->quiet_ev[--n]));
  }
  return GH_OK;
}

int gh_tensor_advise(gh_tmgr_t* tm, void* ptr, gh_advice_t advice) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_advise: NULL manager");
  if ((unsigned)advice >= GH_ADVICE_COUNT) return _gh_error(GH_ERR_INVAL, "gh_tensor_advise: advice %d", (int)advice);
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_advise", &rc);
  if (rc == GH_OK) rc = gh_tm_advise(tm, t, advice);
  gh_tm_trace(tm, "c %llx %d %d\n", GH_TM_TP(ptr), (int)advice, rc);
  gh_tm_call_end(tm, GH_TM_CALL_ADVISE, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* gh_tensor_evict_ahead: the quiet advice (unless the tensor is quiet
 * already), then the eviction of its run's units with the users' streams
 * left alone (tm->ahead: the promise says nothing touches it), ordered, so
 * that the call returns once the copies are queued: the device memory
 * they free carries the copies' event, and what takes it waits for that. A
 * quiet tensor's move waits (on the host) for its advice's events only, and
 * leaves its home unmapped. */
int gh_tensor_evict_ahead(gh_tmgr_t* tm, void* ptr) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_evict_ahead: NULL manager");
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_evict_ahead", &rc);
  if (rc == GH_OK && t->pins) rc = _gh_error(GH_ERR_PINNED, "gh_tensor_evict_ahead: %p is pinned", ptr);
  if (rc == GH_OK) rc = _gh_tm_mover_failed(tm);
  if (rc == GH_OK && !t->quiet) rc = gh_tm_advise(tm, t, GH_ADVICE_QUIET);
  /* Moved only as a quiet run with no mover (a shared frame's neighbours,
   * a tensor on more streams than tracked or the mover's remaps would make
   * streams wait): otherwise the advice alone. */
  if (rc == GH_OK && t->quiet && tm->vf[t->vf0].role == GH_VF_RUN && !tm->mover_on) {
    gh_tm_unit_t* units = _gh_malloc(t->nvf * sizeof *units);
    if (units) {
      tm->ordered = 1;
      tm->ahead = t;
      _gh_tm_move(tm, units, gh_tm_evict_units(tm, t, units), GH_TIER_HOST);
      rc = _gh_tm_move_rc(tm, "gh_tensor_evict_ahead");
      tm->ordered = 0;
      tm->ahead = NULL;
    } else {
      rc = _gh_error(GH_ERR_NOMEM, "gh_tensor_evict_ahead: out of memory");
    }
    free(units);
  }
  gh_tm_trace(tm, "o %llx %d\n", GH_TM_TP(ptr), rc);
  gh_tm_call_end(tm, GH_TM_CALL_EVICT, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_pin(gh_tmgr_t* tm, void* ptr) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_pin: NULL manager");
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_pin", &rc);
  if (rc == GH_OK && t->pins == UINT32_MAX) rc = _gh_error(GH_ERR_INVAL, "gh_tensor_pin: too many pins");
  if (rc == GH_OK && t->pins == 0) rc = _gh_tm_mover_failed(tm);  /* (a tensor pinned already moves nothing) */
  if (rc == GH_OK) {
    if (t->pins == 0) {
      rc = _gh_tm_restore_range(tm, t->vf0, t->nvf);
      if (rc == GH_OK) {
        gh_tm_tensor_frames(tm, t, 0, 0, +1, 0);
        tm->pinned_tensors++;
      }
    }
    if (rc == GH_OK) {
      t->pins++;
      (void)gh_tm_set_cold(tm, t, 0);  /* a use (restored whole: no homeless unit left to map) */
      _gh_tm_ahead_join(tm, t, NULL);
    }
  }
  gh_tm_trace(tm, "P %llx %d\n", GH_TM_TP(ptr), rc);
  gh_tm_call_end(tm, GH_TM_CALL_OTHER, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_unpin(gh_tmgr_t* tm, void* ptr) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_unpin: NULL manager");
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_unpin", &rc);
  if (rc == GH_OK && t->pins == 0) rc = _gh_error(GH_ERR_INVAL, "gh_tensor_unpin: %p is not pinned", ptr);
  if (rc == GH_OK && --t->pins == 0) {
    gh_tm_tensor_frames(tm, t, 0, 0, -1, 0);
    tm->pinned_tensors--;
  }
  gh_tm_trace(tm, "U %llx %d\n", GH_TM_TP(ptr), rc);
  gh_tm_call_end(tm, GH_TM_CALL_OTHER, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_set_kind(gh_tmgr_t* tm, void* ptr, gh_kind_t kind) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_set_kind: NULL manager");
  if ((unsigned)kind >= GH_KIND_COUNT) return _gh_error(GH_ERR_INVAL, "gh_tensor_set_kind: kind %d", (int)kind);
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_set_kind", &rc);
  if (rc == GH_OK) {
    tm->tensors[t->kind]--, tm->tensor_bytes[t->kind] -= t->bytes;
    t->kind = (uint8_t)kind;
    tm->tensors[kind]++, tm->tensor_bytes[kind] += t->bytes;
    /* A run's frames take the new kind; a shared frame keeps its slab's. */
    if (tm->vf[t->vf0].role == GH_VF_RUN)
      for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) tm->vf[v].kind = (uint8_t)kind;
  }
  gh_tm_trace(tm, "k %llx %u %d\n", GH_TM_TP(ptr), (unsigned)kind, rc);
  gh_tm_call_end(tm, GH_TM_CALL_OTHER, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tensor_tier(gh_tmgr_t* tm, const void* ptr, gh_tier_t* tier) {
  if (!tm || !tier) return _gh_error(GH_ERR_INVAL, "gh_tensor_tier: NULL argument");
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, "gh_tensor_tier", &rc);
  if (rc == GH_OK) *tier = (gh_tier_t)tm->vf[t->vf0].tier;
  gh_tm_trace(tm, "t %llx %d\n", GH_TM_TP(ptr), rc); /* it reclaims, as every call does */
  gh_tm_call_end(tm, GH_TM_CALL_OTHER, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

static void gh_tm_snapshot(gh_tmgr_t* tm, gh_tmgr_stats_t* s) {
  memset(s, 0, sizeof *s);
  s->frame_bytes = tm->frame;
  s->device_budget = tm->dev_budget_f * tm->frame;
  s->host_budget = tm->host_budget_f * tm->frame;
  for (int k = 1; k < GH_TIER_COUNT; k++) s->frames[k] = tm->nframes[k], s->heap_frames[k] = tm->heap_nframes[k];
  s->frames[GH_TIER_NONE] =
      tm->n_va - tm->tensor_vf0 - tm->nframes[GH_TIER_DEVICE] - tm->nframes[GH_TIER_HOST] - tm->cached;
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
  s->cached_frames = tm->cached;
  s->spare_frames = tm->spare_f;
  s->peak_tensor_bytes = tm->peak_bytes;
  s->moves = tm->moves, s->move_ns = tm->move_ns;
  s->stream_waits = tm->waits, s->stream_wait_ns = tm->wait_ns;
  s->host_placed_bytes = tm->host_placed;
  for (int k = 0; k < GH_KIND_COUNT; k++) s->clock_victims[k] = tm->clock_victims[k];
  s->quiet_waits = tm->quiet_waits;
  pthread_mutex_lock(&tm->pmu);
  for (int k = 0; k < GH_VMM_OP_COUNT; k++) s->vmm_calls[k] = tm->vmm_calls[k], s->vmm_ns[k] = tm->vmm_ns[k];
  s->vmm_move_ns = tm->vmm_move_ns;
  s->ordered_moves = tm->ordered_moves;
  s->chunk_frames = tm->chunk;
  s->chunk_changes = tm->chunk_changes;
  s->heap_grow_asks = __atomic_load_n(&tm->grow_asks, __ATOMIC_RELAXED);
  s->heap_grow_denied = __atomic_load_n(&tm->grow_denied, __ATOMIC_RELAXED);
  s->heap_grow_stale = __atomic_load_n(&tm->grow_stale, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&tm->pmu);
}

int _gh_tmgr_device(const gh_tmgr_t* tm) { return tm->device; }

int _gh_tmgr_device_memory(gh_tmgr_t* tm, size_t* total, size_t* usable) {
  size_t free_bytes = 0;
  _gh_tm_lock(tm);
  const int rc = GH_P(tm, tm->ops->device_free(tm->fr, &free_bytes, total));
  const size_t have = free_bytes + tm->dev_used * tm->frame;  /* the device's free memory and the manager's own */
  *usable = have > tm->opt.device_reserve ? have - tm->opt.device_reserve : 0;
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_stream_capturing(gh_tmgr_t* tm, gh_stream_t stream, int* capturing) {
  return tm->ops->stream_capturing(tm->fr, stream, capturing);
}

int _gh_tmgr_capture_scope(gh_tmgr_t* tm, int delta) {
  if (!tm || (delta != 1 && delta != -1)) return _gh_error(GH_ERR_INVAL, "_gh_tmgr_capture_scope: bad arguments");
  int rc = GH_OK;
  _gh_tm_lock(tm);
  if (delta > 0 && !tm->side_stream) rc = GH_P(tm, tm->ops->stream_create(tm->fr, &tm->side_stream));
  if (rc == GH_OK && delta < 0 && __atomic_load_n(&tm->captures, __ATOMIC_RELAXED) == 0)
    rc = _gh_error(GH_ERR_INVAL, "_gh_tmgr_capture_scope: no capture underway");
  if (rc == GH_OK) __atomic_add_fetch(&tm->captures, delta, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_captures(gh_tmgr_t* tm) { return __atomic_load_n(&tm->captures, __ATOMIC_ACQUIRE); }

gh_stream_t _gh_tmgr_side_stream(gh_tmgr_t* tm) { return tm->side_stream; }

int _gh_tmgr_device_sync(gh_tmgr_t* tm) {
  _gh_tm_lock(tm);
  _gh_tm_mover_drain(tm);  /* the device may wait for the mover's word */
  const int rc = GH_PW(tm, GH_TM_W_OTHER, tm->ops->device_sync(tm->fr));
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_side_sync(gh_tmgr_t* tm) {
  if (!tm->side_stream) return _gh_error(GH_ERR_INVAL, "_gh_tmgr_side_sync: no capture has begun");
  _gh_tm_lock(tm);
  _gh_tm_mover_drain(tm);  /* the stream may wait for the mover's word */
  const int rc = GH_PW(tm, GH_TM_W_OTHER, tm->ops->stream_sync(tm->fr, tm->side_stream));
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_relax(gh_tmgr_t* tm, int* saved) {
  if (!_gh_tmgr_captures(tm)) return 0;
  *saved = GH_FRAMES_CAPTURE_RELAXED;
  return tm->ops->capture_mode(tm->fr, saved) == GH_OK;
}

void _gh_tmgr_unrelax(gh_tmgr_t* tm, int relaxed, int saved) {
  if (relaxed) (void)tm->ops->capture_mode(tm->fr, &saved); /* restoring a mode the call gave cannot fail */
}

int gh_tmgr_stats(gh_tmgr_t* tm, gh_tmgr_stats_t* stats) {
  if (!tm || !stats) return _gh_error(GH_ERR_INVAL, "gh_tmgr_stats: NULL argument");
  _gh_tm_lock(tm);
  gh_tm_snapshot(tm, stats);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int gh_tmgr_reset_peak(gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_reset_peak: NULL manager");
  _gh_tm_lock(tm);
  tm->peak_bytes = tm->live_bytes;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int gh_tmgr_frame_map(gh_tmgr_t* tm, gh_frame_info_t* out, size_t cap, size_t* count) {
  if (!tm || !count || (cap && !out)) return _gh_error(GH_ERR_INVAL, "gh_tmgr_frame_map: NULL argument");
  _gh_tm_lock(tm);
  size_t n = 0;
  for (size_t v = 0; v < tm->n_va; v++) {
    const gh_vframe_t* f = &tm->vf[v];
    if (f->tier == GH_TIER_NONE || f->role == GH_VF_STAGE || f->role == GH_VF_FREE) continue;
    if (n < cap) {
      gh_frame_info_t* o = &out[n];
      memset(o, 0, sizeof *o);
      o->va = (uint64_t)(uintptr_t)gh_tm_va(tm, v);
      o->tier = f->tier;
      o->heap = f->role == GH_VF_HEAP;
      o->kind = o->heap ? 255 : f->kind;
      o->pinned = f->pins > 0;
      o->tensors = f->live - f->pending;
      /* Bytes of its live tensors that lie in this frame. */
      const uint8_t *lo = gh_tm_va(tm, v), *hi = gh_tm_va(tm, v + 1);
      if (f->role == GH_VF_SLAB) {
        for (const gh_tensor_t* t = f->tensors; t; t = t->fnext)
          if (t->state == GH_T_LIVE) o->used_bytes += t->bytes;
      } else if (f->role == GH_VF_RUN && f->tensors && f->tensors->state == GH_T_LIVE) {
        const gh_tensor_t* t = f->tensors;
        const uint8_t* a = t->ptr > lo ? t->ptr : lo;
        const uint8_t* b = t->ptr + t->bytes < hi ? t->ptr + t->bytes : hi;
        if (b > a) o->used_bytes = (uint64_t)(b - a);
      }
    }
    n++;
  }
  *count = n;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

static int gh_tm_info_cmp(const void* a, const void* b) {
  const uint64_t x = ((const gh_tensor_info_t*)a)->ptr, y = ((const gh_tensor_info_t*)b)->ptr;
  return x < y ? -1 : x > y;
}

static void gh_tm_tensor_info(const gh_tmgr_t* tm, const gh_tensor_t* t, gh_tensor_info_t* o) {
  memset(o, 0, sizeof *o);
  o->ptr = (uint64_t)(uintptr_t)t->ptr;
  o->bytes = t->bytes;
  o->span = t->span;
  const int run = tm->vf[t->vf0].role == GH_VF_RUN;
  o->extent = run ? (uint64_t)t->nvf * tm->frame : t->span;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
    if (tm->vf[v].tier != GH_TIER_DEVICE) continue;
    const uint8_t *lo = gh_tm_va(tm, v), *hi = gh_tm_va(tm, v + 1);
    const uint8_t* a = t->ptr > lo ? t->ptr : lo;
    const uint8_t* b = t->ptr + t->span < hi ? t->ptr + t->span : hi;
    if (b > a) o->device_bytes += (uint64_t)(b - a);
  }
  o->pending = t->state == GH_T_PENDING;
  o->stream = (uint64_t)(uintptr_t)(o->pending ? t->free_stream : t->nstreams ? t->streams[0] : NULL);
  o->kind = t->kind;
  o->pinned = t->pins > 0;
  o->cold = t->cold != 0;
  o->run = run;
  o->context = t->hist_ctx;
}

int gh_tmgr_tensor_map(gh_tmgr_t* tm, gh_tensor_info_t* out, size_t cap, size_t* count) {
  if (!tm || !count || (cap && !out)) return _gh_error(GH_ERR_INVAL, "gh_tmgr_tensor_map: NULL argument");
  _gh_tm_lock(tm);
  size_t n = 0;
  for (const gh_tensor_t* t = tm->live_head; t; t = t->next) n++;
  for (const gh_tensor_t* t = tm->pend_head; t; t = t->next) n++;
  /* All of them, sorted, then the first cap: the lowest addresses. */
  gh_tensor_info_t* all = cap && n ? _gh_malloc(n * sizeof *all) : NULL;
  if (cap && n && !all) {
    pthread_mutex_unlock(&tm->mu);
    return _gh_error(GH_ERR_NOMEM, "gh_tmgr_tensor_map: %zu tensors", n);
  }
  size_t i = 0;
  for (const gh_tensor_t* t = tm->live_head; all && t; t = t->next) gh_tm_tensor_info(tm, t, &all[i++]);
  for (const gh_tensor_t* t = tm->pend_head; all && t; t = t->next) gh_tm_tensor_info(tm, t, &all[i++]);
  pthread_mutex_unlock(&tm->mu);
  if (all) {
    qsort(all, n, sizeof *all, gh_tm_info_cmp);
    memcpy(out, all, (n < cap ? n : cap) * sizeof *all);
    free(all);
  }
  *count = n;
  return GH_OK;
}

int gh_tmgr_record_history(gh_tmgr_t* tm, size_t max_entries) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_record_history: NULL manager");
  if (max_entries > SIZE_MAX / 2 / sizeof(gh_hist_entry_t))
    return _gh_error(GH_ERR_INVAL, "gh_tmgr_record_history: %zu entries", max_entries);
  _gh_tm_lock(tm);
  /* The newest entries held so far, up to the new size, oldest first, in
   * a ring of their number (at least GH_TM_HIST_FIRST, at most max_entries). */
  const size_t keep = tm->hist_n < max_entries ? tm->hist_n : max_entries;
  size_t alloc = keep > GH_TM_HIST_FIRST ? keep : GH_TM_HIST_FIRST;
  if (alloc > max_entries) alloc = max_entries;
  gh_hist_entry_t* ring = alloc ? _gh_malloc(alloc * sizeof *ring) : NULL;
  if (alloc && !ring) {
    pthread_mutex_unlock(&tm->mu);
    return _gh_error(GH_ERR_NOMEM, "gh_tmgr_record_history: %zu entries", alloc);
  }
  for (size_t k = 0; k < keep; k++)
    ring[k] = tm->hist[(tm->hist_next + tm->hist_n - keep + k) % tm->hist_alloc];
  gh_hist_entry_t* old = tm->hist;
  tm->hist_dropped = max_entries ? tm->hist_dropped + (tm->hist_n - keep) : 0;
  tm->hist = ring, tm->hist_cap = max_entries, tm->hist_alloc = alloc, tm->hist_n = keep, tm->hist_next = 0;
  pthread_mutex_unlock(&tm->mu);
  free(old);
  return GH_OK;
}

int gh_tmgr_history(gh_tmgr_t* tm, gh_hist_entry_t* out, size_t cap, size_t* count, uint64_t* dropped) {
  if (!tm || !count || (cap && !out)) return _gh_error(GH_ERR_INVAL, "gh_tmgr_history: NULL argument");
  _gh_tm_lock(tm);
  for (size_t k = 0; k < tm->hist_n && k < cap; k++) out[k] = tm->hist[(tm->hist_next + k) % tm->hist_alloc];
  *count = tm->hist_n;
  if (dropped) *dropped = tm->hist_dropped;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int gh_tmgr_empty_cache(gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_empty_cache: NULL manager");
  _gh_tm_lock(tm);
  _gh_tm_flush(tm);
  _gh_tm_reclaim(tm, 1);
  _gh_tm_cache_release(tm, SIZE_MAX);
  while (tm->n_spare) _gh_tm_spare_release(tm, tm->n_spare - 1);
  /* Host memory kept by restores beyond what the pool thread keeps. */
  while (tm->pool_n > tm->pool_target && tm->pool_cnt) _gh_tm_pool_release_last(tm);
  gh_tm_trace(tm, "x %d\n", GH_OK);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int gh_tmgr_set_device_budget(gh_tmgr_t* tm, size_t bytes) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_set_device_budget: NULL manager");
  _gh_tm_lock(tm);
  const size_t nf = bytes / tm->frame, old = tm->dev_budget_f;
  int rc = GH_OK;
  if (nf == 0)
    rc = _gh_error(GH_ERR_INVAL, "gh_tmgr_set_device_budget: %zu bytes, less than a frame (%zu)", bytes, tm->frame);
  else if (nf < tm->dev_used)
    rc = _gh_tm_mover_failed(tm);  /* (a failure that stops moves stops this one) */
  if (rc == GH_OK && nf < tm->dev_used) {
    tm->dev_budget_f = nf;
    /* As an allocation makes room: pending frees reclaimed, the cache,
     * then evictions down to the low watermark of the new budget; then the
     * spares, which the budget counts but room does not. */
    (void)_gh_tm_device_room(tm, 0, NULL);
    while (tm->n_spare && tm->dev_used > nf) _gh_tm_spare_release(tm, tm->n_spare - 1);
    if (tm->dev_used > nf && tm->move_rc != GH_OK) {  /* a copy or map the provider refused */
      tm->dev_budget_f = old;
      rc = _gh_tm_move_rc(tm, "gh_tmgr_set_device_budget (the budget stays)");
    } else if (tm->dev_used > nf) {
      tm->dev_budget_f = old;
      rc = _gh_error(GH_ERR_BUDGET,
                     "gh_tmgr_set_device_budget: %zu bytes asked, %zu stay on the device (pinned tensors, the device "
                     "heap, frames the host budget could not take); the budget stays %zu bytes",
                     nf * tm->frame, tm->dev_used * tm->frame, old * tm->frame);
    }
  } else if (rc == GH_OK) {
    tm->dev_budget_f = nf;
  }
  gh_tm_trace(tm, "b %zu %d\n", bytes, rc);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int gh_tmgr_set_oom_observer(gh_tmgr_t* tm, gh_oom_fn fn, void* user) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_set_oom_observer: NULL manager");
  _gh_tm_lock(tm);
  tm->oom = fn, tm->oom_user = user;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

/* Map k (<= GH_TM_HEAP_STEP) more frames for the device heap and publish
 * them: device frames within the budget (evicting tensor frames for them),
 * host frames when it is spent; all or as many as came. With `nowait`
 * (growth on demand, kernels waiting for it: grow.h) only memory that
 * waits for no stream: device frames the budget has free, new host frames. */
static int gh_tm_heap_grow(gh_tmgr_t* tm, size_t k, int nowait) {
  /* Single frames: the heap shrinks a frame at a time. */
  gh_tm_pa_t pas[GH_TM_HEAP_STEP];
  gh_pframe_t pfs[GH_TM_HEAP_STEP];
  const size_t free_f = tm->dev_budget_f > tm->dev_used ? tm->dev_budget_f - tm->dev_used : 0;  /* spares count */
  const size_t dev = nowait ? (free_f < k ? free_f : k) : _gh_tm_device_room(tm, k, NULL);
  size_t got = 0;
  for (; got < k; got++) {
    /* The device heap's frames serve every stream: the host waits for copies. */
    const int rc = nowait ? (got < dev ? _gh_tm_dev_new(tm, 1, &pas[got]) : _gh_tm_host_new(tm, 1, &pas[got]))
                          : (got < dev ? _gh_tm_dev_get(tm, 1, &pas[got], NULL) : _gh_tm_host_get(tm, 1, &pas[got], NULL));
    if (rc != GH_OK) break;
    pfs[got] = pas[got].pf;
  }
  if (got == 0) return _gh_error(GH_ERR_BUDGET, "heap growth: no frame in either tier");
  const size_t v0 = tm->heap_online_f;
  int rc = GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, gh_tm_va(tm, v0), pfs, got));
  if (rc != GH_OK) {
    _gh_tm_pas_drop(tm, pas, got);
    return rc;
  }
  _gh_tm_vf_set(tm, v0, pas, got);
  for (size_t i = 0; i < got; i++) _gh_tm_count(tm, &tm->vf[v0 + i], +1);
  rc = _gh_heap_online(tm->heap, (v0 + got) * tm->frame);
  if (rc != GH_OK) {  /* not published: take the frames back */
    GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, gh_tm_va(tm, v0), got));
    for (size_t i = 0; i < got; i++) {
      _gh_tm_count(tm, &tm->vf[v0 + i], -1);
      tm->vf[v0 + i].tier = GH_TIER_NONE;
    }
    _gh_tm_pas_drop(tm, pas, got);
    return rc;
  }
  tm->heap_online_f = v0 + got;
  tm->heap_grows += got;
  return GH_OK;
}

/* The device heap: grow past the high watermark (by a quarter, at most
 * GH_TM_HEAP_STEP frames), or give back trailing free frames down to what
 * keeps occupancy below the high watermark (never below the initial size). */
static int gh_tm_heap_maintain(gh_tmgr_t* tm) {
  size_t used = 0, online = 0;
  int rc = _gh_heap_usage(tm->heap, &used, &online);
  if (rc != GH_OK) return rc;
  const double high = tm->opt.high_watermark;
  if ((double)used > high * (double)online && tm->heap_online_f < tm->heap_vf) {
    size_t k = tm->heap_online_f / 4 ? tm->heap_online_f / 4 : 1;
    if (k > tm->heap_vf - tm->heap_online_f) k = tm->heap_vf - tm->heap_online_f;
    if (k > GH_TM_HEAP_STEP) k = GH_TM_HEAP_STEP;
    return gh_tm_heap_grow(tm, k, 0);
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
      _gh_tm_vframes_drop(tm, v, 1);  /* a single frame */
      tm->vf[v].role = GH_VF_HEAP;
    }
    tm->heap_shrinks += tm->heap_online_f - nf;
    tm->heap_online_f = nf;
  }
  return GH_OK;
}

int gh_tmgr_maintain(gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_maintain: NULL manager");
  _gh_tm_lock(tm);
  _gh_tm_flush(tm);
  _gh_tm_reclaim(tm, 0);
  const int sticky = _gh_tm_mover_failed(tm);  /* (frees reclaimed all the same; nothing moves) */
  int rc = sticky;
  if (rc == GH_OK && tm->heap) rc = gh_tm_heap_maintain(tm);
  /* Restore warm host frames while the device stays below the low watermark. */
  const size_t low = sticky ? 0 : (size_t)(tm->opt.low_watermark * (double)tm->dev_budget_f);
  gh_tm_unit_t* units = NULL;
  size_t n = 0, cap = 0, frames = 0;
  for (size_t v = tm->tensor_vf0; v < tm->n_va && gh_tm_dev_busy(tm) + frames < low;) {
    const gh_vframe_t* f = &tm->vf[v];
    if (f->tier != GH_TIER_HOST || f->warm == 0) {
      v++;
      continue;
    }
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
    v = u.v0 + u.k;
    if (gh_tm_dev_busy(tm) + frames + u.k > low) continue;
    if (n == cap) {
      gh_tm_unit_t* p = _gh_realloc(units, (cap = cap ? 2 * cap : 64) * sizeof *p);
      if (!p) break;
      units = p;
    }
    units[n++] = u, frames += u.k;
  }
  if (n) _gh_tm_move(tm, units, n, GH_TIER_DEVICE);  /* one pipelined batch */
  if (rc == GH_OK) rc = _gh_tm_move_rc(tm, "gh_tmgr_maintain");  /* (the heap's evictions' too) */
  free(units);
  if (tm->pool_running) pthread_cond_signal(&tm->pool_cv);
  gh_tm_trace(tm, "m %d\n", rc);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* ---------------------------------------------------------------- growth
 * on demand (GH_TMGR_GROW_ON_DEMAND; the protocol: include/gpuheap/grow.h).
 * A thread of the manager's own watches the channel and answers each
 * request. Kernels wait for it in place, so nothing it does may wait for
 * the GPU: it takes the manager's lock only if it comes within
 * GH_TM_GROW_LOCK_NS (another thread may hold it while it waits for a
 * stream whose kernel waits here), grows with memory that waits for no
 * stream (gh_tm_heap_grow's nowait), and publishes the pages with a copy
 * engine (_gh_heap_online). A request from a lane that searched before the
 * latest growth is answered by it, without growing again. It polls every
 * 20 us while requests come and backs off to 1 ms when idle. */

#define GH_TM_GROW_LOCK_NS 20000000ull
#define GH_TM_GROW_POLL_NS 20000ull
#define GH_TM_GROW_IDLE_NS 1000000ull

static void gh_tm_sleep_ns(uint64_t ns) {
  const struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  nanosleep(&ts, NULL);
}

/* One request for at least `frames` frames, with the lock held: the
 * larger of a quarter of the heap and what was asked, up to the heap's
 * maximum, in steps of GH_TM_HEAP_STEP. GH_OK when it grew at all. */
static int gh_tm_grow_serve(gh_tmgr_t* tm, size_t frames) {
  size_t k = tm->heap_online_f / 4 > frames ? tm->heap_online_f / 4 : frames;
  if (k == 0) k = 1;
  if (k > tm->heap_vf - tm->heap_online_f) k = tm->heap_vf - tm->heap_online_f;
  if (k == 0) return _gh_error(GH_ERR_BUDGET, "heap growth on demand: the heap is at heap_max_bytes");
  size_t done = 0;
  while (done < k) {
    const size_t before = tm->heap_online_f;
    const size_t step = k - done < GH_TM_HEAP_STEP ? k - done : GH_TM_HEAP_STEP;
    const int rc = gh_tm_heap_grow(tm, step, 1);
    done += tm->heap_online_f - before;
    if (rc != GH_OK) return done ? GH_OK : rc;  /* grew, if less than asked */
    if (tm->heap_online_f - before < step) break;  /* the budgets ran out */
  }
  return GH_OK;
}

static void* gh_tm_grow_main(void* arg) {
  gh_tmgr_t* tm = arg;
  uint32_t* ch = tm->grow_words;
  int relaxed = GH_FRAMES_CAPTURE_RELAXED;  /* (as the pool thread: a capture elsewhere forbids nothing here) */
  (void)tm->ops->capture_mode(tm->fr, &relaxed);
  const int bound = _gh_heap_bind_thread(tm->heap);
  uint32_t done = 0;
  uint64_t idle = GH_TM_GROW_POLL_NS;
  while (!__atomic_load_n(&tm->grow_stop, __ATOMIC_ACQUIRE)) {
    const uint32_t want = __atomic_load_n(&ch[GH_GROW_WANT], __ATOMIC_ACQUIRE);
    if (want == done) {
      gh_tm_sleep_ns(idle);
      idle = idle * 2 < GH_TM_GROW_IDLE_NS ? idle * 2 : GH_TM_GROW_IDLE_NS;
      continue;
    }
    idle = GH_TM_GROW_POLL_NS;
    const size_t frames = __atomic_load_n(&ch[GH_GROW_FRAMES], __ATOMIC_RELAXED);
    const uint32_t seen = __atomic_load_n(&ch[GH_GROW_SEEN], __ATOMIC_RELAXED);
    int rc = bound;
    if (rc == GH_OK && seen != _gh_heap_grown(tm->heap)) {
      /* The heap grew since the asking lane searched: that growth answers. */
      __atomic_add_fetch(&tm->grow_stale, 1, __ATOMIC_RELAXED);
    } else if (rc == GH_OK) {
      rc = _gh_error(GH_ERR_BUSY, "heap growth on demand: the manager stayed busy");
      for (const uint64_t t0 = gh_tm_now_ns(); gh_tm_now_ns() - t0 < GH_TM_GROW_LOCK_NS;) {
        if (pthread_mutex_trylock(&tm->mu) == 0) {
          tm->move_rc = GH_OK;
          gh_tm_settle(tm);
          rc = gh_tm_grow_serve(tm, frames);
          pthread_mutex_unlock(&tm->mu);
          break;
        }
        gh_tm_sleep_ns(GH_TM_GROW_POLL_NS);
      }
    }
    __atomic_add_fetch(&tm->grow_asks, 1, __ATOMIC_RELAXED);
    if (rc != GH_OK) {
      __atomic_add_fetch(&tm->grow_denied, 1, __ATOMIC_RELAXED);
      __atomic_store_n(&ch[GH_GROW_DENIED], want, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&ch[GH_GROW_DONE], want, __ATOMIC_RELEASE);
    done = want;
  }
  __atomic_store_n(&ch[GH_GROW_CLOSED], 1u, __ATOMIC_RELEASE);
  return NULL;
}

static int gh_tm_grow_start(gh_tmgr_t* tm) {
  int rc = tm->ops->word_alloc(tm->fr, &tm->grow_words);
  if (rc != GH_OK) return rc;
  rc = _gh_heap_grow_channel(tm->heap, tm->grow_words);
  if (rc != GH_OK) return rc;
  if (pthread_create(&tm->grow_thread, NULL, gh_tm_grow_main, tm) != 0)
    return _gh_error(GH_ERR_NOMEM, "gh_tmgr_create: cannot start the heap's growth thread");
  tm->grow_running = 1;
  return GH_OK;
}

/* Before the heap goes: no more answers (lanes still waiting see CLOSED). */
static void gh_tm_grow_stop(gh_tmgr_t* tm) {
  if (!tm->grow_running) return;
  __atomic_store_n(&tm->grow_stop, 1, __ATOMIC_RELEASE);
  pthread_join(tm->grow_thread, NULL);
  tm->grow_running = 0;
}

gh_heap_t* gh_tmgr_heap(gh_tmgr_t* tm) { return tm ? tm->heap : NULL; }

int gh_heap_maintain(gh_heap_t* heap) {
  gh_tmgr_t* tm = heap ? _gh_heap_manager(heap) : NULL;
  return tm ? gh_tmgr_maintain(tm) : _gh_error(GH_ERR_INVAL, "gh_heap_maintain: the heap has no manager");
}
