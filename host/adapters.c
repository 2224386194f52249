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
 * Streams: PyTorch passes the stream of the allocation and of the free (the
 * caching allocator's contract applies: a tensor used on other streams must
 * be record_stream'ed by the framework -- with this allocator, ordered
 * before the free). CuPy passes none: its tensors are allocated and freed on
 * the legacy default stream (NULL), which orders them against every
 * blocking stream.
 */
#include <pthread.h>

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

int _gh_torch_alloc(ptrdiff_t size, int device, gh_stream_t stream, void** out) {
  *out = NULL;
  if (size < 0) return _gh_error(GH_ERR_INVAL, "gh_torch_alloc: size %td", size);
  if (size == 0) return GH_OK;
  gh_tmgr_t* tm;
  int rc = gh_adapter_manager("gh_torch_alloc", device, &tm);
  if (rc != GH_OK) return rc;
  /* PyTorch gives a pluggable allocator no graph pool: memory handed out
   * during a capture would go back to the manager when PyTorch frees it at
   * the capture's end and be reused while every replay still writes it. */
  int capturing = 0;
  if ((rc = _gh_tmgr_stream_capturing(tm, stream, &capturing)) != GH_OK) return rc;
  if (capturing)
    return _gh_error(GH_ERR_UNSUPPORTED,
                     "gh_torch_alloc: the stream is capturing a CUDA graph; gpuheap cannot keep a graph's memory "
                     "from reuse (PyTorch gives pluggable allocators no graph pool): capture without gpuheap");
  return gh_tensor_alloc(tm, (size_t)size, GH_KIND_ACTIVATIONS, stream, out);
}

void* gh_torch_alloc(ptrdiff_t size, int device, gh_stream_t stream) {
  void* p = NULL;
  _gh_torch_alloc(size, device, stream, &p);
  return p;
}

void gh_torch_record_stream(void* ptr, gh_stream_t stream) {
  if (!ptr) return;
  gh_tmgr_t* tm = gh_tmgr_global();
  if (tm) gh_tensor_record_stream(tm, ptr, stream);
}

void gh_torch_free(void* ptr, ptrdiff_t size, int device, gh_stream_t stream) {
  (void)size, (void)device;
  if (!ptr) return;
  gh_tmgr_t* tm = gh_tmgr_global();
  if (tm) gh_tensor_free(tm, ptr, stream);
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
