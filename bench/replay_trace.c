/* replay_trace: run a tensor manager's recorded calls (GPUHEAP_TRACE, see
 * host/tensor.c) again on the simulated frame provider, so that eviction
 * and cache policy can be worked on without a GPU: the same sequence of
 * allocations, frees, hints and prefetches, with the budgets of the trace
 * or others, and the manager's counts at the end (moves, bytes moved,
 * physical-memory calls, cached and spare frames).
 *
 *   replay_trace TRACE [--device-mib N] [--host-mib N] [--low W] [--chunk F|auto]
 *                      [--lag L] [--check] [--cuda] [--step-bytes B] [--phases]
 *
 * --chunk: F frames, or "auto" (the chunk follows the tensors, as when the
 * trace's header says 0); default: the trace's. --lag: events complete
 * after L queries (default 2); --check: exit 1 when
 * a call's result differs from the recorded one, or when the trace ends
 * with an "# expect" line (tests/cpu/test_trace.c writes one) that the
 * counts do not match. The simulation copies real bytes (memfd-backed
 * tiers), so replaying a training step moves its bytes through memcpy.
 *
 * --cuda (the build with CUDA: bench/replay_trace_cuda): the calls run on
 * the GPU's own frames (the VMM provider), with real copies, events and
 * physical-memory calls but no kernels and no framework: what the manager
 * alone costs the host for that sequence. The trace's first stream is the
 * default stream (what a PyTorch program allocates on), the others new
 * streams. --step-bytes B: an allocation of exactly B bytes marks a step
 * (pick a size the program asks for once a step); the host time between
 * marks is reported (median, min, max over the steps after the first two),
 * with the physical-memory calls' share of it. Exit 77 (skipped) with
 * --cuda where there is no CUDA device.
 *
 * --phases: the physical-memory calls and frames moved split by phase of
 * a training step, as the trace's calls show it: a forward from a cold
 * advice that follows a prefetch (or from the first cold advice), split at
 * its first eviction ("before the budget fills" / "after"); the rest (from
 * the first prefetch: the backward, the optimizer step and the next
 * forward's allocations before its first advice). Averages per forward. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef GH_REPLAY_CUDA
#include <cuda_runtime_api.h>
#endif

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

static int on_cuda;
#ifdef GH_REPLAY_CUDA
#define REPLAY_STREAMS 64
static cudaStream_t cuda_streams[REPLAY_STREAMS];
#endif

static gh_stream_t stream_of(unsigned long long idx) {
  if (idx > 1000000) return NULL;
#ifdef GH_REPLAY_CUDA
  if (on_cuda) {
    if (idx == 0 || idx >= REPLAY_STREAMS) return NULL;
    if (!cuda_streams[idx] && cudaStreamCreateWithFlags(&cuda_streams[idx], cudaStreamNonBlocking) != cudaSuccess) {
      fprintf(stderr, "replay_trace: cudaStreamCreateWithFlags failed\n");
      exit(2);
    }
    return (gh_stream_t)cuda_streams[idx];
  }
#endif
  return (gh_stream_t)(uintptr_t)(0x1000 * (idx + 1));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The host time between step marks, and the share of the manager's
 * physical-memory calls, moves and stream waits in it (counted from the
 * third mark on: the first steps pin host memory and create the pool). */
#define REPLAY_MARKS 4096
static double mark_t[REPLAY_MARKS];
static gh_tmgr_stats_t mark_s[2]; /* at the third mark, at the end */
static size_t n_marks;

static void mark_step(gh_tmgr_t* tm) {
  if (n_marks < REPLAY_MARKS) mark_t[n_marks] = now_s();
  if (n_marks == 2) gh_tmgr_stats(tm, &mark_s[0]);
  n_marks++;
}

