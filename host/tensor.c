/* gpuheap: the tensor manager's public calls (gh_tmgr_*, gh_tensor_*) and all
 * that the other tensor_*.c files do not hold yet. The design, the types and
 * what the files share: tensor_impl.h; host/TENSORS.md at more length. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
 *   n <stream> <rc> <count> <ptr>...         prefetch_many
 *   e <ptr> <rc>                             evict
 *   o <ptr> <rc>                             evict_ahead
 *   P <ptr> <rc> / U <ptr> <rc>              pin / unpin
 *   k <ptr> <kind> <rc>                      set_kind
 *   t <ptr> <rc>                             tier (no change but its reclaim)
 *   m <rc> / x <rc>                          maintain / empty_cache */
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

/* The cold list: live cold tensors, oldest mark first. */
static void gh_tm_cold_unlink(gh_tmgr_t* tm, gh_tensor_t* t) {
  if (t->cprev) t->cprev->cnext = t->cnext; else tm->cold_head = t->cnext;
  if (t->cnext) t->cnext->cprev = t->cprev; else tm->cold_tail = t->cprev;
  t->cnext = t->cprev = NULL;
}
static void gh_tm_tensor_frames(gh_tmgr_t* tm, gh_tensor_t* t, int live_d, int warm_d, int pins_d, int pend_d);

static int gh_tm_home_back(gh_tmgr_t* tm, gh_tensor_t* t);
static void gh_tm_clean_drop(gh_tmgr_t* tm, const gh_tensor_t* t);
static void gh_tm_clean_unqueue(gh_tmgr_t* tm, gh_tensor_t* t);

/* Forget a quiet advice (its events). remap: a live tensor's promise ends,
 * so its homeless units get their host memory mapped at home first
 * (gh_tm_home_back); when that fails the advice stays (the tensor still
 * quiet, its error returned). A freed tensor's need no remap. */
static int gh_tm_unquiet(gh_tmgr_t* tm, gh_tensor_t* t, int remap) {
  if (!t->quiet) return GH_OK;
  if (remap) {
    const int rc = gh_tm_home_back(tm, t);
    if (rc != GH_OK) return rc;
  }
  gh_tm_clean_unqueue(tm, t);
  gh_tm_clean_drop(tm, t);  /* its clean copies go (the promise kept them valid) */
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

/* ---------------------------------------------------------------- moving
 * A move takes units (whole chunks of runs, or slab vframes) from one tier
 * to the other, pipelined: the copies of units i .. i + DEPTH - 1 are queued
 * on the copy stream while this thread remaps their homes. The copy goes
 * between the aliases of the two allocations (host: its alias; device: its
 * alias, mapped on its first move, else a staging window, one per unit in
 * flight), never through the home address, so a unit's home is remapped at
 * once, while its copy runs: no kernel touches a moving frame (a move
 * starts after the streams of its tensors reached the present), and the
 * move ends only when the copies have. Per unit:
 *   start   new backing (host allocations come mapped at their aliases),
 *           copy alias -> alias, event; unmap home, map the new backing
 *           there (one map call);
 *   finish  wait for the event, unmap the staging window if one was used,
 *           give back the old backing (device: to the spares, with its
 *           alias; host: to the pool, still at its alias).
 * A failure stops the move after the units finished so far; a unit whose
 * remap or copy fails keeps its old backing (mapped back at home). */

typedef struct gh_tm_step_s {
  gh_tm_pa_t pa[GH_TM_CHUNK_MAX];   /* the new backing */
  gh_tm_pa_t old[GH_TM_CHUNK_MAX];  /* the old one */
  size_t npa, nold;
  gh_fevent_t ev;
  uint64_t stamp;  /* with a restore stream: its copies' stamp on their lane */
  uint8_t* stage;  /* the device allocation's staging window, when it has no alias */
  uint8_t from_homeless, to_homeless;  /* the unit's home was / is left unmapped (gh_tm_homeless_ok) */
  uint8_t held;  /* its copy is held back (_gh_tm_held_flush) */
  uint8_t clean; /* a clean unit's eviction: no copy of its own (gh_tm_clean_start) */
} gh_tm_step_t;

/* The unit of vframe v. */
gh_tm_unit_t _gh_tm_unit_of(const gh_tmgr_t* tm, size_t v) {
  const gh_vframe_t* f = &tm->vf[v];
  gh_tm_unit_t u = {v, 1};
  if (f->role == GH_VF_RUN && f->tensors) {
    const gh_tensor_t* t = f->tensors;
    u.v0 = t->vf0 + (v - t->vf0) / t->chunk * t->chunk;
    u.k = t->vf0 + t->nvf - u.v0 < t->chunk ? t->vf0 + t->nvf - u.v0 : t->chunk;
  }
  return u;
}

/* Map the home of unit u (unmapped) to pas[0..n) (one map call). */
static int gh_tm_home_map(gh_tmgr_t* tm, const gh_tm_unit_t* u, const gh_tm_pa_t* pas, size_t n) {
  gh_pframe_t pfs[GH_TM_CHUNK_MAX];
  for (size_t i = 0; i < n; i++) pfs[i] = pas[i].pf;
  return GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, gh_tm_va(tm, u->v0), pfs, n));
}

/* Put unit u's old backing back at its home, which holds the new one (or
 * nothing: a homeless eviction); a homeless unit's restore leaves it
 * unmapped again. */
static void gh_tm_home_undo(gh_tmgr_t* tm, const gh_tm_unit_t* u, const gh_tm_step_t* st) {
  if (st->to_homeless) {
    gh_tm_home_map(tm, u, st->old, st->nold);
    return;
  }
  if (GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, gh_tm_va(tm, u->v0), u->k)) == GH_OK && !st->from_homeless)
    gh_tm_home_map(tm, u, st->old, st->nold);
}

/* Homeless evictions. A unit of a run whose tensor is quiet (advised
 * GH_ADVICE_QUIET: nothing touches it until its next prefetch, pin,
 * advice or free) is evicted with its home left unmapped: the copy goes
 * alias to alias, and no host memory is mapped at home, which costs the
 * driver ~41 us a 2 MiB frame (cuMemSetAccess), nor unmapped from it at
 * the restore (~16 us): ~57 us a frame moved out and back, 19 ms a step
 * of (c) in bench/NOTES.md (host side, rows 36 and 43). The restore maps
 * the device memory there as ever; an advice or use that ends the promise
 * first maps the host memory at home (gh_tm_home_back), so that a kernel
 * reads it over PCIe as any evicted tensor's. A kernel that touches a
 * homeless home faults: that is what a broken quiet promise costs.
 * GPUHEAP_HOMELESS=0 maps homes as for other tensors; the mover keeps
 * them mapped too (its remaps are queued as pairs). */
static int gh_tm_homeless_ok(const gh_tmgr_t* tm, const gh_tm_unit_t* u) {
  const gh_vframe_t* f = &tm->vf[u->v0];
  return !tm->homeless_off && !tm->mover_on && f->role == GH_VF_RUN && f->tensors && f->tensors->quiet &&
         f->tensors->state == GH_T_LIVE;
}

/* Map the host memory of t's homeless units at their homes (the quiet
 * promise ends). */
static int gh_tm_home_back(gh_tmgr_t* tm, gh_tensor_t* t) {
  int rc = GH_OK;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf;) {
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
    if (tm->vf[u.v0].homeless) {
      gh_tm_pa_t pas[GH_TM_CHUNK_MAX];
      const size_t n = _gh_tm_vf_pas(tm, u.v0, u.k, pas);
      const int r = gh_tm_home_map(tm, &u, pas, n);
      if (r == GH_OK)
        for (size_t k = 0; k < u.k; k++) tm->vf[u.v0 + k].homeless = 0;
      else if (rc == GH_OK)
        rc = r;
    }
    v = u.v0 + u.k;
  }
  return rc;
}

/* An eviction's copy (device to host) on the copy stream: by the copy
 * engine (the default), or by the provider's kernel for every unit
 * (GPUHEAP_COPY_KERNEL=1) or for homeless units only (=homeless). A map's
 * access call waits in the driver for every device-to-host copy of the
 * engine in flight, whatever memory it reads, and for this kernel only
 * briefly (0.69 against 0.08 ms for 36 MiB: host/copy_kernel.cu,
 * bench/NOTES.md, host side, row 51), which made the kernel the homeless
 * units' default from row 51 to row 104; but the kernel's 8 blocks slow
 * beside the model's own kernels, and where the GPU bounds the step the
 * engine wins (rows 70, 103-104: a training step -3 to -34 ms at widths
 * 192-512, level at 64, where the host is the bound). A unit with a home
 * takes the engine either way unless =1: its home's host-memory map waits
 * for either copy, and longer for the kernel's (0.95 against 0.76 ms). */
