/* gpuheap, tensor manager: memory -- the host pool and its thread, frame
 * counts, device aliases and spare device allocations, the backing of a
 * unit, the vframes' records, slabs, and the cache of freed device memory.
 * The design: tensor_impl.h. */
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

/* ---------------------------------------------------------------- host pool
 * Host allocations are of a chunk's size ("big": any size from 2 to
 * GH_TM_CHUNK_MAX, since the chunk follows the tensors, gh_tm_chunk_learn;
 * alias in [0, alias_big_f) of the alias region, first fit) or a single
 * frame ("one", alias in [alias_big_f, +alias_one_f)). The big region is
 * twice the host budget, for first fit's holes; should first fit still
 * find no room, the unit takes single frames (_gh_tm_unit_get), whose
 * region holds the whole budget: no request fails for want of an alias. */

/* First fit of n free frames in used[lo, hi), searching from *hint (no
 * free frame in [lo, *hint), which it moves on); SIZE_MAX when none. */
static size_t gh_tm_first_fit(const uint8_t* used, size_t hi, size_t n, size_t* hint) {
  size_t i = *hint;
  while (i < hi && used[i]) i++;
  *hint = i;
  while (i + n <= hi) {
    size_t j = 0;
    while (j < n && !used[i + j]) j++;
    if (j == n) return i;
    i += j + 1;
    while (i < hi && used[i]) i++;
  }
  return SIZE_MAX;
}

/* An alias for a host allocation of n frames; GH_TM_NO_ALIAS when none. */
static uint32_t gh_tm_alias_get(gh_tmgr_t* tm, size_t n) {
  size_t a = SIZE_MAX;
  if (n == 1) {
    a = gh_tm_first_fit(tm->alias_used, tm->alias_big_f + tm->alias_one_f, 1, &tm->alias_one_hint);
  } else if (n <= GH_TM_CHUNK_MAX) {
    a = gh_tm_first_fit(tm->alias_used, tm->alias_big_f, n, &tm->alias_big_hint);
  }
  if (a == SIZE_MAX) return GH_TM_NO_ALIAS;
  memset(tm->alias_used + a, 1, n);
  return (uint32_t)a;
}
static void gh_tm_alias_put(gh_tmgr_t* tm, uint32_t alias, size_t n) {
  memset(tm->alias_used + alias, 0, n);
  size_t* hint = alias < tm->alias_big_f ? &tm->alias_big_hint : &tm->alias_one_hint;
  if (alias < *hint) *hint = alias;
}

/* Provider calls for a host allocation of n frames at its (reserved) alias:
 * create and map there / unmap and release. Under pmu, not mu necessarily. */
static int gh_tm_host_make(gh_tmgr_t* tm, size_t n, uint32_t alias, gh_pframe_t* out) {
  gh_pframe_t pf = 0;
  int rc = GH_PV(tm, GH_VMM_CREATE, tm->ops->create(tm->fr, GH_TIER_HOST, n, &pf));
  if (rc != GH_OK) return rc;
  rc = GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, gh_tm_alias_va(tm, alias), &pf, 1));
  if (rc != GH_OK) {
    GH_PV(tm, GH_VMM_RELEASE, tm->ops->release(tm->fr, pf));
    return rc;
  }
  *out = pf;
  return GH_OK;
}
static void gh_tm_host_unmake(gh_tmgr_t* tm, const gh_tm_pa_t* pa) {
  GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, gh_tm_alias_va(tm, pa->alias), pa->n));
  GH_PV(tm, GH_VMM_RELEASE, tm->ops->release(tm->fr, pa->pf));
  gh_tm_alias_put(tm, pa->alias, pa->n);
  tm->host_used -= pa->n;
}

/* Pool entries the pool thread counts: single frames and allocations of
 * the current chunk (pool_ones, pool_bigs); others (of an earlier chunk)
 * are pooled, taken by size and counted by neither. */
