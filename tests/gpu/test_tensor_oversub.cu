/* The tensor manager on the GPU (CUDA VMM backend), oversubscribed: 4 GiB
 * of tensors in a 1 GiB device budget (6 GiB of host frames behind it).
 * Kernels stamp every tensor, then read-modify-write all of them for 20+
 * rounds in a random order while evict hints and prefetches move frames
 * between the tiers; every byte is checked on the host at the end. Then
 * both tiers are exhausted (a clean GH_ERR_BUDGET, nothing damaged), bad
 * pointers are refused, and the manager is destroyed.
 *
 * Every kernel that touches a tensor runs on the stream the tensor was
 * allocated on (or was last prefetched on): the manager's contract. */
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "gpu_util.cuh"

#define MiB ((size_t)1 << 20)

__host__ __device__ static inline uint32_t base_word(uint32_t id, uint64_t i) {
  uint64_t x = ((uint64_t)id << 40) ^ i;
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
  return (uint32_t)x;
}

__global__ void stamp_kernel(uint32_t* p, size_t n, uint32_t id) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = base_word(id, i);
}

__global__ void add_kernel(uint32_t* p, size_t n, uint32_t c) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] += c;
}

struct tensor {
  uint32_t* p;
  size_t bytes;  /* a multiple of 4 */
  uint32_t id;
  uint32_t sum;  /* expected: base_word + sum */
  cudaStream_t stream;
  gh_kind_t kind;
};

static uint64_t rng = 12345;
static uint64_t rnd() {
  rng += 0x9E3779B97F4A7C15ull;
  uint64_t x = rng;
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
  return x;
}

static int oom_seen = 0;
static void on_oom(void* user, size_t bytes, const gh_tmgr_stats_t* s) {
  (void)bytes, (void)s;
  ++*(int*)user;
}

static unsigned blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

/* Copy a tensor back and check every word; returns the first bad word or SIZE_MAX. */
static size_t verify(const tensor& t, uint32_t* host) {
  CUDA_OK(cudaMemcpyAsync(host, t.p, t.bytes, cudaMemcpyDeviceToHost, t.stream));
  CUDA_OK(cudaStreamSynchronize(t.stream));
  const size_t n = t.bytes / 4;
  for (size_t i = 0; i < n; i++)
    if (host[i] != base_word(t.id, i) + t.sum) return i;
  return SIZE_MAX;
}

