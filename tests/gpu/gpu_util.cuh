/* gpuheap GPU tests: CUDA checks and the skip when there is no GPU. */
#ifndef GPUHEAP_GPU_UTIL_CUH
#define GPUHEAP_GPU_UTIL_CUH

#include <cuda_runtime.h>

#include "gpuheap.h"
#include "../test_util.h"

/* A failed CUDA call fails the test at once (later results would mean nothing). */
#define CUDA_OK(call)                                                                                    \
  do {                                                                                                   \
    const cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));             \
      exit(1);                                                                                           \
    }                                                                                                    \
  } while (0)

#define GH_OK_OR_DIE(call)                                                                                \
  do {                                                                                                    \
    const int e_ = (call);                                                                                \
    if (e_ != GH_OK) {                                                                                    \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, gh_strerror(e_), gh_last_error_detail()); \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* After a launch: the launch error and the kernel's own. */
#define KERNEL_OK()                   \
  do {                                \
    CUDA_OK(cudaGetLastError());      \
    CUDA_OK(cudaDeviceSynchronize()); \
  } while (0)

static inline void skip_without_gpu(const char* name) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("%s: no CUDA device, skipped\n", name);
    exit(GH_TEST_SKIP);
  }
}

/* A tensor's words stamped with a pattern of `seed`, and the words found
 * otherwise counted into *bad. */
static __global__ void stamp(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = seed * 2654435761u + (uint32_t)i;
}

static __global__ void verify(const uint32_t* p, size_t words, uint32_t seed, unsigned int* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    if (p[i] != seed * 2654435761u + (uint32_t)i) atomicAdd(bad, 1u);
}

static inline gh_heap_t* make_heap(size_t bytes, size_t page_bytes) {
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = page_bytes;
  gh_heap_t* heap = NULL;
  GH_OK_OR_DIE(gh_heap_create(&heap, bytes, &o));
  return heap;
}

#endif /* GPUHEAP_GPU_UTIL_CUH */