static int gh_tm_copy_out(gh_tmgr_t* tm, void* dst, const void* src, size_t bytes, int homeless) {
  if (tm->copy_kernel > 0 || (tm->copy_kernel < 0 && homeless))
    return tm->ops->copy_to_host(tm->fr, dst, src, bytes, tm->copy_stream);
  return tm->ops->copy(tm->fr, dst, src, bytes, tm->copy_stream);
}

/* A unit of the move in progress stayed where it was because the provider
 * refused something (rc): the first such failure is the move's
 * (gh_tm_move_rc). A full tier (GH_ERR_BUDGET) is not one: a move is best
 * effort there. */
static void gh_tm_move_failed(gh_tmgr_t* tm, int rc) {
  if (rc == GH_OK || rc == GH_ERR_BUDGET || tm->move_rc != GH_OK) return;
  tm->move_rc = rc;
  snprintf(tm->move_what, sizeof tm->move_what, "%s", gh_last_error_detail());
}

/* Forget the clean record of unit [v0, v0 + k) (its copy's memory, event
 * and stamp went elsewhere). */
static void gh_tm_clean_forget(gh_tmgr_t* tm, size_t v0, size_t k) {
  gh_vframe_t* f = &tm->vf[v0];
  tm->clean_f -= f->cpa.n;
  memset(&f->cpa, 0, sizeof f->cpa);
  f->cev = 0, f->cstamp = 0;
  for (size_t v = v0; v < v0 + k; v++) tm->vf[v].clean = 0;
}

/* gh_tm_move_start for a clean unit going to the host: its copy is there
 * already, so the step only remaps its home (or leaves it unmapped: a
 * homeless unit). The copy's event and stamp become the step's: its device
 * memory, a spare, carries the event (ordered), its users wait for the
 * stamp (gh_tm_move_units), a later restore for the stamp too (xstamp). */
static int gh_tm_clean_start(gh_tmgr_t* tm, const gh_tm_unit_t* u, gh_tm_step_t* st) {
  const gh_vframe_t* f = &tm->vf[u->v0];
  uint8_t* home = gh_tm_va(tm, u->v0);
  st->stage = NULL, st->held = 0, st->clean = 1, st->from_homeless = 0;
  st->to_homeless = gh_tm_homeless_ok(tm, u);
  st->nold = _gh_tm_vf_pas(tm, u->v0, u->k, st->old);
  st->pa[0] = f->cpa, st->npa = 1;
  st->ev = f->cev, st->stamp = f->cstamp;
  int rc = GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, home, u->k));
  if (rc == GH_OK && !st->to_homeless) {
    rc = gh_tm_home_map(tm, u, st->pa, st->npa);
    if (rc != GH_OK) gh_tm_home_map(tm, u, st->old, st->nold);  /* put the device memory back */
  }
  if (rc != GH_OK) {  /* the unit stays on the device, clean */
    gh_tm_move_failed(tm, rc);
    return 0;
  }
  gh_tm_clean_forget(tm, u->v0, u->k);
  tm->clean_n[1] += u->k;
  return 1;
}

/* Start moving unit u into tier `to`, staging window `slot`: 1 when its
 * copy is under way and its home holds the new backing (mover: its remap
 * is queued for the mover), 0 (nothing changed) when not. */
static int gh_tm_move_start(gh_tmgr_t* tm, const gh_tm_unit_t* u, gh_tier_t to, gh_tm_step_t* st, size_t slot,
                            int mover) {
  if (to == GH_TIER_HOST && tm->vf[u->v0].clean && !mover) return gh_tm_clean_start(tm, u, st);
  uint8_t* home = gh_tm_va(tm, u->v0);
  st->ev = 0, st->stage = NULL, st->held = 0, st->clean = 0;
  st->from_homeless = to == GH_TIER_DEVICE && tm->vf[u->v0].homeless;
  st->to_homeless = to == GH_TIER_HOST && !mover && gh_tm_homeless_ok(tm, u);
  st->nold = _gh_tm_vf_pas(tm, u->v0, u->k, st->old);
  st->stamp = 0;
  const gh_stream_t cs = gh_tm_lane_to(tm, to)->s;
  const int got = _gh_tm_unit_get(tm, u->k, to == GH_TIER_DEVICE, st->pa, &st->npa, &cs);
  if (got != GH_OK) {
    gh_tm_move_failed(tm, got);
    return 0;
  }
  /* The device side is one allocation (a chunk's, or a slab's frame:
   * _gh_tmgr_check's invariant; refused, nothing moved, if it were not). */
  gh_tm_pa_t* dev = to == GH_TIER_DEVICE ? &st->pa[0] : &st->old[0];
  if (dev->n != u->k) {
    gh_tm_move_failed(tm, _gh_error(GH_ERR_CORRUPT, "a device unit of %zu frames in an allocation of %u", u->k, dev->n));
    _gh_tm_pas_drop(tm, st->pa, st->npa);
    return 0;
  }
  const gh_tm_pa_t* host = to == GH_TIER_DEVICE ? st->old : st->pa;
  const size_t nhost = to == GH_TIER_DEVICE ? st->nold : st->npa;
  /* With a restore stream: after the unit's last move the other way. */
  if (tm->split)
    _gh_tm_lane_wait(tm, gh_tm_lane_from(tm, to), tm->vf[u->v0].xstamp, &cs, GH_TM_W_ORDERED);
  uint8_t* dva = NULL;
  int rc = GH_OK;
  if (_gh_tm_dalias_get(tm, dev) == GH_OK) {
    dva = gh_tm_dalias_va(tm, dev->alias);
    if (to == GH_TIER_HOST)  /* the old backing's records keep its alias */
      for (size_t v = u->v0; v < u->v0 + u->k; v++) tm->vf[v].palias = dev->alias;
  } else {
    st->stage = gh_tm_va(tm, tm->stage_vf0 + slot * GH_TM_CHUNK_MAX);
    rc = GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, st->stage, &dev->pf, 1));
    if (rc != GH_OK) st->stage = NULL;
    dva = st->stage;
  }
  /* One copy per run of host allocations whose aliases are contiguous; a
   * homeless unit evicted for a run being placed holds its copies back
   * until the run is mapped (_gh_tm_held_flush). */
  st->held = rc == GH_OK && st->to_homeless && tm->holding && !st->stage && tm->n_held + nhost <= GH_TM_HELD_MAX;
  const size_t held0 = tm->n_held;
  size_t off = 0;
  for (size_t i = 0; i < nhost && rc == GH_OK;) {
    size_t j = i + 1, nf = host[i].n;
    while (j < nhost && host[j].alias == host[j - 1].alias + host[j - 1].n) nf += host[j++].n;
    uint8_t* h = gh_tm_alias_va(tm, host[i].alias);
    uint8_t* d = dva + off * tm->frame;
    if (st->held)
      tm->held[tm->n_held++] = (gh_tm_held_t){dev->pf, h, d, nf * tm->frame};
    else
      rc = GH_P(tm, to == GH_TIER_DEVICE ? tm->ops->copy(tm->fr, d, h, nf * tm->frame, cs)
                                         : gh_tm_copy_out(tm, h, d, nf * tm->frame, st->to_homeless));
    off += nf, i = j;
  }
  if (st->held) tm->held_copies++;
  if (rc == GH_OK && tm->split)  /* (a held copy's: whatever its lane has queued when it is waited for) */
    st->stamp = st->held ? GH_TM_STAMP_LATEST : ++gh_tm_lane_to(tm, to)->issued;
  if (rc == GH_OK && !st->held && GH_P(tm, tm->ops->event_record(tm->fr, cs, &st->ev)) != GH_OK) {
    st->ev = 0;  /* no event: wait for the stream at the finish instead */
  }
  /* The remap, while the copy runs. */
  if (rc == GH_OK && mover) {
    _gh_tm_mover_push(tm, home, u->k, st->pa, st->npa, 0);
  } else if (rc == GH_OK) {
    if (!st->from_homeless) rc = GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, home, u->k));
    if (rc == GH_OK && !st->to_homeless) {
      rc = gh_tm_home_map(tm, u, st->pa, st->npa);
      if (rc != GH_OK && !st->from_homeless) gh_tm_home_map(tm, u, st->old, st->nold);  /* put the old backing back */
    }
  }
  if (rc != GH_OK) {
    gh_tm_move_failed(tm, rc);
    if (st->held) tm->n_held = held0, tm->held_copies--;  /* its copies, not queued, go with the move */
    GH_PW(tm, GH_TM_W_MOVE, tm->ops->stream_sync(tm->fr, cs));  /* no copy may still write into them */
    if (st->ev) GH_P(tm, tm->ops->event_destroy(tm->fr, st->ev));
    if (st->stage) GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, st->stage, u->k));
    _gh_tm_pas_drop(tm, st->pa, st->npa);
    return 0;
  }
  return 1;
}

