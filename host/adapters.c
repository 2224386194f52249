/* gpuheap: the process-wide tensor manager and the framework entry points
 * (PyTorch's CUDAPluggableAllocator, CuPy's CFunctionAllocator).
 *
 * The global manager is either set once by gh_tmgr_set_global (the caller
 * keeps owning it and may replace it by NULL, then set another) or made on
 * first use with the defaults; a manager made by the library lives as long
 * as the process and then cannot be replaced (GH_ERR_INVAL).
 *
 * The entry points cannot return an error code: they return NULL or ignore
 * the failure, and leave the code's detail in gh_last_error_detail() of the
 * calling thread.
 *
 * Size 0 (an empty tensor or array): NULL with no error, and freeing NULL
 * does nothing. Both frameworks accept a null data pointer for zero bytes
 * (PyTorch's DataPtr of nullptr for an empty storage), and a unique
 * non-NULL pointer would cost a tensor slot for nothing.
 *
 * CUDA graphs: PyTorch's graph pools are served in adapters_torch.cc,
 * which asks here for their blocks (_gh_torch_pool_block) and gives them
 * back (_gh_torch_pool_give_back). While a capture is underway every entry
 * point runs in the relaxed capture mode (_gh_tmgr_relax): a capture in
 * PyTorch's default (global) mode forbids the driver calls of every other
 * thread that could synchronize (creating and mapping memory among them),
 * and PyTorch allocates from several threads (autograd's).
 *
 * Streams: PyTorch passes the stream of the allocation and of the free (the
 * caching allocator's contract applies: a tensor used on other streams must
 * be record_stream'ed by the framework -- with this allocator, ordered
 * before the free). CuPy passes none: its tensors are allocated and freed on
 * the legacy default stream (NULL), which orders them against every
 * blocking stream.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "internal.h"

static pthread_mutex_t gh_global_mu = PTHREAD_MUTEX_INITIALIZER;
static gh_tmgr_t* gh_global = NULL;  /* guarded by gh_global_mu; read with acquire */
static int gh_global_owned = 0;      /* made by the library */

int gh_tmgr_set_global(gh_tmgr_t* tm) {
  pthread_mutex_lock(&gh_global_mu);
  int rc = GH_OK;
  if (gh_global_owned)
    rc = _gh_error(GH_ERR_INVAL, "gh_tmgr_set_global: a default manager was made already");
  else if (tm && gh_global && gh_global != tm)
    rc = _gh_error(GH_ERR_INVAL, "gh_tmgr_set_global: another manager is set; set NULL first");
  else
    __atomic_store_n(&gh_global, tm, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&gh_global_mu);
  return rc;
}

/* The global manager in *out, made with the defaults if there is none;
 * the creation's error otherwise (*out NULL). */
