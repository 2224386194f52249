/* replay_trace: run a tensor manager's recorded calls (GPUHEAP_TRACE, see
 * host/tensor.c) again on the simulated frame provider, so that eviction
 * and cache policy can be worked on without a GPU: the same sequence of
 * allocations, frees, hints and prefetches, with the budgets of the trace
 * or others, and the manager's counts at the end (moves, bytes moved,
 * physical-memory calls, cached and spare frames).
 *
 *   replay_trace TRACE [--device-mib N] [--host-mib N] [--low W] [--chunk F|auto]
 *                      [--lag L] [--check]
 *
 * --chunk: F frames, or "auto" (the chunk follows the tensors, as when the
 * trace's header says 0); default: the trace's. --lag: events complete
 * after L queries (default 2); --check: exit 1 when
 * a call's result differs from the recorded one, or when the trace ends
 * with an "# expect" line (tests/cpu/test_trace.c writes one) that the
 * counts do not match. The simulation copies real bytes (memfd-backed
 * tiers), so replaying a training step moves its bytes through memcpy. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../host/frames_sim.h"
#include "../host/tensor_internal.h"
#include "gpuheap.h"

#define MiB ((size_t)1 << 20)

/* Recorded pointer -> pointer of this run: open addressing, tombstones. */
typedef struct {
  uint64_t key;  /* 0 empty, 1 deleted */
  void* val;
} slot_t;
static slot_t* tab;
static size_t tab_cap, tab_used;

static size_t hash64(uint64_t k) {
  k ^= k >> 33, k *= 0xff51afd7ed558ccdULL, k ^= k >> 33;
  return (size_t)k;
}
static void tab_put(uint64_t key, void* val);
static void tab_grow(void) {
  slot_t* old = tab;
  const size_t n = tab_cap;
  tab_cap = n ? 2 * n : 1024;
  tab = calloc(tab_cap, sizeof *tab);
  if (!tab) {
    fprintf(stderr, "replay_trace: out of memory\n");
    exit(2);
  }
  tab_used = 0;
  for (size_t i = 0; i < n; i++)
    if (old[i].key > 1) tab_put(old[i].key, old[i].val);
  free(old);
}
static void tab_put(uint64_t key, void* val) {
  if (2 * (tab_used + 1) > tab_cap) tab_grow();
  size_t i = hash64(key) & (tab_cap - 1);
  while (tab[i].key > 1 && tab[i].key != key) i = (i + 1) & (tab_cap - 1);
  if (tab[i].key <= 1) tab_used++;
  tab[i].key = key, tab[i].val = val;
}
static slot_t* tab_find(uint64_t key) {
  if (!tab_cap) return NULL;
  size_t i = hash64(key) & (tab_cap - 1);
  for (size_t probes = 0; tab[i].key != 0 && probes < tab_cap; probes++, i = (i + 1) & (tab_cap - 1))
    if (tab[i].key == key) return &tab[i];
  return NULL;
}
/* This run's pointer for a recorded one: the recorded value itself when
 * unknown (a foreign or freed pointer stays one). */
static void* ptr_of(uint64_t key) {
  slot_t* s = tab_find(key);
  return s ? s->val : (void*)(uintptr_t)key;
}