static void report_steps(gh_tmgr_t* tm) {
  const size_t n = n_marks < REPLAY_MARKS ? n_marks : REPLAY_MARKS;
  if (n < 4) {
    printf("steps: %zu marks, too few to time (at least 4)\n", n);
    return;
  }
  gh_tmgr_stats(tm, &mark_s[1]);
  const size_t steps = n - 3;  /* from mark 2 to mark n - 1 */
  double* d = malloc(steps * sizeof *d);
  if (!d) return;
  for (size_t i = 0; i < steps; i++) d[i] = 1e3 * (mark_t[i + 3] - mark_t[i + 2]);
  qsort(d, steps, sizeof *d, cmp_double);
  const double per = 1e-6 / (double)steps;
  uint64_t vmm = 0;
  for (int k = 0; k < GH_VMM_OP_COUNT; k++) vmm += mark_s[1].vmm_ns[k] - mark_s[0].vmm_ns[k];
  printf("host time a step: median %.2f ms (min %.2f, max %.2f) over %zu steps; of it, a step: "
         "physical-memory calls %.2f ms (map %.2f, unmap %.2f, create %.2f, release %.2f), moves %.2f ms, "
         "stream waits %.2f ms\n",
         d[steps / 2], d[0], d[steps - 1], steps, (double)vmm * per,
         (double)(mark_s[1].vmm_ns[GH_VMM_MAP] - mark_s[0].vmm_ns[GH_VMM_MAP]) * per,
         (double)(mark_s[1].vmm_ns[GH_VMM_UNMAP] - mark_s[0].vmm_ns[GH_VMM_UNMAP]) * per,
         (double)(mark_s[1].vmm_ns[GH_VMM_CREATE] - mark_s[0].vmm_ns[GH_VMM_CREATE]) * per,
         (double)(mark_s[1].vmm_ns[GH_VMM_RELEASE] - mark_s[0].vmm_ns[GH_VMM_RELEASE]) * per,
         (double)(mark_s[1].move_ns - mark_s[0].move_ns) * per,
         (double)(mark_s[1].stream_wait_ns - mark_s[0].stream_wait_ns) * per);
  printf("a step: map %.1f, unmap %.1f, create %.1f, release %.1f calls; %.3f GB moved\n",
         (double)(mark_s[1].vmm_calls[GH_VMM_MAP] - mark_s[0].vmm_calls[GH_VMM_MAP]) / (double)steps,
         (double)(mark_s[1].vmm_calls[GH_VMM_UNMAP] - mark_s[0].vmm_calls[GH_VMM_UNMAP]) / (double)steps,
         (double)(mark_s[1].vmm_calls[GH_VMM_CREATE] - mark_s[0].vmm_calls[GH_VMM_CREATE]) / (double)steps,
         (double)(mark_s[1].vmm_calls[GH_VMM_RELEASE] - mark_s[0].vmm_calls[GH_VMM_RELEASE]) / (double)steps,
         1e-9 * (double)(mark_s[1].bytes_evicted + mark_s[1].bytes_restored - mark_s[0].bytes_evicted -
                         mark_s[0].bytes_restored) / (double)steps);
  free(d);
}

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s TRACE [--device-mib N] [--host-mib N] [--low W] [--chunk F|auto] [--lag L] [--check]\n"
          "       [--cuda] [--step-bytes B] [--phases]\n",
          argv0);
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 2) usage(argv[0]);
  const char* path = argv[1];
  double dev_mib = 0, host_mib = 0, low = 0;
  unsigned long chunk = 0, lag = 2;
  int chunk_auto = 0;
  int check = 0, phases = 0;
  unsigned long long step_bytes = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--check")) check = 1;
    else if (!strcmp(argv[i], "--phases")) phases = 1;
    else if (!strcmp(argv[i], "--cuda")) on_cuda = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--step-bytes")) step_bytes = strtoull(argv[++i], NULL, 10);
    else if (i + 1 < argc && !strcmp(argv[i], "--device-mib")) dev_mib = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--host-mib")) host_mib = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--low")) low = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--chunk") && !strcmp(argv[i + 1], "auto")) chunk_auto = 1, i++;
    else if (i + 1 < argc && !strcmp(argv[i], "--chunk")) chunk = strtoul(argv[++i], NULL, 10);
    else if (i + 1 < argc && !strcmp(argv[i], "--lag")) lag = strtoul(argv[++i], NULL, 10);
    else usage(argv[0]);
  }
