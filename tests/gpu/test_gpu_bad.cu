/* Bad input on the device (checked build): double frees of chunks and runs,
 * foreign and interior pointers, NULL, zero and huge sizes, an exhausted
 * heap. Each is counted and none disturbs the blocks that are live. */
#include "gpu_util.cuh"
#include "gpuheap_device.cuh"

/* Many allocation sites in one kernel: call the allocator through one
 * out-of-line function each, as README advises, so it is inlined once. */
__device__ __noinline__ void* t_malloc(const gh_dheap_t* h, size_t size) { return gh_heap_malloc(h, size); }
__device__ __noinline__ void t_free(const gh_dheap_t* h, void* p) { gh_heap_free(h, p); }

struct Out {
  void* zero[2];
  void* huge;
  void* over;
  unsigned long long exhausted_nulls;
  void* after_free;
  unsigned long long intact;
};

/* One warp does everything, so the expected counts are exact. */
__global__ void bad_frees(const gh_dheap_t* h, void* foreign, Out* out) {
  const uint32_t lane = threadIdx.x;
  /* lanes 0..31 each get a 100-byte chunk and a 3-page run, stamped */
  uint32_t* chunk = (uint32_t*)t_malloc(h, 100);
  uint32_t* run = (uint32_t*)t_malloc(h, 3 * 65536);
  chunk[0] = lane;
  run[0] = lane;
  __syncwarp();
  /* lanes 0..7 free their chunk twice */
  if (lane < 8) t_free(h, chunk);
  if (lane < 8) t_free(h, chunk);
  /* lanes 8..11 free their run twice */
  if (lane >= 8 && lane < 12) t_free(h, run);
  if (lane >= 8 && lane < 12) t_free(h, run);
  /* lanes 12..15: interior pointers of live blocks (foreign) */
  if (lane >= 12 && lane < 14) t_free(h, (uint8_t*)chunk + 16);
  if (lane >= 14 && lane < 16) t_free(h, (uint8_t*)run + 65536);
  /* lane 16: memory from cudaMalloc; lane 17: NULL (nothing) */
  if (lane == 16) t_free(h, foreign);
  if (lane == 17) t_free(h, nullptr);
  __syncwarp();
  /* The live blocks are intact. */
  bool ok = true;
  if (lane >= 8) ok = ok && chunk[0] == lane;
  if (lane < 8 || lane >= 12) ok = ok && run[0] == lane;
  const unsigned intact = __popc(__ballot_sync(0xFFFFFFFFu, ok));
  if (lane == 0) out->intact = intact;
  if (lane >= 8) t_free(h, chunk);
  if (lane < 8 || lane >= 12) t_free(h, run);
  if (lane == 0) {
    out->zero[0] = t_malloc(h, 0);
    out->zero[1] = t_malloc(h, 0);
    out->huge = t_malloc(h, (size_t)-1);
    out->over = t_malloc(h, (size_t)1 << 40);
  }
}

/* Exhaust the heap with pages, count the NULLs, free one, allocate again. */
__global__ void exhaust(const gh_dheap_t* h, uint32_t per_thread, void** slots, Out* out) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long nulls = 0;
  for (uint32_t i = 0; i < per_thread; i++) {
    void* p = t_malloc(h, 65536);
    slots[t * per_thread + i] = p;
    nulls += p == nullptr;
  }
  atomicAdd(&out->exhausted_nulls, nulls);
}
__global__ void free_slots(const gh_dheap_t* h, void** slots, uint32_t n, uint32_t skip) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    if (i != skip) t_free(h, slots[i]);
}
__global__ void realloc_one(const gh_dheap_t* h, void** slots, uint32_t i, Out* out) {
  t_free(h, slots[i]);
  out->after_free = t_malloc(h, 65536);
  t_free(h, out->after_free);
}

int main() {
  skip_without_gpu("test_gpu_bad");
  gh_heap_t* heap = make_heap((size_t)64 << 20, 65536); /* 1024 pages */
  const gh_dheap_t* h = gh_heap_device(heap);
  Out* d_out;
  void* foreign;
  CUDA_OK(cudaMalloc(&d_out, sizeof(Out)));
  CUDA_OK(cudaMemset(d_out, 0, sizeof(Out)));
  CUDA_OK(cudaMalloc(&foreign, 4096));
  bad_frees<<<1, 32>>>(h, foreign, d_out);
  KERNEL_OK();
  Out out;
  CUDA_OK(cudaMemcpy(&out, d_out, sizeof out, cudaMemcpyDeviceToHost));
  gh_heap_stats_t st;
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  CHECK_EQ_U64(st.double_frees, 8 + 4);
  CHECK_EQ_U64(st.foreign_frees, 2 + 2 + 1);
  CHECK_EQ_U64(out.intact, 32);
  CHECK(out.zero[0] && out.zero[1] && out.zero[0] != out.zero[1]);
  CHECK(out.huge == nullptr && out.over == nullptr);
  /* everything but the two malloc(0) blocks is back */
  CHECK_EQ_U64(st.bytes_in_use, 32);
  CHECK_EQ_U64(st.runs, 0);

  GH_OK_OR_DIE(gh_heap_reset(heap));
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  CHECK(st.double_frees == 0 && st.foreign_frees == 0 && st.pages_free == st.pages_total);
  /* 1024 pages; 1280 page requests: 256 NULLs exactly, never a crash */
  void** slots;
  CUDA_OK(cudaMalloc(&slots, 1280 * sizeof(void*)));
  CUDA_OK(cudaMemset(d_out, 0, sizeof(Out)));
  exhaust<<<10, 32>>>(h, 4, slots, d_out);
  KERNEL_OK();
  void* h_slots[1280];
  CUDA_OK(cudaMemcpy(h_slots, slots, sizeof h_slots, cudaMemcpyDeviceToHost));
  uint32_t some = 0;
  while (some < 1280 && h_slots[some] == nullptr) some++;
  CHECK(some < 1280);
  realloc_one<<<1, 1>>>(h, slots, some, d_out); /* a free makes room again */
  KERNEL_OK();
  CUDA_OK(cudaMemcpy(&out, d_out, sizeof out, cudaMemcpyDeviceToHost));
  CHECK_EQ_U64(out.exhausted_nulls, 256);
  CHECK(out.after_free != nullptr);
  free_slots<<<4, 256>>>(h, slots, 1280, some);
  KERNEL_OK();
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  CHECK(st.bytes_in_use == 0 && st.pages_free == st.pages_total);
  CHECK_EQ_U64(st.double_frees + st.foreign_frees, 0);

  /* Host API: bad arguments give codes, not crashes. */
  CHECK(gh_heap_create(nullptr, 1 << 30, nullptr) == GH_ERR_INVAL);
  gh_heap_t* none = nullptr;
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = 1000;
  CHECK(gh_heap_create(&none, 1 << 30, &o) == GH_ERR_INVAL && none == nullptr);
  CHECK(gh_heap_create(&none, (size_t)1 << 45, nullptr) == GH_ERR_DEVICE_NOMEM && none == nullptr);
  CHECK(gh_heap_stats(nullptr, &st) == GH_ERR_INVAL && gh_heap_reset(nullptr) == GH_ERR_INVAL);
  CHECK(gh_heap_destroy(nullptr) == GH_OK);
  CUDA_OK(cudaFree(slots));
  CUDA_OK(cudaFree(foreign));
  CUDA_OK(cudaFree(d_out));
  GH_OK_OR_DIE(gh_heap_destroy(heap));
  return gh_test_done("test_gpu_bad");
}
