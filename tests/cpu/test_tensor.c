/* The tensor manager on the simulated frame provider (no GPU): a randomized
 * sequence of operations checked against a reference model, directed bad
 * inputs, stream-ordered reuse, the cache of mapped device memory (reuse
 * with no provider create, empty_cache, the frame map, the peak), cold
 * advice (victims in advice order, pins respected, batches), exhausted
 * budgets, threads with the host pool running, the framework
 * entry points, and a clean destroy.
 *
 * Budgets are small (device 64 MiB, host 160 MiB, 2 MiB frames) so that
 * eviction and restore happen all the time; events complete only after a
 * few queries, so frees stay pending for a while. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gpuheap.h"
#include "gpuheap/types.h"
#include "gpuheap/cpu.h"
#include "../../host/frames_sim.h"
#include "../../host/internal.h"
#include "../../host/tensor_internal.h"
#include "../test_util.h"

#define MiB ((size_t)1 << 20)

/* ------------------------------------------------------------ patterns */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 33, x *= UINT64_C(0xff51afd7ed558ccd), x ^= x >> 33;
  return x;
}
static uint8_t pat_byte(uint64_t stamp, size_t i) { return (uint8_t)(mix64(stamp + (i >> 3)) >> (8 * (i & 7))); }
/* Bytes [lo, hi) of a tensor stamped `stamp`: word w holds mix64(stamp + w). */
static void pat_fill(uint8_t* p, size_t lo, size_t hi, uint64_t stamp) {
  size_t i = lo;
  for (; i < hi && (i & 7); i++) p[i] = pat_byte(stamp, i);
  for (; i + 8 <= hi; i += 8) *(uint64_t*)(void*)(p + i) = mix64(stamp + (i >> 3));  /* tensors are 256-aligned */
  for (; i < hi; i++) p[i] = pat_byte(stamp, i);
}
/* The first wrong byte in [lo, hi), or SIZE_MAX. */
static size_t pat_check(const uint8_t* p, size_t lo, size_t hi, uint64_t stamp) {
  size_t i = lo;
  for (; i < hi && (i & 7); i++)
    if (p[i] != pat_byte(stamp, i)) return i;
  for (; i + 8 <= hi; i += 8)
    if (*(const uint64_t*)(const void*)(p + i) != mix64(stamp + (i >> 3))) break;
  for (; i < hi; i++)
    if (p[i] != pat_byte(stamp, i)) return i;
  return SIZE_MAX;
}

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state += UINT64_C(0x9E3779B97F4A7C15);
  return mix64(rng_state ^ (rng_state >> 29));
}
static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static int open_fds(void) {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* ------------------------------------------------------------ reference model */
typedef struct ref_s {
  uint8_t* p;
  size_t bytes;
  uint64_t stamp;
  gh_kind_t kind;
  uint32_t pins;
  int ahead;  /* prefetched ahead: untouched until its next prefetch (ref_use) */
  int quiet;  /* advised quiet: untouched until its next prefetch, pin or advice (ref_use) */
} ref_t;

typedef struct model_s {
  ref_t* t;
  size_t n, cap;
  size_t bytes;  /* live requested bytes */
} model_t;

static uint64_t oom_calls;
static size_t gh_sim_leak_base;  /* leaks the provider test made on purpose */
static void on_oom(void* user, size_t bytes, const gh_tmgr_stats_t* s) {
  (void)bytes, (void)s;
  __atomic_fetch_add((uint64_t*)user, 1, __ATOMIC_RELAXED);
}

static void check_one(const ref_t* r, int full) {
  size_t bad;
  if (full || r->bytes <= 8192) {
    bad = pat_check(r->p, 0, r->bytes, r->stamp);
  } else {
    const size_t at = (size_t)(rnd() % (r->bytes - 4096));
    bad = pat_check(r->p, 0, 256, r->stamp);
    if (bad == SIZE_MAX) bad = pat_check(r->p, r->bytes - 256, r->bytes, r->stamp);
    if (bad == SIZE_MAX) bad = pat_check(r->p, at, at + 4096, r->stamp);
  }
  CHECK_MSG(bad == SIZE_MAX, "tensor %p (%zu bytes, kind %d) damaged at byte %zu", (void*)r->p, r->bytes, (int)r->kind,
            bad);
}

static void check_stats(gh_tmgr_t* tm, const model_t* m) {
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  size_t cnt[GH_KIND_COUNT] = {0}, bytes[GH_KIND_COUNT] = {0}, pinned = 0;
  for (size_t i = 0; i < m->n; i++) {
    cnt[m->t[i].kind]++, bytes[m->t[i].kind] += m->t[i].bytes;
    pinned += m->t[i].pins > 0;
  }
  for (int k = 0; k < GH_KIND_COUNT; k++) {
    CHECK_EQ_U64(s.tensors[k], cnt[k]);
    CHECK_EQ_U64(s.tensor_bytes[k], bytes[k]);
    CHECK_EQ_U64(s.tensor_bytes_tier[k][GH_TIER_DEVICE] + s.tensor_bytes_tier[k][GH_TIER_HOST], bytes[k]);
    CHECK_EQ_U64(s.tensor_bytes_tier[k][GH_TIER_NONE], 0);
  }
  CHECK_EQ_U64(s.pinned_tensors, pinned);
  size_t all = 0;
  for (int k = 0; k < GH_KIND_COUNT; k++) all += bytes[k];
  CHECK(s.peak_tensor_bytes >= all);
  const size_t fb = s.frame_bytes;
  CHECK((s.frames[GH_TIER_DEVICE] + s.heap_frames[GH_TIER_DEVICE] + s.cached_frames) * fb <= s.device_budget);
  CHECK((s.frames[GH_TIER_HOST] + s.heap_frames[GH_TIER_HOST] + s.host_pool_frames) * fb <= s.host_budget);
  CHECK_EQ_U64(s.oom_events, __atomic_load_n(&oom_calls, __ATOMIC_RELAXED));
  const int rc = _gh_tmgr_check(tm);
  CHECK_MSG(rc == GH_OK, "%s", gh_last_error_detail());
}

/* gh_tmgr_frame_map against the statistics: every mapped frame listed once,
 * in address order, by tier (cached frames are device frames), the live
 * bytes; with no pending free, the frames with no tensor are the cache. */
static void check_frame_map(gh_tmgr_t* tm) {
  gh_tmgr_stats_t s;
  size_t n = 0, n2 = 0;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK(gh_tmgr_frame_map(tm, NULL, 0, &n) == GH_OK);
  gh_frame_info_t* fi = calloc(n + 1, sizeof *fi);
  CHECK(gh_tmgr_frame_map(tm, fi, n + 1, &n2) == GH_OK && n2 == n);
  if (n) CHECK(gh_tmgr_frame_map(tm, fi, 1, &n2) == GH_OK && n2 == n);  /* a short array: the count of all */
  CHECK(gh_tmgr_frame_map(tm, fi, n, &n2) == GH_OK && n2 == n);
  size_t tier[GH_TIER_COUNT] = {0}, empty = 0, used = 0, want = 0;
  for (size_t i = 0; i < n; i++) {
    CHECK(i == 0 || fi[i].va > fi[i - 1].va);
    CHECK(fi[i].tier == GH_TIER_DEVICE || fi[i].tier == GH_TIER_HOST);
    CHECK(!fi[i].heap && fi[i].kind < GH_KIND_COUNT);
    tier[fi[i].tier]++;
    empty += fi[i].tensors == 0;
    used += fi[i].used_bytes;
    CHECK(fi[i].used_bytes <= s.frame_bytes);
  }
  for (int k = 0; k < GH_KIND_COUNT; k++) want += s.tensor_bytes[k];
  CHECK_EQ_U64(tier[GH_TIER_DEVICE], s.frames[GH_TIER_DEVICE] + s.cached_frames);
  CHECK_EQ_U64(tier[GH_TIER_HOST], s.frames[GH_TIER_HOST]);
  CHECK_EQ_U64(used, want);
  if (s.pending_frees == 0) CHECK_EQ_U64(empty, s.cached_frames);
  free(fi);
}

/* gh_tmgr_tensor_map against the model: in address order; every model
 * tensor listed once, live, with its size, kind and pin; the others
 * pending frees; no two extents overlap; a pinned tensor all on the
 * device. */
static void check_tensor_map(gh_tmgr_t* tm, const model_t* m) {
  size_t n = 0, n2 = 0;
  CHECK(gh_tmgr_tensor_map(tm, NULL, 0, &n) == GH_OK);
  gh_tensor_info_t* ti = calloc(n + 1, sizeof *ti);
  CHECK(gh_tmgr_tensor_map(tm, ti, n + 1, &n2) == GH_OK && n2 == n);
  if (n > 1) {  /* a short array: the lowest addresses, the count of all */
    gh_tensor_info_t two[2];
    CHECK(gh_tmgr_tensor_map(tm, two, 2, &n2) == GH_OK && n2 == n);
    CHECK(two[0].ptr == ti[0].ptr && two[1].ptr == ti[1].ptr);
  }
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  size_t live = 0, pending = 0;
  for (size_t i = 0; i < n; i++) {
    const gh_tensor_info_t* t = &ti[i];
    CHECK(i == 0 || (t->ptr > ti[i - 1].ptr && t->ptr >= ti[i - 1].ptr + ti[i - 1].extent));
    CHECK_MSG(t->bytes > 0 && t->bytes <= t->span && t->span <= t->extent && t->device_bytes <= t->span,
              "tensor map: %#llx bytes %llu span %llu extent %llu device %llu", (unsigned long long)t->ptr,
              (unsigned long long)t->bytes, (unsigned long long)t->span, (unsigned long long)t->extent,
              (unsigned long long)t->device_bytes);
    CHECK(t->kind < GH_KIND_COUNT);
    if (t->pending) {
      pending++;
      CHECK(!t->pinned);
      continue;
    }
    live++;
    size_t j = 0;
    while (j < m->n && (uintptr_t)m->t[j].p != t->ptr) j++;
    CHECK_MSG(j < m->n, "tensor map: %#llx is no live tensor", (unsigned long long)t->ptr);
    if (j == m->n) continue;
    CHECK_EQ_U64(t->bytes, m->t[j].bytes);
    CHECK_EQ_U64(t->kind, m->t[j].kind);
    CHECK_EQ_U64(t->pinned, m->t[j].pins > 0);
    if (t->pinned) CHECK_EQ_U64(t->device_bytes, t->span);
  }
  CHECK_EQ_U64(live, m->n);
  CHECK_EQ_U64(pending, s.pending_frees);
  free(ti);
}

/* The history of a run with a ring large enough to drop nothing, replayed:
 * each alloc of an address not live or pending, each free request of a
 * live one, each completion of a pending one; the live addresses at the
 * end are the model's, as many OOM entries as refusals. */
static void check_history(gh_tmgr_t* tm, const model_t* m, uint64_t oom_events) {
  size_t n = 0;
  uint64_t dropped = 1;
  CHECK(gh_tmgr_history(tm, NULL, 0, &n, &dropped) == GH_OK && dropped == 0);
  gh_hist_entry_t* e = calloc(n + 1, sizeof *e);
  size_t n2 = 0;
  CHECK(gh_tmgr_history(tm, e, n, &n2, NULL) == GH_OK && n2 == n);
  /* addr -> state (1 live, 2 pending) in a small open-addressing table */
  const size_t cap = 2 * n + 16;
  uint64_t* key = calloc(cap, sizeof *key);
  uint8_t* st = calloc(cap, 1);
  uint64_t ooms = 0;
  size_t live = 0;
  for (size_t i = 0; i < n; i++) {
    CHECK(i == 0 || e[i].time_ns >= e[i - 1].time_ns);
    if (e[i].action == GH_HIST_OOM) {
      ooms++;
      CHECK(e[i].addr == 0 && e[i].size > 0);
      continue;
    }
    size_t h = (size_t)(e[i].addr / GH_TM_ALIGN * 0x9E3779B97F4A7C15ull) % cap;
    while (key[h] && key[h] != e[i].addr) h = (h + 1) % cap;
    key[h] = e[i].addr;
    const uint8_t was = st[h];
    switch (e[i].action) {
      case GH_HIST_ALLOC: CHECK_MSG(was == 0, "history %zu: alloc of %#llx in state %d", i,
                                    (unsigned long long)e[i].addr, was); st[h] = 1, live++; break;
      case GH_HIST_FREE_REQUESTED: CHECK_MSG(was == 1, "history %zu: free of %#llx in state %d", i,
                                             (unsigned long long)e[i].addr, was); st[h] = 2, live--; break;
      case GH_HIST_FREE_COMPLETED: CHECK_MSG(was == 2, "history %zu: completion of %#llx in state %d", i,
                                             (unsigned long long)e[i].addr, was); st[h] = 0; break;
      default: CHECK_MSG(0, "history %zu: action %d", i, e[i].action);
    }
  }
  CHECK_EQ_U64(live, m->n);
  for (size_t j = 0; j < m->n; j++) {
    size_t h = (size_t)((uintptr_t)m->t[j].p / GH_TM_ALIGN * 0x9E3779B97F4A7C15ull) % cap;
    while (key[h] && key[h] != (uintptr_t)m->t[j].p) h = (h + 1) % cap;
    CHECK(st[h] == 1);
  }
  CHECK_EQ_U64(ooms, oom_events);
  free(key), free(st), free(e);
}

/* A manager on the simulation; low: its low watermark (0: the default). */
static gh_tmgr_t* make_tm_low(size_t dev_mib, size_t host_mib, uint32_t pool, uint32_t lag, double low) {
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_SIM;
  if (low > 0) o.low_watermark = low;
  o.device_budget = dev_mib * MiB;
  o.host_budget = host_mib * MiB;
  o.host_pool_frames = pool;
  gh_tmgr_t* tm = NULL;
  oom_calls = 0;  /* one manager at a time checks it */
  CHECK(gh_tmgr_create(&tm, &o) == GH_OK);
  if (tm) {
    /* The simulated tiers are a little larger than the budgets: the
     * manager's own accounting must keep it inside. */
    CHECK(_gh_tmgr_sim_configure(tm, lag, dev_mib * MiB / GH_SIM_FRAME_BYTES + 4,
                                 host_mib * MiB / GH_SIM_FRAME_BYTES + 4) == GH_OK);
    CHECK(gh_tmgr_set_oom_observer(tm, on_oom, &oom_calls) == GH_OK);
  }
  return tm;
}
static gh_tmgr_t* make_tm(size_t dev_mib, size_t host_mib, uint32_t pool, uint32_t lag) {
  return make_tm_low(dev_mib, host_mib, pool, lag, 0);
}
/* make_tm with GPUHEAP_CLEAN=mode, the variable then put back as it was
 * (test_tensor_clean runs the whole suite with it set). */
static gh_tmgr_t* make_clean_tm(const char* mode, size_t dev_mib, size_t host_mib, uint32_t pool, uint32_t lag) {
  const char* was = getenv("GPUHEAP_CLEAN");
  char* saved = was ? strdup(was) : NULL;
  setenv("GPUHEAP_CLEAN", mode, 1);
  gh_tmgr_t* tm = make_tm(dev_mib, host_mib, pool, lag);
  if (saved)
    setenv("GPUHEAP_CLEAN", saved, 1);
  else
    unsetenv("GPUHEAP_CLEAN");
  free(saved);
  return tm;
}

static void ref_use(gh_tmgr_t* tm, ref_t* r);

/* Free everything, drain pending frees, check nothing is left, destroy. */
static void drain_and_destroy(gh_tmgr_t* tm, model_t* m) {
  for (size_t i = 0; i < m->n; i++) {
    ref_use(tm, &m->t[i]);
    check_one(&m->t[i], 1);
    CHECK(gh_tensor_free(tm, m->t[i].p, NULL) == GH_OK);
  }
  m->n = 0, m->bytes = 0;
  gh_tmgr_stats_t s;
  for (int i = 0; i < 10000; i++) {
    CHECK(gh_tmgr_maintain(tm) == GH_OK);
    CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
    if (s.pending_frees == 0) break;
  }
  CHECK_EQ_U64(s.pending_frees, 0);
  /* Freed device memory stays mapped in the cache until emptied. */
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK_EQ_U64(s.cached_frames, 0);
  CHECK_EQ_U64(s.frames[GH_TIER_DEVICE], 0);
  CHECK_EQ_U64(s.frames[GH_TIER_HOST], 0);
  size_t dev = 99, host = 99;
  CHECK(_gh_tmgr_sim_live(tm, GH_TIER_DEVICE, &dev) == GH_OK);
  CHECK(_gh_tmgr_sim_live(tm, GH_TIER_HOST, &host) == GH_OK);
  CHECK_EQ_U64(dev, 0);
  /* Host frames left are the pool's (or an allocation the pool thread is
   * creating: a frame, or a chunk's slab). */
  CHECK(host <= s.host_pool_frames + GH_TM_CHUNK_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
  CHECK_EQ_U64(_gh_frames_sim_leaked_total(), gh_sim_leak_base);
}

/* ------------------------------------------------------------ randomized */
static const gh_stream_t streams[3] = {NULL, (gh_stream_t)(uintptr_t)0x1000, (gh_stream_t)(uintptr_t)0x2000};

static size_t rand_size(void) {
  const unsigned r = (unsigned)rnd_below(100);
  if (r < 55) return 1 + rnd_below(64 * 1024);                 /* small: shared frames */
  if (r < 70) return 64 * 1024 + rnd_below(GH_TM_SMALL_MAX);   /* up to about a frame */
  return MiB + rnd_below(5 * MiB);                              /* frame runs */
}

static uint64_t random_restores, random_evictions, random_moves, random_waits, random_homeless; /* over all seeds */
static uint64_t random_room[2]; /* gh_tensor_prefetch_room of a tensor on the host: done, refused */
static uint64_t random_clean[4]; /* _gh_tmgr_clean_counts over all seeds */
static uint64_t random_ordered; /* over the seeds with deferred copies */
static uint64_t random_early;   /* ... copies run early (eager runs) */
/* random_run with the simulation's copies deferred: the test's reads and
 * writes stand for kernels on its streams, so each first lets the three
 * streams' queued work run (_gh_tmgr_sim_run): a copy that none of them
 * was made to wait for is still pending then, and the data check fails. */
static int random_defer;
static void run_streams(gh_tmgr_t* tm) {
  if (!random_defer) return;
  for (int i = 0; i < 3; i++) CHECK(_gh_tmgr_sim_run(tm, streams[i]) == GH_OK);
}

/* Tensor r is about to be touched: if it was prefetched ahead, its next
 * prefetch first (gh_tensor_prefetch_ahead's promise), then the streams'
 * work runs (the copies they now wait for). */
static void ref_use(gh_tmgr_t* tm, ref_t* r) {
  if (!r->ahead && !r->quiet) return;
  const int rc = gh_tensor_prefetch(tm, r->p, streams[rnd_below(3)]);
  CHECK_MSG(rc == GH_OK || rc == GH_ERR_BUDGET, "prefetch after ahead: %s", gh_err_name(rc));
  r->ahead = r->quiet = 0; /* a prefetch that found no room still ends a quiet advice (home mapped) */
  run_streams(tm);
}

static void random_run(uint64_t seed, size_t ops) {
  rng_state = seed;
  const char* mv = getenv("GPUHEAP_MOVER");
  const int mover_on = mv && *mv == '1'; /* evict_ahead then advises only */
  gh_tmgr_t* tm = make_tm(64, 160, 4 + 3 * (uint32_t)(seed % 2) * 8, 1 + (uint32_t)(seed % 4));
  if (!tm) return;
  /* Chunks of 2 or 3 frames (of 1-3 frame tensors) for two seeds, so that
   * multi-frame allocations, pooled host slabs and single-frame tails all
   * move; the default (32: a frame run is one chunk here) for the others. */
  if (seed <= 2) CHECK(_gh_tmgr_set_chunk(tm, 1 + (size_t)seed) == GH_OK);
  if (random_defer) CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  /* ... and copies that nothing waits for yet run early at random, as a
   * GPU may run them (a wait missing in either direction shows) */
  if (random_defer) CHECK(_gh_tmgr_sim_eager(tm, seed * 7919 + 1, NULL) == GH_OK);
  /* With GPUHEAP_CLEAN: a target that lets quiet tensors be cleaned while
   * the host has room, whatever the cycles (random ops have none). */
  if (getenv("GPUHEAP_CLEAN")) CHECK(_gh_tmgr_set_clean_target(tm, 160) == GH_OK);
  CHECK(gh_tmgr_record_history(tm, 4 * ops + 64) == GH_OK);  /* (at most ~2 entries an op and the frees) */
  model_t m = {0};
  m.cap = 4096;
  m.t = calloc(m.cap, sizeof *m.t);
  size_t max_pending = 0, budget_fails = 0, pin_fails = 0, allocs = 0;
  size_t pinned_bytes = 0, again = 0, reallocs = 0;
  for (size_t op = 0; op < ops; op++) {
    unsigned r = (unsigned)rnd_below(100);
    if (m.bytes > 180 * MiB && r < 40) r = 40;  /* keep both budgets nearly spent */
    if (m.n == 0 || again) r = 0;
    ref_t* x = m.n ? &m.t[rnd_below(m.n)] : NULL;
    if (r < 40) {  /* alloc */
      const size_t bytes = again ? again : rand_size();
      reallocs += again != 0;
      again = 0;
      const gh_kind_t kind = (gh_kind_t)rnd_below(GH_KIND_COUNT);
      void* p = (void*)1;
      const uint64_t before = oom_calls;
      const int rc = gh_tensor_alloc(tm, bytes, kind, streams[rnd_below(3)], &p);
      if (rc == GH_OK) {
        CHECK(p != NULL && ((uintptr_t)p % GH_TM_ALIGN) == 0);
        for (size_t i = 0; i < m.n; i++)  /* no overlap with a live tensor */
          CHECK(!((uint8_t*)p < m.t[i].p + m.t[i].bytes && m.t[i].p < (uint8_t*)p + bytes));
        if (m.n == m.cap) m.t = realloc(m.t, (m.cap *= 2) * sizeof *m.t);
        ref_t* n = &m.t[m.n++];
        *n = (ref_t){.p = p, .bytes = bytes, .stamp = rnd(), .kind = kind};
        run_streams(tm);
        pat_fill(n->p, 0, bytes, n->stamp);
        m.bytes += bytes;
        allocs++;
      } else {
        CHECK_MSG(rc == GH_ERR_BUDGET, "alloc: %s (%s)", gh_err_name(rc), gh_last_error_detail());
        CHECK(p == NULL);
        CHECK_EQ_U64(oom_calls, before + 1);
        /* Refused only when the budgets are really spent (half of the
         * 224 MiB in requested bytes: frame runs round up, slabs fragment). */
        CHECK_MSG(m.bytes + bytes > 112 * MiB, "refused %zu bytes with only %zu live", bytes, m.bytes);
        budget_fails++;
      }
    } else if (r < 62) {  /* free (its pins go with it; prefetched ahead or quiet: freed untouched half the time) */
      if (!(x->ahead || x->quiet) || rnd_below(2)) {
        ref_use(tm, x);
        run_streams(tm);
        check_one(x, 0);
      }
      CHECK(gh_tensor_free(tm, x->p, streams[rnd_below(3)]) == GH_OK);
      if (x->pins) pinned_bytes -= x->bytes;
      m.bytes -= x->bytes;
      /* A realloc half the time: the same size next, on a random stream
       * (the freed memory serves it once its event completed). */
      if (rnd_below(2)) again = x->bytes;
      *x = m.t[--m.n];
    } else if (r < 70 && rnd_below(2) == 0) {  /* advice: a mark, nothing moves */
      gh_tmgr_stats_t s0, s1;
      gh_tmgr_stats(tm, &s0);
      /* quiet: its evictions leave its home unmapped, so it is touched only
       * after its next prefetch, pin or advice (ref_use) */
      const unsigned a = (unsigned)rnd_below(4);
      const gh_advice_t adv = a == 0 ? GH_ADVICE_NORMAL : a == 1 ? GH_ADVICE_COLD : GH_ADVICE_QUIET;
      CHECK(gh_tensor_advise(tm, x->p, adv) == GH_OK);
      x->quiet = adv == GH_ADVICE_QUIET;
      gh_tmgr_stats(tm, &s1);
      CHECK(s1.evictions == s0.evictions && s1.restores == s0.restores);
    } else if (r < 70) {  /* evict hint */
      gh_tmgr_stats_t s0;
      gh_tmgr_stats(tm, &s0);
      const size_t need = (x->bytes + s0.frame_bytes - 1) / s0.frame_bytes;
      const int room = (s0.frames[GH_TIER_HOST] + need + 5) * s0.frame_bytes <= s0.host_budget;
      /* ahead half the time: quiet, untouched until its next use (ref_use),
       * its copies queued for no stream to wait for */
      const int ahead = rnd_below(2) == 0;
      const int rc = (ahead ? gh_tensor_evict_ahead : gh_tensor_evict)(tm, x->p);
      CHECK(rc == (x->pins ? GH_ERR_PINNED : GH_OK));
      if (rc == GH_OK) x->quiet = ahead; /* a cold mark ends a quiet advice; ahead gives one */
      if (rc == GH_OK && x->bytes >= GH_TM_SMALL_MAX && room && (!ahead || !mover_on)) {
        /* A frame-run tensor that is cold goes to the host at once when
         * the host tier has room (the pool may hold one frame in flight). */
        gh_tier_t tier = GH_TIER_NONE;
        CHECK(gh_tensor_tier(tm, x->p, &tier) == GH_OK);
        CHECK_MSG(tier == GH_TIER_HOST, "evicted tensor of %zu bytes in tier %d", x->bytes, (int)tier);
      }
    } else if (r < 78) {  /* prefetch (ahead a third of the time) */
      const int ahead = rnd_below(3) == 0;
      gh_tier_t was = GH_TIER_NONE;
      CHECK(gh_tensor_tier(tm, x->p, &was) == GH_OK);
      if (ahead && was == GH_TIER_HOST && !x->ahead && !x->quiet) {  /* new bytes where it is, so that a stale copy shows */
        x->stamp = rnd();
        run_streams(tm);
        pat_fill(x->p, 0, x->bytes, x->stamp);
      }
      /* Half of those ahead only where there is room (gh_tensor_prefetch_room:
       * refused with nothing changed otherwise). */
      const int room = ahead && rnd_below(2);
      const int rc = room ? gh_tensor_prefetch_room(tm, x->p, streams[rnd_below(3)], rnd_below(2) * MiB)
                          : (ahead ? gh_tensor_prefetch_ahead : gh_tensor_prefetch)(tm, x->p, streams[rnd_below(3)]);
      CHECK_MSG(rc == GH_OK || rc == GH_ERR_BUDGET, "prefetch: %s", gh_err_name(rc));
      if (room && was == GH_TIER_HOST) random_room[rc != GH_OK]++;
      if (room && rc != GH_OK) {  /* refused: where it was, as it was (ahead, quiet) */
        gh_tier_t now = GH_TIER_NONE;
        CHECK(gh_tensor_tier(tm, x->p, &now) == GH_OK && now == was);
      } else {
        x->ahead = ahead || (x->ahead && rc != GH_OK);
        x->quiet = 0;
      }
      if (ahead && rnd_below(2) && !(room && rc != GH_OK)) {  /* used at once: its copies may still be deferred */
        ref_use(tm, x);
        check_one(x, 0);
      }
      if (rc == GH_OK) {
        gh_tier_t tier = GH_TIER_NONE;
        CHECK(gh_tensor_tier(tm, x->p, &tier) == GH_OK && tier == GH_TIER_DEVICE);
      }
    } else if (r < 84) {  /* pin: keep pinned bytes well below the device budget */
      if (x->pins || pinned_bytes + x->bytes < 24 * MiB) {
        const int rc = gh_tensor_pin(tm, x->p);
        CHECK_MSG(rc == GH_OK || rc == GH_ERR_BUDGET, "pin: %s", gh_err_name(rc));
        if (rc == GH_OK) {
          x->ahead = x->quiet = 0;  /* a pin is a use */
          if (x->pins++ == 0) pinned_bytes += x->bytes;
        } else {
          pin_fails++;
        }
      }
    } else if (r < 90) {  /* unpin */
      const int rc = gh_tensor_unpin(tm, x->p);
      CHECK(rc == (x->pins ? GH_OK : GH_ERR_INVAL));
      if (x->pins && --x->pins == 0) pinned_bytes -= x->bytes;
    } else if (r < 93) {  /* set kind */
      const gh_kind_t k = (gh_kind_t)rnd_below(GH_KIND_COUNT);
      CHECK(gh_tensor_set_kind(tm, x->p, k) == GH_OK);
      x->kind = k;
    } else if (r < 97) {  /* rewrite: writes to evicted frames land too */
      ref_use(tm, x);
      x->stamp = rnd();
      run_streams(tm);
      pat_fill(x->p, 0, x->bytes, x->stamp);
    } else {
      CHECK(gh_tmgr_maintain(tm) == GH_OK);
    }
    /* After each op: a sample of tensors, every pinned one on the device,
     * the statistics against the model. */
    run_streams(tm);
    for (int k = 0; k < 2 && m.n; k++) {
      ref_t* y = &m.t[rnd_below(m.n)];
      ref_use(tm, y);
      check_one(y, 0);
    }
    for (size_t i = 0; i < m.n; i++)
      if (m.t[i].pins) {
        gh_tier_t tier = GH_TIER_NONE;
        CHECK(gh_tensor_tier(tm, m.t[i].p, &tier) == GH_OK && tier == GH_TIER_DEVICE);
      }
    check_stats(tm, &m);
    if (op % 50 == 0) check_frame_map(tm), check_tensor_map(tm, &m);
    if (op % 300 == 150) {  /* now and then everything cached goes */
      CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
      gh_tmgr_stats_t s;
      CHECK(gh_tmgr_stats(tm, &s) == GH_OK && s.cached_frames == 0 && s.pending_frees == 0);
      check_frame_map(tm);
    }
    gh_tmgr_stats_t s;
    gh_tmgr_stats(tm, &s);
    if (s.pending_frees > max_pending) max_pending = s.pending_frees;
    if (gh_test_failures > 20) break;
  }
  run_streams(tm);
  for (size_t i = 0; i < m.n; i++) {
    ref_use(tm, &m.t[i]);
    check_one(&m.t[i], 1);
  }
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  check_tensor_map(tm, &m);
  check_history(tm, &m, s.oom_events);
  printf("seed %llu: %zu ops, %zu allocs (%zu reallocs), %zu refused, %zu pins refused, %llu evictions, "
         "%llu restores, max pending %zu, cached %zu frames\n",
         (unsigned long long)seed, ops, allocs, reallocs, budget_fails, pin_fails, (unsigned long long)s.evictions,
         (unsigned long long)s.restores, max_pending, s.cached_frames);
  /* Over all seeds (a short run, as under GH_TEST_SCALE, may have none):
   * evictions, restores, homeless evictions (quiet advice), and batches of
   * moves, each counted and timed after a wait for its streams. */
  uint64_t homeless = 0;
  CHECK(_gh_tmgr_homeless(tm, &homeless) == GH_OK);
  random_restores += s.restores, random_evictions += s.evictions, random_homeless += homeless;
  random_moves += s.moves, random_waits += s.stream_waits;
  if (ops >= 1000) CHECK(s.evictions > 0 && s.moves > 0 && s.move_ns > 0 && s.stream_waits > 0);
  /* (bytes evicted: a clean unit's at its copy, evicted or dropped later) */
  uint64_t cn[4] = {0};
  size_t clean_now = 0;
  CHECK(_gh_tmgr_clean_counts(tm, cn, &clean_now, NULL) == GH_OK);
  CHECK(cn[0] == cn[1] + cn[2] + clean_now);
  for (int k = 0; k < 4; k++) random_clean[k] += cn[k];
  CHECK(s.bytes_evicted == (s.evictions - cn[1] + cn[0]) * s.frame_bytes &&
        s.bytes_restored == s.restores * s.frame_bytes);
  CHECK((s.moves > 0) == (s.move_ns > 0));
  CHECK(max_pending > 0);
  if (random_defer) random_ordered += s.ordered_moves;
  uint64_t early = 0;
  if (random_defer) CHECK(_gh_tmgr_sim_eager(tm, 0, &early) == GH_OK);
  random_early += early;
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* ------------------------------------------------------------ directed */
static void bad_inputs(void) {
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_SIM;
  gh_tmgr_t* bad = (gh_tmgr_t*)1;
  o.low_watermark = 0;
  CHECK(gh_tmgr_create(&bad, &o) == GH_ERR_INVAL && bad == NULL);
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_CUDA_VMM;  /* not in the CPU library */
  CHECK(gh_tmgr_create(&bad, &o) == GH_ERR_UNSUPPORTED && bad == NULL);
  o.backend = GH_BACKEND_SIM;
  o.device_budget = 64 * MiB, o.host_budget = 64 * MiB;
  o.heap_bytes = 128 * MiB;  /* a heap larger than the device budget */
  CHECK(gh_tmgr_create(&bad, &o) == GH_ERR_BUDGET && bad == NULL);
  CHECK(strstr(gh_last_error_detail(), "exceeds the device budget") != NULL);
  CHECK(gh_tmgr_create(NULL, &o) == GH_ERR_INVAL);
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
  {
    /* A stream the driver will not create: the copy stream (the first),
     * then the restore stream (the second; with GPUHEAP_RESTORE_STREAM=0
     * there is none and the manager is made). Either way the error is the
     * provider's and nothing is left behind: no frames, and no stream or
     * event for the frames' close to clean up. */
    o.heap_bytes = 0;
    const char* was = getenv("GPUHEAP_RESTORE_STREAM");
    const char* mover = getenv("GPUHEAP_MOVER");  /* (the mover keeps restores on the copy stream) */
    const int split = !(was && *was == '0') && !(mover && *mover && *mover != '0');
    const size_t leaked = _gh_frames_sim_leaked_total();
    for (uint32_t nth = 1; nth <= 2; nth++) {
      _gh_frames_sim_fail_stream(nth);
      bad = (gh_tmgr_t*)1;
      const int rc = gh_tmgr_create(&bad, &o);
      _gh_frames_sim_fail_stream(0);
      if (nth == 1 || split) {
        CHECK_MSG(rc == GH_ERR_CUDA && bad == NULL, "stream %u refused: rc %d", nth, rc);
        CHECK(strstr(gh_last_error_detail(), "refused on purpose") != NULL);
      } else {
        CHECK(rc == GH_OK && bad != NULL);
      }
      if (rc == GH_OK) CHECK(gh_tmgr_destroy(bad) == GH_OK);
      CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
      CHECK_EQ_U64(_gh_frames_sim_leaked_total(), leaked);
    }
  }

  gh_tmgr_t* tm = make_tm(16, 32, 2, 2);
  if (!tm) return;
  void* p = NULL;
  CHECK(gh_tensor_alloc(NULL, 100, GH_KIND_WEIGHTS, NULL, &p) == GH_ERR_INVAL);
  CHECK(gh_tensor_alloc(tm, 100, GH_KIND_WEIGHTS, NULL, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_alloc(tm, 0, GH_KIND_WEIGHTS, NULL, &p) == GH_ERR_INVAL && p == NULL);
  CHECK(gh_tensor_alloc(tm, 100, (gh_kind_t)9, NULL, &p) == GH_ERR_INVAL && p == NULL);
  CHECK(gh_tensor_alloc(tm, SIZE_MAX, GH_KIND_WEIGHTS, NULL, &p) == GH_ERR_INVAL && p == NULL);
  uint64_t before = oom_calls;
  CHECK(gh_tensor_alloc(tm, (size_t)1 << 40, GH_KIND_WEIGHTS, NULL, &p) == GH_ERR_BUDGET && p == NULL);
  CHECK_EQ_U64(oom_calls, before + 1);

  model_t m = {0};
  m.cap = 1024;
  m.t = calloc(m.cap, sizeof *m.t);
  /* Fill both tiers (16 + 32 MiB, the pool's 2 frames included) until
   * refused: 3 MiB tensors take 2 frames, small ones a slab per kind. */
  int rc = GH_OK;
  for (int i = 0; i < 1000 && rc == GH_OK; i++) {
    const size_t bytes = i % 3 ? 3 * MiB : 100000;
    rc = gh_tensor_alloc(tm, bytes, (gh_kind_t)(i % GH_KIND_COUNT), NULL, &p);
    if (rc == GH_OK) {
      ref_t* n = &m.t[m.n++];
      *n = (ref_t){.p = p, .bytes = bytes, .stamp = rnd(), .kind = (gh_kind_t)(i % GH_KIND_COUNT)};
      pat_fill(n->p, 0, bytes, n->stamp);
      m.bytes += bytes;
    }
  }
  CHECK(rc == GH_ERR_BUDGET);
  CHECK(strlen(gh_last_error_detail()) > 0);
  CHECK_MSG(m.bytes > 24 * MiB, "%zu tensors, %zu bytes: %s", m.n, m.bytes, gh_last_error_detail());
  before = oom_calls;
  CHECK(gh_tensor_alloc(tm, 5 * MiB, GH_KIND_WORKSPACE, NULL, &p) == GH_ERR_BUDGET && p == NULL);
  CHECK_EQ_U64(oom_calls, before + 1);
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);

  /* Bad pointers. */
  ref_t* a = &m.t[0];
  int local = 0;
  CHECK(gh_tensor_free(tm, &local, NULL) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_free(tm, a->p + 256, NULL) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_free(tm, NULL, NULL) == GH_OK);
  CHECK(gh_tensor_free(NULL, a->p, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_evict(tm, &local) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_prefetch(tm, a->p + 1, NULL) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_pin(tm, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_unpin(tm, a->p) == GH_ERR_INVAL);  /* not pinned */
  gh_tier_t tier;
  CHECK(gh_tensor_tier(tm, &local, &tier) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_tier(tm, a->p, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_set_kind(tm, a->p, (gh_kind_t)-1) == GH_ERR_INVAL);
  CHECK(gh_tmgr_stats(tm, NULL) == GH_ERR_INVAL);
  CHECK(gh_tmgr_maintain(NULL) == GH_ERR_INVAL);
  CHECK(gh_heap_maintain(NULL) == GH_ERR_INVAL);
  CHECK(gh_tmgr_heap(tm) == NULL);
  /* Pinned: evict refused, stays on the device. A tensor on the device:
   * with both tiers full, pinning one on the host may find no swap (a
   * victim that fits the host's last free frames) and fail with
   * GH_ERR_BUDGET, which is not what this checks. */
  for (size_t i = 0; i < m.n; i++) {
    gh_tier_t ti = GH_TIER_NONE;
    if (gh_tensor_tier(tm, m.t[i].p, &ti) == GH_OK && ti == GH_TIER_DEVICE) {
      a = &m.t[i];
      break;
    }
  }
  CHECK(gh_tensor_pin(tm, a->p) == GH_OK);
  CHECK(gh_tensor_pin(tm, a->p) == GH_OK);  /* pins nest */
  a->pins = 2;
  CHECK(gh_tensor_evict(tm, a->p) == GH_ERR_PINNED);
  CHECK(gh_tensor_tier(tm, a->p, &tier) == GH_OK && tier == GH_TIER_DEVICE);
  CHECK(gh_tensor_unpin(tm, a->p) == GH_OK);
  CHECK(gh_tensor_evict(tm, a->p) == GH_ERR_PINNED);
  CHECK(gh_tensor_unpin(tm, a->p) == GH_OK);
  a->pins = 0;
  CHECK(gh_tensor_evict(tm, a->p) == GH_OK);
  /* Double free, also after the memory was reclaimed. */
  uint8_t* freed = a->p;
  CHECK(gh_tensor_free(tm, freed, NULL) == GH_OK);
  m.bytes -= a->bytes;
  *a = m.t[--m.n];
  CHECK(gh_tensor_free(tm, freed, NULL) == GH_ERR_DOUBLE_FREE);
  for (int i = 0; i < 20; i++) gh_tmgr_maintain(tm);
  CHECK(gh_tensor_free(tm, freed, NULL) == GH_ERR_DOUBLE_FREE);
  CHECK(gh_tensor_pin(tm, freed) == GH_ERR_DOUBLE_FREE);
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* Stream order: freed memory waits for its event, also for an allocation
 * on the free's own stream; when room runs out the manager waits for the
 * event instead of failing. */
static void stream_order(void) {
  {
    gh_tmgr_options_t o;
    gh_tmgr_options_init(&o);
    o.backend = GH_BACKEND_SIM;
    gh_tmgr_t* none = NULL;
    o.flags = GH_TMGR_GROW_ON_DEMAND; /* with no heap to grow */
    CHECK(gh_tmgr_create(&none, &o) == GH_ERR_INVAL && none == NULL);
    o.heap_bytes = o.heap_max_bytes = 4 * MiB; /* with a heap that may not grow */
    CHECK(gh_tmgr_create(&none, &o) == GH_ERR_INVAL && none == NULL);
    o.heap_bytes = o.heap_max_bytes = 0;
    o.flags = 0x80;
    CHECK(gh_tmgr_create(&none, &o) == GH_ERR_INVAL && none == NULL);
  }
  gh_tmgr_t* tm = make_tm(8, 8, 0, 1000000);  /* events never complete by queries alone */
  if (!tm) return;
  const gh_stream_t s = streams[1], s2 = streams[2];
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  gh_tmgr_stats_t st;
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_ACTIVATIONS, s, &a) == GH_OK);
  CHECK(gh_tensor_free(tm, a, s) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_ACTIVATIONS, s2, &b) == GH_OK);
  CHECK(a != b);  /* another stream: a is still pending */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.pending_frees == 1);
  CHECK(gh_tensor_alloc(tm, 4000, GH_KIND_ACTIVATIONS, s, &c) == GH_OK);
  CHECK(c != a);  /* the free's own stream too: not before its event */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.pending_frees == 1);
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_WEIGHTS, s, &d) == GH_OK);
  CHECK(gh_tensor_free(tm, d, s) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_ACTIVATIONS, s, &d) == GH_OK);
  CHECK(gh_tensor_free(tm, d, s) == GH_OK);  /* not the weights' slab: another kind */
  CHECK(gh_tensor_free(tm, b, s2) == GH_OK);
  CHECK(gh_tensor_free(tm, c, s) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.pending_frees == 5);
  CHECK(gh_tensor_alloc(tm, 3 * MiB, GH_KIND_WORKSPACE, s2, &d) == GH_OK);  /* frees pending on s and s2 */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.pending_frees == 5);
  CHECK(gh_tensor_free(tm, d, s2) == GH_OK);
  /* All 8 frames of both tiers: two are the slabs of the pending frees,
   * which the manager gets back by waiting for their events. */
  CHECK(gh_tensor_alloc(tm, 16 * MiB - 4096, GH_KIND_WEIGHTS, s, &c) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.pending_frees == 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, c, s) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

