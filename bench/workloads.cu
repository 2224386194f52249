/* gpuheap: the in-kernel allocation workloads (see workloads.h). */
#include <algorithm>
#include <cstdio>
#include <vector>

#include "gpuheap_device.cuh"
#include "workloads.h"

namespace {

constexpr uint32_t kBlock = 256;

#define WL_TRY(call)                                                                   \
  do {                                                                                 \
    const cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return e_ == cudaErrorMemoryAllocation ? GH_ERR_DEVICE_NOMEM : GH_ERR_CUDA;      \
    }                                                                                  \
  } while (0)

enum Counter { kNulls = 0, kBad = 1, kBytes = 2, kCounters = 3 };

__device__ __forceinline__ uint32_t draw(uint32_t tid, uint32_t seed, uint32_t round) {
  return gh_mix32(tid * 0x9E3779B9u ^ gh_mix32(seed + round * 0x85EBCA6Bu));
}

__device__ __forceinline__ uint32_t wl_size(const gh_wl_t& w, uint32_t tid, uint32_t round) {
  if (w.kind == GH_WL_FIXED) return w.bytes;
  if (w.kind == GH_WL_MIXED) return 16u + draw(tid, w.seed, round) % 4081u;
  return 16u + draw(tid, w.seed, round) % 1009u; /* churn: [16, 1024] */
}

__device__ __forceinline__ bool wl_active(const gh_wl_t& w, uint32_t tid) {
  return tid < w.threads && (w.lanes_mask == 0u || ((w.lanes_mask >> (tid & 31u)) & 1u));
}

/* The owner's id in the first and the last aligned 8 bytes, or everywhere. */
__device__ __forceinline__ void stamp(void* p, uint32_t size, uint64_t id, bool full) {
  uint64_t* q = static_cast<uint64_t*>(p);
  const uint32_t last = (size - 8u) / 8u;
  if (full)
    for (uint32_t i = 0; i <= last; i++) q[i] = id;
  else {
    q[0] = id;
    q[last] = id;
  }
}

__device__ __forceinline__ bool stamp_ok(const void* p, uint32_t size, uint64_t id, bool full) {
  const uint64_t* q = static_cast<const uint64_t*>(p);
  const uint32_t last = (size - 8u) / 8u;
  if (full) {
    for (uint32_t i = 0; i <= last; i++)
      if (q[i] != id) return false;
    return true;
  }
  return q[0] == id && q[last] == id;
}

__device__ __forceinline__ bool in_heap(const gh_dheap_t* h, const void* p, uint32_t size) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  const uint8_t* end = h->base + ((size_t)h->n_pages << h->page_shift);
  return b >= h->base && b + size <= end && ((uintptr_t)b & (GH_CHUNK_ALIGN - 1u)) == 0u;
}

/* Warp-aggregated counter update (so the check does not serialize on it). */
__device__ __forceinline__ void count(unsigned long long* c, unsigned long long v) {
  const uint32_t m = __activemask();
  unsigned long long sum = v;
  for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(m, sum, d);
  if (m == 0xFFFFFFFFu) {
    if ((threadIdx.x & 31u) == 0u && sum) atomicAdd(c, sum);
  } else if (v) {
    atomicAdd(c, v);
  }
}

__global__ void alloc_kernel(const gh_dheap_t* h, gh_wl_t w, uint32_t round, void** ptrs) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (!wl_active(w, tid)) return;
  const uint32_t size = wl_size(w, tid, round);
  void* p = gh_heap_malloc(h, size);
  ptrs[tid] = p;
  if (p) stamp(p, size, tid, w.full_stamp);
}

__global__ void check_kernel(const gh_dheap_t* h, gh_wl_t w, uint32_t round, void* const* ptrs,
                             unsigned long long* counters) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long nulls = 0, bad = 0, bytes = 0;
  if (wl_active(w, tid)) {
    const uint32_t size = wl_size(w, tid, round);
    const void* p = ptrs[tid];
    if (!p)
      nulls = 1;
    else {
      bad = !(in_heap(h, p, size) && stamp_ok(p, size, tid, w.full_stamp));
      bytes = size;
    }
  }
  count(&counters[kNulls], nulls);
  count(&counters[kBad], bad);
  count(&counters[kBytes], bytes);
}