static gh_stream_t stream_of(unsigned long long idx) {
  return idx > 1000000 ? NULL : (gh_stream_t)(uintptr_t)(0x1000 * (idx + 1));
}

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s TRACE [--device-mib N] [--host-mib N] [--low W] [--chunk F|auto] [--lag L] [--check]\n", argv0);
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 2) usage(argv[0]);
  const char* path = argv[1];
  double dev_mib = 0, host_mib = 0, low = 0;
  unsigned long chunk = 0, lag = 2;
  int chunk_auto = 0;
  int check = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--check")) check = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--device-mib")) dev_mib = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--host-mib")) host_mib = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--low")) low = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--chunk") && !strcmp(argv[i + 1], "auto")) chunk_auto = 1, i++;
    else if (i + 1 < argc && !strcmp(argv[i], "--chunk")) chunk = strtoul(argv[++i], NULL, 10);
    else if (i + 1 < argc && !strcmp(argv[i], "--lag")) lag = strtoul(argv[++i], NULL, 10);
    else usage(argv[0]);
  }
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "replay_trace: %s: %s\n", path, strerror(errno));
    return 2;
  }
  char* line = NULL;
  size_t cap = 0;
  unsigned long long dev_b = 0, host_b = 0, tchunk = 0, pool = 0;
  double tlow = 0;
  if (getline(&line, &cap, f) < 0 ||
      sscanf(line, "# gpuheap-trace 1 %llu %llu %lf %llu %llu", &dev_b, &host_b, &tlow, &tchunk, &pool) != 5) {
    fprintf(stderr, "replay_trace: %s: not a gpuheap trace (version 1)\n", path);
    return 2;
  }
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_SIM;
  o.device_budget = dev_mib > 0 ? (size_t)(dev_mib * (double)MiB) : (size_t)dev_b;
  o.host_budget = host_mib > 0 ? (size_t)(host_mib * (double)MiB) : (size_t)host_b;
  o.low_watermark = low > 0 ? low : tlow;
  o.host_pool_frames = (uint32_t)pool;
  gh_tmgr_t* tm = NULL;
  if (gh_tmgr_create(&tm, &o) != GH_OK) {
    fprintf(stderr, "replay_trace: gh_tmgr_create: %s\n", gh_last_error_detail());
    return 2;
  }
  /* The simulated tiers a little larger than the budgets, as in the tests:
   * the manager's accounting must keep within them. */
  _gh_tmgr_sim_configure(tm, (uint32_t)lag, o.device_budget / GH_SIM_FRAME_BYTES + 4,
                         o.host_budget / GH_SIM_FRAME_BYTES + 4);
  const size_t ch = chunk_auto ? 0 : chunk ? chunk : (size_t)tchunk;
  if (ch && _gh_tmgr_set_chunk(tm, ch) != GH_OK) {
    fprintf(stderr, "replay_trace: chunk %zu: %s\n", ch, gh_last_error_detail());
    return 2;
  }
  unsigned long long calls = 0, differ = 0, lineno = 1;
  unsigned long long expect[6];
  int have_expect = 0;
  void** many = NULL;
  size_t many_cap = 0;
  while (getline(&line, &cap, f) >= 0) {
    lineno++;
    char op = line[0];
    unsigned long long p = 0, a1 = 0, a2 = 0, a3 = 0;
    int want = 0, got = GH_OK;
    if (op == '#') {
      if (sscanf(line, "# expect %llu %llu %llu %llu %llu %llu", &expect[0], &expect[1], &expect[2], &expect[3],
                 &expect[4], &expect[5]) == 6)
        have_expect = 1;
      continue;
    }
    calls++;
    switch (op) {
      case 'a': {
        if (sscanf(line + 1, "%llx %llu %llu %llu %d", &p, &a1, &a2, &a3, &want) != 5) goto bad;
        void* q = NULL;
        got = gh_tensor_alloc(tm, (size_t)a1, (gh_kind_t)a2, stream_of(a3), &q);
        if (got == GH_OK && p) tab_put(p, q);
        break;
      }
      case 'f': {
        if (sscanf(line + 1, "%llx %llu %d", &p, &a1, &want) != 3) goto bad;
        got = gh_tensor_free(tm, ptr_of(p), stream_of(a1));
        slot_t* s = got == GH_OK ? tab_find(p) : NULL;
        if (s) s->key = 1;
        break;
      }
      case 'c':
        if (sscanf(line + 1, "%llx %llu %d", &p, &a1, &want) != 3) goto bad;
        got = gh_tensor_advise(tm, ptr_of(p), (gh_advice_t)a1);
        break;
      case 'p':
      case 'h':
        if (sscanf(line + 1, "%llx %llu %d", &p, &a1, &want) != 3) goto bad;
        got = (line[0] == 'p' ? gh_tensor_prefetch : gh_tensor_prefetch_ahead)(tm, ptr_of(p), stream_of(a1));
        break;
      case 'n': {
        int off = 0;
        if (sscanf(line + 1, "%llu %d %llu%n", &a1, &want, &a2, &off) != 3) goto bad;
        if (a2 > many_cap) {
          many_cap = (size_t)a2;
          void** m = realloc(many, many_cap * sizeof *many);
          if (!m) goto bad;
          many = m;
        }
        const char* c = line + 1 + off;
        for (size_t i = 0; i < a2; i++) {
          char* end = NULL;
          const unsigned long long v = strtoull(c, &end, 16);
          if (end == c) goto bad;
          many[i] = ptr_of(v), c = end;
        }
        got = gh_tensor_prefetch_many(tm, many, (size_t)a2, stream_of(a1));
        break;
      }
      case 'e':
        if (sscanf(line + 1, "%llx %d", &p, &want) != 2) goto bad;
        got = gh_tensor_evict(tm, ptr_of(p));
        break;
      case 'P':
        if (sscanf(line + 1, "%llx %d", &p, &want) != 2) goto bad;
        got = gh_tensor_pin(tm, ptr_of(p));
        break;
      case 'U':
        if (sscanf(line + 1, "%llx %d", &p, &want) != 2) goto bad;
        got = gh_tensor_unpin(tm, ptr_of(p));
        break;
      case 'k':
        if (sscanf(line + 1, "%llx %llu %d", &p, &a1, &want) != 3) goto bad;
        got = gh_tensor_set_kind(tm, ptr_of(p), (gh_kind_t)a1);
        break;
      case 't': {
        if (sscanf(line + 1, "%llx %d", &p, &want) != 2) goto bad;
        gh_tier_t tier;
        got = gh_tensor_tier(tm, ptr_of(p), &tier);
        break;
      }
      case 'm':
        if (sscanf(line + 1, "%d", &want) != 1) goto bad;
        got = gh_tmgr_maintain(tm);
        break;
      case 'x':
        if (sscanf(line + 1, "%d", &want) != 1) goto bad;
        got = gh_tmgr_empty_cache(tm);
        break;
      default:
        goto bad;
    }
    if (got != want && differ++ < 10)
      fprintf(stderr, "replay_trace: line %llu (%c): result %d, recorded %d\n", lineno, op, got, want);
    continue;
  bad:
    fprintf(stderr, "replay_trace: %s:%llu: cannot read \"%.60s\"\n", path, lineno, line);
    return 2;
  }
  fclose(f);
  free(line);
  free(many);
  gh_tmgr_stats_t s;
  gh_tmgr_stats(tm, &s);
  const char* ops[GH_VMM_OP_COUNT] = {"create", "release", "map", "unmap"};
  printf("replay_trace: %llu calls, %llu results differ; device budget %zu MiB, host %zu MiB, chunk %zu%s "
         "(%" PRIu64 " changes), lag %lu\n",
         calls, differ, s.device_budget / MiB, s.host_budget / MiB, s.chunk_frames, ch ? "" : " (auto)",
         s.chunk_changes, lag);
  printf("moves %" PRIu64 ", frames evicted %" PRIu64 ", restored %" PRIu64 ", bytes moved %" PRIu64
         ", stream waits %" PRIu64 ", quiet waits %" PRIu64 ", host placed %" PRIu64 " B, oom %" PRIu64 "\n",
         s.moves, s.evictions, s.restores, s.bytes_evicted + s.bytes_restored, s.stream_waits, s.quiet_waits,
         s.host_placed_bytes, s.oom_events);
  printf("physical-memory calls:");
  for (int k = 0; k < GH_VMM_OP_COUNT; k++) printf(" %s %" PRIu64, ops[k], s.vmm_calls[k]);
  printf("\ncached frames %zu, spare frames %zu, device frames %zu, host frames %zu, pending frees %zu, "
         "peak tensor bytes %zu\n",
         s.cached_frames, s.spare_frames, s.frames[GH_TIER_DEVICE], s.frames[GH_TIER_HOST], s.pending_frees,
         s.peak_tensor_bytes);
  int rc = 0;
  if (check && differ) rc = 1;
  if (check && have_expect) {
    const unsigned long long now[6] = {s.evictions, s.restores, s.vmm_calls[GH_VMM_CREATE], s.vmm_calls[GH_VMM_MAP],
                                       s.cached_frames, s.spare_frames};
    for (int k = 0; k < 6; k++)
      if (now[k] != expect[k]) {
        fprintf(stderr, "replay_trace: count %d is %llu, the trace expects %llu\n", k, now[k], expect[k]);
        rc = 1;
      }
  }
  if (_gh_tmgr_check(tm) != GH_OK) {
    fprintf(stderr, "replay_trace: invariants: %s\n", gh_last_error_detail());
    rc = 1;
  }
  gh_tmgr_destroy(tm);
  free(tab);
  return rc;
}
