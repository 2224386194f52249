/* gpuheap, tensor manager: the hooks for tests and diagnostics
 * (_gh_tmgr_sim_*, counters and setters, declared in tensor_internal.h)
 * and _gh_tmgr_check, which checks the invariants of tensor_impl.h. */
#include <stdlib.h>
#include <string.h>

#include "frames_sim.h"
#include "tensor_impl.h"

/* ---------------------------------------------------------------- tests */
/* GH_OK for a manager on the simulation (the hooks below need it). */
static int gh_tm_sim_only(const gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  if (tm->ops != &_gh_frames_sim) return _gh_error(GH_ERR_UNSUPPORTED, "the manager's provider is not the simulation");
  return GH_OK;
}

/* A hook's body: `expr` (a call into the simulation) under the manager's
 * lock and the provider's; GH_OK, or why it cannot run. */
#define GH_TM_SIM_CALL(tm, expr)                    \
  do {                                              \
    const int gh_sim_rc_ = gh_tm_sim_only(tm);      \
    if (gh_sim_rc_ != GH_OK) return gh_sim_rc_;     \
    pthread_mutex_lock(&(tm)->mu);                  \
    GH_P(tm, ((expr), GH_OK));                      \
    pthread_mutex_unlock(&(tm)->mu);                \
    return GH_OK;                                   \
  } while (0)

int _gh_tmgr_sim_configure(gh_tmgr_t* tm, uint32_t lag, size_t device_frames, size_t host_frames) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  _gh_tm_lock(tm);
  pthread_mutex_lock(&tm->pmu);
  _gh_frames_sim_configure(tm->fr, lag, device_frames, host_frames);
  pthread_mutex_unlock(&tm->pmu);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_sim_defer(gh_tmgr_t* tm, int on) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  _gh_tm_lock(tm);
  GH_P(tm, (_gh_frames_sim_defer(tm->fr, on), GH_OK));
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_sim_capture(gh_tmgr_t* tm, gh_stream_t stream) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  _gh_frames_sim_capture(tm->fr, stream);
  return GH_OK;
}

int _gh_tmgr_sim_capture_touches(gh_tmgr_t* tm, uint64_t* n) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  _gh_tm_lock(tm);
  GH_P(tm, (*n = _gh_frames_sim_capture_touches(tm->fr), GH_OK));
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_sim_eager(gh_tmgr_t* tm, uint64_t seed, uint64_t* runs) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  _gh_tm_lock(tm);
  pthread_mutex_lock(&tm->pmu);
  _gh_frames_sim_eager(tm->fr, seed);
  if (runs) *runs = _gh_frames_sim_eager_runs(tm->fr);
  pthread_mutex_unlock(&tm->pmu);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_sim_run(gh_tmgr_t* tm, gh_stream_t stream) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  pthread_mutex_lock(&tm->mu);
  _gh_tm_mover_drain(tm);  /* "the stream's work has run": the mover's word written too */
  const int rc = GH_P(tm, _gh_frames_sim_run_stream(tm->fr, stream));
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_sim_counts(gh_tmgr_t* tm, size_t* deferred, uint64_t* stream_waits) {
  GH_TM_SIM_CALL(tm, _gh_frames_sim_counts(tm->fr, deferred, stream_waits));
}

