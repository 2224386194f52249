/* gpuheap tests: a tensor manager on the simulated frames (host memory
 * standing in for both tiers), with the given budgets and no host pool;
 * NULL when it cannot be made (the detail in gh_last_error_detail()). */
#ifndef GPUHEAP_TEST_SIM_H
#define GPUHEAP_TEST_SIM_H

#include "gpuheap.h"

static gh_tmgr_t* gh_test_sim_tmgr(size_t device_bytes, size_t host_bytes) {
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_SIM;
  o.device_budget = device_bytes;
  o.host_budget = host_bytes;
  o.host_pool_frames = 0;
  gh_tmgr_t* tm = NULL;
  return gh_tmgr_create(&tm, &o) == GH_OK ? tm : NULL;
}

#endif /* GPUHEAP_TEST_SIM_H */