static void gh_tm_pool_count(gh_tmgr_t* tm, size_t n, int delta) {
  if (n == 1) tm->pool_ones += (size_t)delta;
  else if (n == tm->chunk) tm->pool_bigs += (size_t)delta;
}

static void gh_tm_pool_take(gh_tmgr_t* tm, size_t i) {
  const gh_tm_pa_t pa = tm->pool[i];
  tm->pool[i] = tm->pool[--tm->pool_cnt];
  tm->pool_n -= pa.n;
  gh_tm_pool_count(tm, pa.n, -1);
}

/* The pool's newest entry of n frames, or SIZE_MAX. With a restore
 * stream, one no restore copy may still read (its stamp known complete)
 * first, else the one given back earliest: an eviction that takes it
 * waits the least. */
static size_t gh_tm_pool_find(const gh_tmgr_t* tm, size_t n) {
  size_t best = SIZE_MAX;
  for (size_t i = tm->pool_cnt; i-- > 0;) {
    if (tm->pool[i].n != n) continue;
    if (!tm->split || tm->pool[i].stamp <= tm->lane[GH_TM_LANE_RESTORE].done) return i;
    if (best == SIZE_MAX || tm->pool[i].stamp < tm->pool[best].stamp) best = i;
  }
  return best;
}

/* Release the pool's last allocation (the pool is not empty). */
void _gh_tm_pool_release_last(gh_tmgr_t* tm) {
  _gh_tm_host_ready(tm, NULL, NULL);
  const gh_tm_pa_t pa = tm->pool[tm->pool_cnt - 1];
  gh_tm_pool_take(tm, tm->pool_cnt - 1);
  gh_tm_host_unmake(tm, &pa);
}

/* A host allocation of n frames (<= GH_TM_CHUNK_MAX) for `user`
 * (_gh_tm_wait_for): from the pool, else created now within the host budget
 * (giving back pool allocations of other sizes if the budget needs it). */
int _gh_tm_host_get(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out, const gh_stream_t* user) {
  int rc = GH_OK;
  size_t i = gh_tm_pool_find(tm, n);
  if (i == SIZE_MAX && tm->clean_f && !tm->cleaning && tm->host_used - tm->pool_n + n > tm->host_budget_f) {
    _gh_tm_clean_drop_all(tm);  /* the clean copies' memory, to the pool first */
    i = gh_tm_pool_find(tm, n);
  }
  if (i != SIZE_MAX) {
    *out = tm->pool[i];
    gh_tm_pool_take(tm, i);
    _gh_tm_host_ready(tm, out, user);
    out->stamp = 0;
  } else {
    while (tm->host_used + n > tm->host_budget_f && tm->pool_cnt) _gh_tm_pool_release_last(tm);
    rc = _gh_tm_host_new(tm, n, out);
  }
  if (tm->pool_running) pthread_cond_signal(&tm->pool_cv);
  return rc;
}

/* A host allocation of n frames created now, within the host budget as it
 * stands (nothing given back for it). */
int _gh_tm_host_new(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out) {
  if (tm->host_used + n > tm->host_budget_f)
    return _gh_error(GH_ERR_BUDGET, "host budget of %zu frames spent (%zu used, %zu asked)", tm->host_budget_f,
                     tm->host_used, n);
  const uint32_t alias = gh_tm_alias_get(tm, n);
  if (alias == GH_TM_NO_ALIAS) return _gh_error(GH_ERR_BUDGET, "no host alias of %zu frames free (first fit)", n);
  const int rc = gh_tm_host_make(tm, n, alias, &out->pf);
  if (rc != GH_OK) {
    gh_tm_alias_put(tm, alias, n);
    return rc;
  }
  tm->host_used += n;
  out->n = (uint32_t)n, out->alias = alias, out->tier = GH_TIER_HOST, out->ev = 0, out->stamp = 0;
  return GH_OK;
}

