/* gpuheap, tensor manager: streams and the order of copies -- the streams
 * seen, stream sets and their syncs, the timing of provider calls (GH_P),
 * ordered moves, the restore stream's lanes, the mover thread and the
 * sticky failure. The design: tensor_impl.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

_Thread_local int _gh_tm_in_move; /* this thread is moving frames (vmm_move_ns) */
static _Thread_local int gh_tm_is_mover; /* this thread is the mover */

/* ---------------------------------------------------------------- streams */
/* The stream's order of first use (SIZE_MAX if never seen):
 * _gh_tm_stream_seen adds it, and the trace names streams by it. */
size_t _gh_tm_sidx(const gh_tmgr_t* tm, gh_stream_t s) {
  for (size_t i = 0; i < tm->n_streams; i++)
    if (tm->streams[i] == s) return i;
  return SIZE_MAX;
}
int _gh_tm_stream_seen(gh_tmgr_t* tm, gh_stream_t s) {
  if (_gh_tm_sidx(tm, s) != SIZE_MAX) return GH_OK;
  if (tm->n_streams == tm->cap_streams) {
    const size_t cap = tm->cap_streams ? 2 * tm->cap_streams : 8;
    gh_stream_t* p = _gh_realloc(tm->streams, cap * sizeof *p);
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

static void gh_tm_sset_add(gh_tm_sset_t* ss, gh_stream_t s) {
  for (size_t i = 0; i < ss->n; i++)
    if (ss->s[i] == s) return;
  if (ss->n == ss->cap) {
    const size_t cap = ss->cap ? 2 * ss->cap : 8;
    gh_stream_t* p = _gh_realloc(ss->s, cap * sizeof *p);
    if (!p) {  /* out of memory: fall back to every stream seen */
      ss->all = 1;
      return;
    }
    ss->s = p, ss->cap = cap;
  }
  ss->s[ss->n++] = s;
}

/* A quiet tensor's moves wait for the events of its advice (the work
 * queued before it), others' for the present of their streams. A set with
 * more quiet tensors than it holds waits for the streams of the rest. */
static void gh_tm_sset_tensor(gh_tm_sset_t* ss, const gh_tensor_t* t) {
  if (t->quiet && ss->nq < sizeof ss->nev / sizeof ss->nev[0]) {
    for (size_t i = 0; i < ss->nq; i++)
      if (ss->ev[i] == t->quiet_ev) return;
    ss->ev[ss->nq] = t->quiet_ev, ss->nev[ss->nq++] = t->quiet;
    return;
  }
  if (t->many_streams) ss->all = 1;
  for (unsigned i = 0; i < t->nstreams; i++) gh_tm_sset_add(ss, t->streams[i]);
}

/* The kind of a provider call from its text ("tm->ops->event_sync(...)",
 * "gh_tm_copy_out(...)"). */
static int gh_tm_op_kind(const char* call) {
  static const struct {
    const char* name;
    int kind;
  } ops[] = {{"copy", GH_TM_OP_COPY},           {"gh_tm_copy_out", GH_TM_OP_COPY},
             {"event_record", GH_TM_OP_RECORD}, {"event_query", GH_TM_OP_QUERY},
             {"event_sync", GH_TM_OP_EVENT_SYNC}, {"event_destroy", GH_TM_OP_EVENT_DESTROY},
             {"stream_sync", GH_TM_OP_STREAM_SYNC}, {"stream_wait", GH_TM_OP_STREAM_WAIT}};
  const char* o = strstr(call, "->ops->");
  const char* name = o ? o + 7 : call;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)  /* by prefix: copy_to_host, stream_wait_value too */
    if (!strncmp(name, ops[i].name, strlen(ops[i].name))) return ops[i].kind;
  return GH_TM_OP_OTHER;
}
/* Under pmu: a provider call of GH_P (its site's kind in *kind) that waited
 * for pmu from w0 and ran from t0 until now. */
void _gh_tm_op_time(gh_tmgr_t* tm, int* kind, const char* call, uint64_t w0, uint64_t t0) {
  if (*kind < 0) *kind = gh_tm_op_kind(call);
  tm->op_n[*kind]++, tm->op_ns[*kind] += gh_tm_now_ns() - t0;
  gh_tm_pmu_waited(tm, w0, t0);
}

/* Wait until every stream of the set has reached the present (record an
 * event on each and wait for it, not for the whole device), and for the
 * events of its quiet tensors. Counted in waits / quiet_waits, wait_ns. */
int _gh_tm_sset_sync(gh_tmgr_t* tm, gh_tm_sset_t* ss) {
  int rc = GH_OK;
  const uint64_t t0 = gh_tm_now_ns();
  const gh_stream_t* list = ss->all ? tm->streams : ss->s;
  const size_t n = ss->all ? tm->n_streams : ss->n;
  for (size_t i = 0; i < n && rc == GH_OK; i++) {
    gh_fevent_t e = 0;
    rc = GH_P(tm, tm->ops->event_record(tm->fr, gh_tm_rec_stream(tm, list[i]), &e));
    if (rc == GH_OK) {
      rc = GH_PW(tm, GH_TM_W_DRAIN, tm->ops->event_sync(tm->fr, e));
      GH_P(tm, tm->ops->event_destroy(tm->fr, e));
    }
    tm->waits++;
  }
  for (size_t q = 0; q < ss->nq && rc == GH_OK; q++)
    for (size_t i = 0; i < ss->nev[q] && rc == GH_OK; i++) {
      rc = GH_PW(tm, GH_TM_W_QUIET, tm->ops->event_sync(tm->fr, ss->ev[q][i]));
      tm->quiet_waits++;
    }
  tm->wait_ns += gh_tm_now_ns() - t0;
  free(ss->s);
  memset(ss, 0, sizeof *ss);
  return rc;
}

/* The streams of every tensor with bytes in vframe v. */
void _gh_tm_sset_vframe(const gh_tmgr_t* tm, gh_tm_sset_t* ss, size_t v) {
  const gh_vframe_t* f = &tm->vf[v];
  if (f->role == GH_VF_RUN) {
    if (f->tensors) gh_tm_sset_tensor(ss, f->tensors);
  } else {
    for (const gh_tensor_t* t = f->tensors; t; t = t->fnext) gh_tm_sset_tensor(ss, t);
  }
}

/* Every stream of every tensor with bytes in vframe v, quiet or not (the
 * streams an ordered move makes wait for its copies); all = 1 when a
 * tensor has more than the manager tracks. */
void _gh_tm_sset_users(const gh_tmgr_t* tm, gh_tm_sset_t* ss, size_t v) {
  const gh_vframe_t* f = &tm->vf[v];
  for (const gh_tensor_t* t = f->tensors; t; t = f->role == GH_VF_RUN ? NULL : t->fnext) {
    if (t->many_streams) ss->all = 1;
    for (unsigned i = 0; i < t->nstreams; i++) gh_tm_sset_add(ss, t->streams[i]);
  }
}

/* ---------------------------------------------------------------- ordered moves
 * An ordered move (gh_tm_move_units) does not wait for its copies: the
 * streams of its tensors are made to wait for them (stream_wait), and the
 * host goes on queuing work while they run. What the copies still read is
 * kept from other uses until they are done:
 *   - the old device allocation of an evicted unit (a spare) carries the
 *     event after its copy: a stream that takes it waits for that event,
 *     the host waits before releasing it or unmapping its alias, the copy
 *     stream needs nothing (its copies run in order);
 *   - host memory that an ordered restore gave back to the pool may be
 *     used by the copy stream only until the latest ordered batch's event
 *     (ordered_ev): a tensor placed in it makes its stream wait for that
 *     event, a release waits for it on the host.
 * Every event here is recorded on the copy stream, so a later one implies
 * an earlier one. With a restore stream, restores' events are recorded on
 * restore_stream and the lanes take ordered_ev's place (see "the restore
 * stream" below). */

/* ---------------------------------------------------------------- captures
 * While a stream captures a CUDA graph, CUDA forbids most of what the
 * manager does to its tensors' streams: an event recorded on it becomes a
 * node of the graph, which no host call may query or wait for; it may not
 * wait for an event recorded outside the capture, nor be synchronized; and
 * a forbidden call ends the capture with an error. So while a framework
 * adapter says captures are underway (_gh_tmgr_capture_scope: PyTorch's
 * graph pools, adapters_torch.cc), each of those calls first asks whether
 * its stream captures, and for one that does: an event of its work is
 * recorded on the side stream instead, a wait of it for the GPU is made by
 * the host, a sync of it is skipped, and it does not wait for the mover's
 * word (the host waits for the mover). The work queued on such a stream
 * before its capture began counts as done: PyTorch synchronizes the device
 * before it begins a capture (torch.cuda.graph), and the work captured runs
 * only when the graph is replayed. With no capture underway this costs one
 * atomic load a call. */
int _gh_tm_capturing(gh_tmgr_t* tm, gh_stream_t s) {
  if (!__atomic_load_n(&tm->captures, __ATOMIC_ACQUIRE)) return 0;
  int c = 1;
  if (tm->ops->stream_capturing(tm->fr, s, &c) != GH_OK) c = 1; /* unknown: touching it could end a capture */
  return c;
}

/* Make what `user` queues from now on wait for event e, recorded on
 * stream `on` (a copy stream): `on` itself needs nothing; another stream
 * waits on the GPU; user NULL (the host), or a stream_wait that fails,
 * waits here. */
void _gh_tm_wait_for(gh_tmgr_t* tm, gh_fevent_t e, gh_stream_t on, const gh_stream_t* user, int site) {
  if (user && *user == on) return;
  if (user && !_gh_tm_capturing(tm, *user) && GH_P(tm, tm->ops->stream_wait(tm->fr, *user, e)) == GH_OK) return;
  GH_PW(tm, site, tm->ops->event_sync(tm->fr, e));
}

/* ---------------------------------------------------------------- the restore stream
 * On by default (GPUHEAP_RESTORE_STREAM=0: off, for comparisons;
 * bench/NOTES.md, host side, rows 109-111: the step 7.6-10.3 ms shorter
 * at widths 384-512 in 6 pairs of 7, level at 64): restores copy on a
 * stream of their own (restore_stream) while evictions keep copy_stream, so that an eviction
 * making room in a backward pass does not queue behind the restores ahead
 * of it (row 110: the kernels waiting for that room start earlier; the two
 * directions of PCIe run at once only ~5 ms a step at width 512, since a
 * restore waits for the eviction that frees its room). The order that one
 * stream gave becomes waits, on the GPU, where the two share memory or
 * data:
 *   - a unit's move waits for its last move the other way (the unit's
 *     xstamp): a restore for the eviction copy that wrote its host memory,
 *     an eviction for the restore copy that wrote its device memory;
 *   - an eviction that takes pooled host memory waits for the restore that
 *     gave it back (the allocation's stamp: _gh_tm_host_ready);
 *   - a restore that takes a spare waits for the spare's eviction copy (its
 *     event, as any user of a spare);
 *   - a stream new to a tensor, a host-placed tensor and the pool's
 *     releases wait for both lanes' latest copies (gh_tm_latest_wait),
 *     where they waited for ordered_ev, which stays unused.
 * Held copies (_gh_tm_held_flush) are evictions'. With the mover on
 * (GPUHEAP_MOVER=1) the restore stream stays off. */

static gh_fevent_t gh_tm_lane_newest(const gh_tm_lane_t* l) {
  return l->ev[(l->head + l->n - 1) % GH_TM_LANE_RING];
}
static uint64_t gh_tm_lane_cover(const gh_tm_lane_t* l, size_t i) {
  return l->cover[(l->head + i) % GH_TM_LANE_RING];
}

/* Forget the ring's events up to its i-th (from the oldest); done says
 * they completed. */
void _gh_tm_lane_drop(gh_tmgr_t* tm, gh_tm_lane_t* l, size_t i, int done) {
  if (done && gh_tm_lane_cover(l, i) > l->done) l->done = gh_tm_lane_cover(l, i);
  for (size_t k = 0; k <= i; k++) {
    GH_P(tm, tm->ops->event_destroy(tm->fr, l->ev[l->head]));
    l->head = (l->head + 1) % GH_TM_LANE_RING, l->n--;
  }
}

/* Event e, recorded on lane l's stream after every copy queued there so
 * far, goes to the ring (which owns it from now on). A full ring forgets
 * its oldest event: a wait for its copies takes the next one, later. */
static void gh_tm_lane_push(gh_tmgr_t* tm, gh_tm_lane_t* l, gh_fevent_t e) {
  if (l->n && gh_tm_lane_cover(l, l->n - 1) == l->issued) {  /* nothing new since the newest */
    GH_P(tm, tm->ops->event_destroy(tm->fr, e));
    return;
  }
  if (l->n == GH_TM_LANE_RING)
    _gh_tm_lane_drop(tm, l, 0, GH_P(tm, tm->ops->event_query(tm->fr, l->ev[l->head])) == GH_OK);
  const size_t i = (l->head + l->n) % GH_TM_LANE_RING;
  l->ev[i] = e, l->cover[i] = l->issued, l->n++;
}

/* An event of the ring after every copy queued on lane l so far (recorded
 * now when the ring has none), or 0 when they are known complete or no
 * event could be recorded (then the host waited for the stream). */
gh_fevent_t _gh_tm_lane_mark(gh_tmgr_t* tm, gh_tm_lane_t* l) {
  if (l->issued <= l->done) return 0;
  if (l->n && gh_tm_lane_cover(l, l->n - 1) == l->issued) return gh_tm_lane_newest(l);
  gh_fevent_t e = 0;
  if (GH_P(tm, tm->ops->event_record(tm->fr, l->s, &e)) != GH_OK) {
    GH_PW(tm, GH_TM_W_ORDERED, tm->ops->stream_sync(tm->fr, l->s));
    if (l->n) _gh_tm_lane_drop(tm, l, l->n - 1, 1);
    l->done = l->issued;
    return 0;
  }
  gh_tm_lane_push(tm, l, e);
  return e;
}

/* Make what `user` queues from now on (the host when NULL) wait for lane
 * l's copies up to `stamp` (GH_TM_STAMP_LATEST: all queued so far), on the
 * GPU, with the earliest event of the ring that follows them. */
void _gh_tm_lane_wait(gh_tmgr_t* tm, gh_tm_lane_t* l, uint64_t stamp, const gh_stream_t* user, int site) {
  if (user && *user == l->s) return;  /* the lane's own order */
  if (stamp == GH_TM_STAMP_LATEST || stamp > l->issued) stamp = l->issued;
  if (stamp <= l->done) return;
  size_t i = 0;
  while (i < l->n && gh_tm_lane_cover(l, i) < stamp) i++;
  if (i == l->n) {
    if (!_gh_tm_lane_mark(tm, l)) return;  /* (the host waited) */
    i = l->n - 1;
  }
  const gh_fevent_t e = l->ev[(l->head + i) % GH_TM_LANE_RING];
  if (GH_P(tm, tm->ops->event_query(tm->fr, e)) == GH_OK) {
    _gh_tm_lane_drop(tm, l, i, 1);  /* it and every older one */
    return;
  }
  tm->lane_waits++;
  _gh_tm_wait_for(tm, e, l->s, user, site);
}

/* 1 when the latest ordered batch's copies are done (its event forgotten). */
int _gh_tm_ordered_done(gh_tmgr_t* tm) {
  if (!tm->ordered_ev) return 1;
  if (GH_P(tm, tm->ops->event_query(tm->fr, tm->ordered_ev)) != GH_OK) return 0;
  GH_P(tm, tm->ops->event_destroy(tm->fr, tm->ordered_ev));
  tm->ordered_ev = 0;
  return 1;
}

/* What `user` (the host when NULL) queues from now on waits for the
 * latest ordered batch (with a restore stream: every copy queued on
 * either lane). */
static void gh_tm_latest_wait(gh_tmgr_t* tm, const gh_stream_t* user) {
  if (tm->split) {
    for (int d = 0; d < 2; d++) _gh_tm_lane_wait(tm, &tm->lane[d], GH_TM_STAMP_LATEST, user, GH_TM_W_ORDERED);
  } else if (!_gh_tm_ordered_done(tm)) {
    _gh_tm_wait_for(tm, tm->ordered_ev, tm->copy_stream, user, GH_TM_W_ORDERED);
  }
}

/* Event e follows every copy queued so far on lane l's stream: with a
 * restore stream it goes to the lane's ring, else it becomes the latest
 * ordered batch's event (ordered_ev). Owns e. */
void _gh_tm_ordered_set(gh_tmgr_t* tm, gh_tm_lane_t* l, gh_fevent_t e) {
  if (tm->split) {
    gh_tm_lane_push(tm, l, e);
    return;
  }
  if (tm->ordered_ev) GH_P(tm, tm->ops->event_destroy(tm->fr, tm->ordered_ev));
  tm->ordered_ev = e;
}

/* Spare *pa goes to `user` (see _gh_tm_wait_for): after its copy (an
 * eviction's, on copy_stream). A stream that waits for the copy does so
 * on the GPU: the allocation keeps its event until it backs a tensor
 * (_gh_tm_pa_commit), since it may come back to the spares first (a
 * placement that fails) with the copy still running. */
void _gh_tm_pa_ready(gh_tmgr_t* tm, gh_tm_pa_t* pa, const gh_stream_t* user) {
  if (!pa->ev) return;
  const int done = GH_P(tm, tm->ops->event_query(tm->fr, pa->ev)) == GH_OK;
  if (!done) _gh_tm_wait_for(tm, pa->ev, tm->copy_stream, user, GH_TM_W_SPARE);
  if (done || !user) {
    GH_P(tm, tm->ops->event_destroy(tm->fr, pa->ev));
    pa->ev = 0;
  }
}

/* Allocations pas[0..n) back a tensor now (their users waited for their
 * copies): their events go. */
void _gh_tm_pa_commit(gh_tmgr_t* tm, gh_tm_pa_t* pas, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (pas[i].ev) {
      GH_P(tm, tm->ops->event_destroy(tm->fr, pas[i].ev));
      pas[i].ev = 0;
    }
}

/* Tensor t is used on `stream` from now on. A stream new to it was not
 * made to wait for an ordered move of it that may still be copying: it
 * waits for the latest ordered batch. */
void _gh_tm_stream_join(gh_tmgr_t* tm, gh_tensor_t* t, gh_stream_t stream) {
  for (unsigned i = 0; i < t->nstreams; i++)
    if (t->streams[i] == stream) return;
  gh_tm_latest_wait(tm, &stream);
  if (tm->mover_on) {  /* ... and for its remaps */
    pthread_mutex_lock(&tm->jmu);
    const uint64_t seq = tm->jseq;
    pthread_mutex_unlock(&tm->jmu);
    if (seq && (_gh_tm_capturing(tm, stream) ||
                GH_P(tm, tm->ops->stream_wait_value(tm->fr, stream, tm->word, (uint32_t)seq)) != GH_OK))
      _gh_tm_mover_drain(tm);
  }
  gh_tm_tensor_add_stream(t, stream);
}

/* The work that t's streams (and `stream`, when not NULL) queue from now
 * on waits for event e, recorded on `on` (the host, when there is no
 * stream to wait). */
void _gh_tm_tensor_wait(gh_tmgr_t* tm, const gh_tensor_t* t, const gh_stream_t* stream, gh_fevent_t e,
                        gh_stream_t on) {
  const gh_stream_t* s = t->many_streams ? tm->streams : t->streams;
  const size_t n = t->many_streams ? tm->n_streams : t->nstreams;
  if (stream) _gh_tm_wait_for(tm, e, on, stream, GH_TM_W_USERS);
  for (size_t i = 0; i < n; i++)
    if (!stream || s[i] != *stream) _gh_tm_wait_for(tm, e, on, &s[i], GH_TM_W_USERS);
  if (!stream && n == 0) _gh_tm_wait_for(tm, e, on, NULL, GH_TM_W_USERS);
}

/* Tensor t, prefetched ahead (gh_tensor_prefetch_ahead), is used from now
 * on: its streams wait for its copies (a restore's). */
void _gh_tm_ahead_join(gh_tmgr_t* tm, gh_tensor_t* t, const gh_stream_t* stream) {
  if (!t->ahead_ev) return;
  if (GH_P(tm, tm->ops->event_query(tm->fr, t->ahead_ev)) != GH_OK)
    _gh_tm_tensor_wait(tm, t, stream, t->ahead_ev, tm->restore_stream);
  GH_P(tm, tm->ops->event_destroy(tm->fr, t->ahead_ev));
  t->ahead_ev = 0;
}

/* Pooled host memory *pa goes to `user`: after the latest ordered batch
 * (with a restore stream, an eviction's copy stream waits only for the
 * restore that gave it back). */
void _gh_tm_host_ready(gh_tmgr_t* tm, const gh_tm_pa_t* pa, const gh_stream_t* user) {
  if (user && *user == tm->copy_stream) {
    if (tm->split && pa) _gh_tm_lane_wait(tm, &tm->lane[GH_TM_LANE_RESTORE], pa->stamp, user, GH_TM_W_ORDERED);
    return;
  }
  gh_tm_latest_wait(tm, user);
}

/* ---------------------------------------------------------------- the mover
 * With GPUHEAP_MOVER=1 (off by default: row 31 of bench/NOTES.md found it
 * slower) an ordered move hands its units' home remaps (unmap the old
 * backing, map the new one) to the mover, a thread of the manager's own,
 * and returns:
 * the calling thread goes on queuing kernels while the driver remaps (a
 * remap on another thread does not slow kernel launches: bench_evict
 * --probe-mover, bench/NOTES.md host side row 31). The streams of the
 * moved tensors wait on the GPU until the mover has written the batch's
 * number into a word of pinned host memory (stream_wait_value), as they
 * wait for its copies. The manager's records change at once and the
 * provider's mappings catch up when the mover is done, so every call that
 * could meet memory or addresses with a remap still to come waits until
 * the mover is idle (_gh_tm_mover_drain): every unmap and release (GH_PV),
 * every move, and every wait on the host for work of the tensors' streams
 * (which may wait for the word: holding pmu there would keep the mover
 * from writing it). A remap the driver refuses (it has mapped the same
 * memory before: out of memory for page tables) cannot be undone once the
 * call has returned: it is recorded, later allocations and prefetches fail
 * with GH_ERR_CORRUPT, and the word is written all the same, so that no
 * stream waits forever. Not safe for every caller, which is one more
 * reason it is off: between the mover's unmap and map the home is mapped
 * to nothing, and a copy or memset queued on the tensor then fails (the
 * runtime checks their addresses when they are queued: bench/NOTES.md,
 * host side, row 47); the word orders kernels only. */
void _gh_tm_mover_drain(gh_tmgr_t* tm) {
  if (!tm->mover_on || gh_tm_is_mover) return;
  pthread_mutex_lock(&tm->jmu);
  while (tm->jhead != tm->jn || tm->mover_busy) pthread_cond_wait(&tm->jdone_cv, &tm->jmu);
  pthread_mutex_unlock(&tm->jmu);
}

/* Record the manager's sticky failure (the first one stays): something
 * that cannot be undone once counted done (a remap on the mover, a held
 * copy not queued, a wait for copies that failed). Later allocations,
 * moves and gh_tmgr_maintain fail with GH_ERR_CORRUPT and this text
 * (_gh_tm_mover_failed); frees and destroy still give everything back. */
void _gh_tm_sticky(gh_tmgr_t* tm, int rc, const char* fmt, ...) {
  pthread_mutex_lock(&tm->jmu);
  if (!tm->mover_err) {
    tm->mover_err = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tm->mover_what, sizeof tm->mover_what, fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&tm->jmu);
}

/* A wait for the GPU failed (GH_PW). CUDA reports a copy that failed, or
 * any earlier failure of the context, at the next sync; which of the copies
 * that wait covered ran is not known, and some of them may be moves
 * already counted done (an ordered eviction whose device memory went on
 * to another tensor): their bytes may be lost. So it is sticky. A move
 * waiting for its own copy also undoes itself (gh_tm_move_finish): that
 * unit keeps its bytes where they were. */
void _gh_tm_wait_failed(gh_tmgr_t* tm, int site) {
  static const char* const why[GH_TM_WAITS] = {"a drain before a move", "a quiet advice's events",
                                               "a spare's eviction copy", "the latest moves' copies",
                                               "a move's copies for their users", "a move's own copies",
                                               "pending frees", "a reclaim", "the close"};
  _gh_tm_sticky(tm, GH_ERR_CUDA, "a wait for the GPU failed (%s); copies queued before it may not have run: %s",
               why[site], gh_last_error_detail());
}

void* _gh_tm_mover_main(void* arg) {
  gh_tmgr_t* tm = arg;
  gh_tm_is_mover = 1, _gh_tm_in_move = 1; /* its calls count in vmm_move_ns */
  int relaxed = GH_FRAMES_CAPTURE_RELAXED;  /* as the pool thread's (tensor_mem.c, _gh_tm_pool_main) */
  (void)tm->ops->capture_mode(tm->fr, &relaxed);
  pthread_mutex_lock(&tm->jmu);
  for (;;) {
    while ((tm->jhead == tm->jn || tm->mover_hold) && !tm->mover_stop) pthread_cond_wait(&tm->jcv, &tm->jmu);
    if (tm->jhead == tm->jn) break;
    const gh_tm_job_t j = tm->jobs[tm->jhead++];
    if (tm->jhead == tm->jn) tm->jhead = tm->jn = 0;
    tm->mover_busy = 1;
    pthread_mutex_unlock(&tm->jmu);
    int rc = GH_OK;
    if (j.k) {
      rc = GH_PV(tm, GH_VMM_UNMAP, tm->ops->unmap(tm->fr, j.home, j.k));
      if (rc == GH_OK) rc = GH_PV(tm, GH_VMM_MAP, tm->ops->map(tm->fr, j.home, j.pfs, j.n));
    }
    if (rc != GH_OK)
      _gh_tm_sticky(tm, rc, "the mover could not remap %p (%zu frames): %s", (void*)j.home, j.k,
                   gh_last_error_detail());
    pthread_mutex_lock(&tm->jmu);
    if (j.seq) __atomic_store_n(tm->word, (uint32_t)j.seq, __ATOMIC_RELEASE);
    tm->mover_busy = 0;
    pthread_cond_broadcast(&tm->jdone_cv);
  }
  pthread_mutex_unlock(&tm->jmu);
  return NULL;
}

/* Room for n more jobs (GH_OK), so that a batch's pushes cannot fail. */
int _gh_tm_mover_reserve(gh_tmgr_t* tm, size_t n) {
  pthread_mutex_lock(&tm->jmu);
  int rc = tm->mover_err ? tm->mover_err : GH_OK;
  if (rc == GH_OK && tm->jn + n > tm->jcap) {
    const size_t cap = tm->jn + n > 2 * tm->jcap ? tm->jn + n : 2 * tm->jcap;
    gh_tm_job_t* p = _gh_realloc(tm->jobs, cap * sizeof *p);
    if (p) tm->jobs = p, tm->jcap = cap;
    else rc = GH_ERR_NOMEM;
  }
  pthread_mutex_unlock(&tm->jmu);
  return rc;
}

/* Queue a job (room reserved): unmap k frames at home and map pas there;
 * k == 0: the end of batch seq. */
void _gh_tm_mover_push(gh_tmgr_t* tm, uint8_t* home, size_t k, const gh_tm_pa_t* pas, size_t n, uint64_t seq) {
  pthread_mutex_lock(&tm->jmu);
  gh_tm_job_t* j = &tm->jobs[tm->jn++];
  j->home = home, j->k = k, j->n = n, j->seq = seq;
  for (size_t i = 0; i < n; i++) j->pfs[i] = pas[i].pf;
  pthread_cond_signal(&tm->jcv);
  pthread_mutex_unlock(&tm->jmu);
}

/* End the batch queued since the last one: its number. */
uint64_t _gh_tm_mover_seal(gh_tmgr_t* tm) {
  pthread_mutex_lock(&tm->jmu);
  const uint64_t seq = ++tm->jseq;
  pthread_mutex_unlock(&tm->jmu);
  _gh_tm_mover_push(tm, NULL, 0, NULL, 0, seq);
  return seq;
}

/* The manager's sticky failure (GH_OK if none: see mover_err), recorded
 * as this call's error. */
int _gh_tm_mover_failed(gh_tmgr_t* tm) {
  pthread_mutex_lock(&tm->jmu);
  const int rc = tm->mover_err;
  char what[sizeof tm->mover_what];
  memcpy(what, tm->mover_what, sizeof what);
  pthread_mutex_unlock(&tm->jmu);
  return rc == GH_OK ? GH_OK : _gh_error(GH_ERR_CORRUPT, "%s", what);
}
