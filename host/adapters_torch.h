/* gpuheap: PyTorch's CUDA graph pool callbacks (adapters_torch.cc), C++
 * only: their arguments are the standard-library types of PyTorch's
 * CUDAPluggableAllocator (c10::cuda::MempoolId_t is a pair of unsigned
 * long long; its filter a std::function over cudaStream_t, which is
 * gh_stream_t), so that their addresses can be given to
 * set_begin_allocate_to_pool, set_end_allocate_to_pool_fn and
 * set_release_pool. C linkage, so that Python finds them by name. Not part
 * of the C API (gpuheap.h). */
#ifndef GPUHEAP_HOST_ADAPTERS_TORCH_H
#define GPUHEAP_HOST_ADAPTERS_TORCH_H

#include <functional>
#include <utility>

#include "gpuheap.h"

using gh_mempool_id = std::pair<unsigned long long, unsigned long long>;
using gh_capture_filter = std::function<bool(gh_stream_t)>;

extern "C" {
/* A capture into pool `id` begins on `device` (before PyTorch begins it on
 * its stream): allocations on a stream that `filter` accepts go to the
 * pool until the capture ends. Another device than the manager's is
 * ignored. Throws std::runtime_error when the manager cannot be made. */
void gh_torch_begin_allocate_to_pool(int device, gh_mempool_id id, gh_capture_filter filter);
/* The capture into pool `id` ends (its oldest, when several into it are underway). */
void gh_torch_end_allocate_to_pool(int device, gh_mempool_id id);
/* No graph uses pool `id` any more: its freed blocks go back to the
 * manager (after a wait for the device, once no capture is underway), the
 * others as PyTorch frees them. */
void gh_torch_release_pool(int device, gh_mempool_id id);
}

#endif /* GPUHEAP_HOST_ADAPTERS_TORCH_H */
