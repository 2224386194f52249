/* GH_TMGR_GROW_ON_DEMAND on the GPU: kernels whose allocations find the
 * heap full ask the manager's thread to grow it and wait in place
 * (include/gpuheap/grow.h); no gh_heap_maintain is called.
 *
 * (1) A 32 MiB heap (at most 256 MiB): one kernel of 512 threads takes a
 *     256 KiB block each (128 MiB), one of 262 144 threads (every SM full
 *     of waiting warps) a 256-byte block each (64 MiB): all served, the
 *     blocks' bytes checked.
 * (2) The same heap asked for 512 MiB in one kernel: it grows to its most
 *     and the rest get NULL (a denied request), with no hang.
 * (3) A device budget that tensors fill: the heap grows into host frames
 *     (same addresses; nothing evicted), the kernel's blocks and the
 *     tensors keep their bytes.
 * (4) gh_heap_malloc (no _grow) on such a heap: NULL when full, no request.
 * Each kernel's time is printed, and the same kernel's once the heap has
 * grown, for what waiting costs. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_util.cuh"
#include "gpuheap_device.cuh"

#define MiB ((size_t)1 << 20)

template <bool kGrow>
__global__ void alloc_fill(const gh_dheap_t* h, size_t bytes, void** out, unsigned int* got) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t* p = (uint32_t*)(kGrow ? gh_heap_malloc_grow(h, bytes) : gh_heap_malloc(h, bytes));
  out[t] = p;
  if (p) {
    p[0] = t;
    p[bytes / 4 - 1] = ~t;
    atomicAdd(got, 1u);
  }
}

__global__ void check_free(const gh_dheap_t* h, size_t bytes, void* const* blocks, unsigned int* bad) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t* p = (const uint32_t*)blocks[t];
  if (p && (p[0] != t || p[bytes / 4 - 1] != ~t)) atomicAdd(bad, 1u);
  gh_heap_free(h, (void*)p);
}

static unsigned int* d_count;
static void** d_blocks;

/* n threads take `bytes` each (with gh_heap_malloc_grow, or gh_heap_malloc
 * where !grow); returns how many got a block, *ms the time. */
static unsigned int run_alloc(const gh_dheap_t* h, uint32_t n, size_t bytes, float* ms, bool grow = true) {
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  CUDA_OK(cudaMemset(d_count, 0, sizeof *d_count));
  CUDA_OK(cudaEventRecord(e0));
  if (grow)
    alloc_fill<true><<<n / 256, 256>>>(h, bytes, d_blocks, d_count);
  else
    alloc_fill<false><<<n / 256, 256>>>(h, bytes, d_blocks, d_count);
  CUDA_OK(cudaEventRecord(e1));
  KERNEL_OK();
  CUDA_OK(cudaEventElapsedTime(ms, e0, e1));
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  unsigned int got = 0;
  CUDA_OK(cudaMemcpy(&got, d_count, sizeof got, cudaMemcpyDeviceToHost));
  return got;
}

/* Check and free what run_alloc handed out; returns blocks with other bytes. */
static unsigned int run_check_free(const gh_dheap_t* h, uint32_t n, size_t bytes) {
  CUDA_OK(cudaMemset(d_count, 0, sizeof *d_count));
  check_free<<<n / 256, 256>>>(h, bytes, d_blocks, d_count);
  KERNEL_OK();
  unsigned int bad = 0;
  CUDA_OK(cudaMemcpy(&bad, d_count, sizeof bad, cudaMemcpyDeviceToHost));
  return bad;
}

static gh_tmgr_t* make_tm(size_t dev_mib, size_t host_mib, size_t heap_mib, size_t max_mib) {
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_CUDA_VMM;
  o.device_budget = dev_mib * MiB;
  o.host_budget = host_mib * MiB;
  o.heap_bytes = heap_mib * MiB;
  o.heap_max_bytes = max_mib * MiB;
  o.host_pool_frames = 0;
  o.flags = GH_TMGR_GROW_ON_DEMAND;
  gh_tmgr_t* tm = NULL;
  GH_OK_OR_DIE(gh_tmgr_create(&tm, &o));
  return tm;
}

/* One allocation kernel on a fresh manager's heap, checked, then the same
 * again on the grown heap. */
static void served_in_one_kernel(uint32_t n, size_t bytes) {
  gh_tmgr_t* tm = make_tm(1024, 1024, 32, 256);
  const gh_dheap_t* dh = gh_heap_device(gh_tmgr_heap(tm));
  float ms = 0, ms2 = 0;
  const unsigned int got = run_alloc(dh, n, bytes, &ms);
  gh_tmgr_stats_t ts;
  gh_heap_stats_t hs;
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &ts));
  GH_OK_OR_DIE(gh_heap_stats(gh_tmgr_heap(tm), &hs));
  CHECK_EQ_U64(run_check_free(dh, n, bytes), 0);
  const unsigned int again = run_alloc(dh, n, bytes, &ms2);
  CHECK_EQ_U64(run_check_free(dh, n, bytes), 0);
  printf("%u threads x %zu B (%zu MiB) from a 32 MiB heap: %u served in %.2f ms (%llu requests, %llu denied, %llu "
         "answered by a later growth; heap %zu MiB); again on the grown heap: %u in %.3f ms\n",
         n, bytes, (size_t)n * bytes / MiB, got, ms, (unsigned long long)ts.heap_grow_asks,
         (unsigned long long)ts.heap_grow_denied, (unsigned long long)ts.heap_grow_stale,
         (size_t)(hs.heap_bytes / MiB), again, ms2);
  CHECK_EQ_U64(got, n);
  CHECK_EQ_U64(again, n);
  CHECK(ts.heap_grow_asks > 0);
  CHECK_EQ_U64(ts.heap_grow_denied, 0);
  /* No growth far beyond the need (visit 37, before SEEN: 64 MiB asked, 256 grown). */
  CHECK(hs.heap_bytes > 32 * MiB && hs.heap_bytes <= (size_t)n * bytes + 64 * MiB);
  GH_OK_OR_DIE(gh_tmgr_destroy(tm));
}