/* A host allocation mapped nowhere but at its alias goes back to the pool,
 * whatever its size: pinning host memory costs ~0.5 ms a frame, so memory
 * that a restore gives back is kept for the next eviction (a training step
 * evicts and restores the same bytes every step). It stays counted in the
 * host budget; _gh_tm_host_get releases pooled allocations when the budget
 * needs them, gh_tmgr_empty_cache trims the pool to its target. */
void _gh_tm_host_put(gh_tmgr_t* tm, const gh_tm_pa_t* pa) {
  if (tm->pool_cnt < tm->pool_cap) {
    tm->pool[tm->pool_cnt++] = *pa;
    tm->pool_n += pa->n;
    gh_tm_pool_count(tm, pa->n, +1);
    return;
  }
  _gh_tm_host_ready(tm, NULL, NULL);
  gh_tm_host_unmake(tm, pa);
}

/* The pool thread: keeps pool_ones_target single frames and
 * pool_bigs_target chunk allocations created ahead of need, mapped at their
 * aliases. It holds mu only to look at and hand over the pool, and pmu
 * (alone) while it creates an allocation. */
void* _gh_tm_pool_main(void* arg) {
  gh_tmgr_t* tm = arg;
  /* A graph captured elsewhere must not forbid its calls (tensor_sync.c,
   * "captures"). Should the mode not change, its calls during such a
   * capture fail, and are reported, as any failed call is. */
  int relaxed = GH_FRAMES_CAPTURE_RELAXED;
  (void)tm->ops->capture_mode(tm->fr, &relaxed);
  pthread_mutex_lock(&tm->mu);
  while (!tm->pool_stop) {
    int big = -1;
    if (tm->pool_cnt + 1 < tm->pool_cap) {
      if (tm->pool_ones < tm->pool_ones_target && tm->host_used + 1 <= tm->host_budget_f)
        big = 0;
      else if (tm->pool_bigs < tm->pool_bigs_target && tm->host_used + tm->chunk <= tm->host_budget_f)
        big = 1;
    }
    const size_t n = big > 0 ? tm->chunk : 1;
    const uint32_t alias = big >= 0 ? gh_tm_alias_get(tm, n) : GH_TM_NO_ALIAS;
    if (alias == GH_TM_NO_ALIAS) {
      pthread_cond_wait(&tm->pool_cv, &tm->mu);
      continue;
    }
    /* Reserve the budget and the count first (the chunk does not change
     * while a creation is in flight: _gh_tm_chunk_set quiesces the pool). */
    tm->host_used += n, tm->pool_inflight += n;
    gh_tm_pool_count(tm, n, +1);
    pthread_mutex_unlock(&tm->mu);
    gh_tm_pa_t pa = {0, (uint32_t)n, alias, GH_TIER_HOST, 0, 0};
    const int rc = gh_tm_host_make(tm, n, alias, &pa.pf);
    pthread_mutex_lock(&tm->mu);
    tm->pool_inflight -= n;
    if (rc == GH_OK && tm->pool_cnt < tm->pool_cap) {
      tm->pool[tm->pool_cnt++] = pa;
      tm->pool_n += n;
      pthread_cond_broadcast(&tm->pool_done_cv);
      continue;
    }
    gh_tm_pool_count(tm, n, -1);
    if (rc == GH_OK) {
      gh_tm_host_unmake(tm, &pa);  /* gives back the budget and the alias */
    } else {
      tm->host_used -= n;
      gh_tm_alias_put(tm, alias, n);
    }
    pthread_cond_broadcast(&tm->pool_done_cv);
    if (!tm->pool_stop) pthread_cond_wait(&tm->pool_cv, &tm->mu);  /* failed: wait for a change */
  }
  pthread_mutex_unlock(&tm->mu);
  return NULL;
}

/* Wait (under mu) until no pool creation holds host budget in flight. */
void _gh_tm_pool_quiesce(gh_tmgr_t* tm) {
  while (tm->pool_inflight) pthread_cond_wait(&tm->pool_done_cv, &tm->mu);
}