/* Finish a started unit: the frames moved (u->k, or 0 when it stays).
 * ordered: without waiting for its copy when it can (no staging window,
 * an event): its old backing is given back with the event (a device
 * allocation, evicted: the spare carries it; host memory, restored: the
 * batch's ordered_ev covers it), and the caller makes the users wait. */
static size_t gh_tm_move_finish(gh_tmgr_t* tm, const gh_tm_unit_t* u, gh_tier_t to, gh_tm_step_t* st, int ordered) {
  /* (a restore's host memory goes to the pool, which must keep it: a
   * release would not wait for this copy) */
  ordered = ordered && st->ev && !st->stage && (to == GH_TIER_HOST || tm->pool_cnt + st->nold <= tm->pool_cap);
  int rc = GH_OK;
  if (st->held) {
    /* its copy comes with _gh_tm_held_flush, which gives the old backing
     * (to the spares now, with no event) the copy's event, and the unit
     * its stamp (GH_TM_STAMP_LATEST until then) */
    if (tm->split && tm->n_held_units < GH_TM_HELD_MAX)
      tm->held_v0[tm->n_held_units] = u->v0, tm->held_k[tm->n_held_units++] = u->k;
  } else if (!ordered) {
    gh_tm_lane_t* l = gh_tm_lane_to(tm, to);
    rc = st->ev ? GH_PW(tm, GH_TM_W_MOVE, tm->ops->event_sync(tm->fr, st->ev))
                : GH_PW(tm, GH_TM_W_MOVE, tm->ops->stream_sync(tm->fr, l->s));
    if (st->ev) GH_P(tm, tm->ops->event_destroy(tm->fr, st->ev));
    if (rc == GH_OK && tm->split && st->stamp > l->done) l->done = st->stamp;  /* and every copy before it */
  } else if (to == GH_TIER_HOST) {
    st->old[0].ev = st->ev;  /* the device allocation: one (a unit's device side, move_start) */
  } else {
    GH_P(tm, tm->ops->event_destroy(tm->fr, st->ev));
  }
  if (rc != GH_OK) gh_tm_home_undo(tm, u, st);  /* the copy failed: the data is in the old backing */
  if (st->stage) GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, st->stage, u->k));
  if (rc != GH_OK) {
    gh_tm_move_failed(tm, rc);
    _gh_tm_pas_drop(tm, st->pa, st->npa);
    return 0;
  }
  for (size_t v = u->v0; v < u->v0 + u->k; v++) _gh_tm_count(tm, &tm->vf[v], -1);
  if (to == GH_TIER_DEVICE)  /* host memory that the copy may still read goes to the pool */
    for (size_t i = 0; i < st->nold; i++) st->old[i].stamp = st->stamp;
  _gh_tm_pas_drop(tm, st->old, st->nold);
  _gh_tm_vf_set(tm, u->v0, st->pa, st->npa);
  _gh_tm_pa_commit(tm, st->pa, st->npa);
  for (size_t v = u->v0; v < u->v0 + u->k; v++) {
    gh_vframe_t* f = &tm->vf[v];
    _gh_tm_count(tm, f, +1);
    f->homeless = st->to_homeless;
    f->xstamp = st->stamp;
    if (to == GH_TIER_DEVICE) f->clock = gh_tm_credit(f->kind), f->born = tm->evict_gen;
  }
  if (st->to_homeless) tm->homeless_frames += u->k;
  if (to == GH_TIER_HOST)  /* (a clean unit's bytes were counted at its copy) */
    tm->evictions += u->k, tm->bytes_evicted += st->clean ? 0 : u->k * tm->frame;
  else
    tm->restores += u->k, tm->bytes_restored += u->k * tm->frame;
  return u->k;
}

/* gh_tm_move without the accounting. Ordered (tm->ordered, unless
 * switched off, and every stream of the units' tensors known): after the
 * last unit has started, one event on the copy stream; every stream of
 * the units' tensors waits for it, and it becomes ordered_ev. */
static size_t gh_tm_move_units(gh_tmgr_t* tm, const gh_tm_unit_t* u, size_t n, gh_tier_t to) {
  gh_tm_sset_t ss = {0}, users = {0};
  int ordered = tm->ordered && !tm->ordered_off;
  int ahead = 0;  /* units of tm->ahead (a run's: its only tensor), whose streams do not wait */
  for (size_t i = 0; i < n; i++) {
    _gh_tm_sset_vframe(tm, &ss, u[i].v0);  /* a unit's vframes share their tensors */
    const gh_vframe_t* f = &tm->vf[u[i].v0];
    if (tm->ahead && f->role == GH_VF_RUN && f->tensors == tm->ahead) ahead = 1;
    else if (ordered) _gh_tm_sset_users(tm, &users, u[i].v0);
  }
  if (users.all) ordered = 0;
  /* The mover's earlier remaps first (these units may be among them, and
   * the streams waited for below may wait for its word). */
  _gh_tm_mover_drain(tm);
  const int mover = ordered && tm->mover_on && _gh_tm_mover_reserve(tm, n + 1) == GH_OK;
  size_t queued = 0;
  const int synced = _gh_tm_sset_sync(tm, &ss);
  gh_tm_step_t* st = synced == GH_OK ? malloc(GH_TM_DEPTH * sizeof *st) : NULL;
  if (!st) {
    gh_tm_move_failed(tm, synced != GH_OK ? synced : _gh_error(GH_ERR_NOMEM, "a move: out of memory"));
    free(users.s);
    return 0;
  }
  /* Units [head, i) are in flight; unit i takes the slot of unit i - DEPTH,
   * finished by then. Start first, then finish the oldest, so that the copy
   * stream never waits for a remap. */
  size_t done = 0, head = 0, i = 0;
  int copied = 0;     /* a unit started queued copies of its own (not a clean one) */
  uint64_t cmax = 0;  /* the clean units' copies: the latest stamp */
  for (; i < n; i++) {
    if (!gh_tm_move_start(tm, &u[i], to, &st[i % GH_TM_DEPTH], i % GH_TM_DEPTH, mover)) break;
    if (st[i % GH_TM_DEPTH].clean) {
      if (st[i % GH_TM_DEPTH].stamp > cmax) cmax = st[i % GH_TM_DEPTH].stamp;
    } else {
      copied = 1;
    }
    queued += mover;
    if (i + 1 - head == GH_TM_DEPTH) {
      done += gh_tm_move_finish(tm, &u[head], to, &st[head % GH_TM_DEPTH], ordered);
      head++;
    }
  }
  /* The batch's event, before the finishes give the old backings back
   * (the copy stream's order: it follows every copy of the batch). */
  const gh_stream_t cs = gh_tm_lane_to(tm, to)->s;
  gh_fevent_t bev = 0;
  if (ordered && copied && GH_P(tm, tm->ops->event_record(tm->fr, cs, &bev)) != GH_OK) bev = 0;
  const uint64_t seq = queued ? _gh_tm_mover_seal(tm) : 0;
  if (ordered && copied && !bev) {  /* no event: wait for every copy (finished units included) and remap */
    GH_PW(tm, GH_TM_W_MOVE, tm->ops->stream_sync(tm->fr, cs));
    _gh_tm_mover_drain(tm);
  }
  /* Clean units only: no copy of the batch's own, so no event after it
   * (one would follow every cleaning copy queued since theirs). */
  const int clean_only = ordered && i > 0 && !copied;
  ordered = ordered && (bev || clean_only);
  for (; head < i; head++) done += gh_tm_move_finish(tm, &u[head], to, &st[head % GH_TM_DEPTH], ordered);
  if (bev) {
    /* The users' later work after the copies and the remaps (the host
     * waits when a stream cannot be made to). */
    int drain = 0;
    for (size_t k = 0; k < users.n; k++) {
      _gh_tm_wait_for(tm, bev, cs, &users.s[k], GH_TM_W_USERS);
      if (seq && GH_P(tm, tm->ops->stream_wait_value(tm->fr, users.s[k], tm->word, (uint32_t)seq)) != GH_OK)
        drain = 1;
    }
    if (drain) _gh_tm_mover_drain(tm);
    _gh_tm_ordered_set(tm, gh_tm_lane_to(tm, to), bev);
    tm->ordered_moves++;
    tm->ahead_moved |= ahead;
  } else if (clean_only) {
    /* The users after the clean units' copies (queued at their advice):
     * the lane's earliest event that follows the latest of them. */
    for (size_t k = 0; k < users.n; k++)
      _gh_tm_lane_wait(tm, gh_tm_lane_to(tm, to), cmax, &users.s[k], GH_TM_W_USERS);
    tm->ordered_moves++;
    tm->ahead_moved |= ahead;
  }
  free(users.s);
  free(st);
  return done;
}

/* Move units u[0..n) (all mapped in the other tier) to tier `to`, after the
 * streams of their tensors reached the present. Device backing for a
 * restore is within the budget (checked by the caller). Returns the frames
 * moved (fewer when the target tier ran out, or when the provider refused
 * something: then tm->move_rc says what, gh_tm_move_rc). Counted in moves /
 * move_ns. */