#ifndef GH_REPLAY_CUDA
  if (on_cuda) {
    fprintf(stderr, "replay_trace: --cuda needs the CUDA build (bench/replay_trace_cuda)\n");
    return 2;
  }
#else
  int devices = 0;
  if (on_cuda && (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)) {
    printf("replay_trace: no CUDA device: skipped\n");
    return 77; /* ctest's skip code */
  }
#endif
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
  o.backend = on_cuda ? GH_BACKEND_CUDA_VMM : GH_BACKEND_SIM;
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
  if (!on_cuda)
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
  /* --phases: 0 before the first forward, 1 a forward before its first
   * eviction, 2 after it, 3 from the first prefetch on. */
  int phase = 0;
  unsigned long long forwards = 0;
  uint64_t fwd_ev0 = 0;
  gh_tmgr_stats_t ps0, ps1;
  uint64_t by_phase[4][GH_VMM_OP_COUNT + 2];
  memset(by_phase, 0, sizeof by_phase);
  if (phases) gh_tmgr_stats(tm, &ps0);
  while (getline(&line, &cap, f) >= 0) {
    lineno++;
    char op = line[0];
    if (phases && op != '#') {
      unsigned long long pp = 0, adv = 0;
      if (op == 'c' && sscanf(line + 1, "%llx %llu", &pp, &adv) == 2 && adv == GH_ADVICE_COLD && phase != 1 &&
          phase != 2) {
        phase = 1, forwards++;
        fwd_ev0 = ps0.evictions;
      } else if (op == 'p' || op == 'h' || op == 'r' || op == 'n') {
        phase = 3;
      }
    }
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
        if (step_bytes && a1 == step_bytes) mark_step(tm);
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
      case 'r':
        if (sscanf(line + 1, "%llx %llu %llu %d", &p, &a1, &a2, &want) != 4) goto bad;
        got = gh_tensor_prefetch_room(tm, ptr_of(p), stream_of(a1), (size_t)a2);
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
      case 'o':
        if (sscanf(line + 1, "%llx %d", &p, &want) != 2) goto bad;
        got = (op == 'e' ? gh_tensor_evict : gh_tensor_evict_ahead)(tm, ptr_of(p));
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
      case 'b':
        if (sscanf(line + 1, "%llu %d", &a1, &want) != 2) goto bad;
        got = gh_tmgr_set_device_budget(tm, (size_t)a1);
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
    if (phases) {
      gh_tmgr_stats(tm, &ps1);
      if (phase == 1 && ps1.evictions > fwd_ev0) phase = 2;  /* this call's moves count after the fill */
      for (int k = 0; k < GH_VMM_OP_COUNT; k++) by_phase[phase][k] += ps1.vmm_calls[k] - ps0.vmm_calls[k];
      by_phase[phase][GH_VMM_OP_COUNT] += ps1.evictions - ps0.evictions;
      by_phase[phase][GH_VMM_OP_COUNT + 1] += ps1.restores - ps0.restores;
      ps0 = ps1;
    }
    continue;
  bad:
    fprintf(stderr, "replay_trace: %s:%llu: cannot read \"%.60s\"\n", path, lineno, line);
    return 2;
  }
  fclose(f);
  free(line);
  free(many);
  const double t_calls = now_s();
#ifdef GH_REPLAY_CUDA
  if (on_cuda && cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "replay_trace: cudaDeviceSynchronize failed\n");
    return 2;
  }