int _gh_tmgr_sim_held(gh_tmgr_t* tm, gh_stream_t stream, int* held) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  if (!held) return _gh_error(GH_ERR_INVAL, "NULL argument");
  pthread_mutex_lock(&tm->mu);
  *held = GH_P(tm, _gh_frames_sim_held(tm->fr, stream));
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_sim_fail_map(gh_tmgr_t* tm, uint32_t nth) { GH_TM_SIM_CALL(tm, _gh_frames_sim_fail_map(tm->fr, nth)); }
int _gh_tmgr_sim_fail_copy(gh_tmgr_t* tm, uint32_t nth) { GH_TM_SIM_CALL(tm, _gh_frames_sim_fail_copy(tm->fr, nth)); }
int _gh_tmgr_sim_fail_sync(gh_tmgr_t* tm, uint32_t nth) { GH_TM_SIM_CALL(tm, _gh_frames_sim_fail_sync(tm->fr, nth)); }
int _gh_tmgr_sim_fail_events_from(gh_tmgr_t* tm, uint32_t nth) {
  GH_TM_SIM_CALL(tm, _gh_frames_sim_fail_events_from(tm->fr, nth));
}
int _gh_tmgr_sim_fail_armed(gh_tmgr_t* tm, int* armed) {
  if (!armed) return _gh_error(GH_ERR_INVAL, "_gh_tmgr_sim_fail_armed: NULL");
  GH_TM_SIM_CALL(tm, *armed = _gh_frames_sim_fail_armed(tm->fr));
}

int _gh_tmgr_sim_frames(gh_tmgr_t* tm, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped) {
  GH_TM_SIM_CALL(tm, _gh_frames_sim_frames(tm->fr, tier, mapped, unmapped));
}
int _gh_tmgr_sim_allocs(gh_tmgr_t* tm, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped) {
  GH_TM_SIM_CALL(tm, _gh_frames_sim_allocs(tm->fr, tier, mapped, unmapped));
}

int _gh_tmgr_sim_copies_to_host(gh_tmgr_t* tm, uint64_t* n) {
  if (!n) return _gh_error(GH_ERR_INVAL, "_gh_tmgr_sim_copies_to_host: NULL");
  GH_TM_SIM_CALL(tm, *n = _gh_frames_sim_copies_to_host(tm->fr));
}

int _gh_tmgr_sim_fail_event(gh_tmgr_t* tm, uint32_t nth, uint64_t* recorded) {
  uint64_t dummy = 0;
  uint64_t* n = recorded ? recorded : &dummy;
  GH_TM_SIM_CALL(tm, *n = _gh_frames_sim_fail_event(tm->fr, nth));
}