__global__ void free_kernel(const gh_dheap_t* h, gh_wl_t w, void** ptrs) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (!wl_active(w, tid)) return;
  gh_heap_free(h, ptrs[tid]);
}

__global__ void churn_kernel(const gh_dheap_t* h, gh_wl_t w, unsigned long long* counters) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (!wl_active(w, tid)) return;
  unsigned long long nulls = 0, bad = 0;
  for (uint32_t r = 0; r < 8u; r++) {
    const uint32_t size = wl_size(w, tid, r);
    void* p = gh_heap_malloc(h, size);
    if (!p) {
      nulls++;
      continue;
    }
    stamp(p, size, tid, w.full_stamp);
    bad += !(in_heap(h, p, size) && stamp_ok(p, size, tid, w.full_stamp));
    gh_heap_free(h, p);
  }
  if (nulls) atomicAdd(&counters[kNulls], nulls);
  if (bad) atomicAdd(&counters[kBad], bad);
}

uint32_t blocks_for(uint32_t threads) { return (threads + kBlock - 1u) / kBlock; }

/* Device buffers of one run, freed on every path. */
struct Buffers {
  void** ptrs = nullptr;
  unsigned long long* counters = nullptr;
  cudaEvent_t ev[4] = {};
  ~Buffers() {
    cudaFree(ptrs);
    cudaFree(counters);
    for (cudaEvent_t e : ev)
      if (e) cudaEventDestroy(e);
  }
  int init(size_t n) {
    WL_TRY(cudaMalloc(&ptrs, std::max<size_t>(n, 1) * sizeof(void*)));
    WL_TRY(cudaMalloc(&counters, kCounters * sizeof(unsigned long long)));
    WL_TRY(cudaMemset(counters, 0, kCounters * sizeof(unsigned long long)));
    for (cudaEvent_t& e : ev) WL_TRY(cudaEventCreate(&e));
    return GH_OK;
  }
};

}  // namespace

extern "C" const char* gh_wl_name(gh_wl_kind_t kind) {
  return kind == GH_WL_FIXED ? "fixed" : kind == GH_WL_MIXED ? "mixed" : "churn";
}

extern "C" int gh_wl_run(gh_heap_t* heap, const gh_wl_t* w, gh_wl_result_t* r) {
  const gh_dheap_t* h = gh_heap_device(heap);
  if (!h || !w || !r || w->threads == 0) return GH_ERR_INVAL;
  Buffers b;
  int err = b.init(w->threads);
  if (err) return err;
  const uint32_t grid = blocks_for(w->threads);
  *r = gh_wl_result_t{};
  unsigned long long c[kCounters] = {};
  if (w->kind == GH_WL_CHURN) {
    WL_TRY(cudaEventRecord(b.ev[0]));
    churn_kernel<<<grid, kBlock>>>(h, *w, b.counters);
    WL_TRY(cudaGetLastError());
    WL_TRY(cudaEventRecord(b.ev[1]));
    WL_TRY(cudaEventSynchronize(b.ev[1]));
    WL_TRY(cudaEventElapsedTime(&r->alloc_ms, b.ev[0], b.ev[1]));
    WL_TRY(cudaMemcpy(c, b.counters, sizeof c, cudaMemcpyDeviceToHost));
    const uint64_t lanes = w->lanes_mask ? (uint64_t)w->threads / 32u * __builtin_popcount(w->lanes_mask) : w->threads;
    r->ops = 16u * lanes;
  } else {
    WL_TRY(cudaEventRecord(b.ev[0]));
    alloc_kernel<<<grid, kBlock>>>(h, *w, 0, b.ptrs);
    WL_TRY(cudaGetLastError());
    WL_TRY(cudaEventRecord(b.ev[1]));
    check_kernel<<<grid, kBlock>>>(h, *w, 0, b.ptrs, b.counters);
    WL_TRY(cudaGetLastError());
    WL_TRY(cudaEventRecord(b.ev[2]));
    free_kernel<<<grid, kBlock>>>(h, *w, b.ptrs);
    WL_TRY(cudaGetLastError());
    WL_TRY(cudaEventRecord(b.ev[3]));
    WL_TRY(cudaEventSynchronize(b.ev[3]));
    WL_TRY(cudaEventElapsedTime(&r->alloc_ms, b.ev[0], b.ev[1]));
    WL_TRY(cudaEventElapsedTime(&r->free_ms, b.ev[2], b.ev[3]));
    WL_TRY(cudaMemcpy(c, b.counters, sizeof c, cudaMemcpyDeviceToHost));
    const uint64_t lanes = w->lanes_mask ? (uint64_t)w->threads / 32u * __builtin_popcount(w->lanes_mask) : w->threads;
    r->ops = 2u * lanes;
  }
  r->nulls = c[kNulls];
  r->bad = c[kBad];
  r->bytes = c[kBytes];
  const double ms = (double)r->alloc_ms + r->free_ms;
  r->mops = ms > 0 ? (double)r->ops / ms / 1000.0 : 0.0;
  return GH_OK;
}

