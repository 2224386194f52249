/* The tensor manager's device heap grows by frames when kernels fill it,
 * evicting tensors to make room in the device budget, and gives its free
 * trailing frames back.
 *
 * Device budget 256 MiB: a 32 MiB heap (at most 128 MiB) and 224 MiB of
 * tensors fill it. Kernels allocate 1 MiB blocks until NULL; gh_heap_maintain
 * grows the heap, which needs tensors evicted; the next kernel gets more
 * blocks. Every block and every tensor byte is checked; once the blocks are
 * freed, maintain gives the grown frames back, also when small blocks left
 * empty pages that hint slots hold in them. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_util.cuh"
#include "gpuheap_device.cuh"

#define MiB ((size_t)1 << 20)

static const size_t kBlock = MiB;
static const uint32_t kThreads = 256;

__global__ void alloc_blocks(const gh_dheap_t* h, void** out, uint32_t base, unsigned int* got) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t* p = (uint64_t*)gh_heap_malloc(h, kBlock);
  out[t] = p;
  if (p) {
    p[0] = base + t;
    p[kBlock / 8 - 1] = ~(uint64_t)(base + t);
    atomicAdd(got, 1u);
  }
}

__global__ void check_blocks(void* const* blocks, uint32_t base, unsigned int* bad) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t* p = (const uint64_t*)blocks[t];
  if (p && (p[0] != base + t || p[kBlock / 8 - 1] != ~(uint64_t)(base + t))) atomicAdd(bad, 1u);
}

__global__ void free_blocks(const gh_dheap_t* h, void* const* blocks) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  gh_heap_free(h, blocks[t]);
}

/* A 256-byte block a thread; *in_grown counts those at or past `grown_from`
 * bytes into the heap. */
__global__ void alloc_small(const gh_dheap_t* h, void** out, size_t grown_from, unsigned int* in_grown) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t* p = (uint32_t*)gh_heap_malloc(h, 256);
  out[t] = p;
  if (p) {
    p[0] = t;
    if ((uint8_t*)p >= h->base + grown_from) atomicAdd(in_grown, 1u);
  }
}

__global__ void free_small(const gh_dheap_t* h, void* const* out, unsigned int* bad) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t* p = (uint32_t*)out[t];
  if (p && p[0] != t) atomicAdd(bad, 1u);
  gh_heap_free(h, p);
}

static unsigned int launch_alloc(const gh_dheap_t* h, void** blocks, uint32_t base, unsigned int* d_count) {
  CUDA_OK(cudaMemset(d_count, 0, sizeof *d_count));
  alloc_blocks<<<kThreads / 64, 64>>>(h, blocks, base, d_count);
  KERNEL_OK();
  unsigned int got = 0;
  CUDA_OK(cudaMemcpy(&got, d_count, sizeof got, cudaMemcpyDeviceToHost));
  return got;
}

