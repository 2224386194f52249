/* Large allocations: runs of pages and of frames from 1 MiB to 1 GiB, alone
 * and concurrently, each filled and checked. */
#include <vector>

#include "gpu_util.cuh"
#include "gpuheap_device.cuh"

__global__ void alloc_one(const gh_dheap_t* h, size_t size, void** out) { *out = gh_heap_malloc(h, size); }
__global__ void free_one(const gh_dheap_t* h, void* p) { gh_heap_free(h, p); }

/* Fill a block with its owner's words and check them (grid-stride). */
__global__ void fill_words(uint64_t* p, size_t words, uint64_t tag) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = tag ^ i;
}
__global__ void check_words(const uint64_t* p, size_t words, uint64_t tag, unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    if (p[i] != (tag ^ i)) atomicAdd(bad, 1ull);
}

/* n threads each allocate `size`, stamp every 4 KiB, check, free. */
__global__ void many(const gh_dheap_t* h, uint32_t n, size_t size, void** ptrs) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  uint64_t* p = (uint64_t*)gh_heap_malloc(h, size);
  ptrs[t] = p;
  if (p)
    for (size_t o = 0; o < size / 8; o += 512) p[o] = t;
}
__global__ void many_check(const gh_dheap_t* h, uint32_t n, size_t size, void** ptrs, unsigned long long* bad,
                           unsigned long long* nulls) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const uint64_t* p = (const uint64_t*)ptrs[t];
  if (!p) {
    atomicAdd(nulls, 1ull);
    return;
  }
  for (size_t o = 0; o < size / 8; o += 512)
    if (p[o] != t) {
      atomicAdd(bad, 1ull);
      break;
    }
  gh_heap_free(h, ptrs[t]);
}

int main() {
  skip_without_gpu("test_gpu_large");
  gh_heap_t* heap = make_heap((size_t)4 << 30, 65536);
  const gh_dheap_t* h = gh_heap_device(heap);
  void** d_out;
  unsigned long long *d_bad, *d_nulls;
  CUDA_OK(cudaMalloc(&d_out, 4096 * sizeof(void*)));
  CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));
  CUDA_OK(cudaMalloc(&d_nulls, sizeof *d_nulls));

  /* One at a time, 1 MiB .. 1 GiB, while a 1 GiB block stays live. */
  void* keep = nullptr;
  alloc_one<<<1, 1>>>(h, (size_t)1 << 30, d_out);
  KERNEL_OK();
  CUDA_OK(cudaMemcpy(&keep, d_out, sizeof keep, cudaMemcpyDeviceToHost));
  CHECK(keep != nullptr);
  fill_words<<<1024, 256>>>((uint64_t*)keep, ((size_t)1 << 30) / 8, 0xABCDull);
  KERNEL_OK();
  for (size_t size = (size_t)1 << 20; size <= ((size_t)1 << 30); size <<= 1) {
    for (size_t extra : {(size_t)0, (size_t)4097}) {
      const size_t sz = size + extra > ((size_t)1 << 30) ? size : size + extra;
      void* p = nullptr;
      alloc_one<<<1, 1>>>(h, sz, d_out);
      KERNEL_OK();
      CUDA_OK(cudaMemcpy(&p, d_out, sizeof p, cudaMemcpyDeviceToHost));
      CHECK_MSG(p != nullptr, "%zu bytes: NULL", sz);
      if (!p) continue;
      CHECK(((uintptr_t)p & 65535u) == 0); /* runs start on a page */
      CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
      fill_words<<<1024, 256>>>((uint64_t*)p, sz / 8, sz);
      check_words<<<1024, 256>>>((const uint64_t*)p, sz / 8, sz, d_bad);
      KERNEL_OK();
      unsigned long long bad = 0;
      CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
      CHECK_MSG(bad == 0, "%zu bytes: %llu words wrong", sz, bad);
      free_one<<<1, 1>>>(h, p);
      KERNEL_OK();
    }
  }
  /* The live 1 GiB block was not touched. */
  CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
  check_words<<<1024, 256>>>((const uint64_t*)keep, ((size_t)1 << 30) / 8, 0xABCDull, d_bad);
  KERNEL_OK();
  unsigned long long bad = 0;
  CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
  CHECK_MSG(bad == 0, "the live 1 GiB block changed: %llu words", bad);
  /* With 1 GiB live, 3 GiB is the most that fits; more is NULL, not a crash. */
  void* p = nullptr;
  alloc_one<<<1, 1>>>(h, ((size_t)3 << 30) + 1, d_out);
  KERNEL_OK();
  CUDA_OK(cudaMemcpy(&p, d_out, sizeof p, cudaMemcpyDeviceToHost));
  CHECK(p == nullptr);
  free_one<<<1, 1>>>(h, keep);
  KERNEL_OK();

  /* Concurrently: 1024 threads x 1 MiB, 512 x 2 MiB (frames), 96 x 33 MiB. */
  const struct {
    uint32_t n;
    size_t size;
  } waves[3] = {{1024, (size_t)1 << 20}, {512, (size_t)2 << 20}, {96, (size_t)33 << 20}};
  for (const auto& w : waves) {
    CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
    CUDA_OK(cudaMemset(d_nulls, 0, sizeof *d_nulls));
    many<<<(w.n + 63) / 64, 64>>>(h, w.n, w.size, d_out);
    many_check<<<(w.n + 63) / 64, 64>>>(h, w.n, w.size, d_out, d_bad, d_nulls);
    KERNEL_OK();
    unsigned long long nulls = 0;
    CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&nulls, d_nulls, sizeof nulls, cudaMemcpyDeviceToHost));
    CHECK_MSG(bad == 0 && nulls == 0, "%u x %zu B: %llu bad, %llu NULL", w.n, w.size, bad, nulls);
    printf("%4u threads x %9zu B: ok\n", w.n, w.size);
  }
  gh_heap_stats_t st;
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  CHECK(st.bytes_in_use == 0 && st.runs == 0 && st.largest_free_run == st.pages_total);
  CHECK(st.double_frees == 0 && st.foreign_frees == 0);
  CUDA_OK(cudaFree(d_out));
  CUDA_OK(cudaFree(d_bad));
  CUDA_OK(cudaFree(d_nulls));
  GH_OK_OR_DIE(gh_heap_destroy(heap));
  return gh_test_done("test_gpu_large");
}
