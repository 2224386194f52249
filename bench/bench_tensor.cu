/* Tensor manager benchmarks (issue: host side), results as CSV lines:
 *
 *   latency:  host alloc + free of one tensor, by size, for gpuheap's tensor
 *             manager and for cudaMallocAsync / cudaFreeAsync on a pool that
 *             keeps its memory (release threshold: all); median and p90 of
 *             each call, in microseconds.
 *   loop:     a kernel that reads and writes every tensor of a working set
 *             once per pass, for a working set within the device budget and
 *             for one of twice the budget, where tensors evicted to host
 *             memory are either prefetched back before their kernel
 *             (evicting others) or used in place over PCIe; ms per pass and
 *             bytes moved per pass.
 *
 *   bench_tensor [--csv FILE] [--loop-csv FILE] [--budget-mib N] [--reps N]
 *
 * PyTorch's caching allocator is measured by bench/torch_alloc.py on the same
 * machine, the same sizes and the same statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "gpuheap.h"
#include "gpu_util.cuh" /* CUDA_OK, GH_OK_OR_DIE (tests/gpu) */

#define MiB ((size_t)1 << 20)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double pct(double* v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int i = (int)(q * (n - 1) + 0.5);
  return v[i];
}

/* Alloc and free `iters` times; per-call times into a[] and f[]. Tensors
 * are held in batches of `live` so that allocations do not all reuse one
 * block. */
static void latency_gpuheap(gh_tmgr_t* tm, size_t bytes, int iters, int live, cudaStream_t s, double* a, double* f) {
  void** p = (void**)calloc((size_t)live, sizeof(void*));
  for (int i = 0; i < iters; i += live) {
    const int n = iters - i < live ? iters - i : live;
    for (int j = 0; j < n; j++) {
      const double t0 = now_us();
      GH_OK_OR_DIE(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, s, &p[j]));
      a[i + j] = now_us() - t0;
    }
    for (int j = 0; j < n; j++) {
      const double t0 = now_us();
      GH_OK_OR_DIE(gh_tensor_free(tm, p[j], s));
      f[i + j] = now_us() - t0;
    }
  }
  free(p);
}

static void latency_async(size_t bytes, int iters, int live, cudaStream_t s, double* a, double* f) {
  void** p = (void**)calloc((size_t)live, sizeof(void*));
  for (int i = 0; i < iters; i += live) {
    const int n = iters - i < live ? iters - i : live;
    for (int j = 0; j < n; j++) {
      const double t0 = now_us();
      CUDA_OK(cudaMallocAsync(&p[j], bytes, s));
      a[i + j] = now_us() - t0;
    }
    for (int j = 0; j < n; j++) {
      const double t0 = now_us();
      CUDA_OK(cudaFreeAsync(p[j], s));
      f[i + j] = now_us() - t0;
    }
  }
  CUDA_OK(cudaStreamSynchronize(s));
  free(p);
}

__global__ void touch(uint4* p, size_t n, uint32_t add) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = p[i];
    v.x += add;
    p[i] = v;
  }
}

__global__ void check(const uint4* p, size_t n, uint32_t want, unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (p[i].x != want) atomicAdd(bad, 1ull);
}

/* Passes over `count` tensors of `tbytes`: prefetch each (or not: then a
 * kernel reads and writes evicted tensors where they are, over PCIe), then
 * touch it. Returns the median ms per pass; *moved: bytes evicted +
 * restored per pass. */
static double loop(gh_tmgr_t* tm, int count, size_t tbytes, int reps, int prefetch, double* moved,
                   unsigned long long* bad_out) {
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void** t = (void**)calloc((size_t)count, sizeof(void*));
  for (int i = 0; i < count; i++) {
    GH_OK_OR_DIE(gh_tensor_alloc(tm, tbytes, GH_KIND_ACTIVATIONS, s, &t[i]));
    CUDA_OK(cudaMemsetAsync(t[i], 0, tbytes, s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  const size_t n = tbytes / sizeof(uint4);
  double* ms = (double*)calloc((size_t)reps + 1, sizeof(double));
  gh_tmgr_stats_t st0, st1;
  for (int r = 0; r <= reps; r++) { /* pass 0: warm-up */
    if (r == 1) GH_OK_OR_DIE(gh_tmgr_stats(tm, &st0));
    const double t0 = now_us();
    for (int i = 0; i < count; i++) {
      if (prefetch) GH_OK_OR_DIE(gh_tensor_prefetch(tm, t[i], s));
      touch<<<1024, 256, 0, s>>>((uint4*)t[i], n, 1u);
      CUDA_OK(cudaGetLastError());
    }
    CUDA_OK(cudaStreamSynchronize(s));
    ms[r] = (now_us() - t0) / 1e3;
  }
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &st1));
  *moved = (double)((st1.bytes_evicted - st0.bytes_evicted) + (st1.bytes_restored - st0.bytes_restored)) / reps;
  unsigned long long* d_bad;
  CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));
  CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
  for (int i = 0; i < count; i++) check<<<1024, 256, 0, s>>>((const uint4*)t[i], n, (uint32_t)reps + 1u, d_bad);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(bad_out, d_bad, sizeof *bad_out, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(d_bad));
  for (int i = 0; i < count; i++) GH_OK_OR_DIE(gh_tensor_free(tm, t[i], s));
  CUDA_OK(cudaStreamSynchronize(s));
  GH_OK_OR_DIE(gh_tmgr_maintain(tm)); /* the frees' event is recorded on s: before s goes */
  const double med = pct(ms + 1, reps, 0.5);
  free(ms);
  free(t);
  CUDA_OK(cudaStreamDestroy(s));
  return med;
}