static size_t sim_dev(gh_tmgr_t* tm) {
  size_t n = 0;
  CHECK(_gh_tmgr_sim_live(tm, GH_TIER_DEVICE, &n) == GH_OK);
  return n;
}

/* Maintain until no free is pending (events lag a few queries). */
static void settle(gh_tmgr_t* tm) {
  gh_tmgr_stats_t st;
  for (int i = 0; i < 100; i++) {
    CHECK(gh_tmgr_maintain(tm) == GH_OK);
    CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
    if (st.pending_frees == 0) break;
  }
  CHECK_EQ_U64(st.pending_frees, 0);
}

/* The cache of mapped device memory: a freed tensor's device chunks and
 * empty slabs stay mapped; allocations take them with no provider call
 * (the simulated device frames do not change); another stream gets them
 * only after the free's event; empty_cache gives them all back; the frame
 * map and the peak agree. */
static void cache_reuse(void) {
  gh_tmgr_t* tm = make_tm(64, 64, 0, 3);  /* an event completes after 3 queries */
  if (!tm) return;
  const gh_stream_t s = streams[1], s2 = streams[2];
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *p = NULL;
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_reset_peak(tm) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, s, &a) == GH_OK);
  const size_t dev0 = sim_dev(tm);
  CHECK_EQ_U64(dev0, 4);
  /* Pending memory goes to no other stream before its event (its own
   * stream takes a pending run at once: same_stream_reuse): new frames
   * meanwhile; then both runs are cached, and empty_cache gives them back. */
  CHECK(gh_tensor_free(tm, a, s) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 8 * MiB - 1000, GH_KIND_WEIGHTS, s2, &b) == GH_OK);
  CHECK(b != a);
  CHECK_EQ_U64(sim_dev(tm), dev0 + 4);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.pending_frees == 1 && st.cached_frames == 0);
  CHECK_EQ_U64(st.tensor_bytes[GH_KIND_WEIGHTS], 8 * MiB - 1000);
  CHECK(gh_tensor_free(tm, b, s) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 8);
  CHECK_EQ_U64(sim_dev(tm), dev0 + 4);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK_EQ_U64(sim_dev(tm), 0);
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_WEIGHTS, s, &b) == GH_OK);
  CHECK_EQ_U64(sim_dev(tm), dev0);
  a = b; /* the run the rest follows */
  /* Another stream: not before the event; new frames meanwhile. */
  CHECK(gh_tensor_free(tm, b, s) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, s2, &c) == GH_OK);
  CHECK(c != a);
  CHECK_EQ_U64(sim_dev(tm), dev0 + 4);
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 4);
  CHECK_EQ_U64(sim_dev(tm), dev0 + 4);  /* cached: still mapped */
  check_frame_map(tm);
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, s2, &d) == GH_OK);
  CHECK(d == a);  /* after the event: from the cache, no create */
  CHECK_EQ_U64(sim_dev(tm), dev0 + 4);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 0);
  /* At most a quarter wasted: 6 MiB + 1 (4 frames) takes the run, 4 MiB (2) does not. */
  CHECK(gh_tensor_free(tm, d, s2) == GH_OK);
  settle(tm);
  CHECK(gh_tensor_alloc(tm, 6 * MiB + 1, GH_KIND_ACTIVATIONS, s, &d) == GH_OK && d == a);
  CHECK(gh_tensor_free(tm, d, s2) == GH_OK);
  settle(tm);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s, &e) == GH_OK);
  CHECK(e != a);
  CHECK_EQ_U64(sim_dev(tm), dev0 + 6);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 4);
  /* Small tensors: an emptied slab stays mapped, and is taken again. */
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_OPTIMIZER, s, &p) == GH_OK);
  const size_t dev1 = sim_dev(tm);
  CHECK(gh_tensor_free(tm, p, s) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 5);
  check_frame_map(tm);
  CHECK(gh_tensor_alloc(tm, 100000, GH_KIND_OPTIMIZER, s2, &p) == GH_OK);
  CHECK_EQ_U64(sim_dev(tm), dev1);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 4);
  /* Peak: the most live at once, until reset. */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  const size_t live = st.tensor_bytes[GH_KIND_ACTIVATIONS] + st.tensor_bytes[GH_KIND_OPTIMIZER];
  CHECK_EQ_U64(live, 8 * MiB + 4 * MiB + 100000);
  CHECK_EQ_U64(st.peak_tensor_bytes, 2 * 8 * MiB);  /* b and c */
  CHECK(gh_tmgr_reset_peak(tm) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.peak_tensor_bytes == live);
  CHECK(gh_tensor_alloc(tm, 20 * MiB, GH_KIND_WEIGHTS, s, &b) == GH_OK);
  CHECK(gh_tensor_free(tm, b, s) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.peak_tensor_bytes == live + 20 * MiB);
  /* empty_cache: waits for the pending free, gives back every cached
   * frame; the simulated device frames are the live tensors' again. */
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 0 && st.pending_frees == 0);
  CHECK_EQ_U64(sim_dev(tm), st.frames[GH_TIER_DEVICE]);
  CHECK_EQ_U64(st.frames[GH_TIER_DEVICE], 4 + 2 + 1);
  check_frame_map(tm);
  CHECK(gh_tmgr_empty_cache(NULL) == GH_ERR_INVAL && gh_tmgr_reset_peak(NULL) == GH_ERR_INVAL);
  size_t cnt = 0;
  CHECK(gh_tmgr_frame_map(tm, NULL, 1, &cnt) == GH_ERR_INVAL);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  model_t m = {0};
  m.cap = 8;
  m.t = calloc(m.cap, sizeof *m.t);
  m.t[m.n++] = (ref_t){.p = c, .bytes = 8 * MiB, .kind = GH_KIND_ACTIVATIONS};
  m.t[m.n++] = (ref_t){.p = e, .bytes = 4 * MiB, .kind = GH_KIND_ACTIVATIONS};
  m.t[m.n++] = (ref_t){.p = p, .bytes = 100000, .kind = GH_KIND_OPTIMIZER};
  for (size_t i = 0; i < m.n; i++) {
    m.t[i].stamp = rnd();
    pat_fill(m.t[i].p, 0, m.t[i].bytes, m.t[i].stamp);
  }
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* A cached run splits at its chunks' boundaries: a 32 MiB tensor in
 * chunks of 4 frames, freed, backs an 8 MiB tensor with its first chunk and
 * a 16 MiB one with the next two, with no create. */
static void cache_split(void) {
  gh_tmgr_t* tm = make_tm(64, 64, 0, 0);
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 4) == GH_OK);
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK(gh_tensor_alloc(tm, 32 * MiB, GH_KIND_WEIGHTS, NULL, &a) == GH_OK);
  CHECK(gh_tensor_free(tm, a, NULL) == GH_OK);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  const size_t dev = sim_dev(tm);
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 16 && dev == 16);
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_WEIGHTS, streams[1], &b) == GH_OK && b == a);
  CHECK(gh_tensor_alloc(tm, 16 * MiB, GH_KIND_WEIGHTS, streams[2], &c) == GH_OK && (uint8_t*)c == (uint8_t*)a + 8 * MiB);
  CHECK_EQ_U64(sim_dev(tm), dev);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 4);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  check_frame_map(tm);
  /* 40 MiB more needs the cache's frames: they go, nothing is evicted. */
  void* d = NULL;
  CHECK(gh_tensor_alloc(tm, 40 * MiB, GH_KIND_WEIGHTS, NULL, &d) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.cached_frames == 0 && st.evictions == 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, b, NULL) == GH_OK && gh_tensor_free(tm, c, NULL) == GH_OK);
  CHECK(gh_tensor_free(tm, d, NULL) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* Many small tensors share few frames; the pointer map grows; frees in a
 * random order give every frame back. */
static void many_small(void) {
  gh_tmgr_t* tm = make_tm(16, 16, 0, 1);
  if (!tm) return;
  enum { N = 5000 };
  model_t m = {0};
  m.cap = N;
  m.t = calloc(m.cap, sizeof *m.t);
  size_t bytes = 0;
  for (int i = 0; i < N; i++) {
    void* p = NULL;
    const size_t b = 1 + rnd_below(700);
    const gh_kind_t k = (gh_kind_t)(i % 2);
    CHECK(gh_tensor_alloc(tm, b, k, streams[i % 3], &p) == GH_OK);
    if (!p) break;
    ref_t* n = &m.t[m.n++];
    *n = (ref_t){.p = p, .bytes = b, .stamp = rnd(), .kind = k};
    pat_fill(n->p, 0, b, n->stamp);
    bytes += (b + GH_TM_ALIGN - 1) / GH_TM_ALIGN * GH_TM_ALIGN;
  }
  check_stats(tm, &m);
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  /* Packed: per kind, the rounded bytes in whole frames (first fit on an
   * empty heap leaves no holes). */
  CHECK_MSG(s.frames[GH_TIER_DEVICE] + s.frames[GH_TIER_HOST] <= bytes / s.frame_bytes + 2, "%zu frames for %zu bytes",
            s.frames[GH_TIER_DEVICE] + s.frames[GH_TIER_HOST], bytes);
  for (size_t i = m.n; i > 1; i--) {  /* shuffle */
    const size_t j = rnd_below(i);
    const ref_t x = m.t[i - 1];
    m.t[i - 1] = m.t[j], m.t[j] = x;
  }
  for (size_t i = 0; i < m.n; i++) {
    check_one(&m.t[i], 1);
    CHECK(gh_tensor_free(tm, m.t[i].p, streams[i % 3]) == GH_OK);
  }
  /* The last 4096 freed starts are remembered; older ones read as foreign. */
  for (size_t i = m.n - 4000; i < m.n; i += 97) CHECK(gh_tensor_free(tm, m.t[i].p, NULL) == GH_ERR_DOUBLE_FREE);
  CHECK(gh_tensor_free(tm, m.t[0].p, NULL) == GH_ERR_FOREIGN);
  m.n = 0, m.bytes = 0;
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* ------------------------------------------------------------ threads
 * The manager may remap a frame only when no "kernel" uses it; here the
 * kernels are the workers' own reads and writes, which no stream orders. So
 * they run under a read lock, and the calls that can move other threads'
 * frames (alloc, evict, prefetch, pin, maintain) under the write lock; free,
 * unpin, tier and stats run concurrently with everything but those, and the
 * pool thread with everything. */
static pthread_rwlock_t mem_lock = PTHREAD_RWLOCK_INITIALIZER;
#define MOVING(call) (pthread_rwlock_wrlock(&mem_lock), gh__rc = (call), pthread_rwlock_unlock(&mem_lock), gh__rc)
#define SHARED(call) (pthread_rwlock_rdlock(&mem_lock), gh__rc = (call), pthread_rwlock_unlock(&mem_lock), gh__rc)

typedef struct worker_s {
  gh_tmgr_t* tm;
  uint64_t seed;
  size_t ops;
  int failures;
} worker_t;

static size_t pat_check_shared(const ref_t* x) {
  pthread_rwlock_rdlock(&mem_lock);
  const size_t bad = pat_check(x->p, 0, x->bytes, x->stamp);
  pthread_rwlock_unlock(&mem_lock);
  return bad;
}

static void* worker_main(void* arg) {
  worker_t* w = arg;
  int gh__rc;
  ref_t t[16] = {{0}};
  uint64_t st = w->seed;
  for (size_t op = 0; op < w->ops; op++) {
    st = mix64(st + op);
    ref_t* x = &t[st % 16];
    const gh_stream_t s = streams[(st >> 8) % 3];
    if (!x->p) {
      const size_t bytes = (st >> 16) % 4 ? 1 + (st >> 20) % 200000 : MiB + (st >> 20) % (3 * MiB);
      void* p = NULL;
      const int rc = MOVING(gh_tensor_alloc(w->tm, bytes, (gh_kind_t)((st >> 12) % GH_KIND_COUNT), s, &p));
      if (rc == GH_OK) {
        *x = (ref_t){.p = p, .bytes = bytes, .stamp = st};
        pthread_rwlock_rdlock(&mem_lock);
        pat_fill(x->p, 0, bytes, st);
        pthread_rwlock_unlock(&mem_lock);
        gh_tier_t tier;
        if (SHARED(gh_tensor_tier(w->tm, p, &tier)) != GH_OK || tier == GH_TIER_NONE) w->failures++;
      } else if (rc != GH_ERR_BUDGET) {
        w->failures++;
      }
      continue;
    }
    switch ((st >> 40) % 6) {
      case 0:
      case 1:
        if (pat_check_shared(x) != SIZE_MAX) w->failures++;
        if (SHARED(gh_tensor_free(w->tm, x->p, s)) != GH_OK) w->failures++;
        x->p = NULL;
        break;
      case 2:
        if ((st >> 50) & 1) {  /* a mark: moves nothing */
          if (SHARED(gh_tensor_advise(w->tm, x->p, GH_ADVICE_COLD)) != GH_OK) w->failures++;
        } else if (MOVING(gh_tensor_evict(w->tm, x->p)) != GH_OK) {
          w->failures++;
        }
        break;
      case 3: {
        const int rc = MOVING(gh_tensor_prefetch(w->tm, x->p, s));
        if (rc != GH_OK && rc != GH_ERR_BUDGET) w->failures++;
        break;
      }
      case 4:
        if (MOVING(gh_tmgr_maintain(w->tm)) != GH_OK) w->failures++;
        break;
      default: {
        if (pat_check_shared(x) != SIZE_MAX) w->failures++;
        gh_tmgr_stats_t sst;
        if (SHARED(gh_tmgr_stats(w->tm, &sst)) != GH_OK) w->failures++;
      }
    }
  }
  for (int i = 0; i < 16; i++)
    if (t[i].p) {
      if (pat_check_shared(&t[i]) != SIZE_MAX) w->failures++;
      if (SHARED(gh_tensor_free(w->tm, t[i].p, NULL)) != GH_OK) w->failures++;
    }
  return NULL;
}

static void threads(size_t ops) {
  gh_tmgr_t* tm = make_tm(32, 128, 8, 2);
  if (!tm) return;
  enum { N = 4 };
  worker_t w[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    w[i] = (worker_t){.tm = tm, .seed = 1000 + (uint64_t)i, .ops = ops};
    CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(w[i].failures == 0, "worker %d: %d failures", i, w[i].failures);
  }
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  printf("threads: %llu evictions, %llu restores, pool %zu\n", (unsigned long long)s.evictions,
         (unsigned long long)s.restores, s.host_pool_frames);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* ------------------------------------------------------------ the provider */
static void sim_provider(void) {
  const gh_frames_ops_t* ops = &_gh_frames_sim;
  gh_frames_t* f = NULL;
  uint8_t* base = NULL;
  size_t fb = 0;
  CHECK(ops->open(&f, 0, 8 * GH_SIM_FRAME_BYTES, &base, &fb) == GH_OK);
  if (!f) return;
  CHECK(fb == GH_SIM_FRAME_BYTES && ((uintptr_t)base % fb) == 0);
  _gh_frames_sim_configure(f, 2, 2, 1);
  gh_pframe_t d0, d1, d2, h0, h1;
  CHECK(ops->create(f, GH_TIER_DEVICE, 1, &d0) == GH_OK);
  CHECK(ops->create(f, GH_TIER_DEVICE, 1, &d1) == GH_OK);
  CHECK(ops->create(f, GH_TIER_DEVICE, 1, &d2) == GH_ERR_DEVICE_NOMEM);
  CHECK(ops->create(f, GH_TIER_HOST, 1, &h0) == GH_OK);
  CHECK(ops->create(f, GH_TIER_HOST, 1, &h1) == GH_ERR_NOMEM);
  CHECK(ops->create(f, GH_TIER_NONE, 1, &h1) == GH_ERR_INVAL);
  CHECK(_gh_frames_sim_live(f, GH_TIER_DEVICE) == 2 && _gh_frames_sim_live(f, GH_TIER_HOST) == 1);
  CHECK(ops->map(f, base - fb, &d0, 1) == GH_ERR_INVAL);        /* outside */
  CHECK(ops->map(f, base + 8 * fb, &d0, 1) == GH_ERR_INVAL);    /* outside */
  CHECK(ops->map(f, base + 7 * fb, (gh_pframe_t[]){d0, d1}, 2) == GH_ERR_INVAL);  /* runs past the end */
  CHECK(ops->map(f, base + 4096, &d0, 1) == GH_ERR_INVAL);      /* unaligned */
  CHECK(ops->map(f, base, (gh_pframe_t[]){12345}, 1) == GH_ERR_INVAL);  /* unknown handle */
  CHECK(ops->map(f, base, &d0, 1) == GH_OK);
  CHECK(ops->map(f, base, &d1, 1) == GH_ERR_INVAL);             /* over a mapped frame */
  CHECK(ops->map(f, base + 3 * fb, &d0, 1) == GH_OK);           /* the same frame twice */
  memset(base, 0x5a, fb);
  CHECK(base[3 * fb] == 0x5a && base[4 * fb - 1] == 0x5a);      /* really the same memory */
  CHECK(ops->release(f, d0) == GH_ERR_INVAL);                   /* still mapped */
  CHECK(ops->unmap(f, base + fb, 1) == GH_ERR_INVAL);           /* not mapped */
  CHECK(ops->unmap(f, base + 3 * fb, 1) == GH_OK);
  CHECK(ops->release(f, d0) == GH_ERR_INVAL);                   /* still mapped at base */
  /* Copy to a host frame, remap at the same address. */
  CHECK(ops->map(f, base + 5 * fb, &h0, 1) == GH_OK);
  CHECK(ops->copy(f, base + 5 * fb, base, fb, NULL) == GH_OK);
  CHECK(ops->unmap(f, base + 5 * fb, 1) == GH_OK);
  CHECK(ops->unmap(f, base, 1) == GH_OK);
  CHECK(ops->map(f, base, &h0, 1) == GH_OK);
  CHECK(base[0] == 0x5a && base[fb - 1] == 0x5a);
  CHECK(ops->release(f, d0) == GH_OK);
  CHECK(ops->release(f, d0) == GH_ERR_INVAL);                   /* unknown now */
  CHECK(ops->create(f, GH_TIER_DEVICE, 1, &d2) == GH_OK);           /* room again */
  /* Events complete after `lag` queries. */
  gh_fevent_t e = 0;
  gh_stream_t st = NULL;
  CHECK(ops->stream_create(f, &st) == GH_OK && st != NULL);
  CHECK(ops->event_record(f, st, &e) == GH_OK);
  CHECK(ops->event_query(f, e) == GH_ERR_BUSY);
  CHECK(ops->event_query(f, e) == GH_ERR_BUSY);
  CHECK(ops->event_query(f, e) == GH_OK);
  CHECK(ops->event_destroy(f, e) == GH_OK);
  CHECK(ops->stream_destroy(f, st) == GH_OK);
  size_t fr = 0, tot = 0;
  CHECK(ops->device_free(f, &fr, &tot) == GH_OK && tot == 2 * fb && fr == 0);
  /* Close cleans up what is left, and counts it as the caller's leak. */
  const size_t leaked = _gh_frames_sim_leaked_total();
  CHECK(ops->close(f) == GH_OK);
  CHECK_EQ_U64(_gh_frames_sim_leaked_total() - leaked, 3);  /* d1, d2, h0 */
  __atomic_store_n(&gh_sim_leak_base, _gh_frames_sim_leaked_total(), __ATOMIC_RELAXED);
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
}

/* Deferred copies keep each stream's own order and no other: a sync runs
 * the copies of its stream and of the events it was made to wait for,
 * however late, and leaves other streams' copies queued, however early. */
static void sim_stream_order(void) {
  const gh_frames_ops_t* ops = &_gh_frames_sim;
  gh_frames_t* f = NULL;
  uint8_t* base = NULL;
  size_t fb = 0;
  CHECK(ops->open(&f, 0, 4 * GH_SIM_FRAME_BYTES, &base, &fb) == GH_OK);
  if (!f) return;
  gh_pframe_t h = 0;
  CHECK(ops->create(f, GH_TIER_HOST, 4, &h) == GH_OK);
  CHECK(ops->map(f, base, &h, 1) == GH_OK);
  uint8_t *x = base, *y = base + fb, *z = base + 2 * fb, *w = base + 3 * fb;
  memset(base, 0, 4 * fb);
  x[0] = 1, x[1] = 2;  /* (a copy reads its source when it runs) */
  gh_stream_t a = NULL, b = NULL, c = NULL;
  CHECK(ops->stream_create(f, &a) == GH_OK && ops->stream_create(f, &b) == GH_OK && ops->stream_create(f, &c) == GH_OK);
  _gh_frames_sim_defer(f, 1);
  CHECK(ops->copy(f, y, x, 1, a) == GH_OK);  /* a: y = x (1) */
  CHECK(ops->copy(f, z, x, 1, b) == GH_OK);  /* b: z = x (1) */
  CHECK(ops->copy(f, w, y, 1, a) == GH_OK);  /* a: w = y, after a's first */
  size_t left = 0;
  CHECK(ops->stream_sync(f, b) == GH_OK);    /* b alone: a's two copies stay queued */
  _gh_frames_sim_counts(f, &left, NULL);
  CHECK_EQ_U64(left, 2);
  CHECK(z[0] == 1 && y[0] == 0 && w[0] == 0);
  gh_fevent_t ea = 0, ec = 0;
  CHECK(ops->event_record(f, a, &ea) == GH_OK);
  CHECK(ops->copy(f, y, x + 1, 1, a) == GH_OK);  /* a: y = x[1] (2), after the event */
  CHECK(ops->stream_wait(f, c, ea) == GH_OK);
  CHECK(ops->event_record(f, c, &ec) == GH_OK);
  CHECK(ops->event_sync(f, ec) == GH_OK);    /* c waited for a up to ea: a's first two, not its third */
  CHECK(y[0] == 1 && w[0] == 1);
  _gh_frames_sim_counts(f, &left, NULL);
  CHECK_EQ_U64(left, 1);
  CHECK(ops->stream_sync(f, c) == GH_OK);    /* c's clock does not cover a's later copy */
  CHECK(y[0] == 1);
  CHECK(ops->event_query(f, ea) == GH_OK);
  CHECK(ops->stream_sync(f, a) == GH_OK);
  CHECK(y[0] == 2);
  _gh_frames_sim_counts(f, &left, NULL);
  CHECK_EQ_U64(left, 0);
  /* A copy queued on one stream that another's copies would overwrite: run
   * in the order its waiters come, not the order it was issued. */
  x[0] = 3;
  CHECK(ops->copy(f, y, x, 1, a) == GH_OK);  /* a: y = 3 */
  z[0] = 4;
  CHECK(ops->copy(f, y, z, 1, b) == GH_OK);  /* b: y = 4, issued later, not ordered after a's */
  CHECK(ops->stream_sync(f, b) == GH_OK);
  CHECK(y[0] == 4);
  CHECK(ops->stream_sync(f, a) == GH_OK);
  CHECK(y[0] == 3);                          /* a's ran last: a race the caller left open */
  /* Eager runs: copies that nothing waits for run early, but never before
   * what they wait for (another stream's copy, a word short of its value). */
  uint32_t* word = NULL;
  CHECK(ops->word_alloc(f, &word) == GH_OK);
  _gh_frames_sim_eager(f, 12345);
  int early_both = 0;
  for (int round = 0; round < 20; round++) {
    memset(base, 0, 4 * fb);
    x[0] = (uint8_t)(10 + round);
    *word = 0;
    gh_fevent_t e1 = 0, q = 0;
    CHECK(ops->copy(f, y, x, 1, a) == GH_OK);      /* a: y = x */
    CHECK(ops->event_record(f, a, &e1) == GH_OK);
    CHECK(ops->stream_wait(f, b, e1) == GH_OK);
    CHECK(ops->copy(f, z, y, 1, b) == GH_OK);      /* b: z = y, after a's */
    CHECK(ops->stream_wait_value(f, c, word, 1) == GH_OK);
    CHECK(ops->copy(f, w, x, 1, c) == GH_OK);      /* c: w = x, once the word is 1 */
    CHECK(ops->event_record(f, a, &q) == GH_OK);
    for (int k = 0; k < 40; k++) {
      (void)ops->event_query(f, q);                /* each call a chance for an early run */
      CHECK(z[0] == 0 || (z[0] == x[0] && y[0] == x[0]));
      CHECK(w[0] == 0);
    }
    early_both += y[0] == x[0] && z[0] == x[0];
    *word = 1;
    CHECK(ops->stream_sync(f, b) == GH_OK && ops->stream_sync(f, c) == GH_OK);
    CHECK(y[0] == x[0] && z[0] == x[0] && w[0] == x[0]);
    CHECK(ops->event_destroy(f, e1) == GH_OK && ops->event_destroy(f, q) == GH_OK);
  }
  CHECK(early_both > 0 && _gh_frames_sim_eager_runs(f) > 0);
  _gh_frames_sim_eager(f, 0);
  _gh_frames_sim_defer(f, 0);
  CHECK(ops->word_free(f, word) == GH_OK);
  CHECK(ops->event_destroy(f, ea) == GH_OK && ops->event_destroy(f, ec) == GH_OK);
  CHECK(ops->stream_destroy(f, a) == GH_OK && ops->stream_destroy(f, b) == GH_OK && ops->stream_destroy(f, c) == GH_OK);
  CHECK(ops->unmap(f, base, 4) == GH_OK);
  CHECK(ops->release(f, h) == GH_OK);
  CHECK(ops->close(f) == GH_OK);
}

/* Multi-frame allocations ("slabs"): mapped whole and back to back, unmapped
 * only as whole mappings, limits in frames, data through two addresses. */
static void sim_slabs(void) {
  const gh_frames_ops_t* ops = &_gh_frames_sim;
  gh_frames_t* f = NULL;
  uint8_t* base = NULL;
  size_t fb = 0;
  CHECK(ops->open(&f, 0, 32 * GH_SIM_FRAME_BYTES, &base, &fb) == GH_OK);
  if (!f) return;
  _gh_frames_sim_configure(f, 0, 8, 8);
  gh_pframe_t a = 0, b = 0, c = 0, h = 0, x = 0;
  CHECK(ops->create(f, GH_TIER_DEVICE, 0, &x) == GH_ERR_INVAL);         /* no frames */
  CHECK(ops->create(f, GH_TIER_DEVICE, 33, &x) == GH_ERR_INVAL);        /* larger than the range */
  CHECK(ops->create(f, GH_TIER_DEVICE, 9, &x) == GH_ERR_DEVICE_NOMEM);  /* beyond the tier, in frames */
  CHECK(ops->create(f, GH_TIER_DEVICE, 4, &a) == GH_OK);
  CHECK(ops->create(f, GH_TIER_DEVICE, 3, &b) == GH_OK);
  CHECK(ops->create(f, GH_TIER_DEVICE, 2, &x) == GH_ERR_DEVICE_NOMEM);  /* 7 of 8 frames live */
  CHECK(ops->create(f, GH_TIER_DEVICE, 1, &c) == GH_OK);
  CHECK(ops->create(f, GH_TIER_HOST, 8, &h) == GH_OK);
  CHECK(_gh_frames_sim_live(f, GH_TIER_DEVICE) == 8 && _gh_frames_sim_live(f, GH_TIER_HOST) == 8);
  /* Back to back: a (4) at frames 0-3, b (3) at 4-6, c (1) at 7; one map call. */
  CHECK(ops->map(f, base + 30 * fb, (gh_pframe_t[]){a}, 1) == GH_ERR_INVAL);     /* runs past the end */
  CHECK(ops->map(f, base, (gh_pframe_t[]){a, b, 999}, 3) == GH_ERR_INVAL);        /* one unknown handle */
  CHECK(ops->map(f, base, (gh_pframe_t[]){a, b, c}, 3) == GH_OK);
  CHECK(ops->map(f, base + 7 * fb, &h, 1) == GH_ERR_INVAL);                        /* over c */
  CHECK(ops->map(f, base + 2 * fb, &c, 1) == GH_ERR_INVAL);                        /* inside a */
  for (size_t i = 0; i < 8 * fb; i += 4096) base[i] = (uint8_t)(i / 4096 * 7 + 1);
  /* Unmaps that would split a mapping: refused, and nothing changed. */
  CHECK(ops->unmap(f, base, 1) == GH_ERR_INVAL);            /* part of a */
  CHECK(ops->unmap(f, base + fb, 3) == GH_ERR_INVAL);       /* a's tail */
  CHECK(ops->unmap(f, base, 5) == GH_ERR_INVAL);            /* a and part of b */
  CHECK(ops->unmap(f, base + 5 * fb, 3) == GH_ERR_INVAL);   /* part of b and c */
  CHECK(ops->unmap(f, base + 4 * fb, 5) == GH_ERR_INVAL);   /* b, c and an unmapped frame */
  CHECK(ops->release(f, b) == GH_ERR_INVAL);                /* mapped */
  for (size_t i = 0; i < 8 * fb; i += 4096) CHECK(base[i] == (uint8_t)(i / 4096 * 7 + 1));
  /* The host slab at a second address (an alias), filled by a copy, then
   * put at home in place of a, b and c (whole mappings, one unmap call). */
  CHECK(ops->map(f, base + 16 * fb, &h, 1) == GH_OK);
  CHECK(ops->copy(f, base + 16 * fb, base, 8 * fb, NULL) == GH_OK);
  CHECK(ops->unmap(f, base + 4 * fb, 4) == GH_OK);          /* b and c together */
  CHECK(ops->unmap(f, base, 4) == GH_OK);                   /* a */
  CHECK(ops->map(f, base, &h, 1) == GH_OK);
  for (size_t i = 0; i < 8 * fb; i += 4096) CHECK(base[i] == (uint8_t)(i / 4096 * 7 + 1));
  base[5 * fb] = 0xee;
  CHECK(base[16 * fb + 5 * fb] == 0xee);                    /* the same memory at both addresses */
  CHECK(ops->unmap(f, base + 16 * fb, 4) == GH_ERR_INVAL);  /* part of the alias */
  CHECK(ops->unmap(f, base + 16 * fb, 8) == GH_OK);
  /* Device slabs back at home, the same allocation twice in one call. */
  CHECK(ops->unmap(f, base, 8) == GH_OK);
  CHECK(ops->map(f, base + 8 * fb, (gh_pframe_t[]){b, b}, 2) == GH_OK);
  CHECK(ops->unmap(f, base + 8 * fb, 3) == GH_OK);
  CHECK(ops->unmap(f, base + 11 * fb, 3) == GH_OK);
  CHECK(ops->release(f, a) == GH_OK && ops->release(f, b) == GH_OK && ops->release(f, c) == GH_OK);
  CHECK(ops->release(f, h) == GH_OK);
  CHECK(ops->create(f, GH_TIER_DEVICE, 8, &a) == GH_OK);    /* the whole tier again, first fit */
  CHECK(ops->release(f, a) == GH_OK);
  CHECK(_gh_frames_sim_live(f, GH_TIER_DEVICE) == 0 && _gh_frames_sim_live(f, GH_TIER_HOST) == 0);
  CHECK(ops->close(f) == GH_OK);
  CHECK_EQ_U64(_gh_frames_sim_leaked_total(), gh_sim_leak_base);
}

/* Large tensors in chunks of the default size (8 frames, 16 MiB: one device
 * allocation each; host: one pooled slab of a chunk, or single frames for a
 * tail): evicted and restored whole, data checked through every move,
 * frames counted in the statistics, then oversubscribed so that CLOCK
 * evicts chunks. Under a reduced scale (sanitizers) everything is 8 times
 * smaller, with chunks of 4 frames (8 MiB). */
static void large_tensors(void) {
  const size_t div = gh_test_scale() < 0.5 ? 8 : 1;
  /* The pool: 16 single frames and slabs of a chunk (8 of 8 frames; reduced: 2 of 4). */
  gh_tmgr_t* tm = div == 1 ? make_tm(256, 400, 80, 2) : make_tm(32, 50, 24, 2);
  if (!tm) return;
  if (div > 1) CHECK(_gh_tmgr_set_chunk(tm, 4) == GH_OK);
  model_t m = {0};
  m.cap = 64;
  m.t = calloc(m.cap, sizeof *m.t);
  /* 6 chunks + 2 frames, 4 chunks, 2 chunks + 5 (reduced: 4+3, 4, 3) */
  const size_t sizes[] = {100 * MiB / div, 64 * MiB / div, 40 * MiB / div + 12345};
  for (size_t i = 0; i < 3; i++) {
    void* p = NULL;
    CHECK(gh_tensor_alloc(tm, sizes[i], (gh_kind_t)i, streams[i], &p) == GH_OK);
    if (!p) break;
    ref_t* n = &m.t[m.n++];
    *n = (ref_t){.p = p, .bytes = sizes[i], .stamp = rnd(), .kind = (gh_kind_t)i};
    pat_fill(n->p, 0, n->bytes, n->stamp);
    m.bytes += n->bytes;
  }
  check_stats(tm, &m);
  gh_tmgr_stats_t s0, s1;
  for (int round = 0; round < 2; round++)
    for (size_t i = 0; i < m.n; i++) {
      ref_t* x = &m.t[i];
      const size_t frames = (x->bytes + 2 * MiB - 1) / (2 * MiB);
      gh_tier_t tier = GH_TIER_NONE;
      CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
      CHECK(gh_tensor_evict(tm, x->p) == GH_OK);
      CHECK(gh_tensor_tier(tm, x->p, &tier) == GH_OK && tier == GH_TIER_HOST);
      CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
      CHECK_EQ_U64(s1.evictions - s0.evictions, frames);
      CHECK_EQ_U64(s1.bytes_evicted - s0.bytes_evicted, frames * s1.frame_bytes);
      CHECK_EQ_U64(s1.tensor_bytes_tier[x->kind][GH_TIER_HOST] - s0.tensor_bytes_tier[x->kind][GH_TIER_HOST], x->bytes);
      check_one(x, 1);
      x->stamp = rnd();
      pat_fill(x->p, 0, x->bytes, x->stamp);  /* writes land in host memory */
      check_stats(tm, &m);
      CHECK(gh_tensor_prefetch(tm, x->p, streams[(i + 1) % 3]) == GH_OK);
      CHECK(gh_tensor_tier(tm, x->p, &tier) == GH_OK && tier == GH_TIER_DEVICE);
      CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
      CHECK_EQ_U64(s0.restores - s1.restores, frames);
      CHECK_EQ_U64(s0.bytes_restored - s1.bytes_restored, frames * s0.frame_bytes);
      check_one(x, 1);
      check_stats(tm, &m);
    }
  /* Oversubscribed: 3 more tensors of 70 MiB, 313 MiB in a 256 MiB device budget. */
  for (int i = 0; i < 3; i++) {
    void* p = NULL;
    const int rc = gh_tensor_alloc(tm, 70 * MiB / div, GH_KIND_ACTIVATIONS, streams[i], &p);
    CHECK_MSG(rc == GH_OK, "alloc: %s (%s)", gh_err_name(rc), gh_last_error_detail());
    if (!p) break;
    ref_t* n = &m.t[m.n++];
    *n = (ref_t){.p = p, .bytes = 70 * MiB / div, .stamp = rnd(), .kind = GH_KIND_ACTIVATIONS};
    pat_fill(n->p, 0, n->bytes, n->stamp);
    m.bytes += n->bytes;
    check_stats(tm, &m);
  }
  for (size_t i = 0; i < m.n; i++) {
    CHECK(gh_tensor_prefetch(tm, m.t[i].p, NULL) == GH_OK);  /* evicts others, chunk by chunk */
    check_one(&m.t[i], 1);
    check_stats(tm, &m);
  }
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(s0.bytes_evicted == s0.evictions * s0.frame_bytes && s0.bytes_restored == s0.restores * s0.frame_bytes);
  printf("large tensors: %llu evictions, %llu restores (frames), pool %zu frames\n",
         (unsigned long long)s0.evictions, (unsigned long long)s0.restores, s0.host_pool_frames);
  CHECK(_gh_tmgr_set_chunk(tm, 4) == GH_ERR_INVAL);  /* tensors live */
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* ------------------------------------------------------------ advice */
static gh_tier_t tier_of(gh_tmgr_t* tm, const void* p) {
  gh_tier_t tier = GH_TIER_NONE;
  CHECK(gh_tensor_tier(tm, p, &tier) == GH_OK);
  return tier;
}

static uint64_t waits_of(gh_tmgr_t* tm) {
  uint64_t w = 0;
  CHECK(_gh_tmgr_waits(tm, &w) == GH_OK);
  return w;
}

/* A stamped tensor into the model (whose array has room); its index. */
static size_t add_tensor(gh_tmgr_t* tm, model_t* m, size_t bytes, gh_kind_t kind) {
  void* p = NULL;
  const int rc = gh_tensor_alloc(tm, bytes, kind, streams[1], &p);
  CHECK_MSG(rc == GH_OK && m->n < m->cap, "alloc: %s (%s)", gh_err_name(rc), gh_last_error_detail());
  if (rc != GH_OK || m->n == m->cap) return 0;
  ref_t* n = &m->t[m->n];
  *n = (ref_t){.p = p, .bytes = bytes, .stamp = rnd(), .kind = kind};
  pat_fill(n->p, 0, bytes, n->stamp);
  m->bytes += bytes;
  return m->n++;
}

/* Which tensors of the model are in the host tier, as a bit mask. */
static uint64_t host_mask(gh_tmgr_t* tm, const model_t* m) {
  uint64_t mask = 0;
  for (size_t i = 0; i < m->n && i < 64; i++)
    if (tier_of(tm, m->t[i].p) == GH_TIER_HOST) mask |= UINT64_C(1) << i;
  return mask;
}
#define BIT(i) (UINT64_C(1) << (i))

/* gh_tensor_advise: a mark that moves nothing and waits for no stream;
 * when device room runs short the frames of cold tensors go first, oldest
 * advice first (advising again counts from the new advice, a shared frame
 * from its last tensor's advice), never a pinned tensor; then CLOCK.
 * With the default low watermark, evictions come in batches, in advice
 * order, one wait each. A prefetch of a tensor on the device moves nothing
 * and waits for nothing. Every byte survives. */
static void advice(void) {
  /* 8 device frames; low watermark 1: each new frame evicts exactly one. */
  gh_tmgr_t* tm = make_tm_low(16, 64, 0, 0, 1.0);
  if (!tm) return;
  model_t m = {0};
  m.cap = 64;
  m.t = calloc(m.cap, sizeof *m.t);
  gh_tmgr_stats_t st;
  void* x = NULL;
  int local = 0;
  /* Bad calls. */
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_OPTIMIZER, NULL, &x) == GH_OK);
  CHECK(gh_tensor_advise(tm, x, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_free(tm, x, NULL) == GH_OK);  /* a cold tensor leaves the cold list */
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_advise(tm, x, GH_ADVICE_COLD) == GH_ERR_DOUBLE_FREE);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK(gh_tensor_advise(tm, x, GH_ADVICE_NORMAL) == GH_ERR_DOUBLE_FREE);  /* reclaimed: still known as freed */
  /* T0..T6: one frame each; S7, S8: small workspace tensors sharing the 8th. */
  for (int i = 0; i < 7; i++) add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
  add_tensor(tm, &m, 100000, GH_KIND_WORKSPACE);
  add_tensor(tm, &m, 100000, GH_KIND_WORKSPACE);
  CHECK(m.n == 9 && m.t[7].p && m.t[8].p && m.t[8].p - m.t[7].p < (ptrdiff_t)(2 * MiB) &&
        m.t[7].p - m.t[8].p < (ptrdiff_t)(2 * MiB));
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.evictions == 0);
  CHECK_EQ_U64(st.frames[GH_TIER_DEVICE], 8);
  uint8_t* const t0 = m.t[0].p;
  CHECK(gh_tensor_advise(NULL, t0, GH_ADVICE_COLD) == GH_ERR_INVAL);
  CHECK(gh_tensor_advise(tm, NULL, GH_ADVICE_COLD) == GH_ERR_INVAL);
  CHECK(gh_tensor_advise(tm, &local, GH_ADVICE_COLD) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_advise(tm, t0 + 256, GH_ADVICE_COLD) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_advise(tm, t0, GH_ADVICE_COUNT) == GH_ERR_INVAL);
  CHECK(gh_tensor_advise(tm, t0, (gh_advice_t)-1) == GH_ERR_INVAL);
  CHECK(gh_tensor_advise(tm, t0, (gh_advice_t)77) == GH_ERR_INVAL);
  CHECK(gh_tensor_advise(tm, &local, (gh_advice_t)77) == GH_ERR_INVAL);

  /* Marks: T3 pinned then cold (the oldest mark); T0 cold, re-marked last;
   * the slab cold from S8's mark; T4 cold then normal again. Expected
   * victims: T5, T1, the slab (S7, S8), T0; never T3 while pinned. */
  const uint64_t w0 = waits_of(tm);
  CHECK(gh_tensor_pin(tm, m.t[3].p) == GH_OK);
  m.t[3].pins = 1;
  CHECK(gh_tensor_advise(tm, m.t[3].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, t0, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[7].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[5].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[1].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[8].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[4].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[4].p, GH_ADVICE_NORMAL) == GH_OK);
  CHECK(gh_tensor_advise(tm, t0, GH_ADVICE_COLD) == GH_OK);
  check_stats(tm, &m);
  /* Nothing moved, no stream waited for; a prefetch of a tensor on the
   * device neither. */
  CHECK(gh_tensor_prefetch(tm, m.t[2].p, streams[2]) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.evictions == 0 && st.restores == 0);
  CHECK_EQ_U64(host_mask(tm, &m), 0);
  CHECK_EQ_U64(waits_of(tm), w0);
  /* Under pressure: one victim per new frame, in advice order. */
  const uint64_t want[] = {BIT(5), BIT(5) | BIT(1), BIT(5) | BIT(1) | BIT(7) | BIT(8),
                           BIT(5) | BIT(1) | BIT(7) | BIT(8) | BIT(0)};
  for (size_t k = 0; k < 4; k++) {
    add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
    const uint64_t mask = host_mask(tm, &m);
    CHECK_MSG(mask == want[k], "step %zu: host tensors %#llx, expected %#llx", k, (unsigned long long)mask,
              (unsigned long long)want[k]);
    check_stats(tm, &m);
  }
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.evictions, 4);
  CHECK(waits_of(tm) > w0);
  /* No cold tensor left on the device but the pinned one: CLOCK picks
   * others, never T3. */
  for (int k = 0; k < 3; k++) {
    add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
    CHECK(tier_of(tm, m.t[3].p) == GH_TIER_DEVICE);
    check_stats(tm, &m);
  }
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  /* Writes to an evicted tensor land; its prefetch brings it back warm. */
  m.t[5].stamp = rnd();
  pat_fill(m.t[5].p, 0, m.t[5].bytes, m.t[5].stamp);
  CHECK(gh_tensor_prefetch(tm, m.t[5].p, streams[1]) == GH_OK);
  CHECK(tier_of(tm, m.t[5].p) == GH_TIER_DEVICE && tier_of(tm, m.t[3].p) == GH_TIER_DEVICE);
  check_one(&m.t[5], 1);
  /* Unpinned, T3 is still cold (advised after its pin): the next victim. */
  CHECK(gh_tensor_unpin(tm, m.t[3].p) == GH_OK);
  m.t[3].pins = 0;
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
  CHECK(tier_of(tm, m.t[3].p) == GH_TIER_HOST);
  /* A pin makes it normal again: after the unpin T2, marked now, goes first. */
  CHECK(gh_tensor_advise(tm, m.t[3].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_pin(tm, m.t[3].p) == GH_OK);
  CHECK(gh_tensor_unpin(tm, m.t[3].p) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[2].p, GH_ADVICE_COLD) == GH_OK);
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
  CHECK(tier_of(tm, m.t[2].p) == GH_TIER_HOST && tier_of(tm, m.t[3].p) == GH_TIER_DEVICE);
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  check_frame_map(tm);
  drain_and_destroy(tm, &m);

  /* Batches: 20 device frames, low watermark 0.85 (17 frames). */
  tm = make_tm_low(40, 80, 0, 0, 0.85);
  if (!tm) {
    free(m.t);
    return;
  }
  for (int i = 0; i < 20; i++) add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
  static const size_t order[] = {9, 3, 15, 0, 11, 7, 18, 4};
  for (size_t i = 0; i < 8; i++) CHECK(gh_tensor_advise(tm, m.t[order[i]].p, GH_ADVICE_COLD) == GH_OK);
  const uint64_t w1 = waits_of(tm);
  uint64_t first = 0, second = 0;
  for (size_t i = 0; i < 4; i++) first |= BIT(order[i]), second |= BIT(order[4 + i]);
  /* One more frame: 4 go at once (21 - 17), the 4 oldest marks. */
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.evictions, 4);
  CHECK_EQ_U64(host_mask(tm, &m), first);
  CHECK_EQ_U64(waits_of(tm) - w1, 1);  /* one batch: one wait for their stream */
  /* Three more fit in the room the batch made. */
  for (int k = 0; k < 3; k++) add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.evictions, 4);
  /* The next one: the other 4. */
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.evictions, 8);
  CHECK_EQ_U64(host_mask(tm, &m), first | second);
  CHECK_EQ_U64(waits_of(tm) - w1, 2);
  printf("advice: %llu evictions in 2 batches, in advice order\n", (unsigned long long)st.evictions);
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* ------------------------------------------------------ record_stream */
/* A stream named by gh_tensor_record_stream: the free's stream waits for it
 * (one stream_wait a named stream other than the free's); none for the
 * free's own stream, none without the call; more named streams than a
 * tensor tracks: the free waits for every stream seen. Bad pointers fail
 * with nothing changed. */