static size_t gh_tm_move(gh_tmgr_t* tm, const gh_tm_unit_t* u, size_t n, gh_tier_t to) {
  if (n == 0) return 0;
  const uint64_t t0 = gh_tm_now_ns();
  tm->moves++;
  _gh_tm_in_move = 1;
  const size_t done = gh_tm_move_units(tm, u, n, to);
  _gh_tm_in_move = 0;
  if (to == GH_TIER_HOST && tm->nframes[GH_TIER_HOST] > tm->clean_peak_f) tm->clean_peak_f = tm->nframes[GH_TIER_HOST];
  tm->move_ns += gh_tm_now_ns() - t0;
  return done;
}

/* The first provider failure of this call's moves (tm->move_rc, reset as
 * a call takes the manager: _gh_tm_lock) as its error (`what`: the call),
 * or GH_OK. A restore short of room because the eviction that was to make
 * it failed reports that failure, not the budget. */
static int gh_tm_move_rc(const gh_tmgr_t* tm, const char* what) {
  if (tm->move_rc == GH_OK) return GH_OK;
  return _gh_error(tm->move_rc, "%s: a unit stayed where it was, its data there: %s", what, tm->move_what);
}

/* ---------------------------------------------------------------- cleaning
 * With GPUHEAP_CLEAN=1 (=kernel: the copies by the provider's kernel), a
 * quiet advice copies the tensor's units (a run's chunks, on the device)
 * to host memory at once, on the copy stream after the advice's events,
 * while they stay on the device: the units are *clean*. An eviction that
 * takes a clean unit then only remaps (gh_tm_clean_start): the copy
 * becomes its backing, its device memory a spare carrying the copy's
 * event. Any end of the quiet promise (an advice, a prefetch, a pin, a
 * free: gh_tm_unquiet) drops the copy, its host memory back to the pool
 * (the host waits for the copy first if it still runs).
 * So a forward pass's copies run from its first quiet tensors on, beside
 * its kernels, where evictions start copying only once the budget is full
 * and each new tensor then waits for the copy of the memory it takes
 * (bench/NOTES.md, host side, rows 117 and 119).
 * How much: the frames on the host and the clean ones together stay
 * within the frames on the host at the previous cycle's peak (a cycle
 * starts at a cold advice after a prefetch: a forward pass), so that a
 * training step cleans about what its forward then evicts, and its first
 * step cleans nothing. Evictions take clean units before the other quiet
 * ones (gh_tm_cmp_cold); a host budget too full for a new host allocation
 * drops every clean copy first (_gh_tm_host_get). Only with a restore
 * stream (its lanes order a unit's restore after the copy that wrote its
 * host memory) and without the mover. */

/* Take t out of clean_q. */
static void gh_tm_clean_unqueue(gh_tmgr_t* tm, gh_tensor_t* t) {
  if (!t->clean_wait) return;
  size_t k = 0;
  for (size_t i = 0; i < tm->clean_qn; i++)
    if (tm->clean_q[i] != t) tm->clean_q[k++] = tm->clean_q[i];
  tm->clean_qn = k;
  t->clean_wait = 0;
}

/* Drop unit [v0, v0 + k)'s clean copy: its host memory back to the pool
 * once the copy is done (the host waits for it if not). */
static void gh_tm_clean_drop_unit(gh_tmgr_t* tm, size_t v0, size_t k) {
  gh_vframe_t* f = &tm->vf[v0];
  if (!f->clean) return;
  const gh_tm_pa_t pa = f->cpa;
  if (f->cev) {
    GH_PW(tm, GH_TM_W_OTHER, tm->ops->event_sync(tm->fr, f->cev));
    GH_P(tm, tm->ops->event_destroy(tm->fr, f->cev));
  }
  gh_tm_clean_forget(tm, v0, k);
  _gh_tm_host_put(tm, &pa);
  tm->clean_n[2] += k;
}

/* Drop the clean copies of t's units. */
static void gh_tm_clean_drop(gh_tmgr_t* tm, const gh_tensor_t* t) {
  if (!tm->clean_f) return;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf;) {
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
    gh_tm_clean_drop_unit(tm, u.v0, u.k);
    v = u.v0 + u.k;
  }
}

/* Drop every clean copy (clean tensors are quiet, hence cold). */
void _gh_tm_clean_drop_all(gh_tmgr_t* tm) {
  for (const gh_tensor_t* t = tm->cold_head; t && tm->clean_f; t = t->cnext) gh_tm_clean_drop(tm, t);
}

/* Clean quiet tensor t's units on the device, as far as the target allows
 * (see above). A provider failure leaves the unit as it was (on the
 * device, not clean) and is returned; a host budget or alias region too
 * full stops the cleaning, with GH_OK. */
static int gh_tm_clean(gh_tmgr_t* tm, gh_tensor_t* t) {
  if (!tm->clean_mode || !tm->split || tm->mover_on || !t->quiet || t->state != GH_T_LIVE || t->pins ||
      tm->vf[t->vf0].role != GH_VF_RUN)
    return GH_OK;
  /* GPUHEAP_CLEAN=ready: the copies are queued at the end of an
   * allocation (after its maps), once the kernels before the advice are
   * done, so that no cleaning copy waits queued on the GPU while the host
   * maps (a map's access call waits for the copies to the host in flight:
   * row 122); until then the tensor waits in clean_q (gh_tm_clean_poll). */
  if (tm->clean_mode == 3 && !t->clean_wait && !tm->clean_polling) {
    if (tm->clean_qn < GH_TM_CLEAN_Q) tm->clean_q[tm->clean_qn++] = t, t->clean_wait = 1;
    return GH_OK;
  }
  gh_tm_lane_t* l = &tm->lane[GH_TM_LANE_EVICT];
  const gh_stream_t cs = l->s;
  int rc = GH_OK, waited = 0;
  const uint64_t issued = l->issued;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf && rc == GH_OK;) {
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
    v = u.v0 + u.k;
    gh_vframe_t* f = &tm->vf[u.v0];
    if (f->tier != GH_TIER_DEVICE || f->clean || f->pins) continue;
    if (tm->nframes[GH_TIER_HOST] + tm->clean_f + u.k > tm->clean_target_f) {
      tm->clean_n[3] += u.k;
      continue;
    }
    gh_tm_pa_t dev;
    _gh_tm_vf_pas(tm, u.v0, 1, &dev);  /* (the allocation at its first vframe) */
    if (dev.n != u.k || _gh_tm_dalias_get(tm, &dev) != GH_OK) {
      tm->clean_n[3] += u.k;  /* (a unit of several allocations, or no device alias: no staging for these) */
      continue;
    }
    for (size_t w = u.v0; w < u.v0 + u.k; w++) tm->vf[w].palias = dev.alias;
    gh_tm_pa_t h;
    tm->cleaning = 1;
    const int got = _gh_tm_host_get(tm, u.k, &h, &cs);
    tm->cleaning = 0;
    if (got != GH_OK) {
      tm->clean_n[3] += u.k;
      if (got != GH_ERR_BUDGET) rc = got;
      break;
    }
    if (!waited) {  /* the copy stream after the advice's events (the kernels that made and read it) */
      for (unsigned i = 0; i < t->quiet; i++)
        _gh_tm_wait_for(tm, t->quiet_ev[i], t->streams[i], &cs, GH_TM_W_QUIET);
      waited = 1;
    }
    /* after the unit's last restore, which wrote its device memory */
    _gh_tm_lane_wait(tm, &tm->lane[GH_TM_LANE_RESTORE], f->xstamp, &cs, GH_TM_W_ORDERED);
    uint8_t* hva = gh_tm_alias_va(tm, h.alias);
    const uint8_t* dva = gh_tm_dalias_va(tm, dev.alias);
    const size_t bytes = u.k * tm->frame;
    rc = GH_P(tm, tm->clean_mode == 2 ? tm->ops->copy_to_host(tm->fr, hva, dva, bytes, cs)
                                      : tm->ops->copy(tm->fr, hva, dva, bytes, cs));
    gh_fevent_t e = 0;
    if (rc == GH_OK) rc = GH_P(tm, tm->ops->event_record(tm->fr, cs, &e));
    if (rc != GH_OK) {  /* no copy may still write into it */
      GH_PW(tm, GH_TM_W_MOVE, tm->ops->stream_sync(tm->fr, cs));
      _gh_tm_host_put(tm, &h);
      break;
    }
    f->cpa = h, f->cev = e, f->cstamp = ++l->issued;
    for (size_t w = u.v0; w < u.v0 + u.k; w++) tm->vf[w].clean = 1;
    tm->clean_f += u.k;
    tm->clean_n[0] += u.k;
    tm->bytes_evicted += bytes;
  }
  if (l->issued != issued) _gh_tm_lane_mark(tm, l);  /* an event of the lane's ring just after them */
  return rc;
}