int main(void) {
  skip_without_gpu("test_tmgr_heap");
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_CUDA_VMM;
  o.device_budget = 256 * MiB;
  o.host_budget = 1024 * MiB;
  o.heap_bytes = 32 * MiB;
  o.heap_max_bytes = 128 * MiB;
  gh_tmgr_t* tm = NULL;
  GH_OK_OR_DIE(gh_tmgr_create(&tm, &o));
  gh_heap_t* heap = gh_tmgr_heap(tm);
  CHECK(heap != NULL);
  const gh_dheap_t* dh = gh_heap_device(heap);

  gh_heap_stats_t hs;
  GH_OK_OR_DIE(gh_heap_stats(heap, &hs));
  CHECK_EQ_U64(hs.heap_bytes, 32 * MiB);
  CHECK_EQ_U64(hs.pages_free, hs.pages_total);
  /* A managed heap is destroyed with its manager, not alone. */
  CHECK(gh_heap_destroy(heap) == GH_ERR_INVAL);

  /* Tensors fill the rest of the device budget. */
  enum { kTensors = 28 };
  const size_t tbytes = 8 * MiB;
  uint32_t* tensors[kTensors];
  for (int i = 0; i < kTensors; i++) {
    GH_OK_OR_DIE(gh_tensor_alloc(tm, tbytes, GH_KIND_ACTIVATIONS, NULL, (void**)&tensors[i]));
    stamp<<<256, 256>>>(tensors[i], tbytes / 4, (uint32_t)i + 1u);
    KERNEL_OK();
  }

  void** blocks = NULL;
  unsigned int* d_count = NULL;
  CUDA_OK(cudaMalloc((void**)&blocks, 4 * kThreads * sizeof(void*)));
  CUDA_OK(cudaMalloc((void**)&d_count, sizeof *d_count));

  /* Round 0: the heap as created. 1 MiB blocks are 16-page runs. */
  const unsigned int got0 = launch_alloc(dh, blocks, 0, d_count);
  printf("round 0: %u of %u blocks of 1 MiB in a 32 MiB heap\n", got0, kThreads);
  CHECK(got0 >= 24 && got0 <= 32);

  /* Grow: the heap is full, past its high watermark; the budget is spent,
   * so tensors are evicted to make room. */
  gh_tmgr_stats_t ts;
  GH_OK_OR_DIE(gh_heap_maintain(heap));
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &ts));
  GH_OK_OR_DIE(gh_heap_stats(heap, &hs));
  printf("after maintain: heap %zu MiB, heap frames device %zu host %zu, evictions %llu, grows %llu\n",
         (size_t)(hs.heap_bytes / MiB), ts.heap_frames[GH_TIER_DEVICE], ts.heap_frames[GH_TIER_HOST],
         (unsigned long long)ts.evictions, (unsigned long long)ts.heap_grows);
  CHECK(hs.heap_bytes > 32 * MiB);
  CHECK(ts.heap_grows > 0);
  CHECK(ts.evictions > 0);

  unsigned int total = got0;
  for (uint32_t round = 1; round < 4; round++) {
    const unsigned int got = launch_alloc(dh, blocks + round * kThreads, round * kThreads, d_count);
    printf("round %u: %u more blocks\n", round, got);
    total += got;
    GH_OK_OR_DIE(gh_heap_maintain(heap));
  }
  printf("blocks in all: %u (initial heap: %u)\n", total, got0);
  CHECK(total > 32);
  GH_OK_OR_DIE(gh_heap_stats(heap, &hs));
  CHECK(hs.heap_bytes <= 128 * MiB);

  /* Every block and every tensor byte is intact. */
  unsigned int bad = 0;
  CUDA_OK(cudaMemset(d_count, 0, sizeof *d_count));
  for (uint32_t round = 0; round < 4; round++) {
    check_blocks<<<kThreads / 64, 64>>>(blocks + round * kThreads, round * kThreads, d_count);
    KERNEL_OK();
  }
  for (int i = 0; i < kTensors; i++) {
    verify<<<256, 256>>>(tensors[i], tbytes / 4, (uint32_t)i + 1u, d_count);
    KERNEL_OK();
  }
  CUDA_OK(cudaMemcpy(&bad, d_count, sizeof bad, cudaMemcpyDeviceToHost));
  CHECK_EQ_U64(bad, 0);

  /* Free the blocks: the grown frames go back at the next maintain. */
  for (uint32_t round = 0; round < 4; round++) {
    free_blocks<<<kThreads / 64, 64>>>(dh, blocks + round * kThreads);
    KERNEL_OK();
  }
  GH_OK_OR_DIE(gh_heap_maintain(heap));
  GH_OK_OR_DIE(gh_heap_stats(heap, &hs));
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &ts));
  printf("after freeing: heap %zu MiB, shrinks %llu\n", (size_t)(hs.heap_bytes / MiB),
         (unsigned long long)ts.heap_shrinks);
  CHECK_EQ_U64(hs.heap_bytes, 32 * MiB);
  CHECK(ts.heap_shrinks > 0);
  CHECK_EQ_U64(hs.pages_free, hs.pages_total);

  /* Small blocks: the heap filled with runs and grown again, then 256-byte
   * blocks from many warps, some on pages of the grown frames. Once all is
   * freed, the pages the lanes' hint slots still hold there (empty) are
   * taken from the slots by the next maintain, which gives the grown frames
   * back. */
  enum { kSmall = 16384 };
  void** small = NULL;
  CUDA_OK(cudaMalloc((void**)&small, kSmall * sizeof(void*)));
  const unsigned int runs = launch_alloc(dh, blocks, 0, d_count);
  GH_OK_OR_DIE(gh_heap_maintain(heap));
  GH_OK_OR_DIE(gh_heap_stats(heap, &hs));
  CHECK(hs.heap_bytes > 32 * MiB);
  CUDA_OK(cudaMemset(d_count, 0, sizeof *d_count));
  alloc_small<<<kSmall / 256, 256>>>(dh, small, 32 * MiB, d_count);
  KERNEL_OK();
  unsigned int in_grown = 0;
  CUDA_OK(cudaMemcpy(&in_grown, d_count, sizeof in_grown, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemset(d_count, 0, sizeof *d_count));
  free_small<<<kSmall / 256, 256>>>(dh, small, d_count);
  KERNEL_OK();
  free_blocks<<<kThreads / 64, 64>>>(dh, blocks);
  KERNEL_OK();
  CUDA_OK(cudaMemcpy(&bad, d_count, sizeof bad, cudaMemcpyDeviceToHost));
  CHECK_EQ_U64(bad, 0);
  GH_OK_OR_DIE(gh_heap_stats(heap, &hs));
  const uint32_t pinned = hs.pages_pinned;
  GH_OK_OR_DIE(gh_heap_maintain(heap));
  GH_OK_OR_DIE(gh_heap_stats(heap, &hs));
  printf("small blocks: %u runs, %u of %u small blocks in grown frames; all freed: %u hint pages, then heap %zu MiB, "
         "%u hint pages\n", runs, in_grown, (unsigned)kSmall, pinned, (size_t)(hs.heap_bytes / MiB), hs.pages_pinned);
  CHECK(in_grown > 0);
  CHECK_EQ_U64(hs.heap_bytes, 32 * MiB);
  CHECK_EQ_U64(hs.bytes_in_use, 0);
  CUDA_OK(cudaFree(small));

  for (int i = 0; i < kTensors; i++) GH_OK_OR_DIE(gh_tensor_free(tm, tensors[i], NULL));
  CUDA_OK(cudaFree(blocks));
  CUDA_OK(cudaFree(d_count));
  GH_OK_OR_DIE(gh_tmgr_destroy(tm));
  return gh_test_done("test_tmgr_heap");
}