int main() {
  skip_without_gpu("test_tensor_oversub");
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(0));
  size_t free0 = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free0, &total));

  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_CUDA_VMM;
  o.device = 0;
  o.device_budget = (size_t)1 << 30;
  o.host_budget = (size_t)6 << 30;
  o.host_pool_frames = 64;
  gh_tmgr_t* tm = NULL;
  GH_OK_OR_DIE(gh_tmgr_create(&tm, &o));
  GH_OK_OR_DIE(gh_tmgr_set_oom_observer(tm, on_oom, &oom_seen));

  cudaStream_t streams[3];
  for (auto& s : streams) CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  /* 4 GiB: 300 small tensors (shared frames), the rest 1-64 MiB. */
  std::vector<tensor> ts;
  size_t total_bytes = 0, max_bytes = 0;
  const size_t target = (size_t)4 << 30;
  for (uint32_t id = 1; total_bytes < target; id++) {
    size_t bytes = id <= 300 ? 16 + (rnd() % (512 * 1024)) : MiB + rnd() % (63 * MiB);
    bytes &= ~(size_t)3;
    tensor t{};
    t.bytes = bytes, t.id = id, t.sum = 0;
    t.stream = streams[rnd() % 3];
    t.kind = (gh_kind_t)(rnd() % GH_KIND_COUNT);
    void* p = NULL;
    const int rc = gh_tensor_alloc(tm, bytes, t.kind, (gh_stream_t)t.stream, &p);
    if (rc != GH_OK) {
      fprintf(stderr, "alloc %zu bytes after %zu: %s (%s)\n", bytes, total_bytes, gh_err_name(rc), gh_last_error_detail());
      CHECK(rc == GH_OK);
      break;
    }
    CHECK(((uintptr_t)p & 255) == 0);
    t.p = (uint32_t*)p;
    stamp_kernel<<<blocks_for(bytes / 4), 256, 0, t.stream>>>(t.p, bytes / 4, id);
    CUDA_OK(cudaGetLastError());
    ts.push_back(t);
    total_bytes += bytes;
    max_bytes = std::max(max_bytes, bytes);
  }
  printf("%zu tensors, %.2f GiB\n", ts.size(), (double)total_bytes / (1 << 30));

  /* Rounds: every tensor read-modify-written in a random order, with
   * evict hints and prefetches between the rounds. */
  const int rounds = 20;
  std::vector<size_t> order(ts.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  for (int r = 0; r < rounds; r++) {
    for (size_t i = order.size(); i > 1; i--) std::swap(order[i - 1], order[rnd() % i]);
    for (size_t k : order) {
      tensor& t = ts[k];
      const uint32_t c = (uint32_t)rnd();
      add_kernel<<<blocks_for(t.bytes / 4), 256, 0, t.stream>>>(t.p, t.bytes / 4, c);
      CUDA_OK(cudaGetLastError());
      t.sum += c;
    }
    for (size_t k = 0; k < ts.size(); k++) {
      const unsigned d = (unsigned)(rnd() % 10);
      if (d < 2) {
        CHECK(gh_tensor_evict(tm, ts[k].p) == GH_OK);
      } else if (d < 4) {
        /* Prefetch on another stream: later kernels go there, ordered
         * after the tensor's previous stream by an event. */
        cudaStream_t s = streams[rnd() % 3];
        if (s != ts[k].stream) {
          cudaEvent_t e;
          CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
          CUDA_OK(cudaEventRecord(e, ts[k].stream));
          CUDA_OK(cudaStreamWaitEvent(s, e, 0));
          CUDA_OK(cudaEventDestroy(e));
        }
        const int rc = gh_tensor_prefetch(tm, ts[k].p, (gh_stream_t)s);
        CHECK_MSG(rc == GH_OK || rc == GH_ERR_BUDGET, "prefetch: %s", gh_err_name(rc));
        ts[k].stream = s;
      }
    }
    GH_OK_OR_DIE(gh_tmgr_maintain(tm));
  }
  CUDA_OK(cudaDeviceSynchronize());

  /* Pins hold tensors on the device. */
  for (size_t k = 0; k < 8; k++) {
    tensor& t = ts[k * 37 % ts.size()];
    gh_tier_t tier = GH_TIER_NONE;
    const int rc = gh_tensor_pin(tm, t.p);
    CHECK_MSG(rc == GH_OK, "pin: %s (%s)", gh_err_name(rc), gh_last_error_detail());
    CHECK(gh_tensor_tier(tm, t.p, &tier) == GH_OK && tier == GH_TIER_DEVICE);
    CHECK(gh_tensor_evict(tm, t.p) == GH_ERR_PINNED);
    CHECK(gh_tensor_unpin(tm, t.p) == GH_OK);
  }

  gh_tmgr_stats_t s;
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &s));
  size_t sum = 0, sum_tier = 0;
  for (int k = 0; k < GH_KIND_COUNT; k++) {
    sum += s.tensor_bytes[k];
    for (int t = 0; t < GH_TIER_COUNT; t++) sum_tier += s.tensor_bytes_tier[k][t];
  }
  printf("evictions %llu restores %llu (%.1f / %.1f GiB moved), device frames %zu, host frames %zu, pool %zu\n",
         (unsigned long long)s.evictions, (unsigned long long)s.restores, (double)s.bytes_evicted / (1 << 30),
         (double)s.bytes_restored / (1 << 30), s.frames[GH_TIER_DEVICE], s.frames[GH_TIER_HOST], s.host_pool_frames);
  CHECK(s.evictions > 0 && s.restores > 0);
  CHECK_EQ_U64(sum, total_bytes);
  CHECK_EQ_U64(sum_tier, total_bytes);
  CHECK(s.frames[GH_TIER_DEVICE] * s.frame_bytes <= s.device_budget);
  CHECK((s.frames[GH_TIER_HOST] + s.host_pool_frames) * s.frame_bytes <= s.host_budget);

  /* Exhaust both tiers: 64 MiB tensors until the budget refuses. */
  std::vector<void*> extra;
  int rc = GH_OK;
  const int oom_before = oom_seen;
  while (rc == GH_OK && extra.size() < 1000) {
    void* p = NULL;
    rc = gh_tensor_alloc(tm, 64 * MiB, GH_KIND_WORKSPACE, (gh_stream_t)streams[0], &p);
    if (rc == GH_OK) extra.push_back(p);
  }
  CHECK_MSG(rc == GH_ERR_BUDGET, "exhaust: %s", gh_err_name(rc));
  CHECK_EQ_U64(oom_seen, oom_before + 1);
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &s));
  CHECK_EQ_U64(s.oom_events, (uint64_t)oom_seen);
  printf("exhausted after %zu more tensors of 64 MiB\n", extra.size());

  /* Bad pointers. */
  void* foreign = NULL;
  CUDA_OK(cudaMalloc(&foreign, 4096));
  CHECK(gh_tensor_free(tm, foreign, NULL) == GH_ERR_FOREIGN);
  CHECK(gh_tensor_free(tm, (uint8_t*)ts[0].p + 256, NULL) == GH_ERR_FOREIGN);
  CUDA_OK(cudaFree(foreign));
  void* none = (void*)1;
  CHECK(gh_tensor_alloc(tm, 0, GH_KIND_WEIGHTS, NULL, &none) == GH_ERR_INVAL && none == NULL);
  gh_tier_t tier = GH_TIER_NONE;
  CHECK(gh_tensor_tier(tm, (uint8_t*)ts[0].p + 4, &tier) == GH_ERR_FOREIGN);
  for (void* p : extra) CHECK(gh_tensor_free(tm, p, (gh_stream_t)streams[0]) == GH_OK);
  if (!extra.empty()) CHECK(gh_tensor_free(tm, extra[0], (gh_stream_t)streams[0]) == GH_ERR_DOUBLE_FREE);

  /* Every byte. */
  uint32_t* host = NULL;
  CUDA_OK(cudaMallocHost(&host, max_bytes));
  size_t bad_tensors = 0;
  for (const tensor& t : ts) {
    const size_t bad = verify(t, host);
    if (bad != SIZE_MAX && bad_tensors++ < 10)
      fprintf(stderr, "tensor %u (%zu bytes): word %zu is %08x, expected %08x\n", t.id, t.bytes, bad, host[bad],
              base_word(t.id, bad) + t.sum);
  }
  CHECK_EQ_U64(bad_tensors, 0);
  CUDA_OK(cudaFreeHost(host));

  for (const tensor& t : ts) CHECK(gh_tensor_free(tm, t.p, (gh_stream_t)t.stream) == GH_OK);
  CHECK(gh_tensor_free(tm, ts[0].p, NULL) == GH_ERR_DOUBLE_FREE);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  for (auto& st : streams) CUDA_OK(cudaStreamDestroy(st));
  size_t free1 = 0;
  CUDA_OK(cudaMemGetInfo(&free1, &total));
  CHECK_MSG(free1 + 64 * MiB >= free0, "device memory not given back: %zu MiB free before, %zu after", free0 >> 20,
            free1 >> 20);
  return gh_test_done("test_tensor_oversub");
}
