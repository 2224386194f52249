/* gpuheap: the device API. Include in CUDA sources that allocate in kernels.
 *
 *   __device__ void* gh_malloc(size_t size);   from the attached heap
 *   __device__ void  gh_free(void* ptr);
 *   __device__ void* gh_heap_malloc(const gh_dheap_t* heap, size_t size);
 *   __device__ void  gh_heap_free(const gh_dheap_t* heap, void* ptr);
 *   __device__ void* gh_heap_malloc_probed(const gh_dheap_t* heap, size_t size, uint32_t* probes);
 * and on the host gh_device_attach(heap) (gpuheap.h) makes `heap` the heap of
 * gh_malloc in every unit.
 *
 *   __device__ void* gh_malloc_grow(size_t size);
 *   __device__ void* gh_heap_malloc_grow(const gh_dheap_t* heap, size_t size);
 * The _grow forms: on a tensor manager's heap made with
 * GH_TMGR_GROW_ON_DEMAND, an allocation that finds no room asks the host
 * to grow the heap and waits for it in the kernel (include/gpuheap/grow.h:
 * ~0.1-1 ms for device frames, more for host frames); NULL then means the
 * heap could not grow either. Elsewhere they are gh_malloc and
 * gh_heap_malloc. The plain forms never wait for the host: the loop the
 * wait needs costs the allocation kernel registers (warp.cuh).
 *
 * Semantics: pointers are 16-byte aligned; gh_malloc(0) returns a unique
 * pointer of the smallest class (free it like any other); requests above the
 * largest class (page/4, at most 16 KiB) take whole pages; NULL means no room
 * was found after a deterministic sweep of the whole heap, never a false
 * NULL while the heap is quiescent and has room (runs take hint slots'
 * empty pages without freeing them, so that no refill takes that room
 * first; while other threads allocate and free, a request can still miss
 * room a concurrent one takes at that moment: README, "Semantics"). gh_free(NULL)
 * does nothing; a pointer not from this heap, or one already freed, is
 * counted (gh_heap_stats: foreign_frees, double_frees) and otherwise ignored.
 *
 * Any subset of a warp may call these together, with any mix of sizes; lanes
 * of one warp that ask for the same class are served by one reservation.
 */
#ifndef GPUHEAP_DEVICE_CUH
#define GPUHEAP_DEVICE_CUH

#include <cuda_runtime.h>

#include "gpuheap.h"
#include "gpuheap/warp.cuh"

__device__ __forceinline__ void* gh_heap_malloc(const gh_dheap_t* heap, size_t size) {
  return gh_warp_malloc(heap, size, nullptr);
}

/* As gh_heap_malloc; *probes receives the search steps this lane waited for
 * (0: served from the hint page). For measurements (proofs/, bench/). */
__device__ __forceinline__ void* gh_heap_malloc_probed(const gh_dheap_t* heap, size_t size, uint32_t* probes) {
  return gh_warp_malloc(heap, size, probes);
}

__device__ __forceinline__ void gh_heap_free(const gh_dheap_t* heap, void* ptr) { gh_warp_free(heap, ptr); }

/* The heap of gh_malloc / gh_free in this translation unit. Without -rdc each
 * CUDA translation unit is its own device module with its own copy of a
 * __device__ variable; static keeps the copies from clashing at link time.
 * Each unit registers, before main, the host function that sets its copy, and
 * gh_device_attach (host/attach.c) calls all of them. */
static __device__ const gh_dheap_t* gh_default_heap_;

__device__ __forceinline__ void* gh_malloc(size_t size) { return gh_warp_malloc(gh_default_heap_, size, nullptr); }

/* As gh_heap_malloc and gh_malloc; on a heap that grows on demand, an
 * allocation that finds no room asks the host to grow the heap and waits
 * for it (see above). */
__device__ __forceinline__ void* gh_heap_malloc_grow(const gh_dheap_t* heap, size_t size) {
  return gh_warp_malloc_grow(heap, size, nullptr);
}
__device__ __forceinline__ void* gh_malloc_grow(size_t size) {
  return gh_warp_malloc_grow(gh_default_heap_, size, nullptr);
}
__device__ __forceinline__ void gh_free(void* ptr) { gh_warp_free(gh_default_heap_, ptr); }

static int gh_attach_this_unit_(const gh_dheap_t* d) {
  const cudaError_t e = cudaMemcpyToSymbol(gh_default_heap_, &d, sizeof d);
  return e == cudaSuccess ? GH_OK : GH_ERR_CUDA;
}
[[maybe_unused]] static const int gh_unit_registered_ = gh_register_unit(gh_attach_this_unit_);

#endif /* GPUHEAP_DEVICE_CUH */