int _gh_tmgr_held_copies(gh_tmgr_t* tm, uint64_t* units) {
  if (!tm || !units) return _gh_error(GH_ERR_INVAL, "NULL argument");
  pthread_mutex_lock(&tm->mu);
  *units = tm->held_copies;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_call_times(gh_tmgr_t* tm, uint64_t n[8], uint64_t ns[8]) {
  if (!tm || !n || !ns) return _gh_error(GH_ERR_INVAL, "NULL argument");
  _Static_assert(GH_TM_CALLS == 8, "_gh_tmgr_call_times reports 8 kinds of call");
  pthread_mutex_lock(&tm->mu);
  for (int k = 0; k < GH_TM_CALLS; k++) n[k] = tm->call_n[k], ns[k] = tm->call_ns[k];
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_freed_taken(gh_tmgr_t* tm, uint64_t* runs) {
  if (!tm || !runs) return _gh_error(GH_ERR_INVAL, "NULL argument");
  pthread_mutex_lock(&tm->mu);
  *runs = tm->freed_taken;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_op_times(gh_tmgr_t* tm, uint64_t n[9], uint64_t ns[9]) {
  if (!tm || !n || !ns) return _gh_error(GH_ERR_INVAL, "NULL argument");
  _Static_assert(GH_TM_OPS == 9, "_gh_tmgr_op_times reports 9 kinds");
  pthread_mutex_lock(&tm->pmu);
  for (int k = 0; k < GH_TM_OPS; k++) n[k] = tm->op_n[k], ns[k] = tm->op_ns[k];
  pthread_mutex_unlock(&tm->pmu);
  return GH_OK;
}

int _gh_tmgr_wait_times(gh_tmgr_t* tm, uint64_t n[9], uint64_t ns[9]) {
  if (!tm || !n || !ns) return _gh_error(GH_ERR_INVAL, "NULL argument");
  _Static_assert(GH_TM_WAITS == 9, "_gh_tmgr_wait_times reports 9 kinds");
  pthread_mutex_lock(&tm->mu);
  for (int k = 0; k < GH_TM_WAITS; k++) n[k] = tm->hwait_n[k], ns[k] = tm->hwait_ns[k];
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_clean_counts(gh_tmgr_t* tm, uint64_t n[4], size_t* clean_frames, size_t* target_frames) {
  if (!tm || !n) return _gh_error(GH_ERR_INVAL, "NULL argument");
  pthread_mutex_lock(&tm->mu);
  memcpy(n, tm->clean_n, sizeof tm->clean_n);
  if (clean_frames) *clean_frames = tm->clean_f;
  if (target_frames) *target_frames = tm->clean_target_f;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_set_clean_target(gh_tmgr_t* tm, size_t frames) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  pthread_mutex_lock(&tm->mu);
  tm->clean_target_f = frames;
  tm->clean_fixed = 1;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_homeless(gh_tmgr_t* tm, uint64_t* frames) {
  if (!tm || !frames) return _gh_error(GH_ERR_INVAL, "NULL argument");
  pthread_mutex_lock(&tm->mu);
  *frames = tm->homeless_frames;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_sim_mapped(gh_tmgr_t* tm, const void* p, int* mapped) {
  if (!mapped) return _gh_error(GH_ERR_INVAL, "NULL argument");
  GH_TM_SIM_CALL(tm, *mapped = _gh_frames_sim_mapped(tm->fr, p));
}

int _gh_tmgr_alias_fragment(gh_tmgr_t* tm, int on) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  int rc = GH_OK;
  pthread_mutex_lock(&tm->mu);
  if (on && !tm->alias_frag) {
    /* Every even frame of the region held (where free): no two free frames
     * are adjacent, so no allocation of several frames finds an alias. */
    tm->alias_frag = calloc(tm->alias_big_f ? tm->alias_big_f : 1, 1);
    if (!tm->alias_frag) rc = _gh_error(GH_ERR_NOMEM, "out of memory");
    for (size_t a = 0; rc == GH_OK && a < tm->alias_big_f; a += 2)
      if (!tm->alias_used[a]) tm->alias_used[a] = tm->alias_frag[a] = 1, tm->alias_held++;
  } else if (!on && tm->alias_frag) {
    for (size_t a = 0; a < tm->alias_big_f; a++)
      if (tm->alias_frag[a]) tm->alias_used[a] = 0;
    free(tm->alias_frag);
    tm->alias_frag = NULL, tm->alias_held = 0, tm->alias_big_hint = 0;
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_mover_hold(gh_tmgr_t* tm, int hold) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  if (!tm->mover_on) return _gh_error(GH_ERR_UNSUPPORTED, "the manager runs no mover");
  pthread_mutex_lock(&tm->jmu);
  tm->mover_hold = hold;
  pthread_cond_broadcast(&tm->jcv);
  pthread_mutex_unlock(&tm->jmu);
  return GH_OK;
}

int _gh_tmgr_sim_live(gh_tmgr_t* tm, gh_tier_t tier, size_t* frames) {
  const int sim = gh_tm_sim_only(tm);
  if (sim != GH_OK) return sim;
  if (!frames) return _gh_error(GH_ERR_INVAL, "NULL argument");
  _gh_tm_lock(tm);
  pthread_mutex_lock(&tm->pmu);
  *frames = _gh_frames_sim_live(tm->fr, tier);
  pthread_mutex_unlock(&tm->pmu);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_waits(gh_tmgr_t* tm, uint64_t* waits) {
  if (!tm || !waits) return _gh_error(GH_ERR_INVAL, "NULL argument");
  _gh_tm_lock(tm);
  *waits = tm->waits;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_lane_waits(gh_tmgr_t* tm, uint64_t* waits, int* split) {
  if (!tm || !waits) return _gh_error(GH_ERR_INVAL, "NULL argument");
  _gh_tm_lock(tm);
  *waits = tm->lane_waits;
  if (split) *split = tm->split;
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int _gh_tmgr_set_dalias_frames(gh_tmgr_t* tm, size_t frames) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  _gh_tm_lock(tm);
  int rc = GH_OK;
  if (tm->dalias_n || frames > tm->dalias_f)
    rc = _gh_error(GH_ERR_INVAL, "device-alias region: %zu frames in use, %zu asked of %zu", tm->dalias_n, frames,
                   tm->dalias_f);
  else
    tm->dalias_f = frames, tm->dalias_hint = 0;
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_set_chunk(gh_tmgr_t* tm, size_t frames) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  if (frames < 2 || frames > GH_TM_CHUNK_MAX)
    return _gh_error(GH_ERR_INVAL, "chunk of %zu frames (2 .. %zu)", frames, GH_TM_CHUNK_MAX);
  _gh_tm_lock(tm);
  int rc = GH_OK;
  if (tm->live_head || tm->pend_head) {
    rc = _gh_error(GH_ERR_INVAL, "the chunk size changes only while the manager holds no tensor");
  } else {
    /* The pool's big allocations have the old size: give them all back;
     * and the device memory of the old size (cached runs, spares, with
     * their aliases), which no allocation of the new size would take: a
     * bench_evict sweep otherwise creates and releases an allocation at
     * every move of the sizes after the first (bench/NOTES.md row 32). */
    _gh_tm_pool_quiesce(tm);
    while (tm->pool_cnt) _gh_tm_pool_release_last(tm);
    _gh_tm_cache_release(tm, SIZE_MAX);
    while (tm->n_spare) _gh_tm_spare_release(tm, tm->n_spare - 1);
    _gh_tm_chunk_set(tm, frames);
    tm->chunk_fixed = 1;
  }
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_check(gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "NULL manager");
  _gh_tm_lock(tm);
  _gh_tm_mover_drain(tm);
  int rc = GH_OK;  /* (the accounts first; then a sticky failure, _gh_tm_sticky) */
  size_t nf[GH_TIER_COUNT] = {0}, hf[GH_TIER_COUNT] = {0}, cf = 0, cruns = 0, clean = 0;
  for (size_t v = 0; v < tm->n_va && rc == GH_OK; v++) {
    const gh_vframe_t* f = &tm->vf[v];
    if (f->clean) {  /* a live quiet run's unit on the device, whole; its first vframe holds the copy */
      const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
      const gh_vframe_t* h = &tm->vf[u.v0];
      if (f->tier != GH_TIER_DEVICE || f->role != GH_VF_RUN || !f->tensors || f->tensors->state != GH_T_LIVE ||
          !f->tensors->quiet || f->pins || !h->clean || h->cpa.n != u.k || h->cpa.tier != GH_TIER_HOST ||
          h->cpa.alias == GH_TM_NO_ALIAS || !tm->alias_used[h->cpa.alias] || !h->cev)
        rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: clean, tier %u, role %u, copy of %u frames", v, f->tier, f->role,
                       h->cpa.n);
      clean += v == u.v0 ? h->cpa.n : 0;
    } else if (f->cpa.n || f->cev) {
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: not clean, with a copy of %u frames", v, f->cpa.n);
    }
    if (f->role == GH_VF_HEAP) hf[f->tier]++;
    else if (gh_tm_vf_cached(f)) cf++;
    else if (f->role == GH_VF_SLAB || f->role == GH_VF_RUN) nf[f->tier]++;
    cruns += f->role == GH_VF_CACHE;
    if (f->live < f->pending || f->warm > f->live - f->pending)
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: live %u pending %u warm %u", v, f->live, f->pending, f->warm);
    else if (f->pins && f->tier != GH_TIER_DEVICE)
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: pinned but in tier %u", v, f->tier);
    else if ((f->role == GH_VF_RUN && (f->live == 0 || f->tier == GH_TIER_NONE)) ||
             (f->role == GH_VF_SLAB && (f->tier == GH_TIER_NONE || (f->live == 0 && f->tier != GH_TIER_DEVICE))))
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: a tensor frame with no tensor or no backing", v);
    else if (f->role == GH_VF_CACHE && (f->tier != GH_TIER_DEVICE || f->live || f->tensors))
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: cached, tier %u, %u tensors", v, f->tier, f->live);
    else if (f->homeless && (f->tier != GH_TIER_HOST || f->role != GH_VF_RUN || !f->tensors ||
                             (f->tensors->state == GH_T_LIVE && !f->tensors->quiet) ||
                             tm->vf[_gh_tm_unit_of(tm, v).v0].homeless != 1))
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: homeless, tier %u, role %u, not quiet or not a whole unit", v,
                     f->tier, f->role);
    else if (f->tier != GH_TIER_NONE &&
             (f->pn == 0 || f->poff >= f->pn ||
              (f->poff > 0 && (v == 0 || tm->vf[v - 1].pf != f->pf || tm->vf[v - 1].poff + 1 != f->poff ||
                               tm->vf[v - 1].tier != f->tier)) ||
              (f->poff + 1 == f->pn) != (v + 1 == tm->n_va || tm->vf[v + 1].tier == GH_TIER_NONE ||
                                         tm->vf[v + 1].poff == 0) ||
              (f->tier == GH_TIER_HOST && f->palias == GH_TM_NO_ALIAS) ||
              (f->tier == GH_TIER_DEVICE && f->palias != GH_TM_NO_ALIAS &&
               (f->palias + f->pn > tm->dalias_f || !tm->dalias_used[f->palias + f->poff]))))
      rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: allocation %#llx, frame %u of %u, tier %u, alias %u", v,
                     (unsigned long long)f->pf, f->poff, f->pn, f->tier, f->palias);
    else if (f->role == GH_VF_RUN && f->tensors) {  /* a chunk is one tier and whole allocations */
      const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
      if (tm->vf[u.v0].tier != f->tier || tm->vf[u.v0].poff != 0 || (v == u.v0 + u.k - 1 && f->poff + 1 != f->pn) ||
          (f->tier == GH_TIER_DEVICE && tm->vf[u.v0].pn != u.k))  /* device: one allocation (a move's copy) */
        rc = _gh_error(GH_ERR_CORRUPT, "vframe %zu: its chunk [%zu, +%zu) is not whole allocations of one tier", v,
                       u.v0, u.k);
    }
  }
  /* The pool: its frames and entries counted right, every entry at an alias. */
  size_t pool_frames = 0, aliases = 0;
  for (size_t i = 0; i < tm->pool_cnt && rc == GH_OK; i++) {
    const gh_tm_pa_t* pa = &tm->pool[i];
    pool_frames += pa->n;
    if (pa->tier != GH_TIER_HOST || pa->alias == GH_TM_NO_ALIAS || !tm->alias_used[pa->alias] ||
        (gh_tm_pa_big(tm, pa) ? pa->n < 2 || pa->alias + pa->n > tm->alias_big_f : pa->n != 1))
      rc = _gh_error(GH_ERR_CORRUPT, "pool entry %zu: tier %u, %u frames, alias %u", i, pa->tier, pa->n, pa->alias);
  }
  for (size_t a = 0; a < tm->alias_big_f + tm->alias_one_f; a++) aliases += tm->alias_used[a];
  if (rc == GH_OK && pool_frames != tm->pool_n)
    rc = _gh_error(GH_ERR_CORRUPT, "pool: %zu frames counted, %zu found", tm->pool_n, pool_frames);
  if (rc == GH_OK) {
    for (int k = 1; k < GH_TIER_COUNT && rc == GH_OK; k++)
      if (nf[k] != tm->nframes[k] || hf[k] != tm->heap_nframes[k])
        rc = _gh_error(GH_ERR_CORRUPT, "tier %d: %zu+%zu frames counted, %zu+%zu found", k, tm->nframes[k],
                       tm->heap_nframes[k], nf[k], hf[k]);
  }
  /* Spares: device allocations counted right. */
  size_t spare_frames = 0, daliased = 0;
  for (size_t v = 0; v < tm->n_va; v++)
    daliased += tm->vf[v].tier == GH_TIER_DEVICE && tm->vf[v].palias != GH_TM_NO_ALIAS;
  for (size_t i = 0; i < tm->n_spare && rc == GH_OK; i++) {
    spare_frames += tm->spare[i].n;
    if (tm->spare[i].alias != GH_TM_NO_ALIAS) daliased += tm->spare[i].n;
    if (tm->spare[i].tier != GH_TIER_DEVICE || tm->spare[i].n == 0)
      rc = _gh_error(GH_ERR_CORRUPT, "spare %zu: tier %u, %u frames", i, tm->spare[i].tier, tm->spare[i].n);
  }
  if (rc == GH_OK && spare_frames != tm->spare_f)
    rc = _gh_error(GH_ERR_CORRUPT, "spares: %zu frames counted, %zu found", tm->spare_f, spare_frames);
  /* Device aliases: the frames in use are those of the allocations holding one. */
  size_t dalias_frames = 0;
  for (size_t a = 0; a < tm->dalias_f; a++) dalias_frames += tm->dalias_used[a];
  if (rc == GH_OK && (dalias_frames != tm->dalias_n || daliased != tm->dalias_n))
    rc = _gh_error(GH_ERR_CORRUPT, "device aliases: %zu frames counted, %zu marked, %zu held", tm->dalias_n,
                   dalias_frames, daliased);
  if (rc == GH_OK && tm->dev_used != nf[GH_TIER_DEVICE] + hf[GH_TIER_DEVICE] + cf + spare_frames)
    rc = _gh_error(GH_ERR_CORRUPT, "dev_used %zu != %zu + %zu cached + %zu spare", tm->dev_used,
                   nf[GH_TIER_DEVICE] + hf[GH_TIER_DEVICE], cf, spare_frames);
  if (rc == GH_OK && cf != tm->cached) rc = _gh_error(GH_ERR_CORRUPT, "cache: %zu frames counted, %zu found", tm->cached, cf);
  /* Cached runs: their vframes are the CACHE ones, each a row of whole
   * allocations of ch frames (the last one ch or fewer). */
  size_t in_runs = 0;
  for (size_t i = 0; i < tm->n_cache && rc == GH_OK; i++) {
    const gh_tm_crun_t* e = &tm->cache[i];
    in_runs += e->n;
    for (size_t v = e->v0; v < e->v0 + e->n && rc == GH_OK; v += tm->vf[v].pn ? tm->vf[v].pn : 1) {
      const gh_vframe_t* f = &tm->vf[v];
      if (f->role != GH_VF_CACHE || f->poff != 0 || f->pn > e->ch || v + f->pn > e->v0 + e->n ||
          (f->pn < e->ch && v + f->pn != e->v0 + e->n))
        rc = _gh_error(GH_ERR_CORRUPT, "cached run [%zu, +%zu) of chunks %zu: vframe %zu role %u, frame %u of %u", e->v0,
                       e->n, e->ch, v, f->role, f->poff, f->pn);
    }
  }
  if (rc == GH_OK && in_runs != cruns)
    rc = _gh_error(GH_ERR_CORRUPT, "cached runs: %zu frames listed, %zu vframes cached", in_runs, cruns);
  for (unsigned k = 0; k < GH_KIND_COUNT && rc == GH_OK; k++) {
    size_t empty = 0;
    for (size_t s = tm->slab_head[k]; s != SIZE_MAX; s = tm->vf[s].snext) empty += tm->vf[s].live == 0;
    if (empty != tm->slab_empty[k] || empty > GH_TM_SLAB_KEEP)
      rc = _gh_error(GH_ERR_CORRUPT, "kind %u: %zu empty slabs counted, %zu found", k, tm->slab_empty[k], empty);
  }
  size_t unflushed = 0;
  for (const gh_tensor_t* t = tm->pend_head; t; t = t->next) {
    if (t->batch && unflushed)
      rc = rc != GH_OK ? rc : _gh_error(GH_ERR_CORRUPT, "a pending free with an event after one without");
    unflushed += t->batch == NULL;
  }
  if (rc == GH_OK && unflushed != tm->n_unflushed)
    rc = _gh_error(GH_ERR_CORRUPT, "pending frees with no event: %zu counted, %zu found", tm->n_unflushed, unflushed);
  for (size_t i = 0; i < tm->clean_qn && rc == GH_OK; i++) {
    const gh_tensor_t* t = tm->clean_q[i];
    if (!t->clean_wait || !t->quiet || t->state != GH_T_LIVE || tm->clean_mode != 3)
      rc = _gh_error(GH_ERR_CORRUPT, "clean queue %zu: %p waiting %u, quiet %u, state %u", i, (void*)t->ptr,
                     t->clean_wait, t->quiet, t->state);
  }
  if (rc == GH_OK && clean != tm->clean_f)
    rc = _gh_error(GH_ERR_CORRUPT, "clean copies: %zu frames counted, %zu found", tm->clean_f, clean);
  if (rc == GH_OK &&
      tm->host_used != nf[GH_TIER_HOST] + hf[GH_TIER_HOST] + tm->pool_n + tm->pool_inflight + tm->clean_f)
    rc = _gh_error(GH_ERR_CORRUPT, "host_used %zu != %zu + %zu + %zu + %zu clean", tm->host_used,
                   nf[GH_TIER_HOST] + hf[GH_TIER_HOST], tm->pool_n, tm->pool_inflight, tm->clean_f);
  if (rc == GH_OK && (tm->dev_used > tm->dev_budget_f || tm->host_used > tm->host_budget_f))
    rc = _gh_error(GH_ERR_CORRUPT, "over budget: device %zu/%zu host %zu/%zu", tm->dev_used, tm->dev_budget_f,
                   tm->host_used, tm->host_budget_f);
  /* Every host allocation holds an alias of its size: those mapped in the
   * range, in the pool, and in creation by the pool thread (host_used). */
  aliases -= tm->alias_held;
  if (rc == GH_OK && aliases != tm->host_used)
    rc = _gh_error(GH_ERR_CORRUPT, "aliases: %zu frames in use, %zu host frames held", aliases, tm->host_used);
  /* The cold list: the live cold tensors, in the order of their marks. */
  size_t ncold = 0, nlc = 0;
  uint64_t last = 0;
  for (const gh_tensor_t* t = tm->cold_head; t && rc == GH_OK; t = t->cnext) {
    if (!t->cold || t->state != GH_T_LIVE || t->cold_seq <= last || t->cold_seq > tm->cold_seq ||
        (t == tm->cold_head && t->cprev) ||
        (t->cnext ? t->cnext->cprev != t : tm->cold_tail != t))
      rc = _gh_error(GH_ERR_CORRUPT, "cold list: %p (cold %u, state %u, mark %llu after %llu)", (void*)t->ptr,
                     t->cold, t->state, (unsigned long long)t->cold_seq, (unsigned long long)last);
    last = t->cold_seq;
    ncold++;
  }
  for (const gh_tensor_t* t = tm->live_head; t; t = t->next) nlc += t->cold;
  if (rc == GH_OK && ncold != nlc)
    rc = _gh_error(GH_ERR_CORRUPT, "cold list: %zu tensors, %zu live cold ones", ncold, nlc);
  size_t nt = 0, np = 0;
  for (const gh_tensor_t* t = tm->live_head; t; t = t->next) nt++;
  for (const gh_tensor_t* t = tm->pend_head; t; t = t->next) np++;
  if (rc == GH_OK && (nt != tm->n_live || np != tm->n_pending))
    rc = _gh_error(GH_ERR_CORRUPT, "tensor lists: %zu live (%zu counted), %zu pending (%zu)", nt, tm->n_live, np,
                   tm->n_pending);
  if (rc == GH_OK) rc = _gh_tm_mover_failed(tm);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

int _gh_tmgr_sticky(gh_tmgr_t* tm) { return tm ? _gh_tm_mover_failed(tm) : _gh_error(GH_ERR_INVAL, "NULL manager"); }