extern "C" int gh_wl_efficiency(gh_heap_t* heap, uint32_t per_round, uint32_t seed, double* efficiency,
                                uint64_t* rounds) {
  return gh_wl_efficiency_detail(heap, per_round, seed, efficiency, rounds, NULL, NULL);
}

extern "C" int gh_wl_efficiency_detail(gh_heap_t* heap, uint32_t per_round, uint32_t seed, double* efficiency,
                                       uint64_t* rounds, gh_heap_stats_t* at_null, uint64_t* nulls) {
  const gh_dheap_t* h = gh_heap_device(heap);
  if (!h || !efficiency || per_round == 0) return GH_ERR_INVAL;
  gh_heap_stats_t st;
  int err = gh_heap_stats(heap, &st);
  if (err) return err;
  Buffers b;
  err = b.init(per_round);
  if (err) return err;
  gh_wl_t w = {GH_WL_MIXED, per_round, 0, seed, 0, 0};
  unsigned long long c[kCounters] = {};
  uint64_t n = 0;
  do {
    alloc_kernel<<<blocks_for(per_round), kBlock>>>(h, w, (uint32_t)n, b.ptrs);
    WL_TRY(cudaGetLastError());
    check_kernel<<<blocks_for(per_round), kBlock>>>(h, w, (uint32_t)n, b.ptrs, b.counters);
    WL_TRY(cudaGetLastError());
    WL_TRY(cudaMemcpy(c, b.counters, sizeof c, cudaMemcpyDeviceToHost));
    n++;
  } while (c[kNulls] == 0 && c[kBad] == 0 && n < 1000000u);
  *efficiency = (double)c[kBytes] / (double)st.heap_bytes;
  if (rounds) *rounds = n;
  if (nulls) *nulls = c[kNulls];
  if (at_null) {
    WL_TRY(cudaDeviceSynchronize());
    err = gh_heap_stats(heap, at_null);
    if (err) return err;
  }
  if (c[kBad]) fprintf(stderr, "efficiency: %llu bad blocks\n", c[kBad]);
  err = gh_heap_reset(heap);
  return err ? err : (c[kBad] ? GH_ERR_CORRUPT : GH_OK);
}

namespace {

/* Mark each page in use with probability `threshold` / 2^32, as a 1-page run. */
__global__ void prefill_kernel(const gh_dheap_t* h, uint32_t threshold, uint32_t seed, unsigned long long* used) {
  const uint32_t w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= h->n_words) return;
  uint32_t mask = 0;
  for (uint32_t b = 0; b < 32u; b++) {
    const uint32_t p = w * 32u + b;
    if (gh_mix32(p * 0x9E3779B9u ^ seed) < threshold) {
      mask |= 1u << b;
      h->xstate[p] = gh_state_head(1);
    }
  }
  h->xpages[w] = mask;
  count(used, __popc(mask));
}

