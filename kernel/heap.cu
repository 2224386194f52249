/* gpuheap: device-side work the host library asks for: the statistics
 * reduction over a heap's page metadata. */
#include <cuda_runtime.h>

#include "../host/internal.h"
#include "gpuheap/atomic.h"
#include "gpuheap/run.h"

namespace {

struct StatsAcc {
  unsigned long long pages[4]; /* by GH_VIEW_* */
  unsigned long long pinned, runs, run_pages, bytes;
  unsigned long long class_pages[GH_MAX_CLASSES];
  unsigned long long class_used[GH_MAX_CLASSES];
};

__global__ void stats_kernel(const gh_dheap_t* __restrict__ h, StatsAcc* out) {
  __shared__ StatsAcc acc;
  for (uint32_t i = threadIdx.x; i < sizeof(StatsAcc) / 8u; i += blockDim.x) ((unsigned long long*)&acc)[i] = 0;
  __syncthreads();
  const uint32_t n = h->n_pages, page_shift = h->page_shift;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
    const uint32_t st = gh_atomic_load_relaxed(&h->xstate[p]);
    const uint32_t ct = gh_atomic_load_relaxed(&h->xcount[p]);
    const bool bit = (gh_atomic_load_relaxed(&h->xpages[p >> 5]) >> (p & 31u)) & 1u;
    const gh_page_view_t v = gh_page_view(st, ct, bit);
    atomicAdd(&acc.pages[v.kind], 1ull);
    if (v.kind == GH_VIEW_CHUNK && v.cls < h->n_classes) {
      if (v.pinned) atomicAdd(&acc.pinned, 1ull);
      atomicAdd(&acc.class_pages[v.cls], 1ull);
      atomicAdd(&acc.class_used[v.cls], (unsigned long long)v.used);
      atomicAdd(&acc.bytes, (unsigned long long)v.used * h->classes[v.cls].size);
    } else if (v.kind == GH_VIEW_HEAD) {
      atomicAdd(&acc.runs, 1ull);
      atomicAdd(&acc.run_pages, (unsigned long long)v.length);
      atomicAdd(&acc.bytes, (unsigned long long)v.length << page_shift);
    }
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < sizeof(StatsAcc) / 8u; i += blockDim.x) {
    const unsigned long long x = ((unsigned long long*)&acc)[i];
    if (x) atomicAdd(&((unsigned long long*)out)[i], x);
  }
}

}  // namespace

extern "C" int _gh_device_stats(const gh_dheap_t* d_heap, const gh_dheap_t* view, gh_heap_stats_t* s) {
  StatsAcc* d_acc = nullptr;
  GH_CUDA_TRY(cudaMalloc(&d_acc, sizeof(StatsAcc)));
  StatsAcc acc;
  cudaError_t e = cudaMemset(d_acc, 0, sizeof acc);
  if (e == cudaSuccess) {
    const uint32_t blocks = (view->n_pages + 255u) / 256u < 1024u ? (view->n_pages + 255u) / 256u : 1024u;
    stats_kernel<<<blocks, 256>>>(d_heap, d_acc);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(&acc, d_acc, sizeof acc, cudaMemcpyDeviceToHost);
  const cudaError_t f = cudaFree(d_acc);
  if (e == cudaSuccess) e = f;
  if (e != cudaSuccess) return _gh_cuda_error((int)e, "stats kernel", __FILE__, __LINE__);
  s->pages_free = (uint32_t)acc.pages[GH_VIEW_FREE];
  s->pages_chunk = (uint32_t)acc.pages[GH_VIEW_CHUNK];
  s->pages_pinned = (uint32_t)acc.pinned;
  s->runs = (uint32_t)acc.runs;
  s->pages_run = (uint32_t)acc.run_pages;
  s->bytes_in_use = acc.bytes;
  for (uint32_t c = 0; c < view->n_classes; c++) {
    s->classes[c].pages = (uint32_t)acc.class_pages[c];
    s->classes[c].chunks_used = acc.class_used[c];
    s->classes[c].chunks_capacity = acc.class_pages[c] * view->classes[c].per_page;
  }
  return GH_OK;
}

namespace {

/* gh_offline_tail on one thread (it runs at sync points, over few words). */
__global__ void offline_tail_kernel(const gh_dheap_t* __restrict__ h, uint32_t from_word, uint32_t to_word,
                                    uint32_t words_per_frame, uint32_t* out_to_word) {
  *out_to_word = gh_offline_tail(h, from_word, to_word, words_per_frame);
}

}  // namespace

extern "C" int _gh_device_offline_tail(const gh_dheap_t* d_heap, uint32_t from_word, uint32_t to_word,
                                       uint32_t words_per_frame, gh_stream_t s, uint32_t* new_to_word) {
  uint32_t* d_out = nullptr;
  cudaError_t e = cudaMallocAsync((void**)&d_out, sizeof *d_out, s);
  if (e == cudaSuccess) {
    offline_tail_kernel<<<1, 1, 0, s>>>(d_heap, from_word, to_word, words_per_frame, d_out);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpyAsync(new_to_word, d_out, sizeof *d_out, cudaMemcpyDeviceToHost, s);
    const cudaError_t f = cudaFreeAsync(d_out, s);
    if (e == cudaSuccess) e = f;
  }
  const cudaError_t g = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = g;
  if (e != cudaSuccess) return _gh_cuda_error((int)e, "offline_tail_kernel", __FILE__, __LINE__);
  return GH_OK;
}
