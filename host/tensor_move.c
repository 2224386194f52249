/* gpuheap, tensor manager: moving units between the tiers (the pipelined
 * move, homeless units, held copies), cleaning, victim choice (the cold
 * list, CLOCK), device room and restores. The design: tensor_impl.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

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
 * first maps the host memory at home (_gh_tm_home_back), so that a kernel
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
int _gh_tm_home_back(gh_tmgr_t* tm, gh_tensor_t* t) {
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
 * (_gh_tm_move_rc). A full tier (GH_ERR_BUDGET) is not one: a move is best
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

/* _gh_tm_move without the accounting. Ordered (tm->ordered, unless
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
  gh_tm_step_t* st = synced == GH_OK ? _gh_malloc(GH_TM_DEPTH * sizeof *st) : NULL;
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
      if (seq && (_gh_tm_capturing(tm, users.s[k]) ||
                  GH_P(tm, tm->ops->stream_wait_value(tm->fr, users.s[k], tm->word, (uint32_t)seq)) != GH_OK))
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
 * something: then tm->move_rc says what, _gh_tm_move_rc). Counted in moves /
 * move_ns. */
size_t _gh_tm_move(gh_tmgr_t* tm, const gh_tm_unit_t* u, size_t n, gh_tier_t to) {
  if (n == 0) return 0;
  const uint64_t t0 = gh_tm_now_ns();
  tm->moves++;
  _gh_tm_in_move = 1;
  const size_t done = gh_tm_move_units(tm, u, n, to);
  _gh_tm_in_move = 0;
  if (to == GH_TIER_HOST && tm->nframes[GH_TIER_HOST] > tm->clean_peak_f) tm->clean_peak_f = tm->nframes[GH_TIER_HOST];
  if (to == GH_TIER_HOST && done) tm->cycle_evicted = 1;
  tm->move_ns += gh_tm_now_ns() - t0;
  return done;
}

/* The first provider failure of this call's moves (tm->move_rc, reset as
 * a call takes the manager: _gh_tm_lock) as its error (`what`: the call),
 * or GH_OK. A restore short of room because the eviction that was to make
 * it failed reports that failure, not the budget. */
int _gh_tm_move_rc(const gh_tmgr_t* tm, const char* what) {
  if (tm->move_rc == GH_OK) return GH_OK;
  return _gh_error(tm->move_rc, "%s: a unit stayed where it was, its data there: %s", what, tm->move_what);
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
 * host memory) and without the mover.
 * GPUHEAP_CLEAN=prefill cleans only until the cycle's first eviction: a
 * forward's first tensors, made while its allocations still take cached
 * runs (no maps), are copied while its compute alone runs; after the
 * budget fills, the maps of new tensors would wait for cleaning copies in
 * flight (a map's access call waits for every copy to the host running:
 * bench/NOTES.md, host side, rows 51 and 122-123), so evictions copy as
 * without cleaning. */