static void record_stream(void) {
  gh_tmgr_t* tm = make_tm(16, 16, 0, 0);
  if (!tm) return;
  uint64_t w0 = 0, w1 = 0;
  void *p = NULL, *q = NULL, *r = NULL;
  CHECK(gh_tensor_alloc(tm, MiB, GH_KIND_ACTIVATIONS, streams[1], &p) == GH_OK);
  CHECK(gh_tensor_alloc(tm, MiB, GH_KIND_ACTIVATIONS, streams[1], &q) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 3 * MiB, GH_KIND_ACTIVATIONS, streams[1], &r) == GH_OK);
  CHECK(gh_tensor_record_stream(tm, p, streams[2]) == GH_OK);
  CHECK(gh_tensor_record_stream(tm, p, streams[2]) == GH_OK);  /* twice: one wait still */
  CHECK(gh_tensor_record_stream(tm, q, streams[1]) == GH_OK);  /* the free's own stream */
  /* The event on streams[2] refused: the free fails and p stays live. */
  gh_tmgr_stats_t s;
  CHECK(_gh_tmgr_sim_fail_event(tm, 1, NULL) == GH_OK);
  CHECK(gh_tensor_free(tm, p, streams[1]) == GH_ERR_CUDA);
  CHECK(_gh_tmgr_sim_fail_event(tm, 0, NULL) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK_EQ_U64(s.tensors[GH_KIND_ACTIVATIONS], 3);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w0) == GH_OK);
  CHECK(gh_tensor_free(tm, p, streams[1]) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w1) == GH_OK);
  CHECK_EQ_U64(w1 - w0, 1);
  CHECK(gh_tensor_free(tm, q, streams[1]) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w0) == GH_OK);
  CHECK_EQ_U64(w0 - w1, 0);
  CHECK(gh_tensor_record_stream(tm, p, streams[2]) == GH_ERR_DOUBLE_FREE);
  int local = 0;
  CHECK(gh_tensor_record_stream(tm, &local, streams[2]) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_record_stream(NULL, r, streams[2]) == GH_ERR_INVAL);
  /* Six streams named: more than a tensor tracks (4); the free on
   * streams[0] waits for every stream seen but its own. */
  for (uintptr_t s = 0x3000; s < 0x3000 + 6 * 0x100; s += 0x100)
    CHECK(gh_tensor_record_stream(tm, r, (gh_stream_t)s) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w0) == GH_OK);
  CHECK(gh_tensor_free(tm, r, streams[0]) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w1) == GH_OK);
  CHECK(w1 - w0 >= 7);  /* streams[1], [2] and the six (and any other seen) */
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* ------------------------------------------------------------ adapters */
/* gh_tmgr_record_history's ring: entries in order with their sizes,
 * streams, kinds and tags; the oldest dropped and counted once it is
 * full; a smaller ring keeps the newest; 0 stops and drops; an OOM entry;
 * PyTorch's entry point tags its entries through the tag function. */
static uint64_t hist_tag_calls;
static uint64_t hist_tag(size_t size) { return hist_tag_calls++, 0x7a90000ull + size; }

static void history(void) {
  gh_tmgr_t* tm = make_tm(16, 16, 0, 0);
  if (!tm) return;
  gh_hist_entry_t e[8];
  size_t n = 9;
  uint64_t dropped = 9;
  CHECK(gh_tmgr_history(tm, e, 8, &n, &dropped) == GH_OK && n == 0 && dropped == 0);  /* off by default */
  void *a = NULL, *b = NULL;
  CHECK(gh_tensor_alloc(tm, 1000, GH_KIND_WEIGHTS, streams[1], &a) == GH_OK);  /* not recorded */
  CHECK(gh_tmgr_record_history(tm, 4) == GH_OK);
  gh_hist_context(77);
  CHECK(gh_tensor_alloc(tm, 3 * MiB, GH_KIND_OPTIMIZER, streams[2], &b) == GH_OK);
  gh_hist_context(0);
  gh_tensor_info_t ti[4];
  CHECK(gh_tmgr_tensor_map(tm, ti, 4, &n) == GH_OK && n == 2);
  const gh_tensor_info_t* tb = ti[0].ptr == (uintptr_t)b ? &ti[0] : &ti[1];
  const gh_tensor_info_t* ta = tb == &ti[0] ? &ti[1] : &ti[0];
  CHECK(tb->ptr == (uintptr_t)b && tb->run && tb->context == 77 && tb->extent == 2 * 2 * MiB);
  CHECK(ta->ptr == (uintptr_t)a && !ta->run && ta->context == 0 && ta->extent == ta->span);
  CHECK(gh_tensor_free(tm, a, streams[1]) == GH_OK);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);  /* waits for the free: its completion */
  CHECK(gh_tmgr_history(tm, e, 8, &n, &dropped) == GH_OK && n == 3 && dropped == 0);
  CHECK(e[0].action == GH_HIST_ALLOC && e[0].addr == (uintptr_t)b && e[0].size == 3 * MiB);
  CHECK(e[0].kind == GH_KIND_OPTIMIZER && e[0].stream == (uintptr_t)streams[2] && e[0].context == 77);
  CHECK(e[1].action == GH_HIST_FREE_REQUESTED && e[1].addr == (uintptr_t)a && e[1].size == 1000);
  CHECK(e[1].kind == GH_KIND_WEIGHTS && e[1].stream == (uintptr_t)streams[1] && e[1].context == 0);
  CHECK(e[2].action == GH_HIST_FREE_COMPLETED && e[2].addr == (uintptr_t)a && e[2].size == 1000);
  CHECK(e[0].time_ns <= e[1].time_ns && e[1].time_ns <= e[2].time_ns);
  /* Refused for want of room: an OOM entry, no address, the budget's free bytes. */
  void* big = (void*)1;
  CHECK(gh_tensor_alloc(tm, 64 * MiB, GH_KIND_ACTIVATIONS, streams[0], &big) == GH_ERR_BUDGET);
  CHECK(gh_tmgr_history(tm, e, 8, &n, &dropped) == GH_OK && n == 4 && dropped == 0);
  CHECK(e[3].action == GH_HIST_OOM && e[3].addr == 0 && e[3].size == 64 * MiB);
  CHECK(e[3].device_free > 0 && e[3].device_free <= 16 * MiB);
  /* Full: each new entry drops the oldest. */
  CHECK(gh_tensor_free(tm, b, streams[2]) == GH_OK);
  CHECK(gh_tmgr_history(tm, e, 8, &n, &dropped) == GH_OK && n == 4 && dropped == 1);
  CHECK(e[0].action == GH_HIST_FREE_REQUESTED && e[0].addr == (uintptr_t)a);
  CHECK(e[3].action == GH_HIST_FREE_REQUESTED && e[3].addr == (uintptr_t)b);
  /* A short array gets the oldest. */
  CHECK(gh_tmgr_history(tm, e, 1, &n, NULL) == GH_OK && n == 4 && e[0].addr == (uintptr_t)a);
  /* A smaller ring keeps the newest two; the two cut are counted. */
  CHECK(gh_tmgr_record_history(tm, 2) == GH_OK);
  CHECK(gh_tmgr_history(tm, e, 8, &n, &dropped) == GH_OK && n == 2 && dropped == 3);
  CHECK(e[0].action == GH_HIST_OOM && e[1].addr == (uintptr_t)b);
  /* A ring grows as entries come, up to its size, then wraps. */
  CHECK(gh_tmgr_record_history(tm, 10000) == GH_OK);
  for (int i = 0; i < 6000; i++) {
    CHECK(gh_tensor_alloc(tm, 512, GH_KIND_WEIGHTS, streams[1], &a) == GH_OK);
    CHECK(gh_tensor_free(tm, a, streams[1]) == GH_OK);
  }
  CHECK(gh_tmgr_history(tm, NULL, 0, &n, &dropped) == GH_OK && n == 10000 && dropped > 2000);
  gh_hist_entry_t* many = calloc(10000, sizeof *many);
  CHECK(gh_tmgr_history(tm, many, 10000, &n, NULL) == GH_OK);
  for (size_t i = 1; i < n; i++) CHECK(many[i].time_ns >= many[i - 1].time_ns);
  CHECK(many[n - 1].action == GH_HIST_FREE_REQUESTED && many[n - 1].addr == (uintptr_t)a);
  free(many);
  /* 0: off, everything dropped; nothing recorded after. */
  CHECK(gh_tmgr_record_history(tm, 0) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 1000, GH_KIND_WEIGHTS, streams[1], &a) == GH_OK);
  CHECK(gh_tmgr_history(tm, e, 8, &n, &dropped) == GH_OK && n == 0 && dropped == 0);
  CHECK(gh_tensor_free(tm, a, streams[1]) == GH_OK);
  /* Bad arguments. */
  CHECK(gh_tmgr_record_history(NULL, 4) == GH_ERR_INVAL);
  CHECK(gh_tmgr_record_history(tm, SIZE_MAX) == GH_ERR_INVAL);
  CHECK(gh_tmgr_history(NULL, e, 8, &n, NULL) == GH_ERR_INVAL);
  CHECK(gh_tmgr_history(tm, NULL, 8, &n, NULL) == GH_ERR_INVAL);
  CHECK(gh_tmgr_history(tm, e, 8, NULL, NULL) == GH_ERR_INVAL);
  CHECK(gh_tmgr_tensor_map(NULL, NULL, 0, &n) == GH_ERR_INVAL);
  CHECK(gh_tmgr_tensor_map(tm, NULL, 1, &n) == GH_ERR_INVAL);
  CHECK(gh_tmgr_tensor_map(tm, NULL, 0, NULL) == GH_ERR_INVAL);
  /* PyTorch's entry point: the tag function is asked once per allocation,
   * with its size, and its answer tags the alloc entry only. */
  CHECK(gh_tmgr_set_global(tm) == GH_OK);
  CHECK(gh_tmgr_record_history(tm, 8) == GH_OK);
  gh_torch_set_history_context(hist_tag);
  void* p = gh_torch_alloc(5000, 0, streams[1]);
  CHECK(p != NULL && hist_tag_calls == 1);
  gh_torch_free(p, 5000, 0, streams[1]);
  CHECK(gh_torch_alloc(0, 0, streams[1]) == NULL && hist_tag_calls == 1);  /* size 0: not asked */
  gh_torch_set_history_context(NULL);
  gh_hist_context(55);  /* the caller's own tag: left alone with no function */
  p = gh_torch_alloc(6000, 0, streams[1]);
  gh_hist_context(0);
  CHECK(p != NULL && hist_tag_calls == 1);
  gh_torch_free(p, 6000, 0, streams[1]);
  /* (the first entries may complete the frees above, made while off) */
  CHECK(gh_tmgr_history(tm, e, 8, &n, &dropped) == GH_OK && n >= 4 && n <= 8);
  size_t k = 0;
  for (; k < n && e[k].action != GH_HIST_ALLOC; k++) CHECK(e[k].action == GH_HIST_FREE_COMPLETED);
  CHECK(k + 1 < n && e[k].size == 5000 && e[k].context == 0x7a90000ull + 5000);
  CHECK(e[k + 1].action == GH_HIST_FREE_REQUESTED && e[k + 1].size == 5000 && e[k + 1].context == 0);
  k += 2;
  while (k < n && e[k].action != GH_HIST_ALLOC) k++;
  CHECK(k < n && e[k].size == 6000 && e[k].context == 55);
  CHECK(gh_tmgr_set_global(NULL) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);  /* (with its ring) */
}