int main(int argc, char** argv) {
  const char* csv_path = NULL;
  const char* loop_path = NULL;
  size_t budget_mib = 2048;
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--csv") && i + 1 < argc)
      csv_path = argv[++i];
    else if (!strcmp(argv[i], "--loop-csv") && i + 1 < argc)
      loop_path = argv[++i];
    else if (!strcmp(argv[i], "--budget-mib") && i + 1 < argc)
      budget_mib = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--csv FILE] [--loop-csv FILE] [--budget-mib N] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "bench_tensor needs a CUDA device\n");
    return 2;
  }
  FILE* csv = csv_path ? fopen(csv_path, "w") : NULL;
  if (csv_path && !csv) {
    perror(csv_path);
    return 2;
  }
  FILE* lcsv = loop_path ? fopen(loop_path, "w") : NULL;
  if (loop_path && !lcsv) {
    perror(loop_path);
    return 2;
  }
  if (csv) fprintf(csv, "allocator,bytes,alloc_us_median,alloc_us_p90,free_us_median,free_us_p90\n");
  if (lcsv) fprintf(lcsv, "working_set,budget_bytes,set_bytes,ms_per_pass,bytes_moved_per_pass\n");

  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_CUDA_VMM;
  o.device_budget = budget_mib * MiB;
  o.host_budget = 4 * budget_mib * MiB;
  gh_tmgr_t* tm = NULL;
  GH_OK_OR_DIE(gh_tmgr_create(&tm, &o));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaMemPool_t pool;
  int dev = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, dev));
  uint64_t keep = UINT64_MAX;
  CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));

  const size_t sizes[] = {512, 4096, 65536, MiB, 8 * MiB, 64 * MiB, 256 * MiB};
  printf("%-14s %-16s %12s %10s %10s %10s %10s\n", "test", "allocator", "bytes", "alloc med", "alloc p90", "free med",
         "free p90");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    const size_t b = sizes[k];
    const int iters = b <= MiB ? 4000 : (b <= 8 * MiB ? 400 : 60);
    const int live = b <= MiB ? 64 : 4;
    double* a = (double*)calloc((size_t)iters, sizeof(double));
    double* f = (double*)calloc((size_t)iters, sizeof(double));
    for (int which = 0; which < 2; which++) {
      const char* name = which ? "cudaMallocAsync" : "gpuheap";
      if (which)
        latency_async(b, iters, live, s, a, f), latency_async(b, iters, live, s, a, f); /* warm, then measure */
      else
        latency_gpuheap(tm, b, iters, live, s, a, f), latency_gpuheap(tm, b, iters, live, s, a, f);
      const double am = pct(a, iters, 0.5), a9 = pct(a, iters, 0.9), fm = pct(f, iters, 0.5), f9 = pct(f, iters, 0.9);
      printf("%-14s %-16s %12zu %10.2f %10.2f %10.2f %10.2f\n", "latency", name, b, am, a9, fm, f9);
      if (csv) fprintf(csv, "%s,%zu,%.3f,%.3f,%.3f,%.3f\n", name, b, am, a9, fm, f9);
    }
    free(a);
    free(f);
  }
  CUDA_OK(cudaStreamSynchronize(s));
  GH_OK_OR_DIE(gh_tmgr_maintain(tm));

  /* Working sets of 64 MiB tensors: 3/4 of the budget, and twice it. */
  const size_t tb = 64 * MiB;
  const int within = (int)(budget_mib * 3 / 4 / 64), over = (int)(budget_mib * 2 / 64);
  printf("\n%-22s %10s %12s %14s %14s\n", "loop", "tensors", "ms/pass", "GB moved/pass", "bad words");
  static const char* names[3] = {"in_budget", "2x_budget_prefetch", "2x_budget_in_place"};
  for (int which = 0; which < 3; which++) {
    const int count = which ? over : within;
    double moved = 0;
    unsigned long long bad = 0;
    const double ms = loop(tm, count, tb, reps, which != 2, &moved, &bad);
    printf("%-22s %10d %12.2f %14.2f %14llu\n", names[which], count, ms, moved / 1e9, bad);
    if (lcsv)
      fprintf(lcsv, "%s,%zu,%zu,%.3f,%.0f\n", names[which], budget_mib * MiB, (size_t)count * tb, ms, moved);
    if (bad) {
      fprintf(stderr, "bench_tensor: %llu words wrong after the loop\n", bad);
      return 1;
    }
  }
  gh_tmgr_stats_t st;
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &st));
  printf("evictions %llu, restores %llu, evicted %.2f GB, restored %.2f GB\n", (unsigned long long)st.evictions,
         (unsigned long long)st.restores, st.bytes_evicted / 1e9, st.bytes_restored / 1e9);
  GH_OK_OR_DIE(gh_tmgr_maintain(tm));
  CUDA_OK(cudaStreamDestroy(s));
  GH_OK_OR_DIE(gh_tmgr_destroy(tm));
  if (csv) fclose(csv);
  if (lcsv) fclose(lcsv);
  return 0;
}
