/* gh_torch_alloc_or_throw, PyTorch's entry point: a C++ exception where
 * gh_torch_alloc returns NULL (spent budgets, another device, a negative
 * size), nothing for size 0, and nothing left allocated by a failure. On
 * the simulated frames. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "gpuheap.h"
#include "../test_sim.h"
#include "../test_util.h"
#include "../../host/internal.h"        /* _gh_tmgr_device_memory */
#include "../../host/tensor_internal.h" /* _gh_tmgr_sim_capture */


static const size_t MiB = (size_t)1 << 20;

/* The message of the exception gh_torch_alloc_or_throw(size, device)
 * throws, or "" when it returns (the pointer in *p). */
static std::string thrown(ptrdiff_t size, int device, void** p) {
  *p = nullptr;
  try {
    *p = gh_torch_alloc_or_throw(size, device, nullptr);
  } catch (const std::bad_alloc& e) {
    return e.what();
  }
  return "";
}

static size_t live(gh_tmgr_t* tm) {
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  return s.tensors[GH_KIND_ACTIVATIONS];
}

int main() {
  gh_tmgr_t* tm = gh_test_sim_tmgr(8 * MiB, 8 * MiB);
  CHECK(tm != nullptr);
  if (!tm) return 1;
  CHECK(gh_tmgr_set_global(tm) == GH_OK);

  void* p;
  CHECK(thrown(3 * MiB, 0, &p).empty() && p != nullptr);  /* within the budget */
  void* z;
  CHECK(thrown(0, 0, &z).empty() && z == nullptr);        /* empty: NULL, no exception */
  CHECK(live(tm) == 1);

  void* q;
  std::string m = thrown(64 * MiB, 0, &q);                /* more than both budgets */
  std::printf("spent budgets: %s\n", m.c_str());
  CHECK(q == nullptr);
  CHECK(m.rfind("gpuheap: out of memory (67108864 bytes on device 0)", 0) == 0);
  CHECK(m.find(": ", std::strlen("gpuheap: out of memory")) != std::string::npos);  /* the detail follows */

  m = thrown(MiB, 1, &q);                                 /* another device */
  std::printf("another device: %s\n", m.c_str());
  CHECK(q == nullptr);
  CHECK(m.rfind("gpuheap: GH_ERR_INVAL (1048576 bytes on device 1)", 0) == 0);
  CHECK(m.find("serves device 0") != std::string::npos);

  CHECK(_gh_tmgr_sim_capture(tm, (gh_stream_t)(uintptr_t)0x1000) == GH_OK);  /* a stream capturing a graph */
  try {
    q = gh_torch_alloc_or_throw(MiB, 0, (gh_stream_t)(uintptr_t)0x1000);
    CHECK(!"no exception during a capture");
  } catch (const std::bad_alloc& e) {
    std::printf("capturing: %s\n", e.what());
    CHECK(std::string(e.what()).rfind("gpuheap: GH_ERR_UNSUPPORTED (1048576 bytes on device 0)", 0) == 0);
    CHECK(std::strstr(e.what(), "capturing a CUDA graph") != nullptr);
  }
  CHECK(_gh_tmgr_sim_capture(tm, nullptr) == GH_OK);

  m = thrown(-5, 0, &q);                                  /* a negative size */
  CHECK(q == nullptr);
  CHECK(m.rfind("gpuheap: GH_ERR_INVAL", 0) == 0);

  /* PyTorch's memory-fraction callback: the device budget, or a C++ exception. */
  size_t total = 0, usable = 0;
  CHECK(_gh_tmgr_device_memory(tm, &total, &usable) == GH_OK && total > 8 * MiB);
  CHECK(usable < total && usable > total / 2);  /* the simulation's 16 GiB, less the reserve of 1 GiB */
  gh_torch_set_memory_fraction((double)(5 * MiB) / (double)total, 0);  /* whole frames: 4 MiB */
  gh_tmgr_stats_t st;
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.device_budget == 4 * MiB);
  try {
    gh_torch_set_memory_fraction(1.5, 0);
    CHECK(!"no exception for a fraction above 1");
  } catch (const std::runtime_error& e) {
    std::printf("fraction 1.5: %s\n", e.what());
    CHECK(std::strstr(e.what(), "not in (0, 1]") != nullptr);
  }
  CHECK(gh_tensor_pin(tm, p) == GH_OK);
  try {
    gh_torch_set_memory_fraction((double)(MiB + MiB / 2) / (double)total, 0);  /* 0 frames: too small */
    CHECK(!"no exception for less than a frame");
  } catch (const std::runtime_error& e) {
    CHECK(std::strstr(e.what(), "GH_ERR_INVAL") != nullptr);
  }
  try {
    gh_torch_set_memory_fraction((double)(2 * MiB + MiB / 2) / (double)total, 0);  /* one frame: p pinned needs 2 */
    CHECK(!"no exception below the pinned tensor");
  } catch (const std::runtime_error& e) {
    std::printf("below the pinned: %s\n", e.what());
    CHECK(std::strstr(e.what(), "GH_ERR_BUDGET") != nullptr);
  }
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.device_budget == 4 * MiB);
  CHECK(gh_tensor_unpin(tm, p) == GH_OK);
  gh_torch_set_memory_fraction(1.0, 0);                     /* all of it: capped at what the device can give */
  CHECK(gh_tmgr_stats(tm, &st) == GH_OK && st.device_budget <= usable && st.device_budget + 2 * MiB > usable);

  CHECK(live(tm) == 1);                                   /* the failures left nothing behind */
  void* r;
  CHECK(thrown(4 * MiB, 0, &r).empty() && r != nullptr);  /* and the manager still serves */
  gh_torch_free(r, 4 * MiB, 0, nullptr);
  gh_torch_free(p, 3 * MiB, 0, nullptr);
  CHECK(live(tm) == 0);
  CHECK(gh_tmgr_set_global(nullptr) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  return gh_test_done("test_torch_throw");
}