/* GPUHEAP_CLEAN=ready, at the end of an allocation: clean the queued
 * tensors whose advice's events are complete, oldest first, up to the
 * first that is not. */
static void gh_tm_clean_poll(gh_tmgr_t* tm) {
  while (tm->clean_qn) {
    gh_tensor_t* t = tm->clean_q[0];
    int done = 1;
    for (unsigned i = 0; i < t->quiet && done; i++)
      done = GH_P(tm, tm->ops->event_query(tm->fr, t->quiet_ev[i])) == GH_OK;
    if (!done) return;
    gh_tm_clean_unqueue(tm, t);
    tm->clean_polling = 1;
    gh_tm_clean(tm, t);  /* (a refused copy leaves it unclean with nothing lost; no call reports it here) */
    tm->clean_polling = 0;
  }
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

/* The units of vframes idx[0..n) (ascending), each once; returns how many. */
static size_t gh_tm_units(const gh_tmgr_t* tm, const size_t* idx, size_t n, gh_tm_unit_t* out) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, idx[i]);
    if (m && out[m - 1].v0 == u.v0) continue;
    out[m++] = u;
  }
  return m;
}

/* A unit whose frames hold cold tensors only, the mark it is cold since,
 * and whether it goes before the units of tensors that are not all quiet
 * (all its tensors quiet, unless GPUHEAP_QUIET_FIRST=0). */
typedef struct gh_tm_cold_s {
  uint64_t since;
  size_t v0;
  int quiet;
  int clean;  /* clean (see "cleaning"): no copy to make, first of all */
} gh_tm_cold_t;

static int gh_tm_cmp_cold(const void* a, const void* b) {
  const gh_tm_cold_t *x = a, *y = b;
  if (x->clean != y->clean) return x->clean ? -1 : 1;
  if (x->quiet != y->quiet) return x->quiet ? -1 : 1;
  if (x->since != y->since) return x->since < y->since ? -1 : 1;
  return x->v0 < y->v0 ? -1 : x->v0 > y->v0;
}

/* Whether every live tensor in vframe v is quiet (its move waits for the
 * events of the advice, not for the streams). */
static int gh_tm_vf_quiet(const gh_tmgr_t* tm, size_t v) {
  int any = 0;
  for (const gh_tensor_t* t = tm->vf[v].tensors; t; t = t->fnext) {
    if (t->state != GH_T_LIVE) continue;
    if (!t->quiet) return 0;
    any = 1;
  }
  return any;
}

/* Since when vframe v holds cold tensors only: the latest mark of its live
 * tensors (a run's: its tensor's). */
static uint64_t gh_tm_cold_since(const gh_tmgr_t* tm, size_t v) {
  const gh_vframe_t* f = &tm->vf[v];
  if (f->role == GH_VF_RUN) return f->tensors ? f->tensors->cold_seq : 0;
  uint64_t since = 0;
  for (const gh_tensor_t* t = f->tensors; t; t = t->fnext)
    if (t->state == GH_T_LIVE && t->cold_seq > since) since = t->cold_seq;
  return since;
}

/* The victim units of cold tensors only (device, unpinned, not protected),
 * oldest mark first, each once; *n of them (NULL when none). */
static gh_tm_cold_t* gh_tm_cold_units(gh_tmgr_t* tm, size_t* n) {
  gh_tm_cold_t* out = NULL;
  size_t m = 0, cap = 0;
  for (const gh_tensor_t* t = tm->cold_head; t; t = t->cnext)
    for (size_t v = t->vf0; v < t->vf0 + t->nvf;) {
      const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
      v = u.v0 + u.k;
      if (!gh_tm_victim_ok(tm, u.v0) || tm->vf[u.v0].warm) continue;
      if (m == cap) {
        gh_tm_cold_t* p = realloc(out, (cap = cap ? 2 * cap : 64) * sizeof *p);
        if (!p) goto done;  /* out of memory: the ones found so far */
        out = p;
      }
      out[m++] = (gh_tm_cold_t){gh_tm_cold_since(tm, u.v0), u.v0, !tm->quiet_first_off && gh_tm_vf_quiet(tm, u.v0),
                                tm->vf[u.v0].clean};
    }
done:
  if (m) qsort(out, m, sizeof *out, gh_tm_cmp_cold);
  /* A slab's vframe was found once per cold tensor in it: same mark, same
   * place, so next to each other now. */
  size_t k = 0;
  for (size_t i = 0; i < m; i++)
    if (k == 0 || out[k - 1].v0 != out[i].v0) out[k++] = out[i];
  *n = k;
  return out;
}

/* Evict `want` device tensor frames (fewer if fewer can go; a little more
 * when a chosen frame's chunk is larger): frames of cold tensors only
 * first, the units of quiet tensors before the others (a move of a tensor
 * that is not quiet drains its streams first: bench/NOTES.md, host side,
 * row 68), each oldest mark first; then by CLOCK. Returns the frames
 * evicted. */
static size_t gh_tm_evict(gh_tmgr_t* tm, size_t want) {
  if (want == 0) return 0;
  size_t* idx = malloc(want * (sizeof *idx + sizeof(gh_tm_unit_t)));
  if (!idx) return 0;
  gh_tm_unit_t* units = (gh_tm_unit_t*)(void*)(idx + want);
  size_t n = 0, frames = 0;
  /* The host frames the victims may take: what the host budget still allows
   * (the pool's frames are free to take). A unit larger than what is left
   * is passed over, so that a batch never picks a victim it cannot move
   * while a smaller one could go. */
  const size_t host_held = tm->host_used - tm->pool_n - tm->clean_f;  /* (clean copies go if need be) */
  size_t hroom = tm->host_budget_f > host_held ? tm->host_budget_f - host_held : 0;
  /* A chosen vframe takes its whole unit: mark all of it, count its frames
   * (a clean unit has its host memory). */
#define GH_TM_TAKE(v)                                                          \
  do {                                                                         \
    const gh_tm_unit_t u_ = _gh_tm_unit_of(tm, (v));                           \
    const size_t h_ = tm->vf[u_.v0].clean ? 0 : u_.k;                          \
    if (h_ > hroom) break; /* passed over */                                   \
    hroom -= h_;                                                               \
    for (size_t w_ = u_.v0; w_ < u_.v0 + u_.k; w_++) tm->vf[w_].mark = 1;      \
    idx[n++] = u_.v0, frames += u_.k;                                          \
  } while (0)
  size_t nc = 0;
  gh_tm_cold_t* cold = gh_tm_cold_units(tm, &nc);
  for (size_t i = 0; i < nc && frames < want; i++) GH_TM_TAKE(cold[i].v0);
  free(cold);
  const size_t region = tm->n_va - tm->tensor_vf0;
  /* Each pass takes a credit from every candidate: at most 1 + max credit
   * passes. With young_last, frames that got device memory since the last
   * batch (the tensors just made or brought back: the next kernels' inputs)
   * are left alone until the others are spent. */
  for (int young = tm->young_last ? 0 : 1; young < 2 && frames < want; young++)
    for (size_t step = 0; frames < want && step < region * (size_t)(2 + gh_tm_credit(GH_KIND_WEIGHTS)); step++) {
      if (tm->hand < tm->tensor_vf0 || tm->hand >= tm->n_va) tm->hand = tm->tensor_vf0;
      const size_t v = tm->hand++;
      if (!gh_tm_victim_ok(tm, v) || (!young && tm->vf[v].born == tm->evict_gen)) continue;
      if (tm->vf[v].clock) {
        tm->vf[v].clock--;
      } else {
        const size_t before = frames;
        GH_TM_TAKE(v);
        tm->clock_victims[tm->vf[v].kind] += frames - before;
      }
    }
  tm->evict_gen++;
#undef GH_TM_TAKE
  for (size_t i = 0; i < n; i++) {
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, idx[i]);
    for (size_t w = u.v0; w < u.v0 + u.k; w++) tm->vf[w].mark = 0;
  }
  qsort(idx, n, sizeof *idx, gh_tm_cmp_size);
  const size_t m = gh_tm_units(tm, idx, n, units);
  const size_t moved = gh_tm_move(tm, units, m, GH_TIER_HOST);
  free(idx);
  return moved;
}

static void gh_tm_flush(gh_tmgr_t* tm);
static void gh_tm_reclaim(gh_tmgr_t* tm, int sync);

/* Whether room should wait for pending frees before evicting (the
 * default rule): the caller is restoring (a prefetch came after the last
 * cold advice: a backward pass, whose frees come back soon and whose cold
 * tensors are mostly on the host already, so that evicting takes warm
 * frames it will need) and a quiet tensor is among the first
 * GH_TM_QUIET_LOOK cold ones (quiet moves do not drain the streams, so the
 * host runs ahead of its frees). The rule looked at the cold list's head
 * alone: a cold tensor the program still reaches (never quiet) at the head
 * then stopped every wait, 1.6 GB moved a step against 1.46
 * (bench/NOTES.md, host side, row 62); waiting in forward as well was
 * slower (row 62: 63-69 ms a step against 53-60, with ~58 CLOCK victims a
 * step against none). */