static void adapters(void) {
  gh_tmgr_t* tm = make_tm(16, 32, 0, 0);
  if (!tm) return;
  CHECK(gh_tmgr_set_global(tm) == GH_OK);
  CHECK(gh_tmgr_global() == tm);
  gh_tmgr_t* other = make_tm(8, 8, 0, 0);
  CHECK(gh_tmgr_set_global(other) == GH_ERR_INVAL);
  void* p = gh_torch_alloc(1000, 0, streams[1]);
  CHECK(p != NULL);
  CHECK(gh_torch_alloc(0, 0, NULL) == NULL);
  CHECK(gh_torch_alloc(-5, 0, NULL) == NULL);
  void* q = gh_cupy_malloc(NULL, 3 * MiB, 0);
  CHECK(q != NULL);
  CHECK(gh_cupy_malloc(NULL, 0, 0) == NULL);
  CHECK(gh_cupy_malloc(NULL, (size_t)1 << 45, 0) == NULL);
  CHECK(strstr(gh_last_error_detail(), "budget") != NULL || strlen(gh_last_error_detail()) > 0);
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK_EQ_U64(s.tensors[GH_KIND_ACTIVATIONS], 2);
  gh_torch_free(p, 1000, 0, streams[1]);
  gh_torch_free(p, 1000, 0, streams[1]);  /* double: ignored, recorded */
  CHECK(strstr(gh_last_error_detail(), "freed already") != NULL);
  gh_cupy_free(NULL, q, 0);
  gh_cupy_free(NULL, NULL, 0);
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK_EQ_U64(s.tensors[GH_KIND_ACTIVATIONS], 0);
  /* No memory for a stream that is capturing a CUDA graph: the graph would
   * keep its address after PyTorch freed it. Other streams still get it. */
  CHECK(_gh_tmgr_sim_capture(tm, streams[2]) == GH_OK);
  CHECK(gh_torch_alloc(1000, 0, streams[2]) == NULL);
  CHECK(strstr(gh_last_error_detail(), "capturing a CUDA graph") != NULL);
  void* c1 = gh_torch_alloc(1000, 0, streams[0]);
  CHECK(c1 != NULL);
  CHECK(_gh_tmgr_sim_capture(tm, NULL) == GH_OK);
  void* c2 = gh_torch_alloc(1000, 0, streams[2]);
  CHECK(c2 != NULL);
  gh_torch_free(c1, 1000, 0, streams[0]);
  gh_torch_free(c2, 1000, 0, streams[2]);
  /* Memory of another device than the manager's is refused (the manager
   * here is on device 0, as the simulation reports for device -1). */
  CHECK(gh_torch_alloc(1000, 1, streams[1]) == NULL);
  CHECK(strstr(gh_last_error_detail(), "on device 1") != NULL);
  CHECK(strstr(gh_last_error_detail(), "serves device 0") != NULL);
  CHECK(gh_cupy_malloc(NULL, 1000, 3) == NULL);
  CHECK(strstr(gh_last_error_detail(), "gh_cupy_malloc") != NULL);
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK_EQ_U64(s.tensors[GH_KIND_ACTIVATIONS], 0);
  CHECK(gh_tmgr_set_global(NULL) == GH_OK);
  CHECK(gh_tmgr_set_global(other) == GH_OK);
  CHECK(gh_tmgr_global() == other);
  CHECK(gh_tmgr_set_global(NULL) == GH_OK);
  CHECK(gh_tmgr_destroy(other) == GH_OK);  /* no tensors, no pool */
  /* A manager on device 2 serves device 2 (and -1: any), not 0. */
  gh_tmgr_options_t o2;
  gh_tmgr_options_init(&o2);
  o2.backend = GH_BACKEND_SIM;
  o2.device = 2;
  o2.device_budget = 8 * MiB;
  o2.host_budget = 8 * MiB;
  o2.host_pool_frames = 0;
  gh_tmgr_t* dev2 = NULL;
  CHECK(gh_tmgr_create(&dev2, &o2) == GH_OK);
  if (dev2) {
    CHECK(gh_tmgr_set_global(dev2) == GH_OK);
    CHECK(gh_torch_alloc(1000, 0, NULL) == NULL);
    CHECK(strstr(gh_last_error_detail(), "serves device 2") != NULL);
    void* r = gh_torch_alloc(1000, 2, NULL);
    CHECK(r != NULL);
    void* r2 = gh_cupy_malloc(NULL, 1000, (int)-1);
    CHECK(r2 != NULL);
    gh_torch_free(r, 1000, 2, NULL);
    gh_cupy_free(NULL, r2, 2);
    CHECK(gh_tmgr_set_global(NULL) == GH_OK);
    CHECK(gh_tmgr_destroy(dev2) == GH_OK);
  }
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* Host memory given back by restores is kept for the next evictions (a
 * training step evicts and restores about the same bytes every step), and
 * gh_tmgr_empty_cache trims it back to the pool's target. */
static void host_reuse(void) {
  gh_tmgr_t* tm = make_tm(64, 64, 2, 0);
  /* Whole chunks (3 of 8 frames): no single host frame is taken from the
   * pool, whose thread would then make new ones between the rounds. */
  CHECK(_gh_tmgr_set_chunk(tm, 8) == GH_OK);
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  const size_t fb = s.frame_bytes, frames = 24, bytes = frames * fb;
  void* p = NULL;
  CHECK(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, NULL, &p) == GH_OK && p);
  memset(p, 0x5A, bytes);
  /* The pool thread fills its target (2 single frames) in the background:
   * wait for it, or its frames would count in live1 and not in live0. */
  for (int i = 0; i < 5000 && gh_tmgr_stats(tm, &s) == GH_OK && s.host_pool_frames < 2; i++) usleep(1000);
  CHECK(s.host_pool_frames >= 2);
  size_t live0 = 0, live1 = 0;
  for (int round = 0; round < 3; round++) {
    CHECK(gh_tensor_evict(tm, p) == GH_OK);
    CHECK(_gh_tmgr_sim_live(tm, GH_TIER_HOST, round ? &live1 : &live0) == GH_OK);
    CHECK(gh_tensor_prefetch(tm, p, NULL) == GH_OK);
    CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
    CHECK(s.host_pool_frames >= frames); /* all of it kept, not twice the target (4) */
    CHECK(_gh_tmgr_check(tm) == GH_OK);
  }
  CHECK(live1 <= live0); /* the later evictions created no host memory */
  for (size_t i = 0; i < bytes; i++)
    if (((const unsigned char*)p)[i] != 0x5A) {
      CHECK_MSG(0, "byte %zu changed", i);
      break;
    }
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK(s.host_pool_frames <= 2); /* trimmed to the target */
  CHECK(gh_tensor_free(tm, p, NULL) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

/* New tensors that find no device room even after eviction (here: the
 * budget is held by a pinned tensor) are placed in host memory, and
 * counted in host_placed_bytes: a large one by its frames, a small one by
 * its bytes. */
/* gh_tensor_prefetch_many: every pointer checked before anything moves;
 * the host frames of all the tensors come back in one batch (a shared frame
 * once, a repeated pointer once); none of them is evicted to make room for
 * the others. */
static void prefetch_many(void) {
  gh_tmgr_t* tm = make_tm_low(16, 64, 0, 0, 1.0);
  if (!tm) return;
  model_t m = {0};
  m.cap = 16;
  m.t = calloc(m.cap, sizeof *m.t);
  for (int i = 0; i < 6; i++) add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* T0..T5 */
  add_tensor(tm, &m, 100000, GH_KIND_WORKSPACE);                                /* S6, S7: one frame */
  add_tensor(tm, &m, 100000, GH_KIND_WORKSPACE);
  const int ev[] = {0, 1, 2, 6, 7};
  for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) CHECK(gh_tensor_evict(tm, m.t[ev[i]].p) == GH_OK);
  const uint64_t out = BIT(0) | BIT(1) | BIT(2) | BIT(6) | BIT(7);
  CHECK_EQ_U64(host_mask(tm, &m), out);
  gh_tmgr_stats_t s0, s1;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  int local = 0;
  void* bad[] = {m.t[0].p, &local};
  void* some[] = {m.t[0].p, m.t[1].p, m.t[6].p, m.t[7].p, m.t[0].p};
  CHECK(gh_tensor_prefetch_many(NULL, some, 5, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_prefetch_many(tm, NULL, 2, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_prefetch_many(tm, NULL, 0, NULL) == GH_OK);
  CHECK(gh_tensor_prefetch_many(tm, bad, 2, streams[2]) == GH_ERR_FOREIGN);
  void* null_one[] = {m.t[0].p, NULL};
  CHECK(gh_tensor_prefetch_many(tm, null_one, 2, streams[2]) == GH_ERR_INVAL);
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(s1.restores, s0.restores);
  CHECK_EQ_U64(s1.moves, s0.moves);
  CHECK_EQ_U64(host_mask(tm, &m), out);
  /* T0, T1 and the shared frame: 3 frames in one batch. */
  CHECK(gh_tensor_prefetch_many(tm, some, 5, streams[2]) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(s1.restores - s0.restores, 3);
  CHECK_EQ_U64(s1.moves - s0.moves, 1);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(2));
  /* All on the device already: no move. */
  CHECK(gh_tensor_prefetch_many(tm, some, 4, streams[2]) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK_EQ_U64(s0.moves, s1.moves);
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  /* Device full (8 frames: T0, T1, T3..T5, the slab, N8, N9) and every
   * tensor but T0 pinned: bringing T2 back together with T0 finds no
   * victim; T2 alone evicts T0. */
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* N8 */
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* N9 */
  CHECK_EQ_U64(host_mask(tm, &m), BIT(2));
  for (size_t i = 1; i < m.n; i++)
    if (i != 2) {
      CHECK(gh_tensor_pin(tm, m.t[i].p) == GH_OK);
      m.t[i].pins = 1;
    }
  void* pair[] = {m.t[0].p, m.t[2].p};
  CHECK(gh_tensor_prefetch_many(tm, pair, 2, streams[1]) == GH_ERR_BUDGET);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(2));
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(gh_tensor_prefetch_many(tm, &pair[1], 1, streams[1]) == GH_OK);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(0));
  /* T0 was no longer cold: CLOCK chose it. */
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(s1.clock_victims[GH_KIND_ACTIVATIONS] - s0.clock_victims[GH_KIND_ACTIVATIONS], 1);
  CHECK_EQ_U64(s1.clock_victims[GH_KIND_WORKSPACE], s0.clock_victims[GH_KIND_WORKSPACE]);
  for (size_t i = 1; i < m.n; i++)
    if (m.t[i].pins) {
      CHECK(gh_tensor_unpin(tm, m.t[i].p) == GH_OK);
      m.t[i].pins = 0;
    }
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* GH_ADVICE_QUIET: a cold mark whose moves wait for the events recorded
 * at the advice (quiet_waits) instead of draining the tensor's streams
 * (stream_waits); a prefetch moves it the same way and ends the advice, as
 * do any other advice and a free (their events destroyed: the simulated
 * provider counts leaks at close). */
static void quiet(void) {
  gh_tmgr_t* tm = make_tm_low(16, 64, 0, 0, 1.0); /* 8 device frames */
  if (!tm) return;
  model_t m = {0};
  m.cap = 16;
  m.t = calloc(m.cap, sizeof *m.t);
  for (int i = 0; i < 8; i++) add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* T0..T7 */
  CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[1].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[2].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[2].p, GH_ADVICE_NORMAL) == GH_OK); /* T2: normal again */
  CHECK(gh_tensor_advise(tm, m.t[3].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[0].p, (gh_advice_t)3) == GH_ERR_INVAL);
  gh_tmgr_stats_t s0, s1;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK_EQ_U64(s0.evictions, 0);
  /* A new frame evicts T0, the oldest cold: after its event, no drain. */
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* N8 */
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(0));
  CHECK_EQ_U64(s1.quiet_waits - s0.quiet_waits, 1);
  CHECK_EQ_U64(s1.stream_waits, s0.stream_waits);
  /* Bringing T0 back evicts T1 (quiet) and restores T0 (still quiet as it
   * moves): two event waits, no drain; T0 is normal afterwards. */
  CHECK(gh_tensor_prefetch(tm, m.t[0].p, streams[2]) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(1));
  CHECK_EQ_U64(s0.quiet_waits - s1.quiet_waits, 2);
  CHECK_EQ_U64(s0.stream_waits, s1.stream_waits);
  /* T0 advised cold (not quiet) and the next victim after T3 (quiet):
   * two new frames, one event wait and one drain. */
  CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_COLD) == GH_OK);
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* N9: T3 goes */
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* N10: T0 goes */
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(1) | BIT(3) | BIT(0));
  CHECK_EQ_U64(s1.quiet_waits - s0.quiet_waits, 1);
  CHECK(s1.stream_waits > s0.stream_waits);
  /* The host's waits by rule (_gh_tmgr_wait_times) agree: every event
   * waited for at a quiet move under "quiet", every drain under "drain". */
  uint64_t wn[9], wns[9];
  CHECK(_gh_tmgr_wait_times(tm, wn, wns) == GH_OK);
  CHECK_EQ_U64(wn[1], s1.quiet_waits);
  CHECK_EQ_U64(wn[0], s1.stream_waits);
  /* T1 and T3 went while quiet: their homes are unmapped (homeless), T0's
   * (cold) holds its host memory; a new advice maps theirs there too, and
   * their bytes read through it (check_one below). */
  int mapped = 0;
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[1].p, &mapped) == GH_OK && !mapped);
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[3].p, &mapped) == GH_OK && !mapped);
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[0].p, &mapped) == GH_OK && mapped);
  CHECK(gh_tensor_advise(tm, m.t[1].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[3].p, GH_ADVICE_NORMAL) == GH_OK);
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[1].p, &mapped) == GH_OK && mapped);
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[3].p, &mapped) == GH_OK && mapped);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(1) | BIT(3) | BIT(0));
  /* Quiet and then freed: its events go with it. */
  CHECK(gh_tensor_advise(tm, m.t[4].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_free(tm, m.t[4].p, NULL) == GH_OK);
  m.bytes -= m.t[4].bytes;
  m.t[4] = m.t[--m.n];
  CHECK(gh_tensor_advise(tm, m.t[5].p, GH_ADVICE_QUIET) == GH_OK); /* left quiet: destroy cleans up */
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* Homeless evictions: a quiet tensor evicted for room leaves its home
 * unmapped (no host memory mapped there, no unmap of it at the restore);
 * its prefetch maps the device memory back, an advice maps the host memory
 * (a failed map leaves it quiet and says so), a free needs neither; with
 * GPUHEAP_HOMELESS=0 its home holds the host memory as any tensor's. */
static void homeless_one(int on) {
  if (!on) setenv("GPUHEAP_HOMELESS", "0", 1);
  gh_tmgr_t* tm = make_tm_low(32, 96, 0, 0, 1.0); /* 16 device frames */
  unsetenv("GPUHEAP_HOMELESS");
  if (!tm) return;
  model_t m = {0};
  m.cap = 16;
  m.t = calloc(m.cap, sizeof *m.t);
  for (int i = 0; i < 8; i++) add_tensor(tm, &m, 4 * MiB, GH_KIND_ACTIVATIONS); /* T0..T7: 2 frames each: full */
  int mapped = 0;
  gh_tmgr_stats_t s0, s1;
  /* T0 cold before T1; quiet then, it keeps its place: it goes first. */
  CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[1].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  add_tensor(tm, &m, 4 * MiB, GH_KIND_ACTIVATIONS); /* N8: T0 goes */
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(host_mask(tm, &m), BIT(0));
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[0].p, &mapped) == GH_OK && mapped == !on);
  CHECK(_gh_tmgr_sim_mapped(tm, (uint8_t*)m.t[0].p + 2 * MiB, &mapped) == GH_OK && mapped == !on);
  CHECK_EQ_U64(s1.evictions - s0.evictions, 2);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  add_tensor(tm, &m, 4 * MiB, GH_KIND_ACTIVATIONS); /* N9: T1 (cold, not quiet) goes, its home mapped */
  CHECK_EQ_U64(host_mask(tm, &m), BIT(0) | BIT(1));
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[1].p, &mapped) == GH_OK && mapped);
  /* The prefetch: T0 back on the device, mapped, every byte (T2 goes). */
  CHECK(gh_tensor_advise(tm, m.t[2].p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, m.t[0].p, NULL) == GH_OK);
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[0].p, &mapped) == GH_OK && mapped);
  check_one(&m.t[0], 1);
  /* Quiet again and evicted (prefetch ahead of T1 takes the room); an advice
   * whose map fails leaves it quiet and homeless; the next one maps it. */
  CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_prefetch_ahead(tm, m.t[1].p, NULL) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, m.t[1].p, NULL) == GH_OK);
  CHECK(host_mask(tm, &m) & BIT(0));
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[0].p, &mapped) == GH_OK && mapped == !on);
  if (on) {  /* an advice or an evict hint whose map fails: nothing changed, still homeless */
    CHECK(_gh_tmgr_sim_fail_map(tm, 1) == GH_OK);
    CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_NORMAL) == GH_ERR_DEVICE_NOMEM);
    CHECK(_gh_tmgr_sim_mapped(tm, m.t[0].p, &mapped) == GH_OK && !mapped);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(_gh_tmgr_sim_fail_map(tm, 1) == GH_OK);
    CHECK(gh_tensor_evict(tm, m.t[0].p) == GH_ERR_DEVICE_NOMEM);
    CHECK(_gh_tmgr_sim_mapped(tm, m.t[0].p, &mapped) == GH_OK && !mapped);
    CHECK(tier_of(tm, m.t[0].p) == GH_TIER_HOST);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
  }
  CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_NORMAL) == GH_OK);
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[0].p, &mapped) == GH_OK && mapped);
  check_one(&m.t[0], 1); /* read where it is: host memory at its home */
  /* Quiet, evicted and freed untouched: no map, no unmap of its home. */
  CHECK(gh_tensor_advise(tm, m.t[3].p, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_evict(tm, m.t[4].p) == GH_OK); /* an evict hint ends no other tensor's advice */
  CHECK(gh_tensor_advise(tm, m.t[5].p, GH_ADVICE_COLD) == GH_OK);
  for (int i = 0; i < 3 && !(host_mask(tm, &m) & BIT(3)); i++) add_tensor(tm, &m, 4 * MiB, GH_KIND_ACTIVATIONS);
  CHECK(host_mask(tm, &m) & BIT(3));
  CHECK(_gh_tmgr_sim_mapped(tm, m.t[3].p, &mapped) == GH_OK && mapped == !on);
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(gh_tensor_free(tm, m.t[3].p, NULL) == GH_OK);
  m.bytes -= m.t[3].bytes;
  m.t[3] = m.t[--m.n];
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(s1.vmm_calls[GH_VMM_UNMAP] - s0.vmm_calls[GH_VMM_UNMAP], (uint64_t)(on ? 0 : 1));
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* Cleaning (GPUHEAP_CLEAN): a training-like loop, its copies deferred
 * and run early at random. A forward makes activations (twice the device
 * budget), each advised cold then quiet; a backward prefetches them newest
 * first, reads and frees them. The first step cleans nothing (no target
 * yet); later ones clean at the quiet advice, and their forward's
 * evictions take clean units (no copy of their own, their device memory
 * reused after the clean copy only): no more bytes copied to the host a
 * step than the first step's, every byte back, the accounts whole after
 * every call. A host budget too small for the next eviction drops the
 * clean copies first. With "prefill" a forward cleans only until its first
 * eviction; the other modes clean after it too. */
static void cleaning_one(const char* mode) {
  const int prefill = strcmp(mode, "prefill") == 0;
  gh_tmgr_t* tm = make_clean_tm(mode, 32, 128, 8, 1); /* 16 device frames, 64 host ones */
  if (!tm) return;
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  CHECK(_gh_tmgr_sim_eager(tm, 4242, NULL) == GH_OK);
  enum { N = 10, STEPS = 4 }; /* 6 MiB (3 frames) each: 60 MiB against 32 */
  ref_t a[N];
  uint64_t per_step[STEPS] = {0}, c[4] = {0};
  const gh_stream_t s = streams[1];
  for (int step = 0; step < STEPS; step++) {
    gh_tmgr_stats_t s0, s1;
    CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
    for (int i = 0; i < N; i++) {
      void* p = NULL;
      CHECK(gh_tensor_alloc(tm, 6 * MiB, GH_KIND_ACTIVATIONS, s, &p) == GH_OK);
      if (!p) return;
      CHECK(_gh_tmgr_sim_run(tm, s) == GH_OK); /* its kernel, after what its stream waits for */
      a[i] = (ref_t){.p = p, .bytes = 6 * MiB, .stamp = rnd(), .kind = GH_KIND_ACTIVATIONS};
      pat_fill(p, 0, a[i].bytes, a[i].stamp);
      CHECK(gh_tensor_advise(tm, p, GH_ADVICE_COLD) == GH_OK);
      CHECK(gh_tensor_advise(tm, p, GH_ADVICE_QUIET) == GH_OK);
      CHECK(_gh_tmgr_check(tm) == GH_OK);
    }
    for (int i = N; i-- > 0;) {
      CHECK(gh_tensor_prefetch(tm, a[i].p, s) == GH_OK);
      CHECK(_gh_tmgr_sim_run(tm, s) == GH_OK);
      check_one(&a[i], 1);
      CHECK(gh_tensor_free(tm, a[i].p, s) == GH_OK);
      CHECK(_gh_tmgr_check(tm) == GH_OK);
    }
    CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
    per_step[step] = s1.bytes_evicted - s0.bytes_evicted;
    size_t target = 0;
    CHECK(_gh_tmgr_clean_counts(tm, c, NULL, &target) == GH_OK);
    if (step == 0) CHECK(c[0] == 0 && target == 0);
  }
  printf("cleaning (%s): %llu frames cleaned, %llu evicted clean, %llu dropped; MiB to the host a step: %llu, %llu, "
         "%llu, %llu\n", mode, (unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2],
         (unsigned long long)(per_step[0] / MiB), (unsigned long long)(per_step[1] / MiB),
         (unsigned long long)(per_step[2] / MiB), (unsigned long long)(per_step[3] / MiB));
  CHECK(c[0] > 0 && c[1] > 0);
  CHECK(per_step[STEPS - 1] > 0 && per_step[STEPS - 1] <= per_step[0]);

  /* Both budgets nearly spent (24 tensors of 3 frames against 16 device
   * and 64 host frames), every quiet unit cleaned while the host has room:
   * cleaning stops where the host is full, evictions go on. With
   * "prefill", at this forward's first eviction. */
  CHECK(_gh_tmgr_set_clean_target(tm, 1000) == GH_OK);
  model_t m = {0};
  m.cap = 24;
  m.t = calloc(m.cap, sizeof *m.t);
  uint64_t before[4];
  CHECK(_gh_tmgr_clean_counts(tm, before, NULL, NULL) == GH_OK);
  uint64_t cleaned_before = 0, cleaned_after = 0; /* frames cleaned before / after the first eviction */
  gh_tmgr_stats_t s0;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  while (m.n < m.cap) {
    uint64_t c0[4];
    CHECK(_gh_tmgr_clean_counts(tm, c0, NULL, NULL) == GH_OK);
    void* p = NULL;
    CHECK(gh_tensor_alloc(tm, 6 * MiB, GH_KIND_ACTIVATIONS, s, &p) == GH_OK);
    if (!p) break;
    CHECK(_gh_tmgr_sim_run(tm, s) == GH_OK);
    ref_t* r = &m.t[m.n++];
    *r = (ref_t){.p = p, .bytes = 6 * MiB, .stamp = rnd(), .kind = GH_KIND_ACTIVATIONS, .quiet = 1};
    pat_fill(p, 0, r->bytes, r->stamp);
    m.bytes += r->bytes;
    CHECK(gh_tensor_advise(tm, p, GH_ADVICE_COLD) == GH_OK);
    CHECK(gh_tensor_advise(tm, p, GH_ADVICE_QUIET) == GH_OK);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    uint64_t c1[4];
    gh_tmgr_stats_t sa;
    CHECK(_gh_tmgr_clean_counts(tm, c1, NULL, NULL) == GH_OK);
    CHECK(gh_tmgr_stats(tm, &sa) == GH_OK); /* (an eviction by this allocation: after) */
    *(sa.evictions > s0.evictions ? &cleaned_after : &cleaned_before) += c1[0] - c0[0];
  }
  printf("cleaning (%s): %llu frames cleaned before the forward's first eviction, %llu after\n", mode,
         (unsigned long long)cleaned_before, (unsigned long long)cleaned_after);
  CHECK(cleaned_before > 0);
  CHECK(prefill ? cleaned_after == 0 : cleaned_after > 0);
  CHECK(_gh_tmgr_clean_counts(tm, c, NULL, NULL) == GH_OK);
  CHECK(c[0] > before[0] && c[3] > before[3]); /* (prefill: skipped after the first eviction) */
  random_defer = 1; /* drain_and_destroy: each prefetched (quiet), its copies run, read */
  drain_and_destroy(tm, &m);
  random_defer = 0;
  free(m.t);
  /* A host budget too full for an eviction: the clean copies go first.
   * 16 device frames, 12 host ones, no pool: four quiet tensors of 3
   * frames cleaned (12 host frames), then a fifth evicted. */
  tm = make_clean_tm(mode, 32, 24, 0, 1);
  if (!tm) return;
  CHECK(_gh_tmgr_set_clean_target(tm, 1000) == GH_OK);
  m = (model_t){0};
  m.cap = 12;
  m.t = calloc(m.cap, sizeof *m.t);
  for (int i = 0; i < 5; i++) add_tensor(tm, &m, 6 * MiB, GH_KIND_ACTIVATIONS);
  for (int i = 0; i < 4; i++) {
    CHECK(gh_tensor_advise(tm, m.t[i].p, GH_ADVICE_QUIET) == GH_OK);
    m.t[i].quiet = 1;
  }
  size_t clean_now = 0;
  for (int k = 0; k < 6 && clean_now < 12; k++) { /* (=ready: allocations end by cleaning what waited) */
    add_tensor(tm, &m, 4096, GH_KIND_WORKSPACE);
    CHECK(_gh_tmgr_clean_counts(tm, before, &clean_now, NULL) == GH_OK);
  }
  CHECK(_gh_tmgr_clean_counts(tm, before, &clean_now, NULL) == GH_OK);
  CHECK_EQ_U64(clean_now, 12);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_evict(tm, m.t[4].p) == GH_OK);
  CHECK(tier_of(tm, m.t[4].p) == GH_TIER_HOST);
  CHECK(_gh_tmgr_clean_counts(tm, c, &clean_now, NULL) == GH_OK);
  CHECK(clean_now == 0 && c[2] == before[2] + 12);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* A unit cleaned right after its restore was queued (prefetched ahead,
 * its copy deferred): the cleaning copy runs after the restore's copy on
 * the other lane, so the host copy holds the restored bytes. (Two waits
 * order it here: the unit's last restore, and the pooled host memory that
 * restore gave back, which the cleaning takes; either alone suffices, so
 * removing one does not fail this case.) Repeated, with deferred copies
 * run only when waited for, then also early at random. */
static void clean_after_restore(void) {
  gh_tmgr_t* tm = make_clean_tm("1", 32, 128, 8, 1);
  if (!tm) return;
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  CHECK(_gh_tmgr_set_clean_target(tm, 1000) == GH_OK);
  const gh_stream_t s = streams[1];
  uint64_t c[4] = {0};
  for (int round = 0; round < 16; round++) {
    if (round == 8) CHECK(_gh_tmgr_sim_eager(tm, 777, NULL) == GH_OK); /* then run early at random too */
    void* p = NULL;
    CHECK(gh_tensor_alloc(tm, 6 * MiB, GH_KIND_ACTIVATIONS, s, &p) == GH_OK);
    if (!p) break;
    CHECK(_gh_tmgr_sim_run(tm, s) == GH_OK);
    ref_t r = {.p = p, .bytes = 6 * MiB, .stamp = rnd(), .kind = GH_KIND_ACTIVATIONS};
    pat_fill(p, 0, r.bytes, r.stamp);
    CHECK(gh_tensor_evict(tm, p) == GH_OK);
    CHECK(gh_tensor_prefetch_ahead(tm, p, s) == GH_OK); /* its restore copy deferred */
    CHECK(gh_tensor_advise(tm, p, GH_ADVICE_QUIET) == GH_OK); /* cleaned: after that copy */
    CHECK(gh_tensor_evict_ahead(tm, p) == GH_OK);  /* evicted clean: no copy of its own */
    CHECK(tier_of(tm, p) == GH_TIER_HOST);
    CHECK(gh_tensor_prefetch(tm, p, s) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s) == GH_OK);
    check_one(&r, 1);
    CHECK(gh_tensor_free(tm, p, s) == GH_OK);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
  }
  CHECK(_gh_tmgr_clean_counts(tm, c, NULL, NULL) == GH_OK);
  CHECK(c[1] >= 16 * 3);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* A cleaning copy or its event refused: the advice returns the
 * provider's error, the advice itself holds (quiet, cold), the unit stays
 * on the device unclean with every byte, the accounts whole; the next
 * quiet advice cleans it. */
static void clean_fails(void) {
  gh_tmgr_t* tm = make_clean_tm("1", 32, 128, 8, 1);
  if (!tm) return;
  CHECK(_gh_tmgr_set_clean_target(tm, 1000) == GH_OK);
  model_t m = {0};
  m.cap = 2;
  m.t = calloc(m.cap, sizeof *m.t);
  add_tensor(tm, &m, 6 * MiB, GH_KIND_ACTIVATIONS);
  for (int kind = 0; kind < 2; kind++) { /* 0: the copy refused, 1: its event (the advice's own comes first) */
    CHECK((kind == 0 ? _gh_tmgr_sim_fail_copy(tm, 1) : _gh_tmgr_sim_fail_event(tm, 2, NULL)) == GH_OK);
    CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_QUIET) == GH_ERR_CUDA);
    size_t clean_now = 99;
    CHECK(_gh_tmgr_clean_counts(tm, (uint64_t[4]){0}, &clean_now, NULL) == GH_OK);
    CHECK_EQ_U64(clean_now, 0);
    CHECK(tier_of(tm, m.t[0].p) == GH_TIER_DEVICE);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    check_one(&m.t[0], 1);
    CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_NORMAL) == GH_OK); /* the quiet advice held: it ends */
  }
  CHECK(gh_tensor_advise(tm, m.t[0].p, GH_ADVICE_QUIET) == GH_OK);
  size_t clean_now = 0;
  CHECK(_gh_tmgr_clean_counts(tm, (uint64_t[4]){0}, &clean_now, NULL) == GH_OK);
  CHECK_EQ_U64(clean_now, 3);
  m.t[0].quiet = 1;
  drain_and_destroy(tm, &m);
  free(m.t);
}

static void cleaning(void) {
  /* (cleaning needs the restore stream: on for these whatever the run's setting) */
  const char* rs = getenv("GPUHEAP_RESTORE_STREAM");
  char* saved = rs ? strdup(rs) : NULL;
  unsetenv("GPUHEAP_RESTORE_STREAM");
  cleaning_one("1");
  cleaning_one("kernel");
  cleaning_one("ready");
  cleaning_one("prefill");
  clean_after_restore();
  clean_fails();
  if (saved) setenv("GPUHEAP_RESTORE_STREAM", saved, 1);
  free(saved);
}

static void homeless(void) {
  homeless_one(1);
  homeless_one(0);
}

/* With the host tier nearly full, eviction passes over victims larger
 * than the host room left and takes a smaller one that fits, instead of
 * choosing one it cannot move (and then placing the new tensor in host
 * memory, or failing a pin or restore). */
static void victims_fit_host(void) {
  gh_tmgr_t* tm = make_tm_low(8, 6, 0, 0, 1.0); /* 4 device frames, 3 host frames */
  if (!tm) return;
  model_t m = {0};
  m.cap = 8;
  m.t = calloc(m.cap, sizeof *m.t);
  const size_t h = add_tensor(tm, &m, 3 * MiB, GH_KIND_ACTIVATIONS); /* 2 frames, then on the host */
  CHECK(gh_tensor_evict(tm, m.t[h].p) == GH_OK);
  CHECK(tier_of(tm, m.t[h].p) == GH_TIER_HOST);
  const size_t a = add_tensor(tm, &m, 3 * MiB, GH_KIND_ACTIVATIONS); /* 2 frames */
  const size_t b = add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS); /* 1 frame */
  add_tensor(tm, &m, 2 * MiB, GH_KIND_ACTIVATIONS);                  /* 1 frame: the device is full */
  CHECK(gh_tensor_advise(tm, m.t[a].p, GH_ADVICE_COLD) == GH_OK);   /* the oldest cold, but 2 frames */
  CHECK(gh_tensor_advise(tm, m.t[b].p, GH_ADVICE_COLD) == GH_OK);
  gh_tmgr_stats_t st;
  const size_t nw = add_tensor(tm, &m, 2 * MiB, GH_KIND_WORKSPACE); /* needs 1 frame; 1 host frame left */
  CHECK(tier_of(tm, m.t[nw].p) == GH_TIER_DEVICE);
  CHECK(tier_of(tm, m.t[b].p) == GH_TIER_HOST);
  CHECK(tier_of(tm, m.t[a].p) == GH_TIER_DEVICE);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.host_placed_bytes, 0);
  for (size_t i = 0; i < m.n; i++) check_one(&m.t[i], 1);
  check_stats(tm, &m);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  drain_and_destroy(tm, &m);
  free(m.t);
}

/* The cache's release order (gh_tm_cache_victim): a (4 frames) and b (2
 * frames) cached, a first (b first for "newest"); a request of 3 frames
 * fits neither and needs room. `policy` NULL (the default): the shorter b
 * goes and a stays; "oldest" and "newest": a goes and b stays. Then a run
 * of the size left takes it, with no provider call. */
static void cache_order(const char* policy) {
  if (policy) setenv("GPUHEAP_CACHE_RELEASE", policy, 1);
  gh_tmgr_t* tm = make_tm(16, 64, 0, 0); /* 8 device frames */
  if (policy) unsetenv("GPUHEAP_CACHE_RELEASE");
  if (!tm) return;
  const int keep_a = !policy, b_first = policy && !strcmp(policy, "newest");
  gh_tmgr_stats_t st;
  void *a = NULL, *b = NULL, *x = NULL, *y = NULL;
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, NULL, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, NULL, &b) == GH_OK);
  CHECK(gh_tensor_free(tm, b_first ? b : a, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tensor_free(tm, b_first ? a : b, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.cached_frames, 6);
  CHECK(gh_tensor_alloc(tm, 6 * MiB, GH_KIND_ACTIVATIONS, NULL, &x) == GH_OK);
  CHECK(tier_of(tm, x) == GH_TIER_DEVICE);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.cached_frames, keep_a ? 4 : 2);
  CHECK_EQ_U64(st.host_placed_bytes, 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  const uint64_t maps = st.vmm_calls[GH_VMM_MAP];
  CHECK(gh_tensor_alloc(tm, keep_a ? 8 * MiB : 4 * MiB, GH_KIND_WORKSPACE, NULL, &y) == GH_OK);
  CHECK(y == (keep_a ? a : b)); /* the run left stayed cached */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.vmm_calls[GH_VMM_MAP], maps);
  CHECK(gh_tensor_free(tm, y, NULL) == GH_OK && gh_tensor_free(tm, x, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK_EQ_U64(sim_dev(tm), 0);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

/* A long run that outlives GH_TM_CACHE_STALE (256) newer cached runs goes
 * first, though shorter ones are cached: its size is no longer asked for. */
static void cache_stale(void) {
  gh_tmgr_t* tm = make_tm(16, 64, 0, 0); /* 8 device frames */
  if (!tm) return;
  gh_tmgr_stats_t st;
  void *a = NULL, *b = NULL, *x = NULL;
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, NULL, &a) == GH_OK);
  CHECK(gh_tensor_free(tm, a, NULL) == GH_OK);
  settle(tm);
  /* A run of 2 frames cached 300 times (taken back each time). */
  for (int i = 0; i < 300; i++) {
    CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, NULL, &b) == GH_OK);
    CHECK(gh_tensor_free(tm, b, NULL) == GH_OK);
    settle(tm);
  }
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.cached_frames, 6);
  /* 3 frames: the stale 4-frame run goes, the newer 2-frame one stays. */
  CHECK(gh_tensor_alloc(tm, 6 * MiB, GH_KIND_ACTIVATIONS, NULL, &x) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.cached_frames, 2);
  void* b2 = NULL;
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_WORKSPACE, NULL, &b2) == GH_OK);
  CHECK(b2 == b);
  CHECK(gh_tensor_free(tm, b2, NULL) == GH_OK && gh_tensor_free(tm, x, NULL) == GH_OK);
  settle(tm);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

/* Device allocations given back are kept as spares for the next one of
 * their size (no create, no release), within the budget, and given back by
 * empty_cache. Counted through the stats' physical-memory calls, which the
 * simulation makes too. */