/* ---------------------------------------------------------------- frames */

/* Count a mapped vframe in (delta +1) or out of (-1) its class: heap,
 * cache, or tensor frames of its tier. Whatever changes the class (role,
 * tier, a slab's live count between 0 and 1) is wrapped in -1 / +1. */
void _gh_tm_count(gh_tmgr_t* tm, const gh_vframe_t* f, int delta) {
  if (f->tier == GH_TIER_NONE) return;
  if (f->role == GH_VF_HEAP)
    tm->heap_nframes[f->tier] += (size_t)delta;
  else if (gh_tm_vf_cached(f))
    tm->cached += (size_t)delta;
  else
    tm->nframes[f->tier] += (size_t)delta;
}

/* ---------------------------------------------------------------- device aliases
 * A device allocation is mapped at an alias (first fit in the device-alias
 * region) the first time a move copies out of or into it, and stays there
 * until it is released, so that later moves of the same memory (a training
 * step moves the same allocations every step) make no call for it. */

static void gh_tm_dalias_put(gh_tmgr_t* tm, gh_tm_pa_t* pa) {
  if (pa->alias == GH_TM_NO_ALIAS) return;
  GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, gh_tm_dalias_va(tm, pa->alias), pa->n));
  memset(tm->dalias_used + pa->alias, 0, pa->n);
  if (pa->alias < tm->dalias_hint) tm->dalias_hint = pa->alias;
  tm->dalias_n -= pa->n;
  pa->alias = GH_TM_NO_ALIAS;
}

/* First fit of n free device-alias frames; GH_TM_NO_ALIAS when none. */
static uint32_t gh_tm_dalias_find(gh_tmgr_t* tm, size_t n) {
  const size_t a = gh_tm_first_fit(tm->dalias_used, tm->dalias_f, n, &tm->dalias_hint);
  return a == SIZE_MAX ? GH_TM_NO_ALIAS : (uint32_t)a;
}

/* Give device allocation *pa (mapped nowhere else but, maybe, at its home)
 * an alias if it has none: GH_OK with pa->alias set, or not (the region
 * full even after the spares gave theirs back: GH_ERR_BUDGET, no error
 * recorded, since the move stages instead and succeeds; or the map's
 * error), nothing changed. */
int _gh_tm_dalias_get(gh_tmgr_t* tm, gh_tm_pa_t* pa) {
  if (pa->alias != GH_TM_NO_ALIAS) return GH_OK;
  if (tm->dalias_off) return GH_ERR_UNSUPPORTED;
  uint32_t a = gh_tm_dalias_find(tm, pa->n);
  if (a == GH_TM_NO_ALIAS) _gh_tm_held_flush(tm, NULL);  /* held copies read through spares' aliases */
  for (size_t i = 0; a == GH_TM_NO_ALIAS && i < tm->n_spare; i++) {  /* spares are the likeliest idle ones */
    if (tm->spare[i].alias == GH_TM_NO_ALIAS) continue;
    _gh_tm_pa_ready(tm, &tm->spare[i], NULL);  /* its copy reads through the alias */
    gh_tm_dalias_put(tm, &tm->spare[i]);
    a = gh_tm_dalias_find(tm, pa->n);
  }
  if (a == GH_TM_NO_ALIAS) return GH_ERR_BUDGET;
  const int rc = GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, gh_tm_dalias_va(tm, a), &pa->pf, 1));
  if (rc != GH_OK) return rc;
  memset(tm->dalias_used + a, 1, pa->n);
  tm->dalias_n += pa->n;
  pa->alias = a;
  return GH_OK;
}