#define GH_TM_QUIET_LOOK 4
static int gh_tm_wait_rule(const gh_tmgr_t* tm) {
  if (!tm->restoring) return 0;
  unsigned seen = 0;
  for (const gh_tensor_t* t = tm->cold_head; t && seen < GH_TM_QUIET_LOOK; t = t->cnext, seen++)
    if (t->quiet) return 1;
  return 0;
}

/* Wait for pending frees, oldest first, while the device budget has no
 * room for k frames and their memory can make it. Returns 1 when `take`
 * got a cached run that the frees brought (the room is then made). */
static int gh_tm_room_wait(gh_tmgr_t* tm, size_t k, gh_tm_take_t* take) {
  while (gh_tm_dev_busy(tm) + k > tm->dev_budget_f && tm->pend_head && tm->pend_head->batch) {
    gh_tm_fbatch_t* b = tm->pend_head->batch;  /* the oldest free's event: wait for it */
    if (!b->done && b->ev) {
      _gh_tm_mover_drain(tm);
      b->done = GH_PW(tm, GH_TM_W_FREES, tm->ops->event_sync(tm->fr, b->ev)) == GH_OK;
    }
    if (!b->done) break;
    gh_tm_reclaim(tm, 0);
    if (take && _gh_tm_cache_take(tm, k, &take->v0, &take->n, &take->ch)) return take->got = 1;
    if (gh_tm_dev_busy(tm) + k > tm->dev_budget_f && tm->cached)
      _gh_tm_cache_release(tm, gh_tm_dev_busy(tm) + k - tm->dev_budget_f);
  }
  return 0;
}

/* Make room for k new device frames: when the budget is spent, record
 * events for new frees and reclaim the completed ones, then release cached
 * frames, then evict in one batch down to the low watermark. Returns how
 * many of the k fit now. With `take` (a run of k frames being placed, which
 * no cached run fitted): a run that the frees reclaimed here bring to the
 * cache and that fits it (_gh_tm_cache_take) is taken before any cached run
 * is released or anything evicted (take->got; returns k): it is mapped
 * where it is, where the room would have unmapped it and mapped its memory
 * again at the new run (bench/NOTES.md, host side, row 63). */
static size_t gh_tm_device_room(gh_tmgr_t* tm, size_t k, gh_tm_take_t* take) {
  if ((take || gh_tm_dev_busy(tm) + k > tm->dev_budget_f) && tm->n_pending) {
    gh_tm_flush(tm);
    gh_tm_reclaim(tm, 0);
  }
  if (take && _gh_tm_cache_take(tm, k, &take->v0, &take->n, &take->ch)) return take->got = 1, k;
  if (gh_tm_dev_busy(tm) + k > tm->dev_budget_f && tm->cached)
    _gh_tm_cache_release(tm, gh_tm_dev_busy(tm) + k - tm->dev_budget_f);
  /* Before evicting, wait for pending frees (oldest first) while their
   * memory can make the room, when gh_tm_wait_rule says so (or
   * GPUHEAP_WAIT_FREES=1): quiet moves do not wait for the streams, so the
   * host runs ahead of the GPU and its frees stay pending; evicting then
   * moves bytes that a wait would have saved (bench/NOTES.md, host side,
   * rows 44 and 49: with quiet="auto", 1.54 GB a step against 1.57-1.73). */
  const int wait = tm->wait_frees > 0 || (tm->wait_frees < 0 && gh_tm_wait_rule(tm));
  if (wait && gh_tm_room_wait(tm, k, take)) return k;
  const size_t busy = gh_tm_dev_busy(tm);
  if (busy + k > tm->dev_budget_f) {
    const size_t low = (size_t)(tm->opt.low_watermark * (double)tm->dev_budget_f);
    size_t want = busy + k - tm->dev_budget_f;
    if (busy + k > low && busy + k - low > want) want = busy + k - low;
    gh_tm_evict(tm, want);
  }
  const size_t avail = tm->dev_budget_f > gh_tm_dev_busy(tm) ? tm->dev_budget_f - gh_tm_dev_busy(tm) : 0;
  return avail < k ? avail : k;
}

/* Bring units u[0..nu) (host, m frames in all) to the device, as many as
 * fit after making room; the caller keeps them from being victims. */
static int gh_tm_restore_units(gh_tmgr_t* tm, const gh_tm_unit_t* u, size_t nu, size_t m) {
  if (m == 0) return GH_OK;
  const size_t room = gh_tm_device_room(tm, m, NULL);
  size_t take = 0, fit = 0;  /* the units that fit in the room */
  while (take < nu && fit + u[take].k <= room) fit += u[take++].k;
  const size_t moved = gh_tm_move(tm, u, take, GH_TIER_DEVICE);
  if (moved < m && tm->move_rc != GH_OK) return gh_tm_move_rc(tm, "restore");
  if (moved < m) return _gh_error(GH_ERR_BUDGET, "restore: %zu of %zu frames found no device room", m - moved, m);
  return GH_OK;
}

/* Append the host units of vframes [v0, v0 + n) to u (room for n more);
 * returns how many, *m += their frames. */
static size_t gh_tm_host_units(const gh_tmgr_t* tm, size_t v0, size_t n, gh_tm_unit_t* u, size_t* m) {
  size_t nu = 0;
  for (size_t v = v0; v < v0 + n;) {
    if (tm->vf[v].tier != GH_TIER_HOST) {
      v++;
      continue;
    }
    u[nu] = _gh_tm_unit_of(tm, v);
    *m += u[nu].k;
    v = u[nu].v0 + u[nu].k;
    nu++;
  }
  return nu;
}

/* Bring the host units of vframes [v0, v0 + n) to the device (evicting
 * others, never these). GH_OK when all of them are on the device. */
static int gh_tm_restore_range(gh_tmgr_t* tm, size_t v0, size_t n) {
  gh_tm_unit_t* units = malloc(n * sizeof *units);
  if (!units) return _gh_error(GH_ERR_NOMEM, "tensor manager: out of memory");
  size_t m = 0;
  const size_t nu = gh_tm_host_units(tm, v0, n, units, &m);
  tm->prot_lo = v0, tm->prot_hi = v0 + n;
  const int rc = gh_tm_restore_units(tm, units, nu, m);
  tm->prot_lo = tm->prot_hi = 0;
  free(units);
  return rc;
}

/* ---------------------------------------------------------------- tensors */
static void gh_tm_tensor_frames(gh_tmgr_t* tm, gh_tensor_t* t, int live_d, int warm_d, int pins_d, int pend_d) {
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) {
    gh_vframe_t* f = &tm->vf[v];
    f->live += (uint32_t)live_d, f->warm += (uint32_t)warm_d, f->pins += (uint32_t)pins_d;
    f->pending += (uint32_t)pend_d;
  }
}

/* The spare that is allocation pf, or SIZE_MAX. */
static size_t gh_tm_spare_find(const gh_tmgr_t* tm, gh_pframe_t pf) {
  for (size_t i = 0; i < tm->n_spare; i++)
    if (tm->spare[i].pf == pf) return i;
  return SIZE_MAX;
}

/* Queue the copies held back while a run was placed (homeless units
 * evicted for it: gh_tm_move_start), with an event after each device
 * allocation's: a map waits in the driver for the device-to-host copies in
 * flight (0.69 ms a 36 MiB chunk against 0.03-0.09 idle: bench/NOTES.md,
 * host side, rows 46, 48 and 51), so the run maps its allocations first
 * and the copies follow. An allocation still spare keeps the event (whoever
 * takes it waits, as for any evicted unit's); one the run took makes
 * `user` wait for it (the host when NULL). Called when the run is mapped,
 * and before anything could need that memory earlier: a device alias
 * taken back from the spares, a spare released. A copy that cannot be
 * queued loses the unit's data: recorded as the manager's sticky failure
 * (later calls fail with GH_ERR_CORRUPT, see _gh_tm_mover_failed). */
