/* The call trace (GPUHEAP_TRACE) and its replay: a seeded random sequence
 * of tensor calls (4000; 800 at GH_TEST_SCALE=0.1) on the simulated
 * provider is recorded to the file named
 * by argv[1], and the manager's counts at the end are appended as an
 * "# expect" line; ctest then runs bench/replay_trace on the file with
 * --check, which fails unless every call gives the recorded result and the
 * counts come out the same (tests/CMakeLists.txt, trace_replay). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../host/frames_sim.h"
#include "../../host/tensor_internal.h"
#include "../test_util.h"

#define MiB ((size_t)1 << 20)

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static size_t below(size_t n) { return (size_t)(next() % n); }

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TRACE\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  CHECK(setenv("GPUHEAP_TRACE", path, 1) == 0);
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_SIM;
  o.device_budget = 32 * MiB;
  o.host_budget = 64 * MiB;
  o.host_pool_frames = 0; /* no pool thread: the sequence is the whole story */
  gh_tmgr_t* tm = NULL;
  CHECK(gh_tmgr_create(&tm, &o) == GH_OK);
  if (!tm) return gh_test_done("test_trace");
  CHECK(unsetenv("GPUHEAP_TRACE") == 0);
  CHECK(_gh_tmgr_sim_configure(tm, 2, 32 * MiB / GH_SIM_FRAME_BYTES + 4, 64 * MiB / GH_SIM_FRAME_BYTES + 4) == GH_OK);
  const gh_stream_t streams[3] = {NULL, (gh_stream_t)(uintptr_t)0x1000, (gh_stream_t)(uintptr_t)0x2000};
  enum { MAXT = 64 };
  void* live[MAXT];
  unsigned pins[MAXT];
  size_t n = 0;
  size_t refused = 0;
  int ops = (int)(4000 * gh_test_scale());
  if (ops < 800) ops = 800;
  for (int op = 0; op < ops; op++) {
    const size_t r = below(100);
    void* p = n ? live[below(n)] : NULL;
    if (r < 35 && n < MAXT) {
      const size_t bytes = below(4) ? 1 + below(MiB) : 1 + below(12 * MiB);
      void* q = NULL;
      if (gh_tensor_alloc(tm, bytes, (gh_kind_t)below(GH_KIND_COUNT), streams[below(3)], &q) == GH_OK)
        pins[n] = 0, live[n++] = q;
      else
        refused++;
    } else if (r < 60 && n) {
      const size_t i = below(n);
      CHECK(gh_tensor_free(tm, live[i], streams[below(3)]) == GH_OK);
      live[i] = live[--n], pins[i] = pins[n];
    } else if (r < 70 && p) {
      gh_tensor_advise(tm, p, (gh_advice_t)below(GH_ADVICE_COUNT));
    } else if (r < 77 && p) {
      (below(2) ? gh_tensor_prefetch : gh_tensor_prefetch_ahead)(tm, p, streams[below(3)]);
    } else if (r < 80 && n >= 2) {
      void* two[2] = {live[below(n)], live[below(n)]};
      gh_tensor_prefetch_many(tm, two, two[0] == two[1] ? 1 : 2, streams[below(3)]);
    } else if (r < 86 && p) {
      (below(2) ? gh_tensor_evict : gh_tensor_evict_ahead)(tm, p);
    } else if (r < 90 && n) {
      const size_t i = below(n);
      if (pins[i] && below(2)) {
        CHECK(gh_tensor_unpin(tm, live[i]) == GH_OK);
        pins[i]--;
      } else if (gh_tensor_pin(tm, live[i]) == GH_OK) {
        pins[i]++;
      }
    } else if (r < 93 && p) {
      gh_tensor_set_kind(tm, p, (gh_kind_t)below(GH_KIND_COUNT));
    } else if (r < 97 && p) {
      gh_tier_t tier;
      CHECK(gh_tensor_tier(tm, p, &tier) == GH_OK);
    } else if (r < 99) {
      CHECK(gh_tmgr_maintain(tm) == GH_OK);
    } else {
      CHECK(gh_tmgr_empty_cache(tm) == GH_OK);
    }
  }
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  CHECK(s.evictions > 0 && s.restores > 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  FILE* f = fopen(path, "a");
  CHECK(f != NULL);
  if (f) {
    fprintf(f, "# expect %llu %llu %llu %llu %zu %zu\n", (unsigned long long)s.evictions,
            (unsigned long long)s.restores, (unsigned long long)s.vmm_calls[GH_VMM_CREATE],
            (unsigned long long)s.vmm_calls[GH_VMM_MAP], s.cached_frames, s.spare_frames);
    fclose(f);
  }
  printf("test_trace: %zu tensors live at the end, %zu allocations refused, %llu frames evicted, %llu restored\n", n,
         refused, (unsigned long long)s.evictions, (unsigned long long)s.restores);
  return gh_test_done("test_trace");
}