/* Take t out of clean_q. */
void _gh_tm_clean_unqueue(gh_tmgr_t* tm, gh_tensor_t* t) {
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
void _gh_tm_clean_drop(gh_tmgr_t* tm, const gh_tensor_t* t) {
  if (!tm->clean_f) return;
  for (size_t v = t->vf0; v < t->vf0 + t->nvf;) {
    const gh_tm_unit_t u = _gh_tm_unit_of(tm, v);
    gh_tm_clean_drop_unit(tm, u.v0, u.k);
    v = u.v0 + u.k;
  }
}

/* Drop every clean copy (clean tensors are quiet, hence cold). */
void _gh_tm_clean_drop_all(gh_tmgr_t* tm) {
  for (const gh_tensor_t* t = tm->cold_head; t && tm->clean_f; t = t->cnext) _gh_tm_clean_drop(tm, t);
}

/* Clean quiet tensor t's units on the device, as far as the target allows
 * (see above). A provider failure leaves the unit as it was (on the
 * device, not clean) and is returned; a host budget or alias region too
 * full stops the cleaning, with GH_OK. */
int _gh_tm_clean(gh_tmgr_t* tm, gh_tensor_t* t) {
  if (!tm->clean_mode || !tm->split || tm->mover_on || !t->quiet || t->state != GH_T_LIVE || t->pins ||
      tm->vf[t->vf0].role != GH_VF_RUN)
    return GH_OK;
  /* GPUHEAP_CLEAN=ready: the copies are queued at the end of an
   * allocation (after its maps), once the kernels before the advice are
   * done, so that no cleaning copy waits queued on the GPU while the host
   * maps (a map's access call waits for the copies to the host in flight:
   * row 122); until then the tensor waits in clean_q (_gh_tm_clean_poll). */
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
    if (tm->nframes[GH_TIER_HOST] + tm->clean_f + u.k > tm->clean_target_f ||
        (tm->clean_mode == 4 && tm->cycle_evicted)) {
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
void _gh_tm_clean_poll(gh_tmgr_t* tm) {
  while (tm->clean_qn) {
    gh_tensor_t* t = tm->clean_q[0];
    int done = 1;
    for (unsigned i = 0; i < t->quiet && done; i++)
      done = GH_P(tm, tm->ops->event_query(tm->fr, t->quiet_ev[i])) == GH_OK;
    if (!done) return;
    _gh_tm_clean_unqueue(tm, t);
    tm->clean_polling = 1;
    _gh_tm_clean(tm, t);  /* (a refused copy leaves it unclean with nothing lost; no call reports it here) */
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
        gh_tm_cold_t* p = _gh_realloc(out, (cap = cap ? 2 * cap : 64) * sizeof *p);
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
  size_t* idx = _gh_malloc(want * (sizeof *idx + sizeof(gh_tm_unit_t)));
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
  const size_t moved = _gh_tm_move(tm, units, m, GH_TIER_HOST);
  free(idx);
  return moved;
}

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
    _gh_tm_reclaim(tm, 0);
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
size_t _gh_tm_device_room(gh_tmgr_t* tm, size_t k, gh_tm_take_t* take) {
  if ((take || gh_tm_dev_busy(tm) + k > tm->dev_budget_f) && tm->n_pending) {
    _gh_tm_flush(tm);
    _gh_tm_reclaim(tm, 0);
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
int _gh_tm_restore_units(gh_tmgr_t* tm, const gh_tm_unit_t* u, size_t nu, size_t m) {
  if (m == 0) return GH_OK;
  const size_t room = _gh_tm_device_room(tm, m, NULL);
  size_t take = 0, fit = 0;  /* the units that fit in the room */
  while (take < nu && fit + u[take].k <= room) fit += u[take++].k;
  const size_t moved = _gh_tm_move(tm, u, take, GH_TIER_DEVICE);
  if (moved < m && tm->move_rc != GH_OK) return _gh_tm_move_rc(tm, "restore");
  if (moved < m) return _gh_error(GH_ERR_BUDGET, "restore: %zu of %zu frames found no device room", m - moved, m);
  return GH_OK;
}

/* Append the host units of vframes [v0, v0 + n) to u (room for n more);
 * returns how many, *m += their frames. */
size_t _gh_tm_host_units(const gh_tmgr_t* tm, size_t v0, size_t n, gh_tm_unit_t* u, size_t* m) {
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
int _gh_tm_restore_range(gh_tmgr_t* tm, size_t v0, size_t n) {
  gh_tm_unit_t* units = _gh_malloc(n * sizeof *units);
  if (!units) return _gh_error(GH_ERR_NOMEM, "tensor manager: out of memory");
  size_t m = 0;
  const size_t nu = _gh_tm_host_units(tm, v0, n, units, &m);
  tm->prot_lo = v0, tm->prot_hi = v0 + n;
  const int rc = _gh_tm_restore_units(tm, units, nu, m);
  tm->prot_lo = tm->prot_hi = 0;
  free(units);
  return rc;
}