void _gh_tm_held_flush(gh_tmgr_t* tm, const gh_stream_t* user) {
  const size_t n = tm->n_held;
  if (!n) return;
  tm->n_held = 0;
  int rc = GH_OK;
  for (size_t i = 0; i < n; i++) {
    const gh_tm_held_t* h = &tm->held[i];
    if (rc == GH_OK) rc = GH_P(tm, gh_tm_copy_out(tm, h->dst, h->src, h->bytes, 1));
    if (i + 1 < n && tm->held[i + 1].pf == h->pf) continue;  /* the allocation's last copy next */
    gh_fevent_t ev = 0;
    if (GH_P(tm, tm->ops->event_record(tm->fr, tm->copy_stream, &ev)) != GH_OK) {
      ev = 0;  /* no event: the host waits for the copies now */
      GH_PW(tm, GH_TM_W_MOVE, tm->ops->stream_sync(tm->fr, tm->copy_stream));
    }
    const size_t si = gh_tm_spare_find(tm, h->pf);
    if (si != SIZE_MAX) {
      tm->spare[si].ev = ev;
    } else if (ev) {
      _gh_tm_wait_for(tm, ev, tm->copy_stream, user, GH_TM_W_USERS);
      GH_P(tm, tm->ops->event_destroy(tm->fr, ev));
    }
  }
  if (rc != GH_OK) _gh_tm_sticky(tm, rc, "an eviction's copy could not be queued: %s", gh_last_error_detail());
  gh_fevent_t last = 0;  /* the latest ordered batch's copies: these */
  if (tm->split) {  /* the held units' stamp: these copies */
    const uint64_t stamp = ++tm->lane[GH_TM_LANE_EVICT].issued;
    for (size_t i = 0; i < tm->n_held_units; i++)
      for (size_t v = tm->held_v0[i]; v < tm->held_v0[i] + tm->held_k[i]; v++)
        if (tm->vf[v].xstamp == GH_TM_STAMP_LATEST) tm->vf[v].xstamp = stamp;
    tm->n_held_units = 0;
  }
  if (GH_P(tm, tm->ops->event_record(tm->fr, tm->copy_stream, &last)) == GH_OK) {
    _gh_tm_ordered_set(tm, &tm->lane[GH_TM_LANE_EVICT], last);
  } else {
    GH_PW(tm, GH_TM_W_MOVE, tm->ops->stream_sync(tm->fr, tm->copy_stream));
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
      const size_t dev = gh_tm_device_room(tm, 1, NULL);
      gh_tm_pa_t pa = {0, 0, GH_TM_NO_ALIAS, GH_TIER_NONE, 0, 0};
      int rc = dev ? _gh_tm_dev_get(tm, 1, &pa, &t->streams[0]) : GH_ERR_BUDGET;
      if (rc != GH_OK) {
        v = _gh_tm_slab_find(tm, kind, GH_TIER_HOST, g, &at);
        if (v == SIZE_MAX) rc = _gh_tm_host_get(tm, 1, &pa, &t->streams[0]);
      }
      if (v == SIZE_MAX) {
        if (rc != GH_OK) return _gh_error(GH_ERR_BUDGET, "no room for %zu bytes in either tier", t->bytes);
        const size_t words = (tm->frame / GH_TM_ALIGN + 63) / 64;
        uint64_t* bits = calloc(words, sizeof *bits);
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
    gh_tm_pa_t* pas = malloc(n * sizeof *pas);
    gh_pframe_t* pfs = malloc(n * sizeof *pfs);
    if (!pas || !pfs) {
      free(pas), free(pfs);
      return _gh_error(GH_ERR_NOMEM, "out of memory");
    }
    tm->holding = !tm->hold_off && tm->ordered && !tm->ordered_off && !tm->mover_on;
    const size_t dev0 = gh_tm_device_room(tm, n, tm->take_freed_off ? NULL : &tk);
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
  tm->move_rc = GH_OK;  /* (this call's moves' first failure, gh_tm_move_rc) */
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
static void gh_tm_flush(gh_tmgr_t* tm) {
  if (!tm->n_unflushed) return;
  gh_tm_settle(tm);
  gh_tm_fbatch_t** sb = calloc(tm->n_streams ? tm->n_streams : 1, sizeof *sb);
  /* The frees with no event are the newest: a suffix of the list. */
  for (gh_tensor_t *t = tm->pend_tail, *pv; t && tm->n_unflushed; t = pv) {
    pv = t->prev;
    if (t->batch) break;
    size_t i = 0;
    while (i < tm->n_streams && tm->streams[i] != t->free_stream) i++;
    gh_tm_fbatch_t* b = sb && i < tm->n_streams ? sb[i] : NULL;
    if (!b) {
      b = calloc(1, sizeof *b);
      if (!b || GH_P(tm, tm->ops->event_record(tm->fr, t->free_stream, &b->ev)) != GH_OK) {
        _gh_tm_mover_drain(tm);  /* the stream may wait for the mover's word */
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
static void gh_tm_reclaim(gh_tmgr_t* tm, int sync) {
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
  t->ptr = o->ptr, t->span = o->span, t->vf0 = o->vf0, t->nvf = o->nvf, t->chunk = o->chunk;
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
  if (o.flags & GH_TMGR_GROW_ON_DEMAND)
    return _gh_error(GH_ERR_UNSUPPORTED, "gh_tmgr_create: GH_TMGR_GROW_ON_DEMAND is not implemented yet");
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

  gh_tmgr_t* tm = calloc(1, sizeof *tm);
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
     * advice (see "cleaning"), =kernel: by the provider's kernel; off
     * unless set. */
    const char* cl = getenv("GPUHEAP_CLEAN");
    tm->clean_mode = !cl || !*cl || *cl == '0'      ? 0
                     : strcmp(cl, "kernel") == 0 ? 2
                     : strcmp(cl, "ready") == 0  ? 3
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
  tm->vf = calloc(tm->n_va, sizeof *tm->vf);
  tm->pool = calloc(tm->pool_cap, sizeof *tm->pool);
  tm->alias_used = calloc(alias_big_f + host_f + 1, 1);
  tm->dalias_used = calloc(dalias_f, 1);
  tm->n_buckets = 256;
  tm->buckets = calloc(tm->n_buckets, sizeof *tm->buckets);
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
    gh_tm_pa_t* pas = malloc(nf * sizeof *pas);
    gh_pframe_t* pfs = malloc(nf * sizeof *pfs);
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
    gh_tm_reclaim(tm, 1);
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
    for (size_t v = 0; v < tm->heap_vf; v++)
      if (tm->vf[v].tier != GH_TIER_NONE) _gh_tm_vframes_drop(tm, v, 1);  /* single frames */
    tm->spares_off = 1;
    while (tm->n_spare) _gh_tm_spare_release(tm, tm->n_spare - 1);
    tm->pool_target = 0;
    while (tm->pool_cnt) _gh_tm_pool_release_last(tm);
    if (tm->split) tm->ops->stream_destroy(tm->fr, tm->restore_stream);
    if (tm->copy_stream) tm->ops->stream_destroy(tm->fr, tm->copy_stream);
    if (tm->word) tm->ops->word_free(tm->fr, tm->word);
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
  gh_tensor_t* t = calloc(1, sizeof *t);
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
        if (tm->n_unflushed >= GH_TM_FLUSH_FREES) gh_tm_flush(tm);
        if (tm->n_pending > tm->n_unflushed && ++tm->alloc_tick % GH_TM_RECLAIM_EVERY == 0) gh_tm_reclaim(tm, 0);
        rc = gh_tm_place(tm, t, 1);
        if (rc != GH_OK) {
          gh_tm_flush(tm);
          gh_tm_reclaim(tm, 0);
          rc = gh_tm_place(tm, t, 0);
        }
        if (rc == GH_ERR_BUDGET && (tm->pend_head || tm->pool_inflight || tm->cached)) {
          gh_tm_flush(tm);
          gh_tm_reclaim(tm, 1);
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
    } else if (rc == GH_ERR_BUDGET) {
      tm->oom_events++;
      if (tm->oom) gh_tm_snapshot(tm, &snap);
    }
  }
  tm->ordered = 0;
  gh_tm_clean_poll(tm);  /* after this allocation's maps (=ready) */
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

int gh_tensor_free(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tensor_free: NULL manager");
  if (!ptr) return GH_OK;  /* as free(NULL) */
  const uint64_t t0 = gh_tm_call_t0(tm);
  pthread_mutex_lock(&tm->mu);
  gh_tensor_t* t = ptr ? gh_tm_find(tm, ptr) : NULL;
  int rc = t ? _gh_tm_stream_seen(tm, stream) : gh_tm_bad_ptr(tm, ptr, "gh_tensor_free");
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
  }
  gh_tm_trace(tm, "f %llx %zu %d\n", GH_TM_TP(ptr), _gh_tm_sidx(tm, stream), rc);
  gh_tm_call_end(tm, GH_TM_CALL_FREE, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

/* Look up a live tensor under mu, with the lazy reclaim every call does. */
static gh_tensor_t* gh_tm_enter(gh_tmgr_t* tm, const void* ptr, const char* what, int* rc) {
  _gh_tm_lock(tm);
  gh_tm_reclaim(tm, 0);
  gh_tensor_t* t = ptr ? gh_tm_find(tm, ptr) : NULL;
  *rc = t ? GH_OK : gh_tm_bad_ptr(tm, ptr, what);
  return t;
}

/* What a prefetch does to a tensor once its frames moved (its stream was
 * added before, a quiet advice counted for the move): the cold mark and a
 * quiet advice go, its frames get the most credits. */
static int gh_tm_prefetch_mark(gh_tmgr_t* tm, gh_tensor_t* t) {
  for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++)
    if (tm->vf[v].clock < gh_tm_credit(GH_KIND_WEIGHTS)) tm->vf[v].clock = gh_tm_credit(GH_KIND_WEIGHTS);
  return gh_tm_set_cold(tm, t, 0);  /* fails only where a unit stayed homeless and could not be mapped */
}

/* gh_tensor_prefetch, and with `ahead` gh_tensor_prefetch_ahead: when the
 * tensor has frames of its own (a run) and its moves are ordered with no
 * mover, its streams are not made to wait for its copies: the copies'
 * event stays with the tensor (ahead_ev), and its next use
 * (gh_tensor_prefetch, prefetch_many, pin, free) makes its streams wait for
 * it (_gh_tm_ahead_join). Tensors sharing its frames (a slab's) wait as
 * with a prefetch. */
static int gh_tm_prefetch(gh_tmgr_t* tm, void* ptr, gh_stream_t stream, int ahead) {
  const char* what = ahead ? "gh_tensor_prefetch_ahead" : "gh_tensor_prefetch";
  if (!tm) return _gh_error(GH_ERR_INVAL, "%s: NULL manager", what);
  int rc;
  const uint64_t t0 = gh_tm_call_t0(tm);
  gh_tensor_t* t = gh_tm_enter(tm, ptr, what, &rc);
  if (rc == GH_OK) rc = _gh_tm_mover_failed(tm);
  if (rc == GH_OK) rc = _gh_tm_stream_seen(tm, stream);
  if (rc == GH_OK) {
    tm->restoring = 1;
    /* Frames all on the device: no move, no stream waited for. A quiet
     * tensor moves after its advice's events, and is a use from then on. */
    _gh_tm_stream_join(tm, t, stream);
    const int defer = ahead && tm->vf[t->vf0].role == GH_VF_RUN && !tm->mover_on;
    if (!defer) _gh_tm_ahead_join(tm, t, &stream);
    tm->ordered = 1;
    tm->ahead = defer ? t : NULL;
    tm->ahead_moved = 0;
    rc = gh_tm_restore_range(tm, t->vf0, t->nvf);
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
  gh_tm_trace(tm, "%c %llx %zu %d\n", ahead ? 'h' : 'p', GH_TM_TP(ptr), _gh_tm_sidx(tm, stream), rc);
  gh_tm_call_end(tm, ahead ? GH_TM_CALL_PREFETCH_AHEAD : GH_TM_CALL_PREFETCH, t0);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}
int gh_tensor_prefetch(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) { return gh_tm_prefetch(tm, ptr, stream, 0); }
int gh_tensor_prefetch_ahead(gh_tmgr_t* tm, void* ptr, gh_stream_t stream) {
  return gh_tm_prefetch(tm, ptr, stream, 1);
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
  gh_tm_reclaim(tm, 0);
  int rc = _gh_tm_mover_failed(tm);
  if (rc == GH_OK) rc = _gh_tm_stream_seen(tm, stream);
  gh_tensor_t** ts = rc == GH_OK ? malloc(n * sizeof *ts) : NULL;
  if (rc == GH_OK && !ts) rc = _gh_error(GH_ERR_NOMEM, "gh_tensor_prefetch_many: out of memory");
  /* Every pointer first: a bad one fails the call before anything changes. */
  size_t frames = 0;
  for (size_t i = 0; rc == GH_OK && i < n; i++) {
    ts[i] = ptrs[i] ? gh_tm_find(tm, ptrs[i]) : NULL;
    if (!ts[i]) rc = gh_tm_bad_ptr(tm, ptrs[i], "gh_tensor_prefetch_many");
    else frames += ts[i]->nvf;
  }
  gh_tm_unit_t* units = rc == GH_OK ? malloc(frames * sizeof *units) : NULL;
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
    for (size_t i = 0; i < n; i++) nu += gh_tm_host_units(tm, ts[i]->vf0, ts[i]->nvf, units + nu, &m);
    /* Tensors sharing a frame found its unit once each. */
    qsort(units, nu, sizeof *units, gh_tm_cmp_unit);
    size_t k = 0;
    m = 0;
    for (size_t i = 0; i < nu; i++)
      if (k == 0 || units[k - 1].v0 != units[i].v0) units[k++] = units[i], m += units[i].k;
    tm->ordered = 1;
    rc = gh_tm_restore_units(tm, units, k, m);
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
    gh_tm_unit_t* units = malloc(t->nvf * sizeof *units);
    for (size_t v = t->vf0; v < t->vf0 + t->nvf; v++) tm->vf[v].clock = 0;
    if (units) {
      gh_tm_move(tm, units, gh_tm_evict_units(tm, t, units), GH_TIER_HOST);
      rc = gh_tm_move_rc(tm, "gh_tensor_evict");
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
    while (n < t->nstreams && GH_P(tm, tm->ops->event_record(tm->fr, t->streams[n], &t->quiet_ev[n])) == GH_OK) n++;
    if (n == t->nstreams) {
      t->quiet = (uint8_t)n;
      return gh_tm_clean(tm, t);
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
    gh_tm_unit_t* units = malloc(t->nvf * sizeof *units);
    if (units) {
      tm->ordered = 1;
      tm->ahead = t;
      gh_tm_move(tm, units, gh_tm_evict_units(tm, t, units), GH_TIER_HOST);
      rc = gh_tm_move_rc(tm, "gh_tensor_evict_ahead");
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
      rc = gh_tm_restore_range(tm, t->vf0, t->nvf);
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
  pthread_mutex_unlock(&tm->pmu);
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

int gh_tmgr_empty_cache(gh_tmgr_t* tm) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_empty_cache: NULL manager");
  _gh_tm_lock(tm);
  gh_tm_flush(tm);
  gh_tm_reclaim(tm, 1);
  _gh_tm_cache_release(tm, SIZE_MAX);
  while (tm->n_spare) _gh_tm_spare_release(tm, tm->n_spare - 1);
  /* Host memory kept by restores beyond what the pool thread keeps. */
  while (tm->pool_n > tm->pool_target && tm->pool_cnt) _gh_tm_pool_release_last(tm);
  gh_tm_trace(tm, "x %d\n", GH_OK);
  pthread_mutex_unlock(&tm->mu);
  return GH_OK;
}

int gh_tmgr_set_oom_observer(gh_tmgr_t* tm, gh_oom_fn fn, void* user) {
  if (!tm) return _gh_error(GH_ERR_INVAL, "gh_tmgr_set_oom_observer: NULL manager");
  _gh_tm_lock(tm);
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
    if (k > GH_TM_HEAP_STEP) k = GH_TM_HEAP_STEP;
    /* Single frames: the heap shrinks a frame at a time. */
    gh_tm_pa_t pas[GH_TM_HEAP_STEP];
    gh_pframe_t pfs[GH_TM_HEAP_STEP];
    const size_t dev = gh_tm_device_room(tm, k, NULL);
    size_t got = 0;
    for (; got < k; got++) {
      /* The device heap's frames serve every stream: the host waits for copies. */
      if ((got < dev ? _gh_tm_dev_get(tm, 1, &pas[got], NULL) : _gh_tm_host_get(tm, 1, &pas[got], NULL)) != GH_OK)
        break;
      pfs[got] = pas[got].pf;
    }
    if (got == 0) return _gh_error(GH_ERR_BUDGET, "heap growth: no frame in either tier");
    const size_t v0 = tm->heap_online_f;
    rc = GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, gh_tm_va(tm, v0), pfs, got));
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
  gh_tm_flush(tm);
  gh_tm_reclaim(tm, 0);
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
      gh_tm_unit_t* p = realloc(units, (cap = cap ? 2 * cap : 64) * sizeof *p);
      if (!p) break;
      units = p;
    }
    units[n++] = u, frames += u.k;
  }
  if (n) gh_tm_move(tm, units, n, GH_TIER_DEVICE);  /* one pipelined batch */
  if (rc == GH_OK) rc = gh_tm_move_rc(tm, "gh_tmgr_maintain");  /* (the heap's evictions' too) */
  free(units);
  if (tm->pool_running) pthread_cond_signal(&tm->pool_cv);
  gh_tm_trace(tm, "m %d\n", rc);
  pthread_mutex_unlock(&tm->mu);
  return rc;
}

gh_heap_t* gh_tmgr_heap(gh_tmgr_t* tm) { return tm ? tm->heap : NULL; }

int gh_heap_maintain(gh_heap_t* heap) {
  gh_tmgr_t* tm = heap ? _gh_heap_manager(heap) : NULL;
  return tm ? gh_tmgr_maintain(tm) : _gh_error(GH_ERR_INVAL, "gh_heap_maintain: the heap has no manager");
}