static int gh_global_get(gh_tmgr_t** out) {
  gh_tmgr_t* tm = __atomic_load_n(&gh_global, __ATOMIC_ACQUIRE);
  int rc = GH_OK;
  if (!tm) {
    pthread_mutex_lock(&gh_global_mu);
    tm = gh_global;
    if (!tm && (rc = gh_tmgr_create(&tm, NULL)) == GH_OK) {
      gh_global_owned = 1;
      __atomic_store_n(&gh_global, tm, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&gh_global_mu);
  }
  *out = tm;
  return rc;
}

gh_tmgr_t* gh_tmgr_global(void) {
  gh_tmgr_t* tm;
  gh_global_get(&tm);
  return tm;  /* NULL: creation failed, its detail recorded */
}

/* The global manager for an allocation on `device` (-1: any), in *out;
 * refused (GH_ERR_INVAL) when it serves another device: one manager a
 * process, on one device, and memory of its device handed to kernels of
 * another would be read over the interconnect at best. */
static int gh_adapter_manager(const char* who, int device, gh_tmgr_t** out) {
  gh_tmgr_t* tm;
  const int rc = gh_global_get(&tm);
  *out = NULL;
  if (rc != GH_OK) return rc;
  if (device >= 0 && device != _gh_tmgr_device(tm))
    return _gh_error(GH_ERR_INVAL, "%s: memory asked for on device %d; gpuheap's manager serves device %d only", who,
                     device, _gh_tmgr_device(tm));
  *out = tm;
  return GH_OK;
}

/* The manager for an entry point's call (gh_adapter_manager: device -1
 * for any), the calling thread relaxed while a capture is underway;
 * gh_relaxed_leave undoes that and passes the call's result on. */
typedef struct gh_relaxed_s {
  gh_tmgr_t* tm;
  int relaxed, saved;
} gh_relaxed_t;

static int gh_relaxed_enter(gh_relaxed_t* r, const char* who, int device) {
  const int rc = gh_adapter_manager(who, device, &r->tm);
  r->relaxed = rc == GH_OK && _gh_tmgr_relax(r->tm, &r->saved);
  return rc;
}

static int gh_relaxed_leave(gh_relaxed_t* r, int rc) {
  _gh_tmgr_unrelax(r->tm, r->relaxed, r->saved);
  return rc;
}

int _gh_torch_alloc(ptrdiff_t size, int device, gh_stream_t stream, void** out) {
  *out = NULL;
  if (size < 0) return _gh_error(GH_ERR_INVAL, "gh_torch_alloc: size %td", size);
  if (size == 0) return GH_OK;
  gh_relaxed_t r;
  int rc = gh_relaxed_enter(&r, "gh_torch_alloc", device);
  if (rc != GH_OK) return rc;
  /* A capture no graph pool serves: memory handed out during it would go
   * back to the manager when PyTorch frees it at the capture's end and be
   * reused while every replay still writes it. */
  int capturing = 0;
  rc = _gh_tmgr_stream_capturing(r.tm, stream, &capturing);
  if (rc == GH_OK && capturing)
    rc = _gh_error(GH_ERR_UNSUPPORTED,
                   "gh_torch_alloc: the stream is capturing a CUDA graph that gpuheap was given no pool for "
                   "(PyTorch's torch.cuda.graph gives one through gpuheap.torch.enable's graph-pool callbacks; "
                   "a capture begun otherwise, or the C entry point, gets none): memory handed out now would be "
                   "reused while every replay still writes it");
  if (rc == GH_OK) rc = gh_tensor_alloc(r.tm, (size_t)size, GH_KIND_ACTIVATIONS, stream, out);
  return gh_relaxed_leave(&r, rc);
}

/* gh_torch_set_history_context's function. */
static _Atomic(gh_hist_tag_fn) gh_torch_hist_fn;

void gh_torch_set_history_context(gh_hist_tag_fn fn) { atomic_store(&gh_torch_hist_fn, fn); }

int _gh_torch_hist_begin(ptrdiff_t size) {
  const gh_hist_tag_fn fn = atomic_load_explicit(&gh_torch_hist_fn, memory_order_relaxed);
  if (!fn || size <= 0) return 0;
  gh_hist_context(fn((size_t)size));
  return 1;
}

void _gh_torch_hist_end(int tagged) {
  if (tagged) gh_hist_context(0);
}

void* gh_torch_alloc(ptrdiff_t size, int device, gh_stream_t stream) {
  void* p = NULL;
  const int tagged = _gh_torch_hist_begin(size);
  _gh_torch_alloc(size, device, stream, &p);
  _gh_torch_hist_end(tagged);
  return p;
}

int _gh_torch_record_stream(void* ptr, gh_stream_t stream) {
  gh_relaxed_t r;
  const int rc = gh_relaxed_enter(&r, "gpuheap", -1);
  return rc != GH_OK ? rc : gh_relaxed_leave(&r, gh_tensor_record_stream(r.tm, ptr, stream));
}

int _gh_torch_free(void* ptr, gh_stream_t stream) {
  gh_relaxed_t r;
  const int rc = gh_relaxed_enter(&r, "gpuheap", -1);
  return rc != GH_OK ? rc : gh_relaxed_leave(&r, gh_tensor_free(r.tm, ptr, stream));
}

int _gh_torch_empty_cache(void) {
  gh_relaxed_t r;
  const int rc = gh_relaxed_enter(&r, "gpuheap", -1);
  return rc != GH_OK ? rc : gh_relaxed_leave(&r, gh_tmgr_empty_cache(r.tm));
}

int _gh_torch_set_memory_fraction(double fraction, int device) {
  const char* who = "set_per_process_memory_fraction";
  if (!(fraction > 0.0 && fraction <= 1.0)) return _gh_error(GH_ERR_INVAL, "%s: %g is not in (0, 1]", who, fraction);
  gh_relaxed_t r;
  int rc = gh_relaxed_enter(&r, who, device);
  if (rc != GH_OK) return rc;
  size_t total = 0, usable = 0;
  rc = _gh_tmgr_device_memory(r.tm, &total, &usable);
  /* At most what the device can give: a budget past it would fail
   * allocations with the driver's out-of-memory instead of evicting. */
  size_t budget = (size_t)(fraction * (double)total);
  if (budget > usable) budget = usable;
  if (rc == GH_OK) rc = gh_tmgr_set_device_budget(r.tm, budget);
  return gh_relaxed_leave(&r, rc);
}

/* A graph pool's block: pinned, so that no eviction copies it while a
 * replay (on a stream the manager never sees) uses it; made on the side
 * stream, which the host then synchronizes, so that the capture's streams
 * need not wait for anything (they may not wait for an event recorded
 * outside the capture). */
int _gh_torch_pool_block(ptrdiff_t size, int device, void** out) {
  *out = NULL;
  if (size <= 0) return _gh_error(GH_ERR_INVAL, "gh_torch_alloc: a graph pool's block of %td bytes", size);
  gh_relaxed_t r;
  int rc = gh_relaxed_enter(&r, "gh_torch_alloc", device);
  if (rc != GH_OK) return rc;
  const gh_stream_t side = _gh_tmgr_side_stream(r.tm);
  if (!side)
    return gh_relaxed_leave(&r, _gh_error(GH_ERR_INVAL, "gh_torch_alloc: a graph pool's block, no capture begun"));
  void* p = NULL;
  int pinned = 0;
  rc = gh_tensor_alloc(r.tm, (size_t)size, GH_KIND_ACTIVATIONS, side, &p);
  if (rc == GH_OK && (rc = gh_tensor_pin(r.tm, p)) == GH_OK) pinned = 1;
  if (rc == GH_OK) rc = _gh_tmgr_side_sync(r.tm);
  if (rc != GH_OK && p) {  /* nothing kept (the first error's detail stays) */
    const int first = rc;
    char detail[256];
    snprintf(detail, sizeof detail, "%s", gh_last_error_detail());
    if (pinned) gh_tensor_unpin(r.tm, p);
    gh_tensor_free(r.tm, p, side);
    rc = _gh_error(first, "%s", detail);
    p = NULL;
  }
  *out = p;
  return gh_relaxed_leave(&r, rc);
}

/* Blocks of graph pools that no graph replays any more: after a wait for
 * the whole device (a replay, on a stream the manager never saw, may still
 * run; PyTorch's own allocator frees such memory only through a device
 * synchronization too), unpinned and freed. *given: n once the wait
 * succeeded (each block then unpinned and freed, the first failure
 * returned), 0 when it failed (nothing touched: the caller keeps them). */
int _gh_torch_pool_give_back(void* const* ptrs, size_t n, size_t* given) {
  *given = 0;
  if (n == 0) return GH_OK;
  gh_relaxed_t r;
  int rc = gh_relaxed_enter(&r, "gpuheap", -1);
  if (rc != GH_OK) return rc;
  if ((rc = _gh_tmgr_device_sync(r.tm)) != GH_OK) return gh_relaxed_leave(&r, rc);
  for (size_t i = 0; i < n; i++) {
    const int u = gh_tensor_unpin(r.tm, ptrs[i]);
    const int f = gh_tensor_free(r.tm, ptrs[i], _gh_tmgr_side_stream(r.tm));
    if (rc == GH_OK) rc = u != GH_OK ? u : f;
  }
  *given = n;
  return gh_relaxed_leave(&r, rc);
}

void* gh_cupy_malloc(void* param, size_t size, int device) {
  (void)param;
  if (size == 0) return NULL;
  gh_tmgr_t* tm;
  gh_adapter_manager("gh_cupy_malloc", device, &tm);
  void* p = NULL;
  if (tm) gh_tensor_alloc(tm, size, GH_KIND_ACTIVATIONS, NULL, &p);
  return p;
}

void gh_cupy_free(void* param, void* ptr, int device) {
  (void)param, (void)device;
  if (!ptr) return;
  gh_tmgr_t* tm = gh_tmgr_global();
  if (tm) gh_tensor_free(tm, ptr, NULL);
}

size_t gh_torch_cache_info(int device) {
  gh_relaxed_t r;
  if (gh_relaxed_enter(&r, "cacheInfo", device) != GH_OK) return 0;
  gh_tmgr_stats_t st;
  size_t room = 0;
  if (gh_relaxed_leave(&r, gh_tmgr_stats(r.tm, &st)) == GH_OK) {
    /* What the budget holds: the device heap's frames and the bytes of
     * tensors on the device (cached and spare frames are reusable room). */
    size_t used = st.heap_frames[GH_TIER_DEVICE] * st.frame_bytes;
    for (int k = 0; k < GH_KIND_COUNT; k++) used += st.tensor_bytes_tier[k][GH_TIER_DEVICE];
    room = used < st.device_budget ? st.device_budget - used : 0;
  }
  return room;
}
