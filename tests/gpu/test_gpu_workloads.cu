/* The allocator on the GPU: fixed, mixed and churn workloads at 2^16 and
 * 2^20 threads with every block filled with its owner's id and checked (so
 * no two live blocks overlap); partial warps and mixed sizes within a warp;
 * fill until no room, free all, refill to the same count.
 * Usage: test_gpu_workloads [--small]  (--small: 2^14 threads, for sanitizers) */
#include <cstring>
#include <vector>

#include "gpu_util.cuh"
#include "gpuheap_device.cuh"
#include "workloads.h"

static void check_empty(gh_heap_t* heap, const char* what) {
  gh_heap_stats_t st;
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  CHECK_MSG(st.bytes_in_use == 0, "%s: %llu bytes still in use", what, (unsigned long long)st.bytes_in_use);
  CHECK_MSG(st.runs == 0 && st.pages_chunk == st.pages_pinned, "%s: runs %u, chunk pages %u, pinned %u", what, st.runs,
            st.pages_chunk, st.pages_pinned);
  CHECK_MSG(st.double_frees == 0 && st.foreign_frees == 0, "%s: bad frees counted", what);
}

static void run(gh_heap_t* heap, gh_wl_t w, const char* what) {
  gh_wl_result_t r;
  GH_OK_OR_DIE(gh_wl_run(heap, &w, &r));
  CHECK_MSG(r.nulls == 0, "%s: %llu NULLs", what, (unsigned long long)r.nulls);
  CHECK_MSG(r.bad == 0, "%s: %llu blocks overlapped, misaligned or outside the heap", what, (unsigned long long)r.bad);
  printf("%-40s %9.3f ms alloc %9.3f ms free %10.1f Mops/s\n", what, r.alloc_ms, r.free_ms, r.mops);
  check_empty(heap, what);
}

/* Rounds of n threads allocating `size` without freeing, until a round gets
 * nothing; returns how many succeeded and leaves their pointers in out. */
__global__ void fill_round(const gh_dheap_t* h, uint32_t size, uint32_t n, void** out, unsigned long long* got) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  void* p = gh_heap_malloc(h, size);
  if (p) {
    const unsigned long long i = atomicAdd(got, 1ull);
    out[i] = p;
    *(uint32_t*)p = tid;
  }
}

__global__ void free_all(const gh_dheap_t* h, void** ptrs, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    gh_heap_free(h, ptrs[i]);
}

static unsigned long long fill_until_full(gh_heap_t* heap, uint32_t size, void** d_ptrs, unsigned long long* d_got,
                                          unsigned long long cap) {
  const uint32_t n = 1u << 16;
  unsigned long long before = 0, after = 0;
  CUDA_OK(cudaMemset(d_got, 0, sizeof *d_got));
  for (;;) {
    fill_round<<<n / 256, 256>>>(gh_heap_device(heap), size, n, d_ptrs, d_got);
    KERNEL_OK();
    CUDA_OK(cudaMemcpy(&after, d_got, sizeof after, cudaMemcpyDeviceToHost));
    if (after == before || after + n > cap) break;
    before = after;
  }
  return after;
}

static void test_fill_refill(uint32_t size, size_t page) {
  const size_t bytes = (size_t)64 << 20;
  gh_heap_t* heap = make_heap(bytes, page);
  const unsigned long long cap = bytes / 16 + (1u << 16);
  void** d_ptrs;
  unsigned long long* d_got;
  CUDA_OK(cudaMalloc(&d_ptrs, cap * sizeof(void*)));
  CUDA_OK(cudaMalloc(&d_got, sizeof *d_got));
  const unsigned long long n1 = fill_until_full(heap, size, d_ptrs, d_got, cap);
  gh_heap_stats_t st;
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  /* Full: every page is of the class and every chunk used (or every page a run). */
  const unsigned long long capacity =
      size <= page / 4 ? (unsigned long long)st.pages_total * (page / gh_class_to_size(gh_size_to_class(size)))
                       : st.pages_total / ((size + page - 1) / page);
  CHECK_MSG(n1 == capacity, "fill %u B (page %zu): %llu of %llu", size, page, n1, capacity);
  free_all<<<1024, 256>>>(gh_heap_device(heap), d_ptrs, n1);
  KERNEL_OK();
  check_empty(heap, "fill, free all");
  const unsigned long long n2 = fill_until_full(heap, size, d_ptrs, d_got, cap);
  CHECK_MSG(n1 == n2, "refill %u B (page %zu): %llu then %llu", size, page, n1, n2);
  free_all<<<1024, 256>>>(gh_heap_device(heap), d_ptrs, n2);
  KERNEL_OK();
  check_empty(heap, "refill, free all");
  printf("fill %5u B, page %5zu: %llu blocks, refill %llu\n", size, page, n1, n2);
  CUDA_OK(cudaFree(d_ptrs));
  CUDA_OK(cudaFree(d_got));
  GH_OK_OR_DIE(gh_heap_destroy(heap));
}

int main(int argc, char** argv) {
  skip_without_gpu("test_gpu_workloads");
  const bool small = argc > 1 && strcmp(argv[1], "--small") == 0;
  gh_heap_t* heap = make_heap(small ? (size_t)256 << 20 : (size_t)6 << 30, 65536);
  const uint32_t ns[3] = {1u << 14, 1u << 16, 1u << 20};
  const uint32_t sizes[5] = {16, 64, 256, 1024, 4096};
  char what[96];
  for (int i = small ? 0 : 1; i < (small ? 1 : 3); i++) {
    const uint32_t n = ns[i];
    for (uint32_t s : sizes) {
      snprintf(what, sizeof what, "fixed %u threads x %u B", n, s);
      run(heap, gh_wl_t{GH_WL_FIXED, n, s, 0, 1, 0}, what);
    }
    snprintf(what, sizeof what, "mixed %u threads", n);
    run(heap, gh_wl_t{GH_WL_MIXED, n, 0, 7, 1, 0}, what);
    snprintf(what, sizeof what, "churn %u threads", n);
    run(heap, gh_wl_t{GH_WL_CHURN, n, 0, 9, 1, 0}, what);
  }
  /* Partial warps, mixed sizes within a warp. */
  const uint32_t masks[5] = {0x1u, 0x80000001u, 0x55555555u, 0xFFFF0000u, 0x7FFFFFFEu};
  for (uint32_t m : masks) {
    snprintf(what, sizeof what, "mixed, lanes %08x", m);
    run(heap, gh_wl_t{GH_WL_MIXED, small ? 1u << 12 : 1u << 16, 0, m, 1, m}, what);
    snprintf(what, sizeof what, "churn, lanes %08x", m);
    run(heap, gh_wl_t{GH_WL_CHURN, small ? 1u << 12 : 1u << 16, 0, m, 1, m}, what);
  }
  GH_OK_OR_DIE(gh_heap_destroy(heap));
  if (!small) {
    test_fill_refill(16, 65536);
    test_fill_refill(1000, 65536);
    test_fill_refill(4096, 4096);  /* one page each */
    test_fill_refill(100, 4096);
  }
  return gh_test_done("test_gpu_workloads");
}
