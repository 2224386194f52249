/* gh_tmgr_set_device_budget on the simulated frames: a lower budget makes
 * room at once (tensors evicted, their bytes kept, the accounts within the
 * new budget); one that pinned tensors cannot fit is refused with the old
 * budget kept; a higher one lets prefetches bring tensors back; a copy
 * the provider refuses on the way fails the call, the budget and the bytes
 * kept; bad arguments. */
#include <stdint.h>
#include <string.h>

#include "gpuheap.h"
#include "../../host/tensor_internal.h"
#include "../test_sim.h"
#include "../test_util.h"

#define MIB ((size_t)1 << 20)
#define N 8

static gh_tmgr_stats_t stats(gh_tmgr_t* tm) {
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  return s;
}

static int on_device(gh_tmgr_t* tm, void* const* t, int n) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    gh_tier_t tier = GH_TIER_NONE;
    CHECK(gh_tensor_tier(tm, t[i], &tier) == GH_OK);
    k += tier == GH_TIER_DEVICE;
  }
  return k;
}

static int holds(const void* p, size_t bytes, int v) {
  const unsigned char* b = p;
  for (size_t i = 0; i < bytes; i += 4096)
    if (b[i] != (unsigned char)v) return 0;
  return b[bytes - 1] == (unsigned char)v;
}

int main(void) {
  gh_tmgr_t* tm = gh_test_sim_tmgr(32 * MIB, 64 * MIB);
  CHECK(tm != NULL);
  if (!tm) return gh_test_done("test_budget");
  const size_t frame = stats(tm).frame_bytes;

  void* t[N];
  for (int i = 0; i < N; i++) {
    CHECK(gh_tensor_alloc(tm, 2 * frame, GH_KIND_ACTIVATIONS, NULL, &t[i]) == GH_OK);
    memset(t[i], 0x20 + i, 2 * frame);
  }
  CHECK(on_device(tm, t, N) == N);
  CHECK(gh_tensor_pin(tm, t[0]) == GH_OK);

  /* Lower: room made now, the rest evicted with their bytes. */
  CHECK(gh_tmgr_set_device_budget(tm, 6 * frame) == GH_OK);
  gh_tmgr_stats_t s = stats(tm);
  CHECK(s.device_budget == 6 * frame);
  CHECK(s.evictions > 0);
  CHECK(on_device(tm, t, N) <= 3);
  CHECK(on_device(tm, t, 1) == 1);  /* the pinned one stayed */
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  for (int i = 0; i < N; i++) CHECK(holds(t[i], 2 * frame, 0x20 + i));

  /* Below what the pinned tensors hold: refused, the budget kept. */
  CHECK(gh_tensor_pin(tm, t[1]) == GH_OK);
  CHECK(gh_tensor_pin(tm, t[2]) == GH_OK);
  CHECK(gh_tmgr_set_device_budget(tm, 4 * frame) == GH_ERR_BUDGET);
  CHECK(strstr(gh_last_error_detail(), "budget stays") != NULL);
  CHECK(stats(tm).device_budget == 6 * frame);
  CHECK(_gh_tmgr_check(tm) == GH_OK);

  /* Bad arguments. */
  CHECK(gh_tmgr_set_device_budget(NULL, 8 * frame) == GH_ERR_INVAL);
  CHECK(gh_tmgr_set_device_budget(tm, frame - 1) == GH_ERR_INVAL);
  CHECK(stats(tm).device_budget == 6 * frame);

  /* Higher: the tensors come back on a prefetch, nothing evicted for it. */
  CHECK(gh_tmgr_set_device_budget(tm, 20 * frame) == GH_OK);
  const uint64_t ev = stats(tm).evictions;
  for (int i = 0; i < N; i++) CHECK(gh_tensor_prefetch(tm, t[i], NULL) == GH_OK);
  CHECK(on_device(tm, t, N) == N);
  CHECK(stats(tm).evictions == ev);
  for (int i = 0; i < N; i++) CHECK(holds(t[i], 2 * frame, 0x20 + i));
  CHECK(stats(tm).device_budget == 20 * frame);

  /* A copy the provider refuses: its error, the budget kept, every tensor's
   * bytes where they are. */
  CHECK(_gh_tmgr_sim_fail_copy(tm, 1) == GH_OK);
  const int frc = gh_tmgr_set_device_budget(tm, 6 * frame);
  CHECK(frc == GH_ERR_CUDA);
  CHECK(frc != GH_OK && stats(tm).device_budget == 20 * frame);
  CHECK(_gh_tmgr_sim_fail_copy(tm, 0) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  for (int i = 0; i < N; i++) CHECK(holds(t[i], 2 * frame, 0x20 + i));

  for (int i = 0; i < 3; i++) CHECK(gh_tensor_unpin(tm, t[i]) == GH_OK);
  for (int i = 0; i < N; i++) CHECK(gh_tensor_free(tm, t[i], NULL) == GH_OK);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  return gh_test_done("test_budget");
}