static void spares(void) {
  cache_order(NULL);
  cache_order("oldest");
  cache_order("newest");
  cache_stale();
  gh_tmgr_t* tm = make_tm(16, 64, 0, 0); /* 8 device frames */
  if (!tm) return;
  gh_tmgr_stats_t st;
  void *e = NULL, *f = NULL;

  /* An eviction leaves its device allocation spare; the restore takes it
   * back: no create, no release. */
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, NULL, &e) == GH_OK);
  memset(e, 0x5a, 8 * MiB);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  const uint64_t releases = st.vmm_calls[GH_VMM_RELEASE];
  CHECK(gh_tensor_evict(tm, e) == GH_OK); /* creates host frames, releases nothing */
  CHECK(tier_of(tm, e) == GH_TIER_HOST);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.vmm_calls[GH_VMM_RELEASE], releases);
  CHECK_EQ_U64(st.spare_frames, 4);
  CHECK_EQ_U64(sim_dev(tm), 4);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  const uint64_t creates = st.vmm_calls[GH_VMM_CREATE];
  CHECK(gh_tensor_prefetch(tm, e, NULL) == GH_OK); /* host frames go to the pool */
  CHECK(tier_of(tm, e) == GH_TIER_DEVICE);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.spare_frames, 0);
  CHECK_EQ_U64(st.vmm_calls[GH_VMM_CREATE], creates);
  CHECK_EQ_U64(st.vmm_calls[GH_VMM_RELEASE], releases);
  for (size_t i = 0; i < 8 * MiB; i += 4099) CHECK(((const uint8_t*)e)[i] == 0x5a);

  /* Spares are not room taken: evict again (4 spare frames), then a tensor
   * of the whole budget goes to the device, the spare released for it. */
  CHECK(gh_tensor_evict(tm, e) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.spare_frames, 4);
  CHECK(gh_tensor_alloc(tm, 16 * MiB, GH_KIND_WORKSPACE, NULL, &f) == GH_OK);
  CHECK(tier_of(tm, f) == GH_TIER_DEVICE);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.spare_frames, 0);
  CHECK_EQ_U64(st.host_placed_bytes, 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, f, NULL) == GH_OK);
  settle(tm);
  /* empty_cache gives spares back: f's run (cached) and e's restore. */
  CHECK(gh_tensor_prefetch(tm, e, NULL) == GH_OK);
  CHECK(gh_tensor_evict(tm, e) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.spare_frames > 0);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.spare_frames, 0);
  CHECK_EQ_U64(st.cached_frames, 0);
  CHECK_EQ_U64(sim_dev(tm), 0);
  CHECK(gh_tensor_free(tm, e, NULL) == GH_OK);
  /* A new chunk size gives back the device memory of the old one: a
   * spare and a cached run made with chunks of 2, none left after. */
  settle(tm);
  void* g = NULL;
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, NULL, &g) == GH_OK);
  CHECK(gh_tensor_evict(tm, g) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, g, NULL) == GH_OK);
  CHECK(gh_tensor_free(tm, g, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.spare_frames + st.cached_frames > 0);
  CHECK(_gh_tmgr_set_chunk(tm, 4) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.spare_frames, 0);
  CHECK_EQ_U64(st.cached_frames, 0);
  CHECK_EQ_U64(sim_dev(tm), 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

/* Device aliases: a device allocation is mapped at its alias on its first
 * move and keeps it, so a second evict / restore of the same tensor maps
 * only its home, one call a chunk each way (without aliases, with
 * GPUHEAP_DEVICE_ALIASES=0, every device allocation is staged: two). The
 * data survives both ways. */
static void device_aliases_one(int on) {
  if (!on) setenv("GPUHEAP_DEVICE_ALIASES", "0", 1);
  gh_tmgr_t* tm = make_tm(64, 64, 0, 0); /* 32 device frames */
  unsetenv("GPUHEAP_DEVICE_ALIASES");
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 8) == GH_OK);
  gh_tmgr_stats_t st;
  void* e = NULL;
  CHECK(gh_tensor_alloc(tm, 32 * MiB, GH_KIND_ACTIVATIONS, NULL, &e) == GH_OK); /* 2 chunks */
  pat_fill(e, 0, 32 * MiB, 77);
  uint64_t maps[3] = {0}, unmaps[3] = {0};
  for (int cycle = 0; cycle < 3; cycle++) {
    CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
    maps[cycle] = st.vmm_calls[GH_VMM_MAP], unmaps[cycle] = st.vmm_calls[GH_VMM_UNMAP];
    if (cycle == 2) break;
    CHECK(gh_tensor_evict(tm, e) == GH_OK);
    CHECK(tier_of(tm, e) == GH_TIER_HOST);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(pat_check(e, 0, 32 * MiB, 77) == SIZE_MAX);
    CHECK(gh_tensor_prefetch(tm, e, NULL) == GH_OK);
    CHECK(tier_of(tm, e) == GH_TIER_DEVICE);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(pat_check(e, 0, 32 * MiB, 77) == SIZE_MAX);
  }
  /* The second cycle: 2 chunks x (evict + restore). */
  CHECK_EQ_U64(maps[2] - maps[1], on ? 4 : 8);
  CHECK_EQ_U64(unmaps[2] - unmaps[1], on ? 4 : 8);
  CHECK(gh_tensor_free(tm, e, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK); /* spares and their aliases given back */
  CHECK_EQ_U64(sim_dev(tm), 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}
/* A full device-alias region: with room for one chunk's alias, a tensor
 * of two chunks moves with one chunk through its alias and the other
 * staged, in both directions; a second tensor's first move takes the alias
 * back from the spares. Every byte checked. */
static void device_aliases_full(void) {
  gh_tmgr_t* tm = make_tm(64, 64, 0, 0); /* 32 device frames; chunks of 8 */
  if (!tm) return;
  CHECK(_gh_tmgr_set_dalias_frames(tm, 1 << 30) == GH_ERR_INVAL);
  CHECK(_gh_tmgr_set_dalias_frames(tm, 8) == GH_OK);
  void *a = NULL, *b = NULL;
  CHECK(gh_tensor_alloc(tm, 32 * MiB, GH_KIND_ACTIVATIONS, NULL, &a) == GH_OK); /* 2 chunks */
  CHECK(gh_tensor_alloc(tm, 16 * MiB, GH_KIND_ACTIVATIONS, NULL, &b) == GH_OK); /* 1 chunk */
  pat_fill(a, 0, 32 * MiB, 5);
  pat_fill(b, 0, 16 * MiB, 6);
  gh_tmgr_stats_t st;
  for (int cycle = 0; cycle < 2; cycle++) {
    CHECK(gh_tensor_evict(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_HOST);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(gh_tensor_prefetch(tm, a, NULL) == GH_OK && tier_of(tm, a) == GH_TIER_DEVICE);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(gh_tensor_evict(tm, b) == GH_OK && tier_of(tm, b) == GH_TIER_HOST);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(gh_tensor_prefetch(tm, b, NULL) == GH_OK && tier_of(tm, b) == GH_TIER_DEVICE);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(pat_check(a, 0, 32 * MiB, 5) == SIZE_MAX);
    CHECK(pat_check(b, 0, 16 * MiB, 6) == SIZE_MAX);
  }
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.restores, 2 * (16 + 8));
  CHECK(_gh_tmgr_set_dalias_frames(tm, 8) == GH_ERR_INVAL); /* an alias is in use */
  CHECK(gh_tensor_free(tm, a, NULL) == GH_OK && gh_tensor_free(tm, b, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK_EQ_U64(sim_dev(tm), 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

static void device_aliases(void) {
  device_aliases_one(1);
  device_aliases_one(0);
  device_aliases_full();
}

/* Same-stream reuse: with events that never complete, a run freed on a
 * stream goes to the next allocation of its size on that stream at once
 * (the same address, its bytes as they were), and not to another stream, a
 * small tensor, a tensor much smaller, or from a run that has frames on
 * the host; a scan of the newest 64 frees that finds nothing hands nothing
 * over. Off (GPUHEAP_SAME_STREAM_REUSE=0): never. */
static void same_stream_reuse_one(int on) {
  if (!on) setenv("GPUHEAP_SAME_STREAM_REUSE", "0", 1);
  gh_tmgr_t* tm = make_tm(64, 64, 0, 1000000); /* events never complete by queries alone */
  unsetenv("GPUHEAP_SAME_STREAM_REUSE");
  if (!tm) return;
  const gh_stream_t s = streams[1], s2 = streams[2];
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
  CHECK(gh_tensor_alloc(tm, 3 * MiB, GH_KIND_ACTIVATIONS, s, &a) == GH_OK); /* 2 frames */
  pat_fill(a, 0, 3 * MiB, 9);
  CHECK(gh_tensor_free(tm, a, s) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 3 * MiB, GH_KIND_ACTIVATIONS, s2, &b) == GH_OK);
  CHECK(b != a); /* another stream: after the event only */
  CHECK(gh_tensor_alloc(tm, 1 * MiB + 4096, GH_KIND_ACTIVATIONS, s, &c) == GH_OK);
  CHECK(c != a); /* 1 frame: a is more than a quarter larger */
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_WEIGHTS, s, &d) == GH_OK);
  CHECK((d == a) == on); /* 2 frames on the free's stream */
  if (on) CHECK(pat_check(d, 0, 3 * MiB, 9) == SIZE_MAX); /* the same memory, untouched */
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* A run with a frame on the host is not handed over. */
  CHECK(gh_tensor_evict(tm, d) == GH_OK && tier_of(tm, d) == GH_TIER_HOST);
  CHECK(gh_tensor_free(tm, d, s) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_WEIGHTS, s, &e) == GH_OK);
  CHECK(e != d);
  CHECK(tier_of(tm, e) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, b, s2) == GH_OK && gh_tensor_free(tm, c, s) == GH_OK && gh_tensor_free(tm, e, s) == GH_OK);
  /* More pending frees than the scan looks at (64), none of them fit: a
   * 1-frame run behind 70 small frees is not handed to a 2-frame request. */
  void* one = NULL;
  CHECK(gh_tensor_alloc(tm, 1 * MiB + 4096, GH_KIND_ACTIVATIONS, s, &one) == GH_OK);
  CHECK(gh_tensor_free(tm, one, s) == GH_OK);
  void* small[70];
  for (int i = 0; i < 70; i++) CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_WORKSPACE, s, &small[i]) == GH_OK);
  for (int i = 0; i < 70; i++) CHECK(gh_tensor_free(tm, small[i], s) == GH_OK);
  void* two = NULL;
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s, &two) == GH_OK);
  CHECK(two != one);
  for (int i = 0; i < 70; i++) CHECK(two != small[i]);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, two, s) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}
static void same_stream_reuse(void) {
  same_stream_reuse_one(0);
  same_stream_reuse_one(1);
}

/* Ordered moves, with the simulation's copies deferred (a copy runs only
 * once a stream that waits for it runs, or the host waits for it): a test
 * "kernel" on stream s first lets s's queued work run (_gh_tmgr_sim_run).
 *   1. An eviction for an allocation on s2 of a tensor used on s1 returns
 *      with its copy still pending; the new tensor takes the victim's old
 *      device memory, so s2 must wait for the copy: writing the new tensor
 *      after running s2 alone must not reach the victim's host copy.
 *   2. A restore (prefetch on s3) gives the tensor's host memory back to
 *      the pool with its copy still reading it; a tensor then placed in
 *      that host memory on s4 must make s4 wait for it.
 *   3. A prefetch on a stream new to a tensor whose ordered restore is
 *      still copying (nothing left to move) must make that stream wait.
 * Switched off (GPUHEAP_ORDERED_MOVES=0): every move waits, no copy is
 * left pending. With the mover (mover = 1), held during step 1: the
 * eviction returns with the victim's stream waiting for the mover's word
 * (the new tensor's stream does not), and nothing moves on until it is
 * let go. */
static void ordered_moves_one(int on, int mover) {
  if (!on) setenv("GPUHEAP_ORDERED_MOVES", "0", 1);
  setenv("GPUHEAP_MOVER", mover ? "1" : "0", 1);
  gh_tmgr_t* tm = make_tm(8, 32, 0, 1000000); /* 4 device frames; events never complete by queries alone */
  unsetenv("GPUHEAP_ORDERED_MOVES");
  unsetenv("GPUHEAP_MOVER");
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000, s2 = (gh_stream_t)(uintptr_t)0x2000,
                    s3 = (gh_stream_t)(uintptr_t)0x3000, s4 = (gh_stream_t)(uintptr_t)0x4000,
                    s5 = (gh_stream_t)(uintptr_t)0x5000;
  const size_t sz = 4 * MiB; /* 2 frames: one chunk */
  void *a = NULL, *p = NULL, *b = NULL, *c = NULL;
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_WEIGHTS, s1, &p) == GH_OK);
  CHECK(gh_tensor_pin(tm, p) == GH_OK);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  pat_fill(a, 0, sz, 11);
  pat_fill(p, 0, sz, 12);
  CHECK(gh_tensor_advise(tm, a, GH_ADVICE_COLD) == GH_OK);
  /* 1. */
  uint64_t w0 = 0, w1 = 0;
  size_t pending = 0;
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w0) == GH_OK);
  if (mover) CHECK(_gh_tmgr_mover_hold(tm, 1) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s2, &b) == GH_OK);
  if (mover) {
    int h1 = 0, h2 = 1;
    CHECK(_gh_tmgr_sim_held(tm, s1, &h1) == GH_OK && _gh_tmgr_sim_held(tm, s2, &h2) == GH_OK);
    CHECK(h1 == on && h2 == 0);
    CHECK(_gh_tmgr_mover_hold(tm, 0) == GH_OK);
  }
  CHECK(tier_of(tm, a) == GH_TIER_HOST && tier_of(tm, b) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w1) == GH_OK);
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.ordered_moves, on ? 1 : 0);
  CHECK(on ? pending > 0 && w1 > w0 : pending == 0);
  CHECK(_gh_tmgr_sim_run(tm, s2) == GH_OK);
  pat_fill(b, 0, sz, 13);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(a, 0, sz, 11) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* 2. The restore evicts b (unpinned) for room; then a is pinned, and c,
   * with no device room left, goes to host memory: a's old one. */
  CHECK(gh_tensor_prefetch(tm, a, s3) == GH_OK);
  CHECK(tier_of(tm, a) == GH_TIER_DEVICE && tier_of(tm, b) == GH_TIER_HOST);
  CHECK(gh_tensor_pin(tm, a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s4, &c) == GH_OK);
  CHECK(tier_of(tm, c) == GH_TIER_HOST);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.ordered_moves, on ? 3 : 0); /* the eviction of b, the restore of a */
  CHECK(_gh_tmgr_sim_run(tm, s4) == GH_OK);
  pat_fill(c, 0, sz, 14);
  CHECK(_gh_tmgr_sim_run(tm, s3) == GH_OK);
  CHECK(pat_check(a, 0, sz, 11) == SIZE_MAX);
  CHECK(_gh_tmgr_sim_run(tm, s2) == GH_OK);
  CHECK(pat_check(b, 0, sz, 13) == SIZE_MAX);
  CHECK(pat_check(c, 0, sz, 14) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* 3. */
  CHECK(gh_tensor_unpin(tm, a) == GH_OK);
  CHECK(gh_tensor_free(tm, c, s4) == GH_OK);
  CHECK(gh_tensor_evict(tm, a) == GH_OK); /* an explicit eviction waits for its copies */
  CHECK(_gh_tmgr_sim_counts(tm, &pending, NULL) == GH_OK);
  CHECK_EQ_U64(pending, 0);
  pat_fill(a, 0, sz, 15);  /* in host memory now: its stream's kernels write there */
  CHECK(gh_tensor_prefetch(tm, a, s3) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, a, s5) == GH_OK);
  CHECK(_gh_tmgr_sim_run(tm, s5) == GH_OK);
  CHECK(pat_check(a, 0, sz, 15) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK && gh_tensor_free(tm, b, s2) == GH_OK);
  CHECK(gh_tensor_unpin(tm, p) == GH_OK);
  CHECK(pat_check(p, 0, sz, 12) == SIZE_MAX);
  CHECK(gh_tensor_free(tm, p, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}
/* Maps the driver refuses (the simulation fails the nth map on purpose):
 * a move whose home remap fails puts the old backing back and stops, the
 * tensor where it was with every byte; a device allocation whose alias map
 * fails moves through a staging window. A remap refused on the mover
 * cannot be undone: later allocations and prefetches fail with
 * GH_ERR_CORRUPT, the mover's word is written all the same (no stream
 * waits forever), and destroy still gives every frame back. */
static void failed_maps(void) {
  gh_tmgr_t* tm = make_tm(64, 64, 0, 0);
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 8) == GH_OK);
  void *e = NULL, *f = NULL;
  CHECK(gh_tensor_alloc(tm, 32 * MiB, GH_KIND_ACTIVATIONS, NULL, &e) == GH_OK); /* 2 chunks */
  pat_fill(e, 0, 32 * MiB, 81);
  CHECK(gh_tensor_evict(tm, e) == GH_OK && gh_tensor_prefetch(tm, e, NULL) == GH_OK); /* aliases, pooled host memory */
  CHECK(tier_of(tm, e) == GH_TIER_DEVICE);
  /* The first map of this eviction is unit 0's home: refused. */
  gh_tmgr_stats_t s0, s1;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_map(tm, 1) == GH_OK);
  CHECK(gh_tensor_evict(tm, e) == GH_ERR_DEVICE_NOMEM); /* nothing moved, and the driver's refusal said */
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(s1.evictions, s0.evictions);
  CHECK_EQ_U64(s1.frames[GH_TIER_DEVICE], s0.frames[GH_TIER_DEVICE]);
  CHECK(tier_of(tm, e) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(pat_check(e, 0, 32 * MiB, 81) == SIZE_MAX);
  CHECK(gh_tensor_evict(tm, e) == GH_OK && tier_of(tm, e) == GH_TIER_HOST);
  CHECK(pat_check(e, 0, 32 * MiB, 81) == SIZE_MAX);
  /* A new device allocation's first move: its alias map refused, staged. */
  CHECK(gh_tensor_alloc(tm, 16 * MiB, GH_KIND_ACTIVATIONS, NULL, &f) == GH_OK);
  pat_fill(f, 0, 16 * MiB, 82);
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_map(tm, 1) == GH_OK);
  CHECK(gh_tensor_evict(tm, f) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(s1.evictions - s0.evictions, 8);
  CHECK(tier_of(tm, f) == GH_TIER_HOST);
  CHECK(pat_check(f, 0, 16 * MiB, 82) == SIZE_MAX);
  CHECK(gh_tensor_prefetch(tm, f, NULL) == GH_OK && tier_of(tm, f) == GH_TIER_DEVICE);
  CHECK(pat_check(f, 0, 16 * MiB, 82) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, e, NULL) == GH_OK && gh_tensor_free(tm, f, NULL) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);

  /* On the mover. */
  setenv("GPUHEAP_MOVER", "1", 1);
  tm = make_tm(8, 32, 0, 0);
  unsetenv("GPUHEAP_MOVER");
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  const gh_stream_t s1s = (gh_stream_t)(uintptr_t)0x1000, s2s = (gh_stream_t)(uintptr_t)0x2000;
  void *a = NULL, *p = NULL, *b = NULL, *c = NULL;
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s1s, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_WEIGHTS, s1s, &p) == GH_OK && gh_tensor_pin(tm, p) == GH_OK);
  CHECK(gh_tensor_advise(tm, a, GH_ADVICE_COLD) == GH_OK);
  CHECK(_gh_tmgr_mover_hold(tm, 1) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s2s, &b) == GH_OK); /* a's remap queued */
  CHECK(_gh_tmgr_sim_fail_map(tm, 1) == GH_OK);                            /* ... and refused */
  CHECK(_gh_tmgr_mover_hold(tm, 0) == GH_OK);
  CHECK(_gh_tmgr_sim_run(tm, s1s) == GH_OK); /* waits for the mover; its word was written */
  int held = 1;
  CHECK(_gh_tmgr_sim_held(tm, s1s, &held) == GH_OK && held == 0);
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_WORKSPACE, s2s, &c) == GH_ERR_CORRUPT && c == NULL);
  CHECK(strstr(gh_last_error_detail(), "mover") != NULL);
  CHECK(gh_tensor_prefetch(tm, b, s2s) == GH_ERR_CORRUPT);
  CHECK(_gh_tmgr_check(tm) == GH_ERR_CORRUPT);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
}

/* gh_tensor_prefetch_ahead (simulation with deferred copies: a copy runs
 * only once a stream waits for it and that stream's work runs): the
 * restore's copies are queued but no stream waits for them, so no stream's
 * work is held behind them; the next gh_tensor_prefetch makes its stream
 * wait, after which the bytes are there. A free of a tensor prefetched
 * ahead makes its stream wait too, so that memory handed on at once is
 * written by the copy before the new owner's work, not after it; a pin
 * waits for them; a small tensor (sharing a frame) is prefetched as by
 * gh_tensor_prefetch. */
/* The start of prefetch_ahead and evict_ahead: 4 device frames, chunks of
 * 2, events that never complete by queries alone; a (4 MiB, a run) and x
 * (256 KiB, a slab's) of `kind` on stream 0x1000, filled with stamps
 * `stamp` and stamp + 1; copies deferred from then on. */
static gh_tmgr_t* ahead_setup(gh_kind_t kind, uint64_t stamp, void** a, void** x) {
  gh_tmgr_t* tm = make_tm(8, 32, 0, 1000000);
  if (!tm) return NULL;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, kind, (gh_stream_t)(uintptr_t)0x1000, a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 256 * 1024, kind, (gh_stream_t)(uintptr_t)0x1000, x) == GH_OK);
  pat_fill(*a, 0, 4 * MiB, stamp);
  pat_fill(*x, 0, 256 * 1024, stamp + 1);
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  return tm;
}

static void prefetch_ahead(void) {
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000, s2 = (gh_stream_t)(uintptr_t)0x2000;
  const size_t sz = 4 * MiB;
  void *a = NULL, *b = NULL, *x = NULL;
  gh_tmgr_t* tm = ahead_setup(GH_KIND_ACTIVATIONS, 21, &a, &x);
  if (!tm) return;
  CHECK(gh_tensor_evict(tm, a) == GH_OK && gh_tensor_evict(tm, x) == GH_OK); /* they wait for their copies */
  size_t pending = 0;
  uint64_t w0 = 0, w1 = 0, w2 = 0;
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w0) == GH_OK);
  CHECK_EQ_U64(pending, 0);
  /* Ahead: moved, its copies queued, no stream waiting for them. */
  CHECK(gh_tensor_prefetch_ahead(tm, a, s2) == GH_OK);
  CHECK(tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK && _gh_tmgr_sim_run(tm, s2) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w1) == GH_OK);
  CHECK(pending > 0);
  CHECK_EQ_U64(w1, w0);
  /* Its use: the stream waits, then finds the bytes. */
  CHECK(gh_tensor_prefetch(tm, a, s2) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w2) == GH_OK);
  CHECK(w2 > w1);
  CHECK(_gh_tmgr_sim_run(tm, s2) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, NULL) == GH_OK);
  CHECK_EQ_U64(pending, 0);
  CHECK(pat_check(a, 0, sz, 21) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* A small tensor: as gh_tensor_prefetch (its stream waits now). */
  CHECK(gh_tensor_prefetch_ahead(tm, x, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w1) == GH_OK);
  CHECK(w1 > w2);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(x, 0, 256 * 1024, 22) == SIZE_MAX);
  /* A pin is a use. */
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(gh_tensor_prefetch_ahead(tm, a, s2) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w1) == GH_OK);
  CHECK(gh_tensor_pin(tm, a) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w2) == GH_OK);
  CHECK(w2 > w1);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK && _gh_tmgr_sim_run(tm, s2) == GH_OK);
  CHECK(pat_check(a, 0, sz, 21) == SIZE_MAX);
  CHECK(gh_tensor_unpin(tm, a) == GH_OK);
  /* A free: the free's stream waits for the copies, and an allocation on
   * it takes the memory at once; the copy runs before its work. */
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(gh_tensor_prefetch_ahead(tm, a, s2) == GH_OK);
  CHECK(gh_tensor_free(tm, a, s2) == GH_OK); /* a stream it knows: no wait for being new to it */
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s2, &b) == GH_OK);
  CHECK(b == a); /* handed over on its stream */
  CHECK(_gh_tmgr_sim_run(tm, s2) == GH_OK);
  pat_fill(b, 0, sz, 23);
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK); /* whatever is still deferred runs now */
  CHECK(pat_check(b, 0, sz, 23) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, b, s2) == GH_OK && gh_tensor_free(tm, x, s1) == GH_OK);
  CHECK(gh_tensor_prefetch_ahead(tm, NULL, s1) == GH_ERR_INVAL);
  CHECK(gh_tensor_prefetch_ahead(tm, b, s1) == GH_ERR_DOUBLE_FREE);
  CHECK(gh_tensor_prefetch_ahead(NULL, b, s1) == GH_ERR_INVAL);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* gh_tensor_evict_ahead (simulation with deferred copies): the tensor goes
 * to the host with its home unmapped (quiet), its copies queued and no
 * stream made to wait for them; an allocation that takes the device memory
 * they read waits for them (else the new owner's bytes would reach the
 * host copy, and the restore below would find them); the next prefetch
 * brings the bytes back. A small tensor is only advised quiet, a pinned
 * one refused; bad pointers as elsewhere. */
static void evict_ahead(void) {
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000, s2 = (gh_stream_t)(uintptr_t)0x2000;
  const size_t sz = 4 * MiB;
  void *a = NULL, *b = NULL, *x = NULL;
  gh_tmgr_t* tm = ahead_setup(GH_KIND_OPTIMIZER, 41, &a, &x);
  if (!tm) return;
  size_t pending = 0;
  uint64_t w0 = 0, w1 = 0, w2 = 0, h0 = 0, h1 = 0;
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w0) == GH_OK && _gh_tmgr_homeless(tm, &h0) == GH_OK);
  CHECK(gh_tensor_evict_ahead(tm, a) == GH_OK);
  CHECK(tier_of(tm, a) == GH_TIER_HOST);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK && _gh_tmgr_sim_run(tm, s2) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w1) == GH_OK && _gh_tmgr_homeless(tm, &h1) == GH_OK);
  CHECK(pending > 0);    /* its copies still queued: no stream waits for them */
  CHECK_EQ_U64(w1, w0);
  CHECK_EQ_U64(h1, h0 + 2); /* its home unmapped */
  CHECK(gh_tensor_evict_ahead(tm, x) == GH_OK); /* a shared frame: advised only */
  CHECK(tier_of(tm, x) == GH_TIER_DEVICE);
  /* Its device memory, taken by a tensor of its size on another stream. */
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s2, &b) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w2) == GH_OK);
  CHECK(w2 > w1);
  CHECK(_gh_tmgr_sim_run(tm, s2) == GH_OK);
  pat_fill(b, 0, sz, 43);
  CHECK(gh_tensor_free(tm, b, s2) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK && tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(gh_tensor_prefetch(tm, x, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(a, 0, sz, 41) == SIZE_MAX);
  CHECK(pat_check(x, 0, 256 * 1024, 42) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* Pinned: refused, nothing moved. */
  CHECK(gh_tensor_pin(tm, a) == GH_OK);
  CHECK(gh_tensor_evict_ahead(tm, a) == GH_ERR_PINNED && tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(gh_tensor_unpin(tm, a) == GH_OK);
  CHECK(gh_tensor_evict_ahead(tm, (uint8_t*)a + 4096) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_evict_ahead(tm, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_evict_ahead(NULL, a) == GH_ERR_INVAL);
  /* The quiet advice not taken (its event record fails): cold only,
   * nothing moved, no stream waits. */
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w1) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_event(tm, 1, NULL) == GH_OK);
  CHECK(gh_tensor_evict_ahead(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_sim_fail_event(tm, 0, NULL) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w2) == GH_OK);
  CHECK_EQ_U64(w2, w1);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK);
  /* Freed while its copies are queued, then a double free's pointer. */
  CHECK(gh_tensor_evict_ahead(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_HOST);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK && gh_tensor_free(tm, x, s1) == GH_OK);
  CHECK(gh_tensor_evict_ahead(tm, a) == GH_ERR_DOUBLE_FREE);
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* The restore stream (the default): restores copy on a stream of their own, and
 * each wait that one copy stream's order gave is made explicit. Four
 * cases where only that wait keeps the bytes right, each with copies
 * deferred until waited for and events that a query does not complete:
 * the simulation runs each stream's copies in its own order, so a missing
 * wait lets the other stream's copy run too early or too late. */
#define RS_SZ (4 * MiB)
/* A manager with the restore stream, a on stream 0x1000 and (b not NULL)
 * b on 0x2000, both RS_SZ and filled; copies deferred from then on. */
static gh_tmgr_t* rs_setup(void** a, uint64_t stamp, void** b, uint64_t b_stamp) {
  const char* was = getenv("GPUHEAP_RESTORE_STREAM");  /* (=0 in ctest's test_tensor_one_copy_stream) */
  char* prev = was ? strdup(was) : NULL;
  unsetenv("GPUHEAP_RESTORE_STREAM");
  gh_tmgr_t* tm = make_tm(64, 64, 0, 1000000);
  if (prev) setenv("GPUHEAP_RESTORE_STREAM", prev, 1);
  free(prev);
  if (!tm) return NULL;
  int split = 0;
  uint64_t w = 0;
  CHECK(_gh_tmgr_lane_waits(tm, &w, &split) == GH_OK && split == 1 && w == 0);
  CHECK(gh_tensor_alloc(tm, RS_SZ, GH_KIND_ACTIVATIONS, (gh_stream_t)(uintptr_t)0x1000, a) == GH_OK);
  pat_fill(*a, 0, RS_SZ, stamp);
  if (b) {
    CHECK(gh_tensor_alloc(tm, RS_SZ, GH_KIND_ACTIVATIONS, (gh_stream_t)(uintptr_t)0x2000, b) == GH_OK);
    pat_fill(*b, 0, RS_SZ, b_stamp);
  }
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  return tm;
}

static void rs_teardown(gh_tmgr_t* tm, uint64_t min_waits) {
  uint64_t w = 0;
  CHECK(_gh_tmgr_lane_waits(tm, &w, NULL) == GH_OK);
  CHECK_MSG(w >= min_waits, "%llu waits between the copy streams, %llu expected", (unsigned long long)w,
            (unsigned long long)min_waits);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* After the manager's sticky failure: the accounts hold, the failure is
 * what _gh_tmgr_check and the moves report (GH_ERR_CORRUPT, with `why` in
 * the detail), frees still work and destroy gives every frame back. */
static void sticky_teardown(gh_tmgr_t* tm, void* const* p, size_t n, const char* why) {
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  CHECK(_gh_tmgr_check(tm) == GH_ERR_CORRUPT);
  CHECK_MSG(strstr(gh_last_error_detail(), why) != NULL, "%s", gh_last_error_detail());
  void* x = NULL;
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_ACTIVATIONS, s1, &x) == GH_ERR_CORRUPT && x == NULL);
  CHECK(gh_tmgr_maintain(tm) == GH_ERR_CORRUPT);
  for (size_t i = 0; i < n; i++) {
    if (!p[i]) continue;
    CHECK(gh_tensor_evict(tm, p[i]) == GH_ERR_CORRUPT);
    CHECK(gh_tensor_prefetch(tm, p[i], s1) == GH_ERR_CORRUPT);
    CHECK(gh_tensor_free(tm, p[i], s1) == GH_OK);
  }
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
}

/* A move whose copy fails on the GPU, as the sync that waits for it
 * reports: gh_tensor_evict and gh_tensor_pin (which wait) return
 * GH_ERR_CUDA, the tensor stays where it was with its bytes (the failed
 * copy wrote nothing: the simulation drops it) and the accounts hold.
 * Which other copies that sync covered ran is not known, so the failure is
 * sticky (sticky_teardown). Refused: 1, the drain of the tensor's stream
 * before anything moves; 2, the wait for the move's own copy. Both
 * directions; ctest runs the suite with and without the restore stream.
 * Then a quiet tensor evicted for room (homeless: its home unmapped) whose
 * copy, held back until the room's run is mapped, fails where its device
 * memory is released: the allocation succeeds, the failure is sticky. */
static void move_copy_fails(void) {
  const size_t sz = 4 * MiB;
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  for (int pin = 0; pin < 2; pin++)
    for (uint32_t nth = 1; nth <= 2; nth++) {
      gh_tmgr_t* tm = make_tm(64, 64, 0, 2);
      if (!tm) return;
      void* a = NULL;
      CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &a) == GH_OK);
      pat_fill(a, 0, sz, 81);
      if (pin) {
        CHECK(gh_tensor_evict(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_HOST);
        pat_fill(a, 0, sz, 82);  /* written where it lives now: host memory */
      }
      CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);  /* copies run when waited for, or are dropped */
      gh_tmgr_stats_t s0, s1st;
      CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
      CHECK(_gh_tmgr_sim_fail_sync(tm, nth) == GH_OK);
      const int rc = pin ? gh_tensor_pin(tm, a) : gh_tensor_evict(tm, a);
      int armed = 1;
      CHECK(_gh_tmgr_sim_fail_armed(tm, &armed) == GH_OK && !armed);
      CHECK(_gh_tmgr_sim_fail_sync(tm, 0) == GH_OK);
      CHECK_MSG(rc == GH_ERR_CUDA, "%s, sync %u refused: %d (%s)", pin ? "pin" : "evict", nth, rc,
                gh_last_error_detail());
      CHECK(tier_of(tm, a) == (pin ? GH_TIER_HOST : GH_TIER_DEVICE));
      CHECK(gh_tmgr_stats(tm, &s1st) == GH_OK);
      CHECK_EQ_U64(s1st.evictions, s0.evictions);
      CHECK_EQ_U64(s1st.frames[GH_TIER_HOST], s0.frames[GH_TIER_HOST]);
      CHECK(pat_check(a, 0, sz, 81 + (uint64_t)pin) == SIZE_MAX);
      CHECK(gh_tensor_pin(tm, a) == GH_ERR_CORRUPT || pin);  /* (pin: the tensor is not pinned) */
      sticky_teardown(tm, &a, 1, "a wait for the GPU failed");
    }
  for (uint32_t nth = 1; nth <= 4; nth++) {
    gh_tmgr_t* tm = make_tm(8, 64, 0, 2);
    if (!tm) return;
    void* p[2] = {NULL, NULL};
    CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &p[0]) == GH_OK);
    pat_fill(p[0], 0, sz, 91);
    CHECK(gh_tensor_advise(tm, p[0], GH_ADVICE_QUIET) == GH_OK);
    CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
    CHECK(_gh_tmgr_sim_fail_sync(tm, nth) == GH_OK);
    CHECK(gh_tensor_alloc(tm, 2 * sz, GH_KIND_ACTIVATIONS, s1, &p[1]) == GH_OK);
    int armed = 1;
    CHECK(_gh_tmgr_sim_fail_armed(tm, &armed) == GH_OK);
    CHECK(_gh_tmgr_sim_fail_sync(tm, 0) == GH_OK);
    if (!armed) {  /* refused: the quiet advice's event (1), the held copy's (2) */
      sticky_teardown(tm, p, 2, "a wait for the GPU failed");
      continue;
    }
    CHECK(tier_of(tm, p[0]) == GH_TIER_HOST);
    CHECK(_gh_tmgr_sticky(tm) == GH_OK);
    CHECK(gh_tensor_free(tm, p[1], s1) == GH_OK);
    CHECK(gh_tensor_prefetch(tm, p[0], s1) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
    CHECK(pat_check(p[0], 0, sz, 91) == SIZE_MAX);
    CHECK(gh_tensor_free(tm, p[0], NULL) == GH_OK);
    CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
    CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
    model_t m = {0};
    drain_and_destroy(tm, &m);
  }
  /* The same quiet tensor evicted for a pin's room, which waits for that
   * copy itself: the refused wait puts its device memory back at its home
   * (it was left unmapped), with the bytes, and the pin reports the
   * failure (not the budget). */
  int undone = 0;
  for (uint32_t nth = 1; nth <= 4; nth++) {
    gh_tmgr_t* tm = make_tm(8, 64, 0, 2);
    if (!tm) return;
    void* p[2] = {NULL, NULL};
    CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &p[1]) == GH_OK);
    pat_fill(p[1], 0, sz, 92);
    CHECK(gh_tensor_evict(tm, p[1]) == GH_OK);
    CHECK(gh_tensor_alloc(tm, 2 * sz, GH_KIND_ACTIVATIONS, s1, &p[0]) == GH_OK);
    pat_fill(p[0], 0, 2 * sz, 93);
    CHECK(gh_tensor_advise(tm, p[0], GH_ADVICE_QUIET) == GH_OK);
    CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
    CHECK(_gh_tmgr_sim_fail_sync(tm, nth) == GH_OK);
    const int rc = gh_tensor_pin(tm, p[1]);
    int armed = 1;
    CHECK(_gh_tmgr_sim_fail_armed(tm, &armed) == GH_OK);
    CHECK(_gh_tmgr_sim_fail_sync(tm, 0) == GH_OK);
    int mapped = 0;
    CHECK(_gh_tmgr_sim_mapped(tm, p[0], &mapped) == GH_OK);
    if (!armed && rc == GH_ERR_CUDA && mapped && tier_of(tm, p[0]) == GH_TIER_DEVICE) {
      undone++;
      CHECK(pat_check(p[0], 0, 2 * sz, 93) == SIZE_MAX);
    }
    if (!armed) {
      CHECK_MSG(rc == GH_ERR_CUDA, "pin, its room's sync %u refused: %d (%s)", nth, rc, gh_last_error_detail());
      sticky_teardown(tm, p, 2, "a wait for the GPU failed");
      continue;
    }
    CHECK(rc == GH_OK && gh_tensor_unpin(tm, p[1]) == GH_OK);
    CHECK(pat_check(p[1], 0, sz, 92) == SIZE_MAX);
    CHECK(gh_tensor_free(tm, p[1], s1) == GH_OK && gh_tensor_prefetch(tm, p[0], s1) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
    CHECK(pat_check(p[0], 0, 2 * sz, 93) == SIZE_MAX);
    CHECK(gh_tensor_free(tm, p[0], s1) == GH_OK);
    CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
    CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
    model_t m = {0};
    drain_and_destroy(tm, &m);
  }
  /* (1: the wait for its quiet advice's event, before anything moved; 2:
   * the wait for its own copy, the move undone) */
  CHECK_MSG(undone == 2, "the quiet tensor left on the device with its bytes: %d times", undone);
}