int main(void) {
  skip_without_gpu("test_grow_on_demand");
  CUDA_OK(cudaMalloc((void**)&d_count, sizeof *d_count));
  CUDA_OK(cudaMalloc((void**)&d_blocks, 262144 * sizeof(void*)));

  served_in_one_kernel(512, 256 * 1024);
  served_in_one_kernel(262144, 256);

  {
    /* (4) The plain form on a heap that grows on demand: no request. */
    gh_tmgr_t* tm = make_tm(1024, 1024, 32, 256);
    const gh_dheap_t* dh = gh_heap_device(gh_tmgr_heap(tm));
    float ms = 0;
    const unsigned int got = run_alloc(dh, 512, 256 * 1024, &ms, false);
    gh_tmgr_stats_t ts;
    GH_OK_OR_DIE(gh_tmgr_stats(tm, &ts));
    printf("gh_heap_malloc: %u of 512 x 256 KiB from a 32 MiB heap, %llu requests\n", got,
           (unsigned long long)ts.heap_grow_asks);
    CHECK(got >= 112 && got <= 128);
    CHECK_EQ_U64(ts.heap_grow_asks, 0);
    CHECK_EQ_U64(run_check_free(dh, 512, 256 * 1024), 0);
    GH_OK_OR_DIE(gh_tmgr_destroy(tm));
  }
  {
    /* (2) More than the heap may ever hold. */
    gh_tmgr_t* tm = make_tm(1024, 1024, 32, 256);
    const gh_dheap_t* dh = gh_heap_device(gh_tmgr_heap(tm));
    float ms = 0;
    const uint32_t n = 2048;
    const size_t bytes = 256 * 1024;
    const unsigned int got = run_alloc(dh, n, bytes, &ms);
    gh_tmgr_stats_t ts;
    gh_heap_stats_t hs;
    GH_OK_OR_DIE(gh_tmgr_stats(tm, &ts));
    GH_OK_OR_DIE(gh_heap_stats(gh_tmgr_heap(tm), &hs));
    printf("%u x 256 KiB (512 MiB) from a heap of at most 256 MiB: %u served in %.2f ms (%llu requests, %llu "
           "denied), heap %zu MiB\n", n, got, ms, (unsigned long long)ts.heap_grow_asks,
           (unsigned long long)ts.heap_grow_denied, (size_t)(hs.heap_bytes / MiB));
    CHECK_EQ_U64(hs.heap_bytes, 256 * MiB);
    CHECK(got >= 896 && got <= 1024);
    CHECK(ts.heap_grow_denied > 0);
    CHECK_EQ_U64(run_check_free(dh, n, bytes), 0);
    GH_OK_OR_DIE(gh_tmgr_destroy(tm));
  }
  {
    /* (3) Device budget 64 MiB: 16 of the heap, 48 of tensors. */
    gh_tmgr_t* tm = make_tm(64, 256, 16, 128);
    const gh_dheap_t* dh = gh_heap_device(gh_tmgr_heap(tm));
    enum { kTensors = 6 };
    uint32_t* tensors[kTensors];
    const size_t tbytes = 8 * MiB;
    for (int i = 0; i < kTensors; i++) {
      GH_OK_OR_DIE(gh_tensor_alloc(tm, tbytes, GH_KIND_WEIGHTS, NULL, (void**)&tensors[i]));
      stamp<<<256, 256>>>(tensors[i], tbytes / 4, (uint32_t)i + 1u);
      KERNEL_OK();
    }
    float ms = 0;
    const uint32_t n = 1024;
    const size_t bytes = 64 * 1024;
    const unsigned int got = run_alloc(dh, n, bytes, &ms);
    gh_tmgr_stats_t ts;
    GH_OK_OR_DIE(gh_tmgr_stats(tm, &ts));
    printf("device budget spent: %u of %u x 64 KiB served in %.2f ms, heap frames %zu device / %zu host, "
           "%llu evictions\n", got, n, ms, ts.heap_frames[GH_TIER_DEVICE], ts.heap_frames[GH_TIER_HOST],
           (unsigned long long)ts.evictions);
    CHECK_EQ_U64(got, n);
    CHECK(ts.heap_frames[GH_TIER_HOST] > 0);
    CHECK_EQ_U64(ts.evictions, 0);
    CHECK_EQ_U64(run_check_free(dh, n, bytes), 0);
    CUDA_OK(cudaMemset(d_count, 0, sizeof *d_count));
    for (int i = 0; i < kTensors; i++) {
      verify<<<256, 256>>>(tensors[i], tbytes / 4, (uint32_t)i + 1u, d_count);
      KERNEL_OK();
    }
    unsigned int bad = 0;
    CUDA_OK(cudaMemcpy(&bad, d_count, sizeof bad, cudaMemcpyDeviceToHost));
    CHECK_EQ_U64(bad, 0);
    for (int i = 0; i < kTensors; i++) GH_OK_OR_DIE(gh_tensor_free(tm, tensors[i], NULL));
    GH_OK_OR_DIE(gh_tmgr_destroy(tm));
  }
  CUDA_OK(cudaFree(d_blocks));
  CUDA_OK(cudaFree(d_count));
  return gh_test_done("test_grow_on_demand");
}
