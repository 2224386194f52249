/* gpuheap: the plain cudaMalloc backing of a heap's data region. The only
 * file that allocates a heap's data; the VMM backing replaces it behind the
 * same gh_backing_ops_t. */
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "internal.h"

struct gh_backing_s {
  void* raw;
};

static int cuda_open(gh_backing_t** out, int device, size_t bytes, size_t align, uint8_t** base) {
  (void)device; /* the caller has made it current */
  gh_backing_t* b = (gh_backing_t*)_gh_calloc(1, sizeof *b);
  if (b == NULL) return _gh_error(GH_ERR_NOMEM, "backing: %zu bytes of host memory", sizeof *b);
  const cudaError_t e = cudaMalloc(&b->raw, bytes + align);
  if (e != cudaSuccess) {
    free(b);
    return _gh_cuda_error((int)e, "cudaMalloc(heap data)", __FILE__, __LINE__);
  }
  *base = (uint8_t*)(((uintptr_t)b->raw + align - 1u) & ~(uintptr_t)(align - 1u));
  *out = b;
  return GH_OK;
}

static int cuda_close(gh_backing_t* b) {
  if (b == NULL) return GH_OK;
  const cudaError_t e = cudaFree(b->raw);
  free(b);
  if (e != cudaSuccess) return _gh_cuda_error((int)e, "cudaFree(heap data)", __FILE__, __LINE__);
  return GH_OK;
}

const gh_backing_ops_t _gh_backing_cuda = {"cuda", cuda_open, cuda_close};
