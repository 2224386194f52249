/* gpuheap: a copy from device memory to host memory by a kernel of a few
 * blocks, for evictions.
 *
 * Why not the copy engine: on the H200 (driver 580) the access call of a
 * map (cuMemSetAccess) waits for every device-to-host copy of the copy
 * engine in flight, whatever memory the copy reads and on whatever stream:
 * a 36 MiB device allocation maps in 0.02-0.03 ms idle and 0.69 ms beside
 * a 36 MiB device-to-host copy of other memory (the copy's whole time),
 * while host-to-device and device-to-device copies and kernels make it wait
 * for nothing. Beside this kernel (8 blocks) it takes 0.08 ms. The kernel
 * copies at 51.6 GB/s against the engine's 55.0 (bench_evict
 * --probe-engine; bench/NOTES.md, host side, row 51). So the manager's
 * evictions, which run beside the maps of the tensors they make room for,
 * may copy this way (GPUHEAP_COPY_KERNEL, host/tensor_move.c). Not by default
 * since row 104: beside a model's own kernels its blocks slow, and where
 * the GPU bounds a training step the engine's copies shorten it.
 *
 * Blocks: 8 of 512 threads, 16 bytes a thread a turn (4 blocks: 50.8 GB/s;
 * more blocks copy no faster and make the access call wait longer: 0.23 ms
 * beside 66). */
#include <stdint.h>

#include <cuda_runtime.h>

namespace {

constexpr int kCopyBlocks = 8;
constexpr int kCopyThreads = 512;

__global__ void gh_copy_words(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

/* Queue the copy of `bytes` from src (device-accessible) to dst (host memory
 * mapped for the device) on `stream`. Both must be 16-byte aligned and
 * bytes a multiple of 16 (frames always are); cudaErrorInvalidValue and
 * nothing queued otherwise. Returns the launch's error. */
extern "C" int _gh_copy_kernel(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (((uintptr_t)dst | (uintptr_t)src | bytes) & 15u) return (int)cudaErrorInvalidValue;
  if (bytes == 0) return (int)cudaSuccess;
  gh_copy_words<<<kCopyBlocks, kCopyThreads, 0, stream>>>((const uint4*)src, (uint4*)dst, bytes / 16);
  return (int)cudaGetLastError();
}