static void gh_tm_dev_release(gh_tmgr_t* tm, const gh_tm_pa_t* pa) {
  for (size_t i = 0; i < tm->n_held; i++)
    if (tm->held[i].pf == pa->pf) _gh_tm_held_flush(tm, NULL);  /* its copy first */
  gh_tm_pa_t p = *pa;
  _gh_tm_pa_ready(tm, &p, NULL);
  gh_tm_dalias_put(tm, &p);
  GH_PV(tm, GH_VMM_RELEASE, tm->ops->release(tm->fr, pa->pf));
  tm->dev_used -= pa->n;
}

/* Take spare i out of the list. */
static gh_tm_pa_t gh_tm_spare_take(gh_tmgr_t* tm, size_t i) {
  const gh_tm_pa_t pa = tm->spare[i];
  tm->spare[i] = tm->spare[--tm->n_spare];
  tm->spare_f -= pa.n;
  return pa;
}
void _gh_tm_spare_release(gh_tmgr_t* tm, size_t i) {
  const gh_tm_pa_t pa = gh_tm_spare_take(tm, i);
  gh_tm_dev_release(tm, &pa);
}

/* Give back an allocation mapped nowhere (but, host, at its alias): host
 * memory to the pool, device memory to the spares (released when the list
 * cannot grow). */
void _gh_tm_pa_drop(gh_tmgr_t* tm, const gh_tm_pa_t* pa) {
  if (pa->tier == GH_TIER_HOST) {
    _gh_tm_host_put(tm, pa);
    return;
  }
  if (!tm->spares_off && tm->n_spare == tm->cap_spare) {
    const size_t cap = tm->cap_spare ? 2 * tm->cap_spare : 64;
    gh_tm_pa_t* p = _gh_realloc(tm->spare, cap * sizeof *p);
    if (p) tm->spare = p, tm->cap_spare = cap;
  }
  if (tm->spares_off || tm->n_spare == tm->cap_spare) {
    gh_tm_dev_release(tm, pa);
    return;
  }
  tm->spare[tm->n_spare++] = *pa;
  tm->spare_f += pa->n;
}
void _gh_tm_pas_drop(gh_tmgr_t* tm, const gh_tm_pa_t* pas, size_t n) {
  for (size_t i = 0; i < n; i++) _gh_tm_pa_drop(tm, &pas[i]);
}

/* A device allocation of n frames (within the budget: checked by the
 * caller) for `user` (_gh_tm_wait_for): a spare of that size, else a new
 * one (spares of other sizes released first while the budget needs their
 * room). */
int _gh_tm_dev_get(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out, const gh_stream_t* user) {
  for (size_t i = tm->n_spare; i-- > 0;)
    if (tm->spare[i].n == n) {
      *out = gh_tm_spare_take(tm, i);
      _gh_tm_pa_ready(tm, out, user);
      return GH_OK;
    }
  while (tm->n_spare && tm->dev_used + n > tm->dev_budget_f) _gh_tm_spare_release(tm, 0);
  return _gh_tm_dev_new(tm, n, out);
}

/* A device allocation of n frames created now (within the budget: checked
 * by the caller). */
int _gh_tm_dev_new(gh_tmgr_t* tm, size_t n, gh_tm_pa_t* out) {
  const int rc = GH_PV(tm, GH_VMM_CREATE, tm->ops->create(tm->fr, GH_TIER_DEVICE, n, &out->pf));
  if (rc != GH_OK) return rc;
  tm->dev_used += n;
  out->n = (uint32_t)n, out->alias = GH_TM_NO_ALIAS, out->tier = GH_TIER_DEVICE, out->ev = 0, out->stamp = 0;
  return GH_OK;
}

/* Backing for a unit of k frames (k <= GH_TM_CHUNK_MAX) in one tier, for
 * `user` (_gh_tm_wait_for): one allocation of k frames (host: from the pool
 * when it holds one of that size, as it does after a restore of a unit of
 * that size; else created now, giving back pooled memory of other sizes if
 * the budget needs it: created once, it comes back to the pool with its
 * size, and k single frames cost k mappings at every move: bench_evict's
 * 8 MiB evictions ran at 19 GB/s that way against 45 with one allocation,
 * bench/NOTES.md host side row 38), else, in host memory, k single
 * frames. All or nothing; *npas allocations in pas. */