/* A manager's heap (the CPU core's, over the manager's first frames)
 * grows by frames when it fills, evicting tensors for the device budget,
 * and gives its free trailing frames back; as tests/gpu/test_tmgr_heap.cu
 * on the GPU. Device budget 64 MiB: an 8 MiB heap (at most 32) and 40 MiB
 * of tensors. 1 MiB blocks until NULL; maintain grows the heap (first with
 * the growth's map refused: nothing changes, the error is returned); more
 * blocks and growths, past the budget's free room (tensors evicted for
 * it); every block's and tensor's bytes are checked; freed, the blocks'
 * frames go back at the next maintain. */
/* A manager on the simulation with a heap of heap_mib (at most 32 MiB),
 * device budget 64 MiB (the simulated tier a little larger), no host pool. */
static gh_tmgr_t* make_heap_tm_with(size_t heap_mib, size_t max_mib, size_t dev_mib, size_t host_mib,
                                    uint32_t flags) {
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_SIM;
  o.device_budget = dev_mib * MiB, o.host_budget = host_mib * MiB;
  o.heap_bytes = heap_mib * MiB, o.heap_max_bytes = max_mib * MiB;
  o.host_pool_frames = 0;  /* no pool thread: its maps would take a map refused on purpose */
  o.flags = flags;
  gh_tmgr_t* tm = NULL;
  CHECK(gh_tmgr_create(&tm, &o) == GH_OK);
  if (tm)
    CHECK(_gh_tmgr_sim_configure(tm, 2, dev_mib * MiB / GH_SIM_FRAME_BYTES + 4,
                                 host_mib * MiB / GH_SIM_FRAME_BYTES + 4) == GH_OK);
  return tm;
}
/* A sim manager checked, destroyed, and its frames all gone. */
static void heap_tm_destroy(gh_tmgr_t* tm) {
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
}
static gh_tmgr_t* make_heap_tm(size_t heap_mib, size_t host_mib) {
  return make_heap_tm_with(heap_mib, 32, 64, host_mib, 0);
}

/* A hint slot's empty page in a grown frame does not keep the frame
 * online: the heap (8 MiB, all free) is filled with runs, grown by
 * maintain, and small blocks are taken until one lands in the grown
 * frames; its page, empty once all is freed, is still its hint slot's.
 * The next maintain takes it from the slot and gives the frame back. */
static void hint_page_trim(gh_heap_t* heap, gh_cpu_heap_t* ch) {
  const gh_dheap_t* h = gh_cpu_heap_core(ch);
  const uint32_t initial_pages = (uint32_t)(8 * MiB >> h->page_shift);
  enum { NR = 16, NS = 4096 };
  void* r[NR];
  void* b[NS];
  size_t nr = 0, ns = 0;
  while (nr < NR && (r[nr] = gh_cpu_malloc(ch, MiB)) != NULL) nr++;
  CHECK(gh_heap_maintain(heap) == GH_OK);
  gh_heap_stats_t hs;
  CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
  CHECK(hs.heap_bytes > 8 * MiB);
  uint32_t page = 0;
  while (ns < NS && (b[ns] = gh_cpu_malloc(ch, 256)) != NULL) {
    page = (uint32_t)(((uint8_t*)b[ns++] - h->base) >> h->page_shift);
    if (page >= initial_pages) break;
  }
  CHECK_MSG(page >= initial_pages, "no small block in the grown frames after %zu", ns);
  for (size_t i = 0; i < ns; i++) gh_cpu_free(ch, b[i]);
  for (size_t i = 0; i < nr; i++) gh_cpu_free(ch, r[i]);
  const uint32_t c = __atomic_load_n(&h->xcount[page], __ATOMIC_RELAXED);
  CHECK_MSG((c & GH_COUNT_PINNED) && !(c & GH_COUNT_USED_MASK), "page %u: count %#x, not an empty hint page", page, c);
  CHECK(gh_heap_maintain(heap) == GH_OK);
  CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
  CHECK_MSG(hs.heap_bytes == 8 * MiB, "heap %zu MiB after all was freed", (size_t)(hs.heap_bytes / MiB));
  CHECK_EQ_U64(hs.bytes_in_use, 0);
  CHECK(!(__atomic_load_n(&h->xcount[page], __ATOMIC_RELAXED) & GH_COUNT_PINNED));
}

static void managed_heap(void) {
  gh_tmgr_t* tm = make_heap_tm(8, 256);
  if (!tm) return;
  gh_heap_t* heap = gh_tmgr_heap(tm);
  gh_cpu_heap_t* ch = _gh_heap_cpu(heap);
  CHECK(heap != NULL && ch != NULL);
  if (!ch) return;
  CHECK(gh_heap_maintain(NULL) == GH_ERR_INVAL);
  gh_heap_stats_t hs;
  CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
  CHECK_EQ_U64(hs.heap_bytes, 8 * MiB);
  CHECK_EQ_U64(hs.pages_free, hs.pages_total);
  enum { NT = 5, NB = 64 };
  const size_t tb = 8 * MiB;
  void* t[NT];
  for (int i = 0; i < NT; i++) {
    CHECK(gh_tensor_alloc(tm, tb, GH_KIND_ACTIVATIONS, NULL, &t[i]) == GH_OK);
    pat_fill(t[i], 0, tb, 200 + (uint64_t)i);
  }
  void* b[NB] = {0};
  size_t nb = 0;
  for (; nb < NB; nb++) {
    b[nb] = gh_cpu_malloc(ch, MiB);
    if (!b[nb]) break;
    pat_fill(b[nb], 0, MiB, 300 + (uint64_t)nb);
  }
  const size_t got0 = nb;
  CHECK_MSG(got0 >= 6 && got0 <= 8, "%zu blocks of 1 MiB in an 8 MiB heap", got0);
  /* The heap is full, past its high watermark, and the budget is spent. */
  gh_tmgr_stats_t s0, s1;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_map(tm, 1) == GH_OK);  /* the growth's map (its frame is free budget: no eviction) */
  const int rc = gh_heap_maintain(heap);
  CHECK(_gh_tmgr_sim_fail_map(tm, 0) == GH_OK);
  CHECK_MSG(rc == GH_ERR_DEVICE_NOMEM, "maintain with the growth's map refused: %d (%s)", rc, gh_last_error_detail());
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK_EQ_U64(s1.heap_grows, s0.heap_grows);
  CHECK_EQ_U64(s1.heap_frames[GH_TIER_DEVICE], s0.heap_frames[GH_TIER_DEVICE]);
  CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
  CHECK_EQ_U64(hs.heap_bytes, 8 * MiB);
  CHECK(gh_cpu_malloc(ch, MiB) == NULL);  /* nothing was published */
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_heap_maintain(heap) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK(s1.heap_grows > s0.heap_grows);
  CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
  CHECK(hs.heap_bytes > 8 * MiB);
  for (int round = 0; round < 12 && nb < NB; round++) {
    for (; nb < NB; nb++) {
      b[nb] = gh_cpu_malloc(ch, MiB);
      if (!b[nb]) break;
      pat_fill(b[nb], 0, MiB, 300 + (uint64_t)nb);
    }
    CHECK(gh_heap_maintain(heap) == GH_OK);
  }
  CHECK_MSG(nb > got0 && nb < NB, "%zu blocks in all, %zu at first", nb, got0);
  CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
  CHECK_EQ_U64(hs.heap_bytes, 32 * MiB);  /* grown to its most, past the budget's free room */
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK(s1.evictions > 0);
  printf("managed heap: %zu blocks of 1 MiB (%zu at first), heap %zu MiB, maintain with a map refused: %d\n", nb,
         got0, (size_t)(hs.heap_bytes / MiB), rc);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  for (size_t i = 0; i < nb; i++) CHECK(pat_check(b[i], 0, MiB, 300 + (uint64_t)i) == SIZE_MAX);
  for (int i = 0; i < NT; i++) {  /* evicted ones read through their host memory */
    CHECK(_gh_tmgr_sim_run(tm, NULL) == GH_OK);
    CHECK(pat_check(t[i], 0, tb, 200 + (uint64_t)i) == SIZE_MAX);
  }
  /* Freed, the grown frames go back; the heap keeps its initial size. */
  for (size_t i = 0; i < nb; i++) gh_cpu_free(ch, b[i]);
  CHECK(gh_heap_maintain(heap) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s1) == GH_OK);
  CHECK(s1.heap_shrinks > 0);
  CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
  CHECK_EQ_U64(hs.heap_bytes, 8 * MiB);
  CHECK_EQ_U64(hs.pages_free, hs.pages_total);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  hint_page_trim(heap, ch);
  for (int i = 0; i < NT; i++) CHECK(gh_tensor_free(tm, t[i], NULL) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);  /* (the heap's frames with it) */
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
}

/* Threads allocate and free blocks of a manager's heap (tagged at both
 * ends, checked at the free) while the main thread calls gh_heap_maintain
 * over and over: the heap grows when they fill it and gives frames back
 * as they free (its online bound moved under them: published words
 * cleared, free trailing frames taken offline by compare-and-swap; the
 * main thread's ballast makes the first maintain grow it), no
 * block is handed out twice or loses its bytes, and once all are freed no
 * byte is in use. Run under ThreadSanitizer too. */
typedef struct heap_worker_s {
  gh_cpu_heap_t* ch;
  int grow;  /* gh_cpu_malloc_grow */
  uint64_t seed;
  size_t ops, nulls;
  int failures;
} heap_worker_t;
static int heap_workers_done;

static void* heap_worker_main(void* arg) {
  heap_worker_t* w = arg;
  enum { LIVE = 48 };
  uint64_t* p[LIVE] = {0};
  size_t words[LIVE] = {0};
  uint64_t st = w->seed;
  for (size_t op = 0; op < w->ops; op++) {
    st = mix64(st + op);
    const size_t i = (size_t)(st % LIVE);
    if (p[i]) {
      if (p[i][0] != (w->seed ^ (uintptr_t)p[i]) || p[i][words[i] - 1] != ~(w->seed ^ (uintptr_t)p[i])) w->failures++;
      gh_cpu_free(w->ch, p[i]);
      p[i] = NULL;
      continue;
    }
    const size_t bytes = (size_t)256 << ((st >> 20) % 12);  /* 256 B .. 512 KiB */
    p[i] = w->grow ? gh_cpu_malloc_grow(w->ch, bytes) : gh_cpu_malloc(w->ch, bytes);
    if (!p[i]) {
      w->nulls++;
      continue;
    }
    words[i] = bytes / 8;
    p[i][0] = w->seed ^ (uintptr_t)p[i];
    p[i][words[i] - 1] = ~(w->seed ^ (uintptr_t)p[i]);
  }
  for (size_t i = 0; i < LIVE; i++)
    if (p[i]) {
      if (p[i][0] != (w->seed ^ (uintptr_t)p[i]) || p[i][words[i] - 1] != ~(w->seed ^ (uintptr_t)p[i])) w->failures++;
      gh_cpu_free(w->ch, p[i]);
    }
  __atomic_add_fetch(&heap_workers_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void heap_threads(size_t ops) {
  gh_tmgr_t* tm = make_heap_tm(4, 64);
  if (!tm) return;
  gh_cpu_heap_t* ch = _gh_heap_cpu(gh_tmgr_heap(tm));
  /* Ballast: the heap filled first, so that the first maintain grows it
   * whatever the workers do; given back after 64 maintains. */
  void* ballast[8] = {0};
  size_t nballast = 0;
  while (nballast < 8 && (ballast[nballast] = gh_cpu_malloc(ch, MiB)) != NULL) nballast++;
  CHECK(nballast >= 3);
  enum { N = 4 };
  heap_worker_t w[N];
  pthread_t th[N];
  heap_workers_done = 0;
  for (int i = 0; i < N; i++) {
    w[i] = (heap_worker_t){.ch = ch, .seed = 77 + (uint64_t)i, .ops = ops};
    CHECK(pthread_create(&th[i], NULL, heap_worker_main, &w[i]) == 0);
  }
  size_t maintains = 0;
  while (__atomic_load_n(&heap_workers_done, __ATOMIC_ACQUIRE) < N) {
    CHECK(gh_heap_maintain(gh_tmgr_heap(tm)) == GH_OK);
    if (++maintains == 64)
      while (nballast) gh_cpu_free(ch, ballast[--nballast]);
  }
  while (nballast) gh_cpu_free(ch, ballast[--nballast]);
  size_t nulls = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(w[i].failures == 0, "heap worker %d: %d blocks with other bytes", i, w[i].failures);
    nulls += w[i].nulls;
  }
  CHECK(gh_heap_maintain(gh_tmgr_heap(tm)) == GH_OK);  /* all free: every grown frame given back */
  gh_tmgr_stats_t s;
  gh_heap_stats_t hs;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK && gh_cpu_heap_stats(ch, &hs) == GH_OK);
  printf("heap threads: %zu maintains, %llu frames grown, %llu given back, %zu NULLs; heap %zu MiB\n", maintains,
         (unsigned long long)s.heap_grows, (unsigned long long)s.heap_shrinks, nulls, (size_t)(hs.heap_bytes / MiB));
  CHECK(s.heap_grows > 0);
  CHECK_EQ_U64(s.heap_shrinks, s.heap_grows);
  CHECK_EQ_U64(hs.heap_bytes, 4 * MiB);
  /* Every block freed: what is not free is the pages the lanes' hint slots
   * keep for their classes in the initial frames (empty, reused by the
   * next allocation of the class); those in grown frames were taken back. */
  CHECK_EQ_U64(hs.bytes_in_use, 0);
  CHECK_EQ_U64(hs.pages_free + hs.pages_pinned, hs.pages_total);
  heap_tm_destroy(tm);
}

/* GH_TMGR_GROW_ON_DEMAND: with no gh_heap_maintain at all, allocations
 * (gh_cpu_malloc_grow) that find the heap full ask the manager's thread
 * to grow it and wait (include/gpuheap/grow.h); gh_cpu_malloc does not.
 * (1) 1 MiB blocks from a 4 MiB heap (at most 32) until NULL: the heap
 * reaches its most, every block but the last few is served, the NULL
 * comes with a denied request, and a block larger than the heap's most is
 * refused without asking. (2) A device budget that tensors fill: the heap
 * grows into new host frames (within the host budget) and then is denied;
 * the blocks keep their bytes. (3) A growth whose map the driver refuses:
 * denied, nothing published or lost. (4) A run longer than a growth step
 * where the budgets hold one step: the request ends. (5) Threads
 * allocating and freeing (heap_worker_main) on a heap that grows only so:
 * no NULL, no block with other bytes; run under ThreadSanitizer too. */
static void grow_on_demand(size_t ops) {
  {
    gh_tmgr_t* tm = make_heap_tm_with(4, 32, 64, 64, GH_TMGR_GROW_ON_DEMAND);
    if (!tm) return;
    gh_cpu_heap_t* ch = _gh_heap_cpu(gh_tmgr_heap(tm));
    enum { NB = 40 };
    void* b[NB] = {0};
    size_t nb = 0;
    for (; nb < NB; nb++) {
      if (!(b[nb] = gh_cpu_malloc_grow(ch, MiB))) break;
      pat_fill(b[nb], 0, MiB, 500 + (uint64_t)nb);
    }
    gh_tmgr_stats_t s;
    gh_heap_stats_t hs;
    CHECK(gh_tmgr_stats(tm, &s) == GH_OK && gh_cpu_heap_stats(ch, &hs) == GH_OK);
    printf("grow on demand: %zu blocks of 1 MiB, heap %zu MiB, %llu requests (%llu denied), %llu frames grown\n", nb,
           (size_t)(hs.heap_bytes / MiB), (unsigned long long)s.heap_grow_asks, (unsigned long long)s.heap_grow_denied,
           (unsigned long long)s.heap_grows);
    CHECK_MSG(nb >= 28 && nb <= 32, "%zu blocks of 1 MiB from a heap of at most 32 MiB", nb);
    CHECK_EQ_U64(hs.heap_bytes, 32 * MiB);
    CHECK_EQ_U64(s.heap_grows * s.frame_bytes, 28 * MiB);
    CHECK(s.heap_grow_asks >= 2 && s.heap_grow_denied >= 1 && s.heap_grow_denied < s.heap_grow_asks);
    CHECK(gh_cpu_malloc_grow(ch, 33 * MiB) == NULL);  /* never fits: no request */
    gh_tmgr_stats_t s2;
    CHECK(gh_tmgr_stats(tm, &s2) == GH_OK);
    CHECK_EQ_U64(s2.heap_grow_asks, s.heap_grow_asks);
    for (size_t i = 0; i < nb; i++) CHECK(pat_check(b[i], 0, MiB, 500 + (uint64_t)i) == SIZE_MAX);
    for (size_t i = 0; i < nb; i++) gh_cpu_free(ch, b[i]);
    /* Freed: maintain gives the grown frames back, and on demand they come again. */
    CHECK(gh_heap_maintain(gh_tmgr_heap(tm)) == GH_OK);
    CHECK(gh_cpu_heap_stats(ch, &hs) == GH_OK);
    CHECK_EQ_U64(hs.heap_bytes, 4 * MiB);
    void* plain = gh_cpu_malloc(ch, 12 * MiB);  /* the plain form asks for nothing */
    CHECK(plain == NULL);
    CHECK(gh_tmgr_stats(tm, &s2) == GH_OK);
    CHECK_EQ_U64(s2.heap_grow_asks, s.heap_grow_asks);
    void* big = gh_cpu_malloc_grow(ch, 12 * MiB);  /* a run longer than the quarter rule's step */
    CHECK(big != NULL);
    if (big) {
      pat_fill(big, 0, 12 * MiB, 7);
      CHECK(pat_check(big, 0, 12 * MiB, 7) == SIZE_MAX);
    }
    gh_cpu_free(ch, big);
    heap_tm_destroy(tm);
  }
  {
    /* Device budget 16 MiB: 4 of the heap, 12 of tensors; host budget 4 MiB. */
    gh_tmgr_t* tm = make_heap_tm_with(4, 32, 16, 4, GH_TMGR_GROW_ON_DEMAND);
    if (!tm) return;
    gh_cpu_heap_t* ch = _gh_heap_cpu(gh_tmgr_heap(tm));
    void* t = NULL;
    CHECK(gh_tensor_alloc(tm, 12 * MiB, GH_KIND_WEIGHTS, NULL, &t) == GH_OK);
    if (t) pat_fill(t, 0, 12 * MiB, 9);
    enum { NB = 16 };
    void* b[NB] = {0};
    size_t nb = 0;
    for (; nb < NB; nb++) {
      if (!(b[nb] = gh_cpu_malloc_grow(ch, MiB))) break;
      pat_fill(b[nb], 0, MiB, 600 + (uint64_t)nb);
    }
    gh_tmgr_stats_t s;
    CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
    printf("grow on demand, device budget spent: %zu blocks of 1 MiB, heap frames %zu device / %zu host, "
           "%llu requests (%llu denied)\n", nb, s.heap_frames[GH_TIER_DEVICE], s.heap_frames[GH_TIER_HOST],
           (unsigned long long)s.heap_grow_asks, (unsigned long long)s.heap_grow_denied);
    CHECK_MSG(nb >= 6 && nb < NB, "%zu blocks of 1 MiB from a 4 MiB heap and 4 MiB of host budget", nb);
    CHECK_EQ_U64(s.heap_frames[GH_TIER_HOST] * s.frame_bytes, 4 * MiB);
    CHECK_EQ_U64(s.evictions, 0);  /* on demand never evicts */
    CHECK(s.heap_grow_denied >= 1);
    for (size_t i = 0; i < nb; i++) CHECK(pat_check(b[i], 0, MiB, 600 + (uint64_t)i) == SIZE_MAX);
    if (t) CHECK(pat_check(t, 0, 12 * MiB, 9) == SIZE_MAX);
    for (size_t i = 0; i < nb; i++) gh_cpu_free(ch, b[i]);
    CHECK(gh_tensor_free(tm, t, NULL) == GH_OK);
    heap_tm_destroy(tm);
  }
  {
    /* A growth whose map the driver refuses: the request denied (NULL),
     * nothing published or lost; with the map allowed again it grows. */
    gh_tmgr_t* tm = make_heap_tm_with(4, 8, 64, 64, GH_TMGR_GROW_ON_DEMAND);
    if (!tm) return;
    gh_cpu_heap_t* ch = _gh_heap_cpu(gh_tmgr_heap(tm));
    void* b[4];
    for (int i = 0; i < 4; i++) {
      b[i] = gh_cpu_malloc(ch, MiB);  /* the 4 MiB heap full */
      CHECK(b[i] != NULL);
      if (b[i]) pat_fill(b[i], 0, MiB, 700 + (uint64_t)i);
    }
    CHECK(_gh_tmgr_sim_fail_map(tm, 1) == GH_OK);
    CHECK(gh_cpu_malloc_grow(ch, MiB) == NULL);
    CHECK(_gh_tmgr_sim_fail_map(tm, 0) == GH_OK);
    gh_tmgr_stats_t s;
    gh_heap_stats_t hs;
    CHECK(gh_tmgr_stats(tm, &s) == GH_OK && gh_cpu_heap_stats(ch, &hs) == GH_OK);
    CHECK_EQ_U64(hs.heap_bytes, 4 * MiB);
    CHECK_EQ_U64(s.heap_grows, 0);
    CHECK_EQ_U64(s.heap_grow_denied, 1);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    void* more = gh_cpu_malloc_grow(ch, MiB);
    CHECK(more != NULL);
    for (int i = 0; i < 4; i++) CHECK(b[i] && pat_check(b[i], 0, MiB, 700 + (uint64_t)i) == SIZE_MAX);
    for (int i = 0; i < 4; i++) gh_cpu_free(ch, b[i]);
    gh_cpu_free(ch, more);
    heap_tm_destroy(tm);
  }
  {
    /* A run longer than one growth step (64 frames) where the budgets hold
     * exactly one step: the first step grows, the second finds nothing,
     * and the request ends (with the growth) instead of trying again. */
    gh_tmgr_t* tm = make_heap_tm_with(4, 512, 128, 4, GH_TMGR_GROW_ON_DEMAND);
    if (!tm) return;
    gh_cpu_heap_t* ch = _gh_heap_cpu(gh_tmgr_heap(tm));
    CHECK(gh_cpu_malloc_grow(ch, 300 * MiB) == NULL);
    gh_tmgr_stats_t s;
    CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
    printf("grow on demand, a 300 MiB run: NULL, %llu frames grown, %llu requests (%llu denied)\n",
           (unsigned long long)s.heap_grows, (unsigned long long)s.heap_grow_asks,
           (unsigned long long)s.heap_grow_denied);
    CHECK_EQ_U64(s.heap_grows * s.frame_bytes, 128 * MiB);
    CHECK(s.heap_grow_denied >= 1);
    void* b = gh_cpu_malloc_grow(ch, 100 * MiB);  /* fits the grown heap */
    CHECK(b != NULL);
    gh_cpu_free(ch, b);
    heap_tm_destroy(tm);
  }
  {
    gh_tmgr_t* tm = make_heap_tm_with(2, 64, 96, 64, GH_TMGR_GROW_ON_DEMAND);
    if (!tm) return;
    gh_cpu_heap_t* ch = _gh_heap_cpu(gh_tmgr_heap(tm));
    enum { N = 4 };
    heap_worker_t w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
      w[i] = (heap_worker_t){.ch = ch, .grow = 1, .seed = 91 + (uint64_t)i, .ops = ops};
      CHECK(pthread_create(&th[i], NULL, heap_worker_main, &w[i]) == 0);
    }
    size_t nulls = 0;
    for (int i = 0; i < N; i++) {
      pthread_join(th[i], NULL);
      CHECK_MSG(w[i].failures == 0, "heap worker %d: %d blocks with other bytes", i, w[i].failures);
      nulls += w[i].nulls;
    }
    gh_tmgr_stats_t s;
    gh_heap_stats_t hs;
    CHECK(gh_tmgr_stats(tm, &s) == GH_OK && gh_cpu_heap_stats(ch, &hs) == GH_OK);
    printf("grow on demand, %d threads: %zu NULLs, %llu requests (%llu denied, %llu answered by a later growth), "
           "heap %zu MiB\n", N, nulls, (unsigned long long)s.heap_grow_asks, (unsigned long long)s.heap_grow_denied,
           (unsigned long long)s.heap_grow_stale, (size_t)(hs.heap_bytes / MiB));
    CHECK_EQ_U64(nulls, 0);
    CHECK(s.heap_grow_asks > 0);
    CHECK_EQ_U64(s.heap_grow_denied, 0);
    CHECK_EQ_U64(hs.bytes_in_use, 0);
    heap_tm_destroy(tm);
  }
  {
    /* The channel's word refused by the provider (the first word a
     * manager asks for): the create fails with the provider's error and
     * leaves nothing behind (no frames, no word, no manager). */
    const size_t words = _gh_frames_sim_words_live();
    gh_tmgr_options_t o;
    gh_tmgr_options_init(&o);
    o.backend = GH_BACKEND_SIM;
    o.device_budget = 64 * MiB, o.host_budget = 64 * MiB;
    o.heap_bytes = 4 * MiB, o.heap_max_bytes = 32 * MiB;
    o.host_pool_frames = 0;
    o.flags = GH_TMGR_GROW_ON_DEMAND;
    gh_tmgr_t* bad = (gh_tmgr_t*)1;
    _gh_frames_sim_fail_word(1);
    const int rc = gh_tmgr_create(&bad, &o);
    _gh_frames_sim_fail_word(0);
    CHECK_MSG(rc == GH_ERR_NOMEM && bad == NULL, "growth channel refused: rc %d", rc);
    CHECK(strstr(gh_last_error_detail(), "refused on purpose") != NULL);
    CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
    CHECK_EQ_U64(_gh_frames_sim_words_live(), words);
    gh_tmgr_t* tm = NULL;  /* and the next create is whole */
    CHECK(gh_tmgr_create(&tm, &o) == GH_OK && tm != NULL);
    if (tm) CHECK(gh_tmgr_destroy(tm) == GH_OK);
    CHECK_EQ_U64(_gh_frames_sim_words_live(), words);
  }
}

/* Fault sweep: one scenario of moves (an eviction for room, an evict
 * hint, ordered restores, a quiet eviction ahead, a pin, a free, an
 * eviction right after a restore, a batch prefetch, maintain)
 * run again and again with copies deferred until waited for, the nth map,
 * copy or event record of the provider refused in run n (or every event
 * record from the nth on: events that stopped working), until a run ends
 * before the failure was reached. Whatever each call returns, every tensor
 * mapped at its address holds its bytes once its stream has run, and the
 * accounts hold; destroy gives every frame back. Then the same with the
 * nth sync refused (the simulation drops the copies it covered). Only a
 * failure the manager records as sticky (GH_ERR_CORRUPT from then on: a
 * held copy that could not be queued, a wait for the GPU that failed) ends
 * the data checks of that run; its accounts must still hold. */
enum { FS_MAP, FS_COPY, FS_EVENT, FS_EVENTS_FROM, FS_SYNC, FS_KINDS };
#define FS_N 5
#define FS_SZ (4 * MiB)
static void fs_verify(gh_tmgr_t* tm, void* const* p, const uint64_t* stamp, int skip, int kind, uint32_t nth, int step) {
  CHECK(_gh_tmgr_sim_run(tm, (gh_stream_t)(uintptr_t)0x1000) == GH_OK);
  for (int i = 0; i < FS_N; i++) {
    int mapped = 0;
    if (!p[i] || i == skip) continue;
    CHECK(_gh_tmgr_sim_mapped(tm, p[i], &mapped) == GH_OK);
    /* (only p[2], quiet from step 4, may be left unmapped: evicted homeless) */
    CHECK_MSG(mapped || (i == 2 && step >= 5), "kind %d, failure %u, step %d: tensor %d unmapped", kind, nth, step, i);
    if (!mapped) continue;
    CHECK_MSG(pat_check(p[i], 0, FS_SZ, stamp[i]) == SIZE_MAX, "kind %d, failure %u, step %d: tensor %d", kind, nth,
              step, i);
  }
  CHECK_MSG(_gh_tmgr_check(tm) == GH_OK, "kind %d, failure %u, step %d: %s", kind, nth, step, gh_last_error_detail());
}

/* One run; returns 1 when the failure asked for happened. */
static int fs_run(int kind, uint32_t nth) {
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  gh_tmgr_t* tm = make_tm(16, 64, 0, 2);
  if (!tm) return 0;
  void* p[FS_N] = {0};
  uint64_t stamp[FS_N] = {0};
  for (int i = 0; i < 4; i++) {
    CHECK(gh_tensor_alloc(tm, FS_SZ, GH_KIND_ACTIVATIONS, s1, &p[i]) == GH_OK);
    pat_fill(p[i], 0, FS_SZ, stamp[i] = 100 + (uint64_t)i);
  }
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  CHECK((kind == FS_MAP    ? _gh_tmgr_sim_fail_map(tm, nth)
         : kind == FS_COPY ? _gh_tmgr_sim_fail_copy(tm, nth)
         : kind == FS_EVENT ? _gh_tmgr_sim_fail_event(tm, nth, NULL)
         : kind == FS_SYNC  ? _gh_tmgr_sim_fail_sync(tm, nth)
                            : _gh_tmgr_sim_fail_events_from(tm, nth)) == GH_OK);
  int sticky = 0;
  for (int step = 0; step < 15 && !sticky; step++) {
    int rc = GH_OK;
    switch (step) {
      case 0: rc = gh_tensor_advise(tm, p[0], GH_ADVICE_COLD); break;
      case 1:  /* the budget is full: p[0] goes */
        rc = gh_tensor_alloc(tm, FS_SZ, GH_KIND_ACTIVATIONS, s1, &p[4]);
        if (rc == GH_OK) {
          CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);  /* what s1's kernels would wait for */
          pat_fill(p[4], 0, FS_SZ, stamp[4] = 104);
        } else {
          p[4] = NULL;
        }
        break;
      case 2: rc = gh_tensor_evict(tm, p[1]); break;
      case 3: rc = gh_tensor_prefetch(tm, p[0], s1); break;
      case 4: rc = gh_tensor_advise(tm, p[2], GH_ADVICE_QUIET); break;
      case 5: rc = gh_tensor_evict_ahead(tm, p[2]); break;
      case 6: rc = gh_tensor_prefetch_ahead(tm, p[1], s1); break;
      case 7: rc = gh_tensor_prefetch(tm, p[1], s1); break;
      case 8:
        rc = gh_tensor_pin(tm, p[3]);
        if (rc == GH_OK) rc = gh_tensor_unpin(tm, p[3]);
        break;
      case 9:
        if (p[4]) rc = gh_tensor_free(tm, p[4], s1);
        if (rc == GH_OK) p[4] = NULL;
        break;
      case 10: rc = gh_tensor_prefetch(tm, p[2], s1); break;
      case 11: rc = gh_tensor_evict(tm, p[0]); break;  /* after its restore's copy (the other lane) */
      case 12: rc = gh_tensor_prefetch_room(tm, p[0], s1, 0); break;  /* ahead where there is room */
      case 13: {
        void* const two[2] = {p[0], p[1]};
        rc = gh_tensor_prefetch_many(tm, two, 2, s1);
        break;
      }
      default: rc = gh_tmgr_maintain(tm); break;
    }
    /* (p[1] between its prefetch ahead and its prefetch, p[0] after its
     * prefetch where there is room: no stream waits for their copies yet,
     * so nothing may read them) */
    if (rc == GH_ERR_CORRUPT || _gh_tmgr_sticky(tm) != GH_OK) {
      /* the accounts still hold: the check's only complaint is the failure */
      char why[256];
      CHECK(_gh_tmgr_sticky(tm) == GH_ERR_CORRUPT);
      snprintf(why, sizeof why, "%s", gh_last_error_detail());
      CHECK(_gh_tmgr_check(tm) == GH_ERR_CORRUPT);
      CHECK_MSG(strcmp(why, gh_last_error_detail()) == 0, "kind %d, failure %u, step %d: %s", kind, nth, step,
                gh_last_error_detail());
      sticky = 1;
    } else {
      fs_verify(tm, p, stamp, step == 6 ? 1 : step == 12 ? 0 : -1, kind, nth, step);
    }
  }
  int armed = 1;
  CHECK(_gh_tmgr_sim_fail_armed(tm, &armed) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_map(tm, 0) == GH_OK && _gh_tmgr_sim_fail_copy(tm, 0) == GH_OK &&
        _gh_tmgr_sim_fail_event(tm, 0, NULL) == GH_OK && _gh_tmgr_sim_fail_sync(tm, 0) == GH_OK);
  for (int i = 0; i < FS_N; i++)
    if (p[i]) CHECK(gh_tensor_free(tm, p[i], s1) == GH_OK);
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  if (sticky) {
    CHECK(gh_tmgr_destroy(tm) == GH_OK);
    CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
  } else {
    model_t m = {0};
    drain_and_destroy(tm, &m);
  }
  return !armed;
}

