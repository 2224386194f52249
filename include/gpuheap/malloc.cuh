/* gpuheap: run an existing CUDA program's in-kernel malloc/free on gpuheap.
 *
 * Add `-include gpuheap/malloc.cuh` to the program's nvcc flags (or include
 * this header before anything else), and call gh_device_attach(heap) once in
 * each translation unit whose kernels allocate, before launching them. In
 * device code malloc and free then are gh_malloc and gh_free; host code keeps
 * the C library's. The macros are object-like so that `std::malloc` and
 * `::free` resolve too. Memory from this malloc must be freed by this free
 * (and device memory from cudaMalloc is unaffected). With
 * -DGPUHEAP_MALLOC_GROWS, device malloc is gh_malloc_grow: on a tensor
 * manager's heap made with GH_TMGR_GROW_ON_DEMAND it waits for the host to
 * grow a full heap (gpuheap_device.cuh).
 */
#ifndef GPUHEAP_MALLOC_CUH
#define GPUHEAP_MALLOC_CUH

#include <cstdlib>
#include <stdlib.h>

#include "../gpuheap_device.cuh"

__host__ __device__ inline void* gh_dropin_malloc(size_t size) {
#if defined(__CUDA_ARCH__) && defined(GPUHEAP_MALLOC_GROWS)
  return gh_malloc_grow(size);
#elif defined(__CUDA_ARCH__)
  return gh_malloc(size);
#else
  return (::malloc)(size);
#endif
}

__host__ __device__ inline void gh_dropin_free(void* ptr) {
#if defined(__CUDA_ARCH__)
  gh_free(ptr);
#else
  (::free)(ptr);
#endif
}

namespace std {
using ::gh_dropin_free;
using ::gh_dropin_malloc;
}  // namespace std

#define malloc gh_dropin_malloc
#define free gh_dropin_free

#endif /* GPUHEAP_MALLOC_CUH */