__global__ void probe_kernel(const gh_dheap_t* h, uint32_t n, uint32_t size, uint32_t* probes, uint64_t* lat,
                             unsigned long long* nulls) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  uint64_t t0, t1;
  uint32_t pr = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  void* p = gh_heap_malloc_probed(h, size, &pr);
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  probes[tid] = pr;
  lat[tid] = t1 - t0;
  if (!p) atomicAdd(nulls, 1ull);
}

}  // namespace

extern "C" int gh_wl_fill_sweep(gh_heap_t* heap, double fill, uint32_t requests, uint32_t seed, gh_fill_result_t* r) {
  const gh_dheap_t* h = gh_heap_device(heap);
  if (!h || !r || requests == 0 || fill < 0 || fill >= 1) return GH_ERR_INVAL;
  gh_dheap_t view;
  WL_TRY(cudaMemcpy(&view, h, sizeof view, cudaMemcpyDeviceToHost));
  int err = gh_heap_reset(heap);
  if (err) return err;
  Buffers b;
  err = b.init(1);
  if (err) return err;
  uint32_t* d_probes = nullptr;
  uint64_t* d_lat = nullptr;
  WL_TRY(cudaMalloc(&d_probes, requests * sizeof(uint32_t)));
  const cudaError_t e = cudaMalloc(&d_lat, requests * sizeof(uint64_t));
  if (e != cudaSuccess) {
    cudaFree(d_probes);
    WL_TRY(e);
  }
  struct Free2 {
    void* a;
    void* b;
    ~Free2() {
      cudaFree(a);
      cudaFree(b);
    }
  } guard{d_probes, d_lat};
  const uint32_t threshold = (uint32_t)(fill * 4294967296.0);
  prefill_kernel<<<(view.n_words + 255u) / 256u, 256>>>(h, threshold, seed, &b.counters[kBytes]);
  WL_TRY(cudaGetLastError());
  WL_TRY(cudaEventRecord(b.ev[0]));
  probe_kernel<<<blocks_for(requests), kBlock>>>(h, requests, 1u << view.page_shift, d_probes, d_lat,
                                                 &b.counters[kNulls]);
  WL_TRY(cudaGetLastError());
  WL_TRY(cudaEventRecord(b.ev[1]));
  WL_TRY(cudaEventSynchronize(b.ev[1]));
  WL_TRY(cudaEventElapsedTime(&r->kernel_ms, b.ev[0], b.ev[1]));
  unsigned long long c[kCounters];
  WL_TRY(cudaMemcpy(c, b.counters, sizeof c, cudaMemcpyDeviceToHost));
  std::vector<uint32_t> probes(requests);
  std::vector<uint64_t> lat(requests);
  WL_TRY(cudaMemcpy(probes.data(), d_probes, requests * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  WL_TRY(cudaMemcpy(lat.data(), d_lat, requests * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  r->fill_actual = (double)c[kBytes] / view.n_pages;
  r->nulls = c[kNulls];
  double sum = 0, worst_sum = 0, lat_sum = 0;
  uint32_t worst_all = 0;
  for (uint32_t w0 = 0; w0 < requests; w0 += 32u) {
    uint32_t worst = 0;
    for (uint32_t i = w0; i < std::min(requests, w0 + 32u); i++) {
      sum += probes[i];
      worst = std::max(worst, probes[i]);
      lat_sum += (double)lat[i];
    }
    worst_sum += worst;
    worst_all = std::max(worst_all, worst);
  }
  r->mean_probes = sum / requests;
  r->mean_worst_lane = worst_sum / ((requests + 31u) / 32u);
  r->max_probes = worst_all;
  r->mean_latency_ns = lat_sum / requests;
  std::sort(lat.begin(), lat.end());
  r->p99_latency_ns = (double)lat[(size_t)(0.99 * (requests - 1))];
  return gh_heap_reset(heap);
}