static void fault_sweep(void) {
  static const char* name[FS_KINDS] = {"the nth map", "the nth copy", "the nth event record",
                                       "every event record from the nth on", "the nth sync"};
  /* Under the sanitizers (a test scale below 1) every third n past the
   * first three: the whole sweep runs in the suite without them. */
  const uint32_t stride = gh_test_scale() < 1 ? 3 : 1;
  for (int kind = 0; kind < FS_KINDS; kind++) {
    uint32_t nth = 1, runs = 0, last = 0;
    while (nth < 400 && fs_run(kind, nth)) last = nth, nth += nth < 3 ? 1 : stride, runs++;
    CHECK_MSG(runs > 3 && nth < 400, "%s: %u runs", name[kind], runs);  /* the scenario reaches several */
    printf("fault sweep, %s refused: %u runs (n up to %u)\n", name[kind], runs, last);
  }
}

static void restore_stream(void) {
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000, s2 = (gh_stream_t)(uintptr_t)0x2000;
  void *a = NULL, *b = NULL, *x = NULL;
  /* 1. A restore after the eviction copy that wrote its host memory: a
   * evicted ahead (no stream waits for its copies), its device memory
   * taken by b, then a brought back into new device memory. */
  gh_tmgr_t* tm = rs_setup(&a, 61, NULL, 0);
  if (tm) {
    CHECK(gh_tensor_evict_ahead(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_HOST);
    CHECK(gh_tensor_alloc(tm, RS_SZ, GH_KIND_ACTIVATIONS, s2, &b) == GH_OK);
    CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK && tier_of(tm, a) == GH_TIER_DEVICE);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
    CHECK(pat_check(a, 0, RS_SZ, 61) == SIZE_MAX);
    CHECK(gh_tensor_free(tm, b, s2) == GH_OK && gh_tensor_free(tm, a, s1) == GH_OK);
    rs_teardown(tm, 1);
  }
  /* 2. An eviction after the restore copy that wrote its device memory: a
   * prefetched ahead (no stream waits for that copy) and evicted again at
   * once, into pooled host memory no restore reads (x's). */
  tm = rs_setup(&a, 62, &x, 0);
  if (tm) {
    CHECK(gh_tensor_evict(tm, a) == GH_OK && gh_tensor_evict(tm, x) == GH_OK);
    CHECK(gh_tensor_free(tm, x, s2) == GH_OK);  /* its host memory to the pool, once the free's event completes */
    CHECK(_gh_tmgr_sim_configure(tm, 0, 36, 36) == GH_OK && gh_tmgr_maintain(tm) == GH_OK);
    CHECK(_gh_tmgr_sim_configure(tm, 1000000, 36, 36) == GH_OK);
    gh_tmgr_stats_t st;
    CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.pending_frees == 0);
    CHECK(gh_tensor_prefetch_ahead(tm, a, s1) == GH_OK && tier_of(tm, a) == GH_TIER_DEVICE);
    CHECK(gh_tensor_evict(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_HOST);
    CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
    CHECK(pat_check(a, 0, RS_SZ, 62) == SIZE_MAX);
    CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
    rs_teardown(tm, 1);
  }
  /* 3. An eviction into pooled host memory after the restore that gave it
   * back: a prefetched ahead, its host memory taken at once by b's
   * eviction, whose copy the host waits for. */
  tm = rs_setup(&a, 63, &b, 64);
  if (tm) {
    CHECK(gh_tensor_evict(tm, a) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
    CHECK(gh_tensor_prefetch_ahead(tm, a, s1) == GH_OK);
    CHECK(gh_tensor_evict(tm, b) == GH_OK && tier_of(tm, b) == GH_TIER_HOST);
    CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK && gh_tensor_prefetch(tm, b, s2) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK && _gh_tmgr_sim_run(tm, s2) == GH_OK);
    CHECK(pat_check(a, 0, RS_SZ, 63) == SIZE_MAX);
    CHECK(pat_check(b, 0, RS_SZ, 64) == SIZE_MAX);
    CHECK(gh_tensor_free(tm, a, s1) == GH_OK && gh_tensor_free(tm, b, s2) == GH_OK);
    rs_teardown(tm, 1);
  }
  /* 4. A restore into a spare after the eviction copy that reads it: a
   * evicted ahead, its device memory taken at once by b's restore. */
  tm = rs_setup(&a, 65, &b, 66);
  if (tm) {
    CHECK(gh_tensor_evict(tm, b) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s2) == GH_OK);
    CHECK(gh_tensor_evict_ahead(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_HOST);
    CHECK(gh_tensor_prefetch(tm, b, s2) == GH_OK && tier_of(tm, b) == GH_TIER_DEVICE);
    CHECK(_gh_tmgr_sim_run(tm, s2) == GH_OK);
    CHECK(pat_check(b, 0, RS_SZ, 66) == SIZE_MAX);
    CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
    CHECK(pat_check(a, 0, RS_SZ, 65) == SIZE_MAX);
    CHECK(gh_tensor_free(tm, a, s1) == GH_OK && gh_tensor_free(tm, b, s2) == GH_OK);
    rs_teardown(tm, 1);
  }
}

/* gh_tensor_prefetch_room: a prefetch ahead only where the budget has room
 * for the tensor and `reserve` more without evicting or waiting. 8 device
 * frames, chunks of 2: refused (GH_ERR_BUDGET, nothing moved, nothing
 * evicted) one frame short, done at exactly enough, cached frames counted
 * as room; the copies deferred as gh_tensor_prefetch_ahead's until the
 * next prefetch; the bytes intact; bad arguments. */
static void prefetch_room(void) {
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  gh_tmgr_t* tm = make_tm(16, 64, 0, 0);
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s1, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s1, &b) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, s1, &c) == GH_OK);
  pat_fill(a, 0, 4 * MiB, 31);
  pat_fill(b, 0, 4 * MiB, 32);
  pat_fill(c, 0, 8 * MiB, 33);
  CHECK(gh_tensor_evict(tm, a) == GH_OK && tier_of(tm, a) == GH_TIER_HOST);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);  /* no spare nor cache: 2 of 8 frames free */
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  const uint64_t ev0 = st.evictions;
  /* One frame short (2 for a, 1 reserved, 2 free): refused, nothing moved. */
  CHECK(gh_tensor_prefetch_room(tm, a, s1, 1) == GH_ERR_BUDGET);
  CHECK(gh_tensor_prefetch_room(tm, a, s1, 2 * MiB) == GH_ERR_BUDGET);
  CHECK(tier_of(tm, a) == GH_TIER_HOST && tier_of(tm, b) == GH_TIER_DEVICE && tier_of(tm, c) == GH_TIER_DEVICE);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.evictions, ev0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* Exactly enough: restored, ahead (its copies wait for its next use). */
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  size_t pending = 0;
  uint64_t w0 = 0, w1 = 0;
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w0) == GH_OK);
  CHECK(gh_tensor_prefetch_room(tm, a, s1, 0) == GH_OK && tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, &pending, &w1) == GH_OK);
  CHECK(pending > 0);
  CHECK_EQ_U64(w1, w0);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK);  /* its use */
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
  CHECK(pat_check(a, 0, 4 * MiB, 31) == SIZE_MAX);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.evictions, ev0);
  /* On the device already: nothing to move, whatever the reserve. */
  CHECK(gh_tensor_prefetch_room(tm, a, s1, 64 * MiB) == GH_OK);
  /* Cached frames are room: c freed and reclaimed into the cache (the
   * budget full: a, b, the cached run), a evicted; a reserve of 2 frames
   * still leaves room for a (2) out of the 6 not busy. */
  CHECK(gh_tensor_free(tm, c, s1) == GH_OK);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK(st.cached_frames >= 4);
  CHECK(gh_tensor_prefetch_room(tm, a, s1, 4 * MiB) == GH_OK && tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK);
  CHECK(pat_check(a, 0, 4 * MiB, 31) == SIZE_MAX && pat_check(b, 0, 4 * MiB, 32) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* Bad arguments. */
  CHECK(gh_tensor_prefetch_room(NULL, a, s1, 0) == GH_ERR_INVAL);
  CHECK(gh_tensor_prefetch_room(tm, NULL, s1, 0) == GH_ERR_INVAL);
  CHECK(gh_tensor_free(tm, b, s1) == GH_OK);
  CHECK(gh_tensor_prefetch_room(tm, b, s1, 0) == GH_ERR_DOUBLE_FREE);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* gh_tensor_prefetch_ahead when the event after its copies cannot be
 * recorded: the streams wait at once (for the latest batch) instead of at
 * the next use, and the bytes arrive. The failing record is the last one
 * the call makes: counted on a first prefetch ahead of the same tensor in
 * the same state. */
static void prefetch_ahead_no_event(void) {
  gh_tmgr_t* tm = make_tm(8, 32, 0, 1000000); /* events never complete by queries alone */
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  const size_t sz = 4 * MiB;
  void* a = NULL;
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &a) == GH_OK);
  pat_fill(a, 0, sz, 31);
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  uint64_t r0 = 0, r1 = 0, w0 = 0, w1 = 0;
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_event(tm, 0, &r0) == GH_OK);
  CHECK(gh_tensor_prefetch_ahead(tm, a, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_event(tm, 0, &r1) == GH_OK);
  CHECK(r1 > r0);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK); /* its use */
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(a, 0, sz, 31) == SIZE_MAX);
  /* Again, the call's last record failing. */
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w0) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_event(tm, (uint32_t)(r1 - r0), NULL) == GH_OK);
  CHECK(gh_tensor_prefetch_ahead(tm, a, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_event(tm, 0, &r0) == GH_OK);
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w1) == GH_OK);
  CHECK(w1 > w0); /* s1 waits now, not at the next use */
  CHECK(tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(a, 0, sz, 31) == SIZE_MAX);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK); /* nothing left to wait for */
  CHECK(_gh_tmgr_sim_counts(tm, NULL, &w0) == GH_OK);
  CHECK_EQ_U64(w0, w1);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* A quiet tensor evicted homeless for a run being placed holds its copy
 * until the run is mapped (a map of memory that a copy reads waits in the
 * driver for the copy): the run's stream then waits for the copy, and the
 * bytes arrive on the host before the new tensor's writes; with
 * GPUHEAP_HOLD_COPIES=0 the copy is queued at once. A held unit's memory
 * released before the map (a request of another size) gets its copy
 * first. Copies run only when something waits for them (sim_defer), and
 * events never complete by queries alone, so a missing wait shows as
 * damaged bytes. */
/* The held copies' tests: a manager of 4 device frames in chunks of 2,
 * whose events complete only when waited for, full with *a and *b (4 MiB
 * each on stream 0x1000, filled with stamps sa and sb), copies deferred
 * from then on, and *a advised quiet. NULL when it could not be made. */
#define HELD_SZ (4 * MiB)
static gh_tmgr_t* held_setup(void** a, void** b, uint64_t sa, uint64_t sb) {
  gh_tmgr_t* tm = make_tm(8, 32, 0, 1000000);
  if (!tm) return NULL;
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  CHECK(gh_tensor_alloc(tm, HELD_SZ, GH_KIND_ACTIVATIONS, s1, a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, HELD_SZ, GH_KIND_ACTIVATIONS, s1, b) == GH_OK);
  pat_fill(*a, 0, HELD_SZ, sa);
  pat_fill(*b, 0, HELD_SZ, sb);
  CHECK(_gh_tmgr_sim_defer(tm, 1) == GH_OK);
  CHECK(gh_tensor_advise(tm, *a, GH_ADVICE_QUIET) == GH_OK);
  return tm;
}

/* Bring p back on stream s (the stream run) and check its bytes. */
static void held_check_back(gh_tmgr_t* tm, void* p, uint64_t stamp, gh_stream_t s) {
  CHECK(gh_tensor_prefetch(tm, p, s) == GH_OK);
  CHECK(_gh_tmgr_sim_run(tm, s) == GH_OK);
  CHECK(pat_check(p, 0, HELD_SZ, stamp) == SIZE_MAX);
}

/* The end of a held-copies test: the manager consistent, copies at once
 * again, a, b and c freed on s, nothing left, destroyed. */
static void held_teardown(gh_tmgr_t* tm, void* a, void* b, void* c, gh_stream_t s) {
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
  CHECK(gh_tensor_free(tm, a, s) == GH_OK);
  CHECK(gh_tensor_free(tm, b, s) == GH_OK);
  CHECK(gh_tensor_free(tm, c, s) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

static void held_copies_one(int on) {
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  if (!on) setenv("GPUHEAP_HOLD_COPIES", "0", 1);
  gh_tmgr_t* tm = held_setup(&a, &b, 51, 52);
  unsetenv("GPUHEAP_HOLD_COPIES");
  if (!tm) return;
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  const size_t sz = HELD_SZ; /* one unit of 2 frames */
  uint64_t h0 = 0, h1 = 0;
  int mapped = 1;
  CHECK(_gh_tmgr_held_copies(tm, &h0) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &c) == GH_OK); /* a goes, c takes its memory */
  CHECK(_gh_tmgr_held_copies(tm, &h1) == GH_OK);
  CHECK_EQ_U64(h1 - h0, (uint64_t)on);
  CHECK(tier_of(tm, a) == GH_TIER_HOST);
  CHECK(_gh_tmgr_sim_mapped(tm, a, &mapped) == GH_OK && !mapped);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK); /* c's stream reaches its first use */
  pat_fill(c, 0, sz, 53);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* b quiet, evicted for a run of one frame: no spare of that size, so
   * b's memory is released for a new allocation before the run is mapped. */
  CHECK(gh_tensor_advise(tm, b, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_advise(tm, c, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 2 * MiB, GH_KIND_ACTIVATIONS, s1, &d) == GH_OK);
  CHECK(tier_of(tm, b) == GH_TIER_HOST);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  pat_fill(d, 0, 2 * MiB, 54);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  /* Every byte: a and b brought back, c where it is. */
  CHECK(gh_tensor_free(tm, d, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  held_check_back(tm, a, 51, s1);
  held_check_back(tm, b, 52, s1);
  held_check_back(tm, c, 53, s1);
  held_teardown(tm, a, b, c, s1);
}

/* A held copy that cannot be queued loses the unit's bytes: the call that
 * placed the run succeeds (its tensor is whole), and every later
 * allocation or prefetch fails with GH_ERR_CORRUPT, saying why. */
static void held_copy_fails(void) {
  gh_tmgr_t* tm = make_tm(8, 32, 0, 0); /* 4 device frames */
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  const size_t sz = 4 * MiB;
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, NULL, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, NULL, &b) == GH_OK);
  CHECK(gh_tensor_advise(tm, a, GH_ADVICE_QUIET) == GH_OK);
  uint64_t h0 = 0, h1 = 0;
  CHECK(_gh_tmgr_held_copies(tm, &h0) == GH_OK);
  CHECK(_gh_tmgr_sim_fail_copy(tm, 1) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, NULL, &c) == GH_OK); /* a's copy, held, then refused */
  CHECK(_gh_tmgr_held_copies(tm, &h1) == GH_OK);
  CHECK_EQ_U64(h1 - h0, 1);
  CHECK(gh_tensor_alloc(tm, 4096, GH_KIND_ACTIVATIONS, NULL, &d) == GH_ERR_CORRUPT);
  CHECK(strstr(gh_last_error_detail(), "copy could not be queued") != NULL);
  CHECK(gh_tensor_prefetch(tm, a, NULL) == GH_ERR_CORRUPT);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

/* A held copy whose event cannot be recorded: the host waits for the copy
 * stream instead, and the bytes still arrive before the new tensor's
 * writes. Copies run only when something waits for them. The failing
 * record is counted on a first pass of the same calls: the run's held unit
 * records its event second to last (the batch's last event follows). */
static void held_copy_no_event(void) {
  uint64_t records = 0;
  for (int pass = 0; pass < 2; pass++) {
    void *a = NULL, *b = NULL, *c = NULL;
    gh_tmgr_t* tm = held_setup(&a, &b, 71, 70);
    if (!tm) return;
    const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
    const size_t sz = HELD_SZ;
    uint64_t r0 = 0, r1 = 0, h0 = 0, h1 = 0;
    CHECK(_gh_tmgr_held_copies(tm, &h0) == GH_OK);
    CHECK(_gh_tmgr_sim_fail_event(tm, pass ? (uint32_t)(records - 1) : 0, &r0) == GH_OK);
    CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &c) == GH_OK); /* a goes, c takes its memory */
    CHECK(_gh_tmgr_sim_fail_event(tm, 0, &r1) == GH_OK);
    CHECK(_gh_tmgr_held_copies(tm, &h1) == GH_OK);
    CHECK_EQ_U64(h1 - h0, 1);
    if (!pass) records = r1 - r0;
    else CHECK_EQ_U64(r1 - r0, records - 1); /* one record refused */
    CHECK(records >= 2);
    CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
    pat_fill(c, 0, sz, 72);
    CHECK(gh_tensor_free(tm, c, s1) == GH_OK);
    CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
    held_check_back(tm, a, 71, s1);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(_gh_tmgr_sim_defer(tm, 0) == GH_OK);
    CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
    CHECK(gh_tensor_free(tm, b, s1) == GH_OK);
    model_t m = {0};
    drain_and_destroy(tm, &m);
  }
}

/* The simulation counts frames and allocations mapped and unmapped by
 * their memory's tier: a run of 2 frames in one chunk maps 2 device frames,
 * one allocation; empty_cache after its free unmaps them; an eviction
 * unmaps the home's device frames and maps host memory there (plus the
 * device alias its copy reads through). */
static void sim_frames(void) {
  gh_tmgr_t* tm = make_tm(8, 32, 0, 0);
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  uint64_t dm0 = 0, du0 = 0, hm0 = 0, hu0 = 0, dm = 0, du = 0, hm = 0, hu = 0;
  CHECK(_gh_tmgr_sim_frames(tm, GH_TIER_DEVICE, &dm0, &du0) == GH_OK);
  CHECK(_gh_tmgr_sim_frames(tm, GH_TIER_HOST, &hm0, &hu0) == GH_OK);
  void *a = NULL, *b = NULL;
  uint64_t am0 = 0, au0 = 0, ahm0 = 0, am = 0, au = 0, ahm = 0, ahu = 0;
  CHECK(_gh_tmgr_sim_allocs(tm, GH_TIER_DEVICE, &am0, &au0) == GH_OK);
  CHECK(_gh_tmgr_sim_allocs(tm, GH_TIER_HOST, &ahm0, NULL) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, NULL, &a) == GH_OK);
  CHECK(_gh_tmgr_sim_frames(tm, GH_TIER_DEVICE, &dm, &du) == GH_OK);
  CHECK_EQ_U64(dm - dm0, 2);
  CHECK_EQ_U64(du - du0, 0);
  CHECK(_gh_tmgr_sim_allocs(tm, GH_TIER_DEVICE, &am, &au) == GH_OK);
  CHECK_EQ_U64(am - am0, 1);             /* one allocation of 2 frames */
  CHECK_EQ_U64(au - au0, 0);
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(_gh_tmgr_sim_frames(tm, GH_TIER_DEVICE, &dm, &du) == GH_OK);
  CHECK(_gh_tmgr_sim_frames(tm, GH_TIER_HOST, &hm, &hu) == GH_OK);
  CHECK_EQ_U64(du - du0, 2);             /* its home */
  CHECK_EQ_U64(dm - dm0, 4);             /* and the alias the copy read through */
  CHECK(hm - hm0 >= 2 && hu == hu0);     /* host memory at home (and at its alias, if new) */
  CHECK(_gh_tmgr_sim_allocs(tm, GH_TIER_DEVICE, &am, &au) == GH_OK);
  CHECK(_gh_tmgr_sim_allocs(tm, GH_TIER_HOST, &ahm, &ahu) == GH_OK);
  CHECK_EQ_U64(au - au0, 1);             /* the home's one mapping */
  CHECK_EQ_U64(am - am0, 2);             /* and the alias */
  CHECK(ahm - ahm0 >= 1 && ahm - ahm0 <= hm - hm0);  /* host allocations: at most one a frame */
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, NULL, &b) == GH_OK);
  CHECK(gh_tensor_free(tm, b, NULL) == GH_OK);
  CHECK(gh_tensor_free(tm, a, NULL) == GH_OK);
  CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
  CHECK(_gh_tmgr_sim_frames(tm, GH_TIER_DEVICE, &dm, &du) == GH_OK);
  CHECK_EQ_U64(dm - du, 0);              /* every device frame mapped is unmapped again */
  CHECK(_gh_tmgr_sim_frames(tm, GH_TIER_DEVICE, NULL, NULL) == GH_OK);
  CHECK(_gh_tmgr_sim_allocs(tm, GH_TIER_DEVICE, &am, &au) == GH_OK);
  CHECK_EQ_U64(am - au, 0);              /* every device mapping is undone */
  CHECK(_gh_tmgr_sim_allocs(tm, GH_TIER_HOST, NULL, NULL) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

static void held_copies(void) {
  held_copies_one(1);
  held_copies_one(0);
  held_copy_fails();
  held_copy_no_event();
}

/* Which evictions copy by the provider's kernel (copy_to_host): by
 * default none (the engine); GPUHEAP_COPY_KERNEL=homeless a homeless
 * unit's (a quiet tensor's, its home left unmapped), not one whose home
 * gets host memory; =1 every eviction's; =0 none. A restore never does
 * (nor, but with =1, the evictions of tensors with homes it makes room
 * for). Bytes are checked after each round trip (copies deferred until
 * waited for). */
static void copy_kernel_one(const char* env, int quiet_by_kernel, int cold_by_kernel) {
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  if (env) setenv("GPUHEAP_COPY_KERNEL", env, 1);
  gh_tmgr_t* tm = held_setup(&a, &b, 81, 82); /* a quiet */
  unsetenv("GPUHEAP_COPY_KERNEL");
  if (!tm) return;
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  uint64_t n0 = 0, n1 = 0, n2 = 0, n3 = 0;
  CHECK(_gh_tmgr_sim_copies_to_host(tm, &n0) == GH_OK);
  CHECK(gh_tensor_alloc(tm, HELD_SZ, GH_KIND_ACTIVATIONS, s1, &c) == GH_OK); /* a goes, homeless */
  CHECK(_gh_tmgr_sim_copies_to_host(tm, &n1) == GH_OK);
  CHECK(tier_of(tm, a) == GH_TIER_HOST);
  CHECK_MSG((n1 > n0) == quiet_by_kernel, "GPUHEAP_COPY_KERNEL=%s: a quiet unit's eviction made %llu kernel copies",
            env ? env : "(unset)", (unsigned long long)(n1 - n0));
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  pat_fill(c, 0, HELD_SZ, 83);
  CHECK(gh_tensor_advise(tm, b, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_alloc(tm, HELD_SZ, GH_KIND_ACTIVATIONS, s1, &d) == GH_OK); /* b goes, its home mapped */
  CHECK(_gh_tmgr_sim_copies_to_host(tm, &n2) == GH_OK);
  CHECK(tier_of(tm, b) == GH_TIER_HOST);
  CHECK_MSG((n2 > n1) == cold_by_kernel, "GPUHEAP_COPY_KERNEL=%s: a cold unit's eviction made %llu kernel copies",
            env ? env : "(unset)", (unsigned long long)(n2 - n1));
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(b, 0, HELD_SZ, 82) == SIZE_MAX); /* read in place over its home */
  CHECK(gh_tensor_free(tm, d, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  CHECK(_gh_tmgr_sim_copies_to_host(tm, &n2) == GH_OK);
  held_check_back(tm, a, 81, s1); /* restores (by the engine), evicting c (not quiet) for room */
  held_check_back(tm, b, 82, s1);
  CHECK(_gh_tmgr_sim_copies_to_host(tm, &n3) == GH_OK);
  if (!cold_by_kernel) CHECK_EQ_U64(n3, n2);
  CHECK(pat_check(c, 0, HELD_SZ, 83) == SIZE_MAX);
  held_teardown(tm, a, b, c, s1);
}

static void copy_kernel(void) {
  copy_kernel_one(NULL, 0, 0);
  copy_kernel_one("homeless", 1, 0);
  copy_kernel_one("1", 1, 1);
  copy_kernel_one("0", 0, 0);
}

/* The start of wait_frees_one and take_freed_one: a manager of 4 device
 * frames (chunks of 2) whose events complete only when waited for, made
 * with variable `var` set to env (unless NULL); a (4 MiB on s1, filled
 * with pattern `tag`, then advised `advice`) and b (4 MiB on s1,
 * prefetched when `restoring`, then freed: pending; its address in *b).
 * NULL when the manager cannot be made. */
static const gh_stream_t wf_s1 = (gh_stream_t)(uintptr_t)0x1000, wf_s2 = (gh_stream_t)(uintptr_t)0x2000;
static gh_tmgr_t* wait_setup(const char* var, const char* env, gh_advice_t advice, int restoring, uint64_t tag,
                             void** a, void** b) {
  if (env) setenv(var, env, 1);
  gh_tmgr_t* tm = make_tm(8, 32, 0, 1000000);
  unsetenv(var);
  if (!tm) return NULL;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, wf_s1, a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, wf_s1, b) == GH_OK);
  pat_fill(*a, 0, 4 * MiB, tag);
  CHECK(gh_tensor_advise(tm, *a, advice) == GH_OK);
  if (restoring) CHECK(gh_tensor_prefetch(tm, *b, wf_s1) == GH_OK);  /* on the device: moves nothing */
  CHECK(gh_tensor_free(tm, *b, wf_s1) == GH_OK);
  return tm;
}

/* Room for an allocation on another stream, with a pending free whose
 * event has not completed and a cold tensor to evict: by default the
 * manager waits for the free while restoring (a prefetch after the last
 * cold advice: `restoring`) when the victim is quiet (its move would not
 * wait for the streams, so the host runs ahead of its frees), and evicts
 * otherwise; GPUHEAP_WAIT_FREES=1 always waits, =0 never. */
static void wait_frees_one(const char* env, gh_advice_t advice, int restoring, int waits) {
  void *a = NULL, *b = NULL, *c = NULL;
  gh_tmgr_t* tm = wait_setup("GPUHEAP_WAIT_FREES", env, advice, restoring, 61, &a, &b);
  if (!tm) return;
  const gh_stream_t s1 = wf_s1, s2 = wf_s2;
  const size_t sz = 4 * MiB;
  gh_tmgr_stats_t s0, st;
  uint64_t wn0[9], wns[9], wn[9];
  CHECK(_gh_tmgr_wait_times(tm, wn0, wns) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s2, &c) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK(_gh_tmgr_wait_times(tm, wn, wns) == GH_OK);
  CHECK_MSG((wn[6] > wn0[6]) == (waits != 0), "GPUHEAP_WAIT_FREES=%s, advice %d, restoring %d: %llu waits for frees",
            env ? env : "(unset)", (int)advice, restoring, (unsigned long long)(wn[6] - wn0[6]));
  CHECK_MSG(st.evictions - s0.evictions == (waits ? 0u : 2u),
            "GPUHEAP_WAIT_FREES=%s, advice %d, restoring %d: %llu frames evicted", env ? env : "(unset)", (int)advice,
            restoring, (unsigned long long)(st.evictions - s0.evictions));
  CHECK(tier_of(tm, a) == (waits ? GH_TIER_DEVICE : GH_TIER_HOST));
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(a, 0, sz, 61) == SIZE_MAX);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
  CHECK(gh_tensor_free(tm, c, s2) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* A run that no cached run fits, placed while the budget is spent: the
 * free its room waits for brings a cached run of its size, which it takes
 * where it is (no map call, nothing evicted) instead of releasing it for
 * room and mapping its memory again (GPUHEAP_TAKE_FREED=0). */
static void take_freed_one(const char* env) {
  void *a = NULL, *b = NULL, *c = NULL;
  /* restoring, a quiet: room waits for b's free */
  gh_tmgr_t* tm = wait_setup("GPUHEAP_TAKE_FREED", env, GH_ADVICE_QUIET, 1, 63, &a, &b);
  if (!tm) return;
  const int take = !env;
  const gh_stream_t s1 = wf_s1, s2 = wf_s2;
  const size_t sz = 4 * MiB;
  gh_tmgr_stats_t s0, st;
  uint64_t t0 = 0, t1 = 0;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(_gh_tmgr_freed_taken(tm, &t0) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s2, &c) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK(_gh_tmgr_freed_taken(tm, &t1) == GH_OK);
  const uint64_t maps = st.vmm_calls[GH_VMM_MAP] - s0.vmm_calls[GH_VMM_MAP];
  const uint64_t unmaps = st.vmm_calls[GH_VMM_UNMAP] - s0.vmm_calls[GH_VMM_UNMAP];
  CHECK_MSG(t1 - t0 == (uint64_t)take, "GPUHEAP_TAKE_FREED=%s: %llu runs taken", env ? env : "(unset)",
            (unsigned long long)(t1 - t0));
  CHECK_MSG((maps == 0) == take && (unmaps == 0) == take, "GPUHEAP_TAKE_FREED=%s: %llu maps, %llu unmaps",
            env ? env : "(unset)", (unsigned long long)maps, (unsigned long long)unmaps);
  if (take) CHECK(c == b); /* b's run, where it was */
  CHECK(st.evictions == s0.evictions);
  CHECK(tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  pat_fill(c, 0, sz, 64);
  CHECK(pat_check(a, 0, sz, 63) == SIZE_MAX);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
  CHECK(gh_tensor_free(tm, c, s2) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

static void take_freed(void) {
  take_freed_one(NULL);
  take_freed_one("0");
}

/* Room taken from cold tensors: an older one that is not quiet (its move
 * waits for its streams) and a newer quiet one (its move waits only for the
 * events of its advice). By default the quiet one goes first and no stream
 * is waited for; GPUHEAP_QUIET_FIRST=0 takes the older one, draining its
 * stream. Every byte comes back either way. */
static void quiet_first_one(const char* env) {
  if (env) setenv("GPUHEAP_QUIET_FIRST", env, 1);
  gh_tmgr_t* tm = make_tm(8, 32, 0, 1000000); /* 4 device frames; events complete only when waited for */
  unsetenv("GPUHEAP_QUIET_FIRST");
  if (!tm) return;
  const int first = !env;
  const gh_stream_t s1 = wf_s1, s2 = wf_s2;
  const size_t sz = 4 * MiB;
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &b) == GH_OK);
  pat_fill(a, 0, sz, 71);
  pat_fill(b, 0, sz, 72);
  CHECK(gh_tensor_advise(tm, a, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, b, GH_ADVICE_QUIET) == GH_OK);
  gh_tmgr_stats_t s0, st;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s2, &c) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.evictions - s0.evictions, 2);
  CHECK_MSG(tier_of(tm, a) == (first ? GH_TIER_DEVICE : GH_TIER_HOST) &&
                tier_of(tm, b) == (first ? GH_TIER_HOST : GH_TIER_DEVICE),
            "GPUHEAP_QUIET_FIRST=%s: the %s tensor was evicted", env ? env : "(unset)",
            tier_of(tm, b) == GH_TIER_HOST ? "quiet" : "older");
  CHECK_MSG((st.stream_waits == s0.stream_waits) == first && (st.quiet_waits > s0.quiet_waits) == first,
            "GPUHEAP_QUIET_FIRST=%s: %llu stream waits, %llu quiet waits", env ? env : "(unset)",
            (unsigned long long)(st.stream_waits - s0.stream_waits),
            (unsigned long long)(st.quiet_waits - s0.quiet_waits));
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  pat_fill(c, 0, sz, 73);
  CHECK(gh_tensor_free(tm, c, s2) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, first ? b : a, s1) == GH_OK);
  CHECK(_gh_tmgr_sim_run(tm, s1) == GH_OK);
  CHECK(pat_check(a, 0, sz, 71) == SIZE_MAX);
  CHECK(pat_check(b, 0, sz, 72) == SIZE_MAX);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
  CHECK(gh_tensor_free(tm, b, s1) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

static void quiet_first(void) {
  quiet_first_one(NULL);
  quiet_first_one("0");
}

/* The same while restoring, with an older cold tensor that is not quiet
 * and already on the host at the head of the cold order: the quiet one
 * behind it still makes the manager wait for the free. */
static void wait_frees_behind_host(void) {
  gh_tmgr_t* tm = make_tm(8, 32, 0, 1000000); /* 4 device frames; events complete only when waited for */
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000, s2 = (gh_stream_t)(uintptr_t)0x2000;
  const size_t sz = 4 * MiB;
  void *h = NULL, *a = NULL, *b = NULL, *c = NULL;
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &h) == GH_OK);
  CHECK(gh_tensor_advise(tm, h, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_evict(tm, h) == GH_OK);
  CHECK(tier_of(tm, h) == GH_TIER_HOST);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s1, &b) == GH_OK);
  pat_fill(a, 0, sz, 62);
  CHECK(gh_tensor_advise(tm, a, GH_ADVICE_QUIET) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, b, s1) == GH_OK);
  CHECK(gh_tensor_free(tm, b, s1) == GH_OK);
  gh_tmgr_stats_t s0, st;
  CHECK(gh_tmgr_stats(tm, &s0) == GH_OK);
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, s2, &c) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_MSG(st.evictions == s0.evictions, "%llu frames evicted with a quiet victim behind a host-only head",
            (unsigned long long)(st.evictions - s0.evictions));
  CHECK(tier_of(tm, a) == GH_TIER_DEVICE);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(_gh_tmgr_sim_configure(tm, 0, 0, 0) == GH_OK);
  CHECK(pat_check(a, 0, sz, 62) == SIZE_MAX);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
  CHECK(gh_tensor_free(tm, c, s2) == GH_OK);
  CHECK(gh_tensor_free(tm, h, s1) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

/* GPUHEAP_CALL_TIMES=1: each public call counted once under its kind,
 * with some time; without it nothing is counted. */
static void call_times_one(int on) {
  if (on) setenv("GPUHEAP_CALL_TIMES", "1", 1);
  gh_tmgr_t* tm = make_tm(8, 32, 0, 0);
  unsetenv("GPUHEAP_CALL_TIMES");
  if (!tm) return;
  const gh_stream_t s1 = (gh_stream_t)(uintptr_t)0x1000;
  void *a = NULL, *b = NULL;
  gh_tier_t tier;
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s1, &a) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 4 * MiB, GH_KIND_ACTIVATIONS, s1, &b) == GH_OK);
  CHECK(gh_tensor_advise(tm, a, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, a, s1) == GH_OK);
  CHECK(gh_tensor_prefetch_ahead(tm, b, s1) == GH_OK);
  CHECK(gh_tensor_prefetch_many(tm, &a, 1, s1) == GH_OK);
  CHECK(gh_tensor_pin(tm, b) == GH_OK);
  CHECK(gh_tensor_unpin(tm, b) == GH_OK);
  CHECK(gh_tensor_tier(tm, b, &tier) == GH_OK);
  CHECK(gh_tensor_free(tm, a, s1) == GH_OK);
  uint64_t n[8], ns[8];
  CHECK(_gh_tmgr_call_times(tm, n, ns) == GH_OK);
  const uint64_t want[8] = {2, 1, 1, 1, 1, 1, 1, 3};
  for (int k = 0; k < 8; k++) {
    CHECK_MSG(n[k] == (on ? want[k] : 0), "GPUHEAP_CALL_TIMES %d: kind %d counted %llu", on, k,
              (unsigned long long)n[k]);
    CHECK_MSG((ns[k] > 0) == (on != 0), "GPUHEAP_CALL_TIMES %d: kind %d took %llu ns", on, k,
              (unsigned long long)ns[k]);
  }
  CHECK(_gh_tmgr_call_times(tm, NULL, ns) == GH_ERR_INVAL);
  /* The provider's calls: the eviction copied and recorded an event, and
   * every provider call waited (if briefly) for its mutex. */
  uint64_t on_[9], ons[9];
  CHECK(_gh_tmgr_op_times(tm, on_, ons) == GH_OK);
  const int must[3] = {0, 1, 8}; /* copies, event records, pmu waits */
  for (int i = 0; i < 3; i++)
    CHECK_MSG((on_[must[i]] > 0) == (on != 0) && (ons[must[i]] > 0) == (on != 0),
              "GPUHEAP_CALL_TIMES %d: provider kind %d counted %llu, %llu ns", on, must[i],
              (unsigned long long)on_[must[i]], (unsigned long long)ons[must[i]]);
  uint64_t ops = 0;
  for (int k = 0; k < 8; k++) ops += on_[k];
  CHECK_MSG(on_[8] >= ops, "pmu waits %llu, fewer than the %llu provider calls", (unsigned long long)on_[8],
            (unsigned long long)ops);
  CHECK(_gh_tmgr_op_times(tm, on_, NULL) == GH_ERR_INVAL);
  /* The host's waits by rule, counted with the switch or without (timed
   * with it): the eviction of a (advised cold, not quiet) drained its
   * stream; each wait counted is one of the event or stream syncs counted
   * above (those only with the switch). */
  uint64_t wn[9], wns[9], waits = 0;
  CHECK(_gh_tmgr_wait_times(tm, wn, wns) == GH_OK);
  for (int k = 0; k < 9; k++) {
    waits += wn[k];
    CHECK_MSG((wns[k] > 0) == (on && wn[k] > 0), "GPUHEAP_CALL_TIMES %d, wait kind %d: %llu waits, %llu ns", on, k,
              (unsigned long long)wn[k], (unsigned long long)wns[k]);
  }
  CHECK_MSG(wn[0] > 0, "GPUHEAP_CALL_TIMES %d: no drain counted", on);
  CHECK_MSG(!on || waits <= on_[3] + on_[5], "%llu waits counted, more than the %llu event and stream syncs",
            (unsigned long long)waits, (unsigned long long)(on_[3] + on_[5]));
  CHECK(_gh_tmgr_wait_times(tm, wn, NULL) == GH_ERR_INVAL);
  CHECK(gh_tensor_free(tm, b, s1) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

static void call_times(void) {
  call_times_one(1);
  call_times_one(0);
}

static void wait_frees(void) {
  wait_frees_one(NULL, GH_ADVICE_QUIET, 1, 1);
  wait_frees_one(NULL, GH_ADVICE_QUIET, 0, 0);  /* no prefetch since the cold advice: a forward pass */
  wait_frees_one(NULL, GH_ADVICE_COLD, 1, 0);
  wait_frees_one("0", GH_ADVICE_QUIET, 1, 0);
  wait_frees_one("1", GH_ADVICE_COLD, 0, 1);
  wait_frees_behind_host();
  take_freed();
  quiet_first();
}

/* A host-alias region with no room for an allocation of several frames
 * (held apart by _gh_tmgr_alias_fragment): an eviction takes host memory
 * as single frames, each at its own alias, and every byte comes back; with
 * the region whole again, one allocation of the unit's size. */
static void host_alias_fragmented(void) {
  gh_tmgr_t* tm = make_tm(16, 64, 0, 0);
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 4) == GH_OK);
  const size_t sz = 8 * MiB; /* one unit of 4 frames */
  void* a = NULL;
  gh_tmgr_stats_t st;
  CHECK(gh_tensor_alloc(tm, sz, GH_KIND_ACTIVATIONS, NULL, &a) == GH_OK);
  pat_fill(a, 0, sz, 41);
  CHECK(_gh_tmgr_alias_fragment(tm, 1) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  uint64_t creates = st.vmm_calls[GH_VMM_CREATE];
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(tier_of(tm, a) == GH_TIER_HOST);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.vmm_calls[GH_VMM_CREATE] - creates, 4); /* four single frames */
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_prefetch(tm, a, NULL) == GH_OK);
  CHECK(pat_check(a, 0, sz, 41) == SIZE_MAX);
  CHECK(_gh_tmgr_alias_fragment(tm, 0) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  creates = st.vmm_calls[GH_VMM_CREATE];
  CHECK(gh_tensor_evict(tm, a) == GH_OK);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.vmm_calls[GH_VMM_CREATE] - creates, 1); /* one allocation of 4 frames */
  CHECK(gh_tensor_prefetch(tm, a, NULL) == GH_OK);
  CHECK(pat_check(a, 0, sz, 41) == SIZE_MAX);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tensor_free(tm, a, NULL) == GH_OK);
  model_t m = {0};
  drain_and_destroy(tm, &m);
}

