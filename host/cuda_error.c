/* gpuheap: CUDA runtime errors as gpuheap errors (host library only; the CPU
 * build has no CUDA). */
#include <cuda_runtime_api.h>

#include "internal.h"

int _gh_cuda_error(int cuda_err, const char* what, const char* file, int line) {
  const cudaError_t e = (cudaError_t)cuda_err;
  int err = GH_ERR_CUDA;
  if (e == cudaErrorMemoryAllocation) err = GH_ERR_DEVICE_NOMEM;
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice) err = GH_ERR_NO_DEVICE;
  return _gh_error(err, "%s:%d: %s: %s (%s)", file, line, what, cudaGetErrorString(e), cudaGetErrorName(e));
}