int _gh_tm_unit_get(gh_tmgr_t* tm, size_t k, int device, gh_tm_pa_t* pas, size_t* npas, const gh_stream_t* user) {
  *npas = 0;
  if (device) {
    const int rc = _gh_tm_dev_get(tm, k, &pas[0], user);
    if (rc == GH_OK) *npas = 1;
    return rc;
  }
  if (k > 1 && _gh_tm_host_get(tm, k, &pas[0], user) == GH_OK) {
    *npas = 1;
    return GH_OK;
  }
  for (size_t i = 0; i < k; i++) {
    const int rc = _gh_tm_host_get(tm, 1, &pas[i], user);
    if (rc != GH_OK) {
      _gh_tm_pas_drop(tm, pas, i);
      return rc;
    }
  }
  *npas = k;
  return GH_OK;
}

/* Record allocations pas[0..n), mapped back to back from vframe v. */
void _gh_tm_vf_set(gh_tmgr_t* tm, size_t v, const gh_tm_pa_t* pas, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < pas[i].n; j++, v++) {
      gh_vframe_t* f = &tm->vf[v];
      f->pf = pas[i].pf, f->palias = pas[i].alias, f->pn = pas[i].n, f->poff = j, f->tier = pas[i].tier;
    }
}

/* The allocations mapped at vframes [v, v + k) (whole ones), in order. */
size_t _gh_tm_vf_pas(const gh_tmgr_t* tm, size_t v, size_t k, gh_tm_pa_t* out) {
  size_t n = 0;
  for (size_t end = v + k; v < end; v += tm->vf[v].pn) {
    const gh_vframe_t* f = &tm->vf[v];
    out[n++] = (gh_tm_pa_t){f->pf, f->pn, f->palias, f->tier, 0, 0};
  }
  return n;
}

/* Unmap vframes [v, v + n) (all mapped, whole allocations) and give back
 * their allocations. */
void _gh_tm_vframes_drop(gh_tmgr_t* tm, size_t v, size_t n) {
  for (size_t i = v, end = v + n; i < end;) {  /* the mapped stretches (homeless units are whole) */
    size_t j = i;
    while (j < end && !tm->vf[j].homeless) j++;
    if (j > i) GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, gh_tm_va(tm, i), j - i));
    while (j < end && tm->vf[j].homeless) j++;
    i = j;
  }
  for (size_t i = v; i < v + n; i++) {
    gh_vframe_t* f = &tm->vf[i];
    _gh_tm_count(tm, f, -1);
    if (f->poff == 0) {
      const gh_tm_pa_t pa = {f->pf, f->pn, f->palias, f->tier, 0, 0};
      _gh_tm_pa_drop(tm, &pa);
    }
    free(f->bits);
    memset(f, 0, sizeof *f);
    f->snext = f->sprev = SIZE_MAX;
    if (i >= tm->tensor_vf0 && i < tm->free_hint) tm->free_hint = i;
  }
}