static void ordered_moves(void) {
  ordered_moves_one(1, 0);
  ordered_moves_one(0, 0);
  ordered_moves_one(1, 1);
  ordered_moves_one(0, 1);
}

/* A cached run is split only when no entry of the size is left: of two
 * runs whose prefixes fit a tensor equally, the shorter one is taken, and
 * the longer one stays whole for a longer tensor. */
static void cache_shortest(void) {
  gh_tmgr_t* tm = make_tm(64, 64, 0, 0);
  if (!tm) return;
  CHECK(_gh_tmgr_set_chunk(tm, 2) == GH_OK);
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  gh_tmgr_stats_t st;
  CHECK(gh_tensor_alloc(tm, 16 * MiB, GH_KIND_ACTIVATIONS, NULL, &a) == GH_OK); /* 8 frames, 4 allocations */
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, NULL, &b) == GH_OK);  /* 4 frames, 2 allocations */
  CHECK(gh_tensor_free(tm, a, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tensor_free(tm, b, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.cached_frames, 12);
  const uint64_t maps = st.vmm_calls[GH_VMM_MAP];
  CHECK(gh_tensor_alloc(tm, 8 * MiB, GH_KIND_ACTIVATIONS, NULL, &c) == GH_OK);
  CHECK(c == b);
  CHECK(gh_tensor_alloc(tm, 16 * MiB, GH_KIND_ACTIVATIONS, NULL, &d) == GH_OK);
  CHECK(d == a);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.cached_frames, 0);
  CHECK_EQ_U64(st.vmm_calls[GH_VMM_MAP], maps); /* both from the cache, nothing mapped */
  CHECK(gh_tensor_free(tm, c, NULL) == GH_OK && gh_tensor_free(tm, d, NULL) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

/* Freed memory comes back to the cache while allocations keep hitting
 * mapped memory: 16 frees get an event at the next allocation, and
 * completed events are looked at every 8 allocations, so that a later
 * allocation of a freed size takes its run instead of new frames. */
static void early_flush(void) {
  gh_tmgr_t* tm = make_tm(64, 64, 0, 1); /* an event completes after 1 query */
  if (!tm) return;
  void* runs[16];
  void* small[16];
  void* keep = NULL;
  CHECK(gh_tensor_alloc(tm, 256, GH_KIND_WEIGHTS, NULL, &keep) == GH_OK); /* a slab with room */
  for (int i = 0; i < 16; i++) CHECK(gh_tensor_alloc(tm, 2 * MiB, GH_KIND_ACTIVATIONS, NULL, &runs[i]) == GH_OK);
  for (int i = 0; i < 16; i++) CHECK(gh_tensor_free(tm, runs[i], NULL) == GH_OK);
  const size_t dev = sim_dev(tm);
  for (int i = 0; i < 16; i++) CHECK(gh_tensor_alloc(tm, 256, GH_KIND_WEIGHTS, NULL, &small[i]) == GH_OK);
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.pending_frees, 0);
  CHECK_EQ_U64(st.cached_frames, 16);
  void* again = NULL;
  CHECK(gh_tensor_alloc(tm, 2 * MiB, GH_KIND_ACTIVATIONS, NULL, &again) == GH_OK);
  CHECK_EQ_U64(sim_dev(tm), dev); /* from the cache: no new frame */
  CHECK(gh_tensor_free(tm, again, NULL) == GH_OK && gh_tensor_free(tm, keep, NULL) == GH_OK);
  for (int i = 0; i < 16; i++) CHECK(gh_tensor_free(tm, small[i], NULL) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

static void host_placed(void) {
  gh_tmgr_t* tm = make_tm(8, 64, 2, 0);
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  const size_t fb = s.frame_bytes, dev_frames = s.device_budget / fb;
  CHECK(s.host_placed_bytes == 0);
  void *held = NULL, *big = NULL, *small = NULL;
  CHECK(gh_tensor_alloc(tm, dev_frames * fb, GH_KIND_WEIGHTS, NULL, &held) == GH_OK);
  CHECK(gh_tensor_pin(tm, held) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 2 * fb, GH_KIND_ACTIVATIONS, NULL, &big) == GH_OK);
  CHECK(gh_tensor_alloc(tm, 1000, GH_KIND_WORKSPACE, NULL, &small) == GH_OK);
  gh_tier_t tier = GH_TIER_NONE;
  CHECK(gh_tensor_tier(tm, big, &tier) == GH_OK && tier == GH_TIER_HOST);
  CHECK(gh_tensor_tier(tm, small, &tier) == GH_OK && tier == GH_TIER_HOST);
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK_EQ_U64(s.host_placed_bytes, 2 * fb + 1000);
  CHECK(gh_tensor_free(tm, small, NULL) == GH_OK && gh_tensor_free(tm, big, NULL) == GH_OK);
  CHECK(gh_tensor_free(tm, held, NULL) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}

/* The chunk follows the tensors (gh_tm_chunk_learn): after
 * GH_TM_CHUNK_AUTO_EVERY tensors of 18 frames, which chunks of 16 split
 * with a tail of 2, the chunk is 18 (the one size of 12-24 frames that
 * divides them). A tensor placed before the change keeps its chunks of 16
 * and one placed after has one allocation of 18; both evict and restore
 * with every byte, and the restore of the new one gives its host
 * allocation of 18 frames back to the pool, so that its next eviction
 * creates no host memory. Freed, a run of the old chunk is neither handed
 * to the next allocation on its stream nor cached. With
 * GPUHEAP_CHUNK_AUTO=0, or a chunk fixed by _gh_tmgr_set_chunk, the chunk
 * does not change and such runs are reused. */
static void chunk_follows_one(int mode) { /* 0: auto, 1: GPUHEAP_CHUNK_AUTO=0, 2: set_chunk(16) */
  if (mode == 1) setenv("GPUHEAP_CHUNK_AUTO", "0", 1);
  gh_tmgr_t* tm = make_tm(128, 512, 0, 0);
  unsetenv("GPUHEAP_CHUNK_AUTO");
  if (!tm) return;
  if (mode == 2) CHECK(_gh_tmgr_set_chunk(tm, GH_TM_CHUNK_DEFAULT) == GH_OK);
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.chunk_frames, GH_TM_CHUNK_DEFAULT);
  const size_t fb = st.frame_bytes, bytes = 18 * fb;
  void *early = NULL, *early2 = NULL;
  CHECK(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, NULL, &early) == GH_OK);
  CHECK(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, NULL, &early2) == GH_OK);
  for (unsigned i = 2; i < GH_TM_CHUNK_AUTO_EVERY; i++) {
    void* p = NULL;
    CHECK(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, NULL, &p) == GH_OK);
    CHECK(gh_tensor_free(tm, p, NULL) == GH_OK);
    CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
    CHECK_EQ_U64(st.chunk_frames, i + 1 < GH_TM_CHUNK_AUTO_EVERY || mode ? GH_TM_CHUNK_DEFAULT : 18);
  }
  CHECK_EQ_U64(st.chunk_changes, mode ? 0 : 1);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  settle(tm);
  /* Freed on a stream, a run is handed to the next allocation there of its
   * size (gh_tm_reuse): not one of the old chunk. */
  void *again = NULL, *again2 = NULL;
  CHECK(gh_tensor_free(tm, early2, NULL) == GH_OK);
  CHECK(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, NULL, &again) == GH_OK);
  CHECK((again == early2) == (mode != 0));
  CHECK(gh_tensor_free(tm, again, NULL) == GH_OK);
  CHECK(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, NULL, &again2) == GH_OK);
  CHECK(again2 == again); /* a run of the current chunk is */
  CHECK(gh_tensor_free(tm, again2, NULL) == GH_OK);
  settle(tm);
  void* late = NULL;
  CHECK(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, NULL, &late) == GH_OK);
  memset(early, 0x3c, bytes);
  memset(late, 0xc3, bytes);
  size_t host0 = 0, host1 = 0;
  for (int round = 0; round < 2; round++) {
    CHECK(gh_tensor_evict(tm, early) == GH_OK && gh_tensor_evict(tm, late) == GH_OK);
    CHECK(tier_of(tm, early) == GH_TIER_HOST && tier_of(tm, late) == GH_TIER_HOST);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
    CHECK(_gh_tmgr_sim_live(tm, GH_TIER_HOST, round ? &host1 : &host0) == GH_OK);
    CHECK(gh_tensor_prefetch(tm, early, NULL) == GH_OK && gh_tensor_prefetch(tm, late, NULL) == GH_OK);
    CHECK(_gh_tmgr_check(tm) == GH_OK);
  }
  CHECK_EQ_U64(host1, host0); /* the second round took its host memory from the pool */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  /* 18 frames as 16 + 2 host frames, as single frames when no allocation of 2 is pooled (first round)
   * or as one allocation of 18 frames (after the change) */
  CHECK(st.host_pool_frames >= 36);
  for (size_t i = 0; i < bytes; i += 4093)
    if (((const uint8_t*)early)[i] != 0x3c || ((const uint8_t*)late)[i] != 0xc3) {
      CHECK_MSG(0, "byte %zu changed", i);
      break;
    }
  /* Reclaimed, a run of the old chunk is not cached (its allocations go to
   * the spares). */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  const size_t cached0 = st.cached_frames;
  CHECK(gh_tensor_free(tm, early, NULL) == GH_OK);
  settle(tm);
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.cached_frames, cached0 + (mode ? 18 : 0));
  CHECK(gh_tensor_free(tm, late, NULL) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}
/* Sizes that want different chunks in turn (24 runs of 20 frames, then 28
 * of 18, as two stages of a step might): the chunk moves once, to one
 * that serves one of them, and stays (a change drops the runs of the old
 * chunk from the cache: flapping would cost every step). Without the
 * quarter's margin it would change 10 times here. */
static void chunk_settles(void) {
  gh_tmgr_t* tm = make_tm(128, 512, 0, 0);
  if (!tm) return;
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  const size_t fb = st.frame_bytes;
  for (int round = 0; round < 40; round++)
    for (int i = 0; i < (round % 2 ? 28 : 24); i++) {
      void* p = NULL;
      CHECK(gh_tensor_alloc(tm, (round % 2 ? 18 : 20) * fb, GH_KIND_ACTIVATIONS, NULL, &p) == GH_OK);
      CHECK(gh_tensor_free(tm, p, NULL) == GH_OK);
    }
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK);
  CHECK_EQ_U64(st.chunk_changes, 1);
  CHECK(st.chunk_frames == 20 || st.chunk_frames == 18);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
}
static void chunk_follows(void) {
  chunk_follows_one(0);
  chunk_follows_one(1);
  chunk_follows_one(2);
  chunk_settles();
}

/* ------------------------------------------------------------ host allocations refused
 * Every host allocation of the library may fail (_gh_fail_alloc refuses
 * the nth from a point on). A manager's creation, then a scenario of
 * allocations, moves, advice, budget changes, maps and the history, run
 * once per allocation it makes with that one refused, and again with
 * every one from it on refused. Each call answers GH_OK, GH_ERR_NOMEM or
 * what it answers with nothing refused (never a sticky failure); after
 * each, the accounts and statistics hold, the mapped tensors keep their
 * bytes and the tensor map is the model's; at the end the history
 * replays, and all is freed and given back (LeakSanitizer, in the
 * sanitizers' build, finds what is not). */
#define NM_SLOTS 7
typedef struct nm_s {
  gh_tmgr_t* tm;
  ref_t r[NM_SLOTS];
  int live[NM_SLOTS];
  uint64_t nth;
  int persist, step, nomem;
} nm_t;
static const gh_stream_t nm_s1 = (gh_stream_t)(uintptr_t)0x1000, nm_s2 = (gh_stream_t)(uintptr_t)0x2000;
static uint32_t nm_refused_steps; /* the steps that answered GH_ERR_NOMEM in some run */

/* The live slots as a model (into `t`, NM_SLOTS entries). */
static model_t nm_model(nm_t* x, ref_t* t) {
  model_t m = {.t = t, .cap = NM_SLOTS};
  for (int i = 0; i < NM_SLOTS; i++)
    if (x->live[i]) t[m.n++] = x->r[i], m.bytes += x->r[i].bytes;
  return m;
}

static void nm_verify(nm_t* x, int rc, int budget_ok) {
  _gh_fail_alloc_hold(1);
  CHECK_MSG(rc == GH_OK || rc == GH_ERR_NOMEM || (budget_ok && rc == GH_ERR_BUDGET),
            "nth %llu%s, step %d: %s (%s)", (unsigned long long)x->nth, x->persist ? " on" : "", x->step,
            gh_err_name(rc), gh_last_error_detail());
  x->nomem += rc == GH_ERR_NOMEM;
  CHECK_MSG(_gh_tmgr_sticky(x->tm) == GH_OK, "nth %llu, step %d: %s", (unsigned long long)x->nth, x->step,
            gh_last_error_detail());
  for (int k = 0; k < 3; k++) CHECK(_gh_tmgr_sim_run(x->tm, streams[k]) == GH_OK);
  for (int i = 0; i < NM_SLOTS; i++) {
    int mapped = 0;
    if (!x->live[i] || x->r[i].ahead) continue;
    CHECK(_gh_tmgr_sim_mapped(x->tm, x->r[i].p, &mapped) == GH_OK);
    CHECK_MSG(mapped || x->r[i].quiet, "nth %llu, step %d: slot %d unmapped", (unsigned long long)x->nth, x->step, i);
    /* 4 KiB of every 256 KiB (each frame 8 times; the end checks all) */
    for (size_t at = 0; mapped && at < x->r[i].bytes; at += 256 << 10) {
      const size_t end = at + 4096 < x->r[i].bytes ? at + 4096 : x->r[i].bytes;
      CHECK_MSG(pat_check(x->r[i].p, at, end, x->r[i].stamp) == SIZE_MAX, "nth %llu, step %d: slot %d damaged",
                (unsigned long long)x->nth, x->step, i);
    }
  }
  ref_t t[NM_SLOTS];
  const model_t m = nm_model(x, t);
  check_stats(x->tm, &m);
  check_tensor_map(x->tm, &m);
  _gh_fail_alloc_hold(0);
}

static int nm_alloc(nm_t* x, int i, size_t bytes, gh_kind_t kind, gh_stream_t s) {
  if (x->live[i]) return GH_OK;
  void* p = NULL;
  const int rc = gh_tensor_alloc(x->tm, bytes, kind, s, &p);
  if (rc != GH_OK) return rc;
  CHECK(_gh_tmgr_sim_run(x->tm, s) == GH_OK); /* what s's kernels would wait for */
  x->r[i] = (ref_t){.p = p, .bytes = bytes, .stamp = 0x6e6f6d656dull * 16 + (uint64_t)i, .kind = kind};
  pat_fill(p, 0, bytes, x->r[i].stamp);
  x->live[i] = 1;
  return GH_OK;
}

/* A call on slot i's tensor, or GH_OK where it has none. */
#define NM_ON(i, call) (x->live[i] ? (call) : GH_OK)
#define NM_P(i) ((void*)x->r[i].p)

/* One run of the scenario; its step count, or -1 when it ended with the
 * nth allocation not reached. */
static int nm_run(uint64_t nth, int persist) {
  nm_t x0 = {.nth = nth, .persist = persist}, *x = &x0;
  x->tm = make_tm(8, 32, 0, 2);
  if (!x->tm) return -1;
  CHECK(gh_tmgr_record_history(x->tm, 1000) == GH_OK);
  _gh_fail_alloc(nth, persist);
  for (x->step = 0; x->step < 30; x->step++) {
    int rc = GH_OK, budget_ok = 0;
    switch (x->step) {
      case 0: rc = nm_alloc(x, 0, 1000, GH_KIND_WEIGHTS, nm_s1); break;
      case 1: rc = nm_alloc(x, 1, 300 << 10, GH_KIND_ACTIVATIONS, nm_s1); break;
      case 2: rc = nm_alloc(x, 2, 3 * MiB / 2, GH_KIND_ACTIVATIONS, nm_s1); break;
      case 3: rc = nm_alloc(x, 3, 2 * MiB, GH_KIND_ACTIVATIONS, nm_s2); break;
      case 4: rc = NM_ON(2, gh_tensor_advise(x->tm, NM_P(2), GH_ADVICE_COLD)); break;
      case 5: rc = nm_alloc(x, 4, 3 * MiB, GH_KIND_ACTIVATIONS, nm_s1), budget_ok = 1; break; /* the budget fills */
      case 6: rc = gh_tmgr_record_history(x->tm, 2000); break;
      case 7: rc = NM_ON(3, gh_tensor_evict(x->tm, NM_P(3))); break;
      case 8: rc = NM_ON(2, gh_tensor_prefetch(x->tm, NM_P(2), nm_s1)), budget_ok = 1; break;
      case 9:
        rc = NM_ON(1, gh_tensor_advise(x->tm, NM_P(1), GH_ADVICE_QUIET));
        if (rc == GH_OK && x->live[1]) x->r[1].quiet = 1;
        break;
      case 10:
        rc = NM_ON(4, gh_tensor_evict_ahead(x->tm, NM_P(4)));
        if (x->live[4]) x->r[4].quiet = 1; /* (advised, whatever the move's answer) */
        break;
      case 11:
        rc = NM_ON(3, gh_tensor_prefetch_ahead(x->tm, NM_P(3), nm_s1)), budget_ok = 1;
        if (rc == GH_OK && x->live[3]) x->r[3].ahead = 1;
        break;
      case 12:
        rc = NM_ON(3, gh_tensor_prefetch(x->tm, NM_P(3), nm_s1)), budget_ok = 1;
        if (x->live[3] && rc != GH_ERR_NOMEM) x->r[3].ahead = 0; /* (a prefetch with no room ends it too) */
        break;
      case 13:
        rc = NM_ON(0, gh_tensor_pin(x->tm, NM_P(0))), budget_ok = 1;
        if (rc == GH_OK && x->live[0]) rc = gh_tensor_unpin(x->tm, NM_P(0));
        break;
      case 14: rc = NM_ON(4, gh_tensor_record_stream(x->tm, NM_P(4), nm_s2)); break;
      case 15:
        rc = NM_ON(4, gh_tensor_free(x->tm, NM_P(4), nm_s1));
        if (rc == GH_OK) x->live[4] = 0;
        break;
      case 16: {
        void* two[2];
        size_t n = 0;
        if (x->live[1]) two[n++] = NM_P(1);
        if (x->live[2]) two[n++] = NM_P(2);
        rc = n ? gh_tensor_prefetch_many(x->tm, two, n, nm_s2) : GH_OK, budget_ok = 1;
        if (rc == GH_OK) x->r[1].quiet = 0;
        break;
      }
      case 17: {
        gh_frame_info_t fi[64];
        size_t n = 0;
        rc = gh_tmgr_frame_map(x->tm, fi, 64, &n);
        break;
      }
      case 18: rc = gh_tmgr_set_device_budget(x->tm, 4 * MiB), budget_ok = 1; break;
      case 19: rc = gh_tmgr_set_device_budget(x->tm, 8 * MiB); break;
      case 20: rc = nm_alloc(x, 5, MiB, GH_KIND_OPTIMIZER, nm_s2), budget_ok = 1; break;
      case 21:
        rc = NM_ON(1, gh_tensor_free(x->tm, NM_P(1), nm_s2));
        if (rc == GH_OK) x->live[1] = 0;
        break;
      case 22: rc = NM_ON(3, gh_tensor_prefetch_room(x->tm, NM_P(3), nm_s1, 0)), budget_ok = 1; break;
      case 23: rc = gh_tmgr_maintain(x->tm); break;
      case 24: rc = gh_tmgr_empty_cache(x->tm); break;
      case 25: rc = nm_alloc(x, 6, 5 * MiB, GH_KIND_ACTIVATIONS, nm_s1), budget_ok = 1; break; /* a run, evicting */
      case 26: {
        gh_tensor_info_t ti[NM_SLOTS + 4];
        size_t n = 0;
        rc = gh_tmgr_tensor_map(x->tm, ti, NM_SLOTS + 4, &n);
        break;
      }
      case 27:
        rc = NM_ON(2, gh_tensor_free(x->tm, NM_P(2), nm_s1));
        if (rc == GH_OK) x->live[2] = 0;
        break;
      case 28:
        rc = NM_ON(5, gh_tensor_set_kind(x->tm, NM_P(5), GH_KIND_WORKSPACE));
        if (rc == GH_OK) x->r[5].kind = GH_KIND_WORKSPACE;
        break;
      default: rc = NM_ON(6, gh_tensor_evict(x->tm, NM_P(6))); break;
    }
    if (nth == 0) CHECK_MSG(rc == GH_OK, "step %d: %s", x->step, gh_err_name(rc)); /* nothing refused */
    if (rc == GH_ERR_NOMEM) nm_refused_steps |= 1u << x->step;
    nm_verify(x, rc, budget_ok);
  }
  const uint64_t refused = _gh_failed_allocs();
  _gh_fail_alloc(0, 0);
  CHECK_MSG(refused == 0 || x->nomem > 0 || !persist, "nth %llu on: %llu refused, no call said so",
            (unsigned long long)nth, (unsigned long long)refused);
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(x->tm, &st) == GH_OK);
  if (nth == 0) CHECK(st.evictions > 0 && st.restores > 0); /* the scenario moves */
  ref_t t[NM_SLOTS];
  model_t m = nm_model(x, t);
  check_history(x->tm, &m, st.oom_events);
  for (size_t i = 0; i < m.n; i++) m.t[i].ahead = m.t[i].ahead || m.t[i].quiet; /* (drain's ref_use prefetches both) */
  drain_and_destroy(x->tm, &m);
  return refused ? x->step : -1;
}

/* gh_tmgr_create with its nth allocation refused: GH_ERR_NOMEM, no
 * manager, nothing of the provider's left; 1 when it was reached. */
static int nm_create(uint64_t nth, int heap) {
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_SIM;
  o.device_budget = 64 * MiB, o.host_budget = 64 * MiB, o.host_pool_frames = 0;
  if (heap) o.heap_bytes = 8 * MiB, o.heap_max_bytes = 32 * MiB;
  gh_tmgr_t* tm = (gh_tmgr_t*)1;
  _gh_fail_alloc(nth, 0);
  const int rc = gh_tmgr_create(&tm, &o);
  const uint64_t refused = _gh_failed_allocs();
  _gh_fail_alloc(0, 0);
  if (!refused) {
    CHECK(rc == GH_OK && tm != NULL);
    if (rc == GH_OK) CHECK(gh_tmgr_destroy(tm) == GH_OK);
  } else {
    CHECK_MSG(rc == GH_ERR_NOMEM, "create, allocation %llu refused: %s", (unsigned long long)nth, gh_err_name(rc));
    CHECK(rc == GH_OK || tm == NULL);
    if (rc == GH_OK && tm) gh_tmgr_destroy(tm);
  }
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
  return refused != 0;
}

static void nomem_sweep(void) {
  for (int heap = 0; heap < 2; heap++) {
    uint64_t nth = 1;
    while (nth < 200 && nm_create(nth, heap)) nth++;
    CHECK(nth > 3 && nth < 200);
    printf("host allocations refused: creation%s, %llu allocations\n", heap ? " with a heap" : "",
           (unsigned long long)nth - 1);
  }
  CHECK(nm_run(0, 0) == -1);
  const uint64_t stride = gh_test_scale() < 1 ? 3 : 1;
  for (int persist = 0; persist < 2; persist++) {
    uint64_t nth = 1, runs = 0;
    while (nth < 5000 && nm_run(nth, persist) >= 0) runs++, nth += nth < 8 ? 1 : stride;
    CHECK_MSG(runs > 20 && nth < 5000, "%llu runs", (unsigned long long)runs);
    printf("host allocations refused: the scenario, %s: %llu runs (n up to %llu)\n",
           persist ? "the nth and every later one" : "the nth", (unsigned long long)runs, (unsigned long long)nth - 1);
  }
  /* Among the calls that said so: allocations (a tensor's own, a run, one
   * that evicts), an eviction, prefetches (one, ahead, many, where there is
   * room), a lower budget, the history's ring, the tensor map. Frees,
   * advice and the frame map allocate nothing: they never did. */
  static const int must[] = {0, 2, 5, 6, 7, 8, 11, 16, 18, 22, 25, 26};
  for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
    CHECK_MSG(nm_refused_steps >> must[i] & 1, "step %d never answered GH_ERR_NOMEM", must[i]);
  for (int step = 0; step < 30; step++)
    if (step == 15 || step == 21 || step == 27) CHECK(!(nm_refused_steps >> step & 1));
  printf("host allocations refused: steps answering GH_ERR_NOMEM %#x\n", nm_refused_steps);
}

int main(int argc, char** argv) {
  const double scale = gh_test_scale();
  size_t ops = (size_t)(1500 * scale);
  if (argc > 1) ops = (size_t)atol(argv[1]);
  if (ops < 200) ops = 200;
  const int fds = open_fds();
  sim_provider();
  sim_stream_order();
  sim_slabs();
  bad_inputs();
  stream_order();
  cache_reuse();
  cache_split();
  many_small();
  advice();
  host_reuse();
  host_placed();
  prefetch_many();
  quiet();
  homeless();
  cleaning();
  victims_fit_host();
  spares();
  chunk_follows();
  device_aliases();
  same_stream_reuse();
  ordered_moves();
  prefetch_ahead();
  prefetch_room();
  prefetch_ahead_no_event();
  evict_ahead();
  restore_stream();
  move_copy_fails();
  fault_sweep();
  nomem_sweep();
  managed_heap();
  heap_threads(100000);
  grow_on_demand(20000);
  held_copies();
  sim_frames();
  copy_kernel();
  wait_frees();
  call_times();
  host_alias_fragmented();
  failed_maps();
  cache_shortest();
  early_flush();
  record_stream();
  adapters();
  history();
  large_tensors();
  static const uint64_t seeds[] = {1, 2, 3, 0xC0FFEE};
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) random_run(seeds[i], ops);
  setenv("GPUHEAP_DEVICE_ALIASES", "0", 1); /* every move staged, as before the aliases */
  random_run(4, ops);
  unsetenv("GPUHEAP_DEVICE_ALIASES");
  setenv("GPUHEAP_SAME_STREAM_REUSE", "0", 1); /* freed memory after its event only, as before */
  random_run(5, ops);
  unsetenv("GPUHEAP_SAME_STREAM_REUSE");
  random_defer = 1; /* copies run only once a stream waits for them (or early, at random) */
  random_run(6, ops);
  random_run(10, ops);
  random_run(11, ops);
  setenv("GPUHEAP_MOVER", "1", 1); /* and homes are remapped on the mover thread */
  random_run(7, ops);
  random_run(8, ops);
  unsetenv("GPUHEAP_MOVER");
  const int rs_set = getenv("GPUHEAP_RESTORE_STREAM") == NULL;
  if (rs_set) setenv("GPUHEAP_RESTORE_STREAM", "0", 1); /* restores on the copy stream, as before row 109 */
  random_run(9, ops);
  if (rs_set) unsetenv("GPUHEAP_RESTORE_STREAM");
  /* Cleaning (GPUHEAP_CLEAN): quiet tensors copied at their advice, and
   * evicted with no copy; by the engine and by the kernel, paced, and only
   * before a cycle's first eviction, with the copies deferred and run early
   * at random. */
  const int clean_set = getenv("GPUHEAP_CLEAN") == NULL;
  if (clean_set) setenv("GPUHEAP_CLEAN", "1", 1);
  random_run(12, ops);
  random_run(13, ops);
  if (clean_set) setenv("GPUHEAP_CLEAN", "kernel", 1);
  random_run(14, ops);
  if (clean_set) setenv("GPUHEAP_CLEAN", "ready", 1);
  random_run(15, ops);
  if (clean_set) setenv("GPUHEAP_CLEAN", "prefill", 1); /* cleaning until each cycle's first eviction */
  random_run(16, ops);
  random_defer = 0;
  random_run(19, ops);  /* (and with the copies run at once) */
  if (clean_set) unsetenv("GPUHEAP_CLEAN");
  CHECK(random_restores > 0 && random_evictions > 0 && random_moves > 0 && random_waits > 0 && random_ordered > 0);
  printf("random runs: %llu frames cleaned, %llu of them evicted clean, %llu dropped, %llu left unclean\n",
         (unsigned long long)random_clean[0], (unsigned long long)random_clean[1],
         (unsigned long long)random_clean[2], (unsigned long long)random_clean[3]);
  const char* one_stream = getenv("GPUHEAP_RESTORE_STREAM"); /* (cleaning needs the restore stream) */
  if (ops >= 1000 && !(one_stream && *one_stream == '0'))
    CHECK(random_clean[0] > 0 && random_clean[1] > 0 && random_clean[2] > 0);
  printf("random runs: %llu copies run early\n", (unsigned long long)random_early);
  if (ops >= 1000) CHECK(random_early > 0);
  printf("random runs: %llu frames evicted homeless\n", (unsigned long long)random_homeless);
  if (ops >= 1000) CHECK(random_homeless > 0);
  printf("random runs: prefetches where there is room: %llu done, %llu refused\n",
         (unsigned long long)random_room[0], (unsigned long long)random_room[1]);
  if (ops >= 1000) CHECK(random_room[0] > 0 && random_room[1] > 0);
  threads(ops);
  CHECK_EQ_U64(_gh_frames_sim_live_total(), 0);
  CHECK_EQ_U64(_gh_frames_sim_leaked_total(), gh_sim_leak_base);
  CHECK_EQ_U64(open_fds(), fds);  /* every memfd closed */
  return gh_test_done("test_tensor");
}