#endif
  if (on_cuda) printf("replay_trace: the GPU finished %.1f ms after the last call\n", 1e3 * (now_s() - t_calls));
  if (step_bytes) report_steps(tm);
  if (phases && forwards) {
    static const char* const names[4] = {"before the first forward", "forward, before the budget fills",
                                         "forward, after it fills", "backward, optimizer, next allocations"};
    printf("by phase, a forward (%llu forwards): create / release / map / unmap calls, frames evicted / restored\n",
           forwards);
    for (int ph = 0; ph < 4; ph++) {
      const double n = ph ? (double)forwards : 1.0;
      printf("  %-40s %7.1f %7.1f %7.1f %7.1f   %8.1f %8.1f\n", names[ph], (double)by_phase[ph][GH_VMM_CREATE] / n,
             (double)by_phase[ph][GH_VMM_RELEASE] / n, (double)by_phase[ph][GH_VMM_MAP] / n,
             (double)by_phase[ph][GH_VMM_UNMAP] / n, (double)by_phase[ph][GH_VMM_OP_COUNT] / n,
             (double)by_phase[ph][GH_VMM_OP_COUNT + 1] / n);
    }
  }
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
  uint64_t dmap = 0, dunmap = 0, hmap = 0, hunmap = 0;
  if (_gh_tmgr_sim_frames(tm, GH_TIER_DEVICE, &dmap, &dunmap) == GH_OK &&
      _gh_tmgr_sim_frames(tm, GH_TIER_HOST, &hmap, &hunmap) == GH_OK)
    printf("\nframes mapped / unmapped: device memory %" PRIu64 " / %" PRIu64 ", host memory %" PRIu64 " / %" PRIu64,
           dmap, dunmap, hmap, hunmap);
  if (_gh_tmgr_sim_allocs(tm, GH_TIER_DEVICE, &dmap, &dunmap) == GH_OK &&
      _gh_tmgr_sim_allocs(tm, GH_TIER_HOST, &hmap, &hunmap) == GH_OK)
    printf("\nallocations mapped / unmapped (the driver's cost): device memory %" PRIu64 " / %" PRIu64
           ", host memory %" PRIu64 " / %" PRIu64,
           dmap, dunmap, hmap, hunmap);
  printf("\ncached frames %zu, spare frames %zu, device frames %zu, host frames %zu, pending frees %zu, "
         "peak tensor bytes %zu\n",
         s.cached_frames, s.spare_frames, s.frames[GH_TIER_DEVICE], s.frames[GH_TIER_HOST], s.pending_frees,
         s.peak_tensor_bytes);
  /* _gh_tmgr_wait_times' rules, in its order (host/tensor_internal.h) */
  static const char* const wait_rules[] = {"drain", "quiet", "spare", "ordered", "users",
                                           "move",  "frees", "reclaim", "other"};
  enum { N_RULES = sizeof wait_rules / sizeof *wait_rules };
  uint64_t wn[N_RULES], wns[N_RULES];
  if (_gh_tmgr_wait_times(tm, wn, wns) == GH_OK) {
    printf("host waits for events by rule:");
    for (int k = 0; k < N_RULES; k++) printf(" %s %" PRIu64, wait_rules[k], wn[k]);
    printf("\n");
  }
  uint64_t lane_waits = 0;
  int split = 0;
  if (_gh_tmgr_lane_waits(tm, &lane_waits, &split) == GH_OK && split)
    printf("waits between the copy streams (on the GPU, for copies not seen done): %" PRIu64
           "\n", lane_waits);
  uint64_t cn[4];
  if (getenv("GPUHEAP_CLEAN") && _gh_tmgr_clean_counts(tm, cn, NULL, NULL) == GH_OK)
    printf("cleaning (GPUHEAP_CLEAN=%s): frames cleaned %" PRIu64 ", evicted clean %" PRIu64 ", dropped %" PRIu64
           ", skipped %" PRIu64 "\n", getenv("GPUHEAP_CLEAN"), cn[0], cn[1], cn[2], cn[3]);
  uint64_t held = 0;
  if (_gh_tmgr_held_copies(tm, &held) == GH_OK && held)
    printf("homeless units whose copy waited for the map of the run evicting them: %" PRIu64 "\n", held);
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
#ifdef GH_REPLAY_CUDA
  for (size_t i = 0; i < REPLAY_STREAMS; i++)
    if (cuda_streams[i]) (void)cudaStreamDestroy(cuda_streams[i]);
#endif
  return rc;
}