/* First fit: n consecutive FREE vframes in the tensor region, or SIZE_MAX. */
size_t _gh_tm_find_run(gh_tmgr_t* tm, size_t n) {
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

/* ---------------------------------------------------------------- slabs */
void _gh_tm_slab_link(gh_tmgr_t* tm, size_t v, unsigned kind) {
  gh_vframe_t* f = &tm->vf[v];
  f->sprev = SIZE_MAX, f->snext = tm->slab_head[kind];
  if (f->snext != SIZE_MAX) tm->vf[f->snext].sprev = v;
  tm->slab_head[kind] = v;
}
void _gh_tm_slab_unlink(gh_tmgr_t* tm, size_t v) {
  gh_vframe_t* f = &tm->vf[v];
  if (f->sprev != SIZE_MAX) tm->vf[f->sprev].snext = f->snext; else tm->slab_head[f->kind] = f->snext;
  if (f->snext != SIZE_MAX) tm->vf[f->snext].sprev = f->sprev;
  f->snext = f->sprev = SIZE_MAX;
}

/* Bits [i, i + n) set (on) or cleared, a word at a time. */
void _gh_tm_bits_set(uint64_t* b, size_t i, size_t n, int on) {
  while (n) {
    const size_t o = i & 63, k = 64 - o < n ? 64 - o : n;
    const uint64_t m = (k == 64 ? UINT64_MAX : ((UINT64_C(1) << k) - 1)) << o;
    if (on) b[i >> 6] |= m; else b[i >> 6] &= ~m;
    i += k, n -= k;
  }
}

/* First fit of g granules in a slab (the start of the first run of at least
 * g clear bits); SIZE_MAX when none. A word at a time: whole words clear or
 * set at once, the runs inside a mixed word by counting trailing bits. */
static size_t gh_tm_slab_fit(const gh_tmgr_t* tm, const gh_vframe_t* f, size_t g) {
  const size_t nw = tm->frame / GH_TM_ALIGN / 64;
  if (f->free_granules < g) return SIZE_MAX;
  size_t start = 0, run = 0;  /* the clear run ending at the current bit */
  for (size_t w = 0; w < nw; w++) {
    const uint64_t x = f->bits[w];
    if (x == 0) {
      if (run == 0) start = w * 64;
      if ((run += 64) >= g) return start;
      continue;
    }
    if (x == UINT64_MAX) {
      run = 0;
      continue;
    }
    for (unsigned b = 0; b < 64;) {
      const uint64_t y = x >> b;
      if (y & 1) {  /* set bits: the run ends */
        const uint64_t ny = ~y;
        b += ny ? (unsigned)__builtin_ctzll(ny) : 64 - b;
        run = 0;
      } else {
        const unsigned z = y ? (unsigned)__builtin_ctzll(y) : 64 - b;
        if (run == 0) start = w * 64 + b;
        if ((run += z) >= g) return start;
        b += z;
      }
    }
  }
  return SIZE_MAX;
}

/* A slab of `kind` in `tier` with room for g granules (first fit); its
 * granule in *at. SIZE_MAX when none. */
size_t _gh_tm_slab_find(const gh_tmgr_t* tm, unsigned kind, gh_tier_t tier, size_t g, size_t* at) {
  for (size_t s = tm->slab_head[kind]; s != SIZE_MAX; s = tm->vf[s].snext)
    if (tm->vf[s].tier == tier && (*at = gh_tm_slab_fit(tm, &tm->vf[s], g)) != SIZE_MAX) return s;
  return SIZE_MAX;
}

/* ---------------------------------------------------------------- the cache
 * Device memory of reclaimed tensors stays mapped where it was: a run's
 * device chunks become a cached run (role CACHE), a slab left with no
 * tensor stays in its kind's list (GH_TM_SLAB_KEEP per kind). Cached frames
 * count against the device budget; they go first when room is needed
 * (_gh_tm_device_room), before any live frame is evicted, and all of them
 * at gh_tmgr_empty_cache and before a request is refused. */
int _gh_tm_cache_add(gh_tmgr_t* tm, size_t v0, size_t n, size_t ch) {
  if (tm->n_cache == tm->cap_cache) {
    const size_t cap = tm->cap_cache ? 2 * tm->cap_cache : 64;
    gh_tm_crun_t* p = _gh_realloc(tm->cache, cap * sizeof *p);
    if (!p) return GH_ERR_NOMEM;
    tm->cache = p, tm->cap_cache = cap;
  }
  tm->cache[tm->n_cache++] = (gh_tm_crun_t){v0, n, ch, tm->cache_seq++};
  return GH_OK;
}

/* A cached prefix for a tensor of n frames: the entry whose shortest prefix
 * of whole allocations covering n frames wastes least (at most n / 4), and
 * among those the shortest entry, so that a run is split only when no
 * entry of the size is left (splitting a long run for a short tensor left
 * the long tensors of the next step no run to take: bench/NOTES.md, host
 * side, row 21); taken out of the cache (the rest stays). 0 when none. */
int _gh_tm_cache_take(gh_tmgr_t* tm, size_t n, size_t* v0, size_t* got, size_t* ch) {
  size_t best = SIZE_MAX, best_p = 0, best_n = 0;
  for (size_t i = 0; i < tm->n_cache; i++) {
    const gh_tm_crun_t* e = &tm->cache[i];
    if (e->n < n) continue;
    const size_t up = (n + e->ch - 1) / e->ch * e->ch;
    const size_t p = up < e->n ? up : e->n;
    if (p - n > n / 4) continue;
    if (best != SIZE_MAX && (p > best_p || (p == best_p && e->n >= best_n))) continue;
    best = i, best_p = p, best_n = e->n;
    if (p == n && e->n == n) break;
  }
  if (best == SIZE_MAX) return 0;
  gh_tm_crun_t* e = &tm->cache[best];
  *v0 = e->v0, *got = best_p, *ch = e->ch;
  if (best_p < e->n)
    e->v0 += best_p, e->n -= best_p;
  else
    *e = tm->cache[--tm->n_cache];
  return 1;
}

/* The cached run to release first (n_cache > 0). By default the shortest,
 * the oldest among equals: a run released is mapped again, a call per
 * allocation, when its size is next asked for, so the runs of fewest
 * allocations are the cheapest to lose, and the long ones stay for the
 * long tensors of the next step (on the replay of the training run, a
 * sixth fewer device allocations mapped and unmapped than releasing the
 * oldest first: bench/NOTES.md, host side, row 41). A run that has seen
 * GH_TM_CACHE_STALE newer ones cached without being taken goes first
 * whatever its length: its size is no longer asked for. The former orders,
 * oldest or newest first, for comparisons: GPUHEAP_CACHE_RELEASE. */
static size_t gh_tm_cache_victim(const gh_tmgr_t* tm) {
  size_t old = 0, newest = 0, best = 0;
  for (size_t j = 1; j < tm->n_cache; j++) {
    const gh_tm_crun_t *e = &tm->cache[j], *b = &tm->cache[best];
    if (e->seq < tm->cache[old].seq) old = j;
    if (e->seq > tm->cache[newest].seq) newest = j;
    if (e->n < b->n || (e->n == b->n && e->seq < b->seq)) best = j;
  }
  if (tm->cache_release == GH_TM_RELEASE_NEWEST) return newest;
  if (tm->cache_release == GH_TM_RELEASE_OLDEST || tm->cache_seq - tm->cache[old].seq > GH_TM_CACHE_STALE) return old;
  return best;
}

/* Unmap and release cached frames, at least `want` of them if there are
 * (SIZE_MAX: all): cached runs first (gh_tm_cache_victim), then empty
 * slabs. Returns the frames released. */
size_t _gh_tm_cache_release(gh_tmgr_t* tm, size_t want) {
  size_t freed = 0;
  while (tm->n_cache && freed < want) {
    const size_t i = gh_tm_cache_victim(tm);
    const gh_tm_crun_t e = tm->cache[i];
    tm->cache[i] = tm->cache[--tm->n_cache];
    _gh_tm_vframes_drop(tm, e.v0, e.n);
    freed += e.n;
  }
  for (unsigned k = 0; k < GH_KIND_COUNT && freed < want; k++)
    for (size_t s = tm->slab_head[k], nx; s != SIZE_MAX && tm->slab_empty[k] && freed < want; s = nx) {
      nx = tm->vf[s].snext;
      if (tm->vf[s].live) continue;
      _gh_tm_slab_unlink(tm, s);
      _gh_tm_vframes_drop(tm, s, 1);
      tm->slab_empty[k]--, freed++;
    }
  return freed;
}
