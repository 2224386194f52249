/* gpuheap benchmarks (Google Benchmark through bench/gbench_shim.h).
 *
 *   alloc/<workload>/threads:N/bytes:S  the peer-table workload: alloc kernel
 *        + free kernel timed with CUDA events (churn: its one kernel);
 *        counters alloc_ms, free_ms, Mops (2N or 16N operations over the time)
 *   efficiency/mixed16-4096            requested bytes granted before the
 *        first NULL over heap bytes (rounds of 2^16 allocations, 2 GiB heap)
 *   fill/<percent>/requests:N          single-page requests on a heap pre-filled
 *        at random: mean probes, mean worst lane per warp, latency
 *
 * Run: gh_bench --benchmark_out=alloc.json --benchmark_out_format=json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gbench_shim.h"
#include "workloads.h"

#ifndef GH_GIT_REV
#define GH_GIT_REV "unknown"
#endif

static gh_heap_t* g_heap;      /* 8 GiB, 64 KiB pages: the workloads */
static gh_heap_t* g_fill_heap; /* 16 GiB, 4 KiB pages: 2^22 pages for the fill sweep */

static gh_heap_t* heap_of(size_t bytes, size_t page) {
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = page;
  gh_heap_t* h = NULL;
  const int err = gh_heap_create(&h, bytes, &o);
  if (err) fprintf(stderr, "gh_heap_create: %s (%s)\n", gh_strerror(err), gh_last_error_detail());
  return h;
}

static void bm_workload(gh_bench_state_t* st, const void* arg) {
  const gh_wl_t* w = (const gh_wl_t*)arg;
  gh_wl_result_t r;
  if (gh_wl_run(g_heap, w, &r) != GH_OK) { /* warm-up */
    gh_bench_error(st, "workload failed");
    return;
  }
  while (gh_bench_keep_running(st)) {
    if (gh_wl_run(g_heap, w, &r) != GH_OK || r.nulls || r.bad) {
      gh_bench_error(st, "workload failed, returned NULL or broke a block");
      return;
    }
    gh_bench_set_iteration_time(st, (r.alloc_ms + r.free_ms) / 1e3);
    gh_bench_counter(st, "alloc_ms", r.alloc_ms);
    gh_bench_counter(st, "free_ms", r.free_ms);
    gh_bench_counter(st, "Mops", r.mops);
  }
}

static void bm_efficiency(gh_bench_state_t* st, const void* arg) {
  (void)arg;
  gh_heap_t* h = heap_of((size_t)2 << 30, 65536);
  if (!h) {
    gh_bench_error(st, "heap");
    return;
  }
  uint32_t seed = 1;
  while (gh_bench_keep_running(st)) {
    double eff = 0;
    uint64_t rounds = 0;
    if (gh_wl_efficiency(h, 1u << 16, seed++, &eff, &rounds) != GH_OK) {
      gh_bench_error(st, "efficiency run failed");
      break;
    }
    gh_bench_set_iteration_time(st, 1e-3);
    gh_bench_counter(st, "efficiency", eff);
    gh_bench_counter(st, "rounds", (double)rounds);
  }
  gh_heap_destroy(h);
}

typedef struct fill_arg_s {
  double fill;
  uint32_t requests;
} fill_arg_t;

static void bm_fill(gh_bench_state_t* st, const void* arg) {
  const fill_arg_t* a = (const fill_arg_t*)arg;
  uint32_t seed = 11;
  while (gh_bench_keep_running(st)) {
    gh_fill_result_t r;
    if (gh_wl_fill_sweep(g_fill_heap, a->fill, a->requests, seed++, &r) != GH_OK) {
      gh_bench_error(st, "fill sweep failed");
      break;
    }
    gh_bench_set_iteration_time(st, r.kernel_ms / 1e3);
    gh_bench_counter(st, "fill", r.fill_actual);
    gh_bench_counter(st, "mean_probes", r.mean_probes);
    gh_bench_counter(st, "worst_lane", r.mean_worst_lane);
    gh_bench_counter(st, "max_probes", r.max_probes);
    gh_bench_counter(st, "latency_ns", r.mean_latency_ns);
    gh_bench_counter(st, "p99_latency_ns", r.p99_latency_ns);
    gh_bench_counter(st, "nulls", (double)r.nulls);
  }
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    fprintf(stderr, "gh_bench: no CUDA device (the stress tool gh_stress runs the CPU build)\n");
    return 1;
  }
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  gh_bench_context("gpu", prop.name);
  /* GH_REV names the revision where the build had no git metadata. */
  const char* rev = getenv("GH_REV");
  gh_bench_context("git_revision", rev && *rev ? rev : GH_GIT_REV);
  g_heap = heap_of((size_t)8 << 30, 65536);
  g_fill_heap = heap_of((size_t)16 << 30, 4096);
  if (!g_heap || !g_fill_heap) return 1;

  static gh_wl_t w[2][7];
  static char names[2][7][96];
  const uint32_t threads[2] = {1u << 16, 1u << 20};
  const uint32_t sizes[5] = {16, 64, 256, 1024, 4096};
  for (int t = 0; t < 2; t++) {
    for (int s = 0; s < 7; s++) {
      gh_wl_t x = {s < 5 ? GH_WL_FIXED : (s == 5 ? GH_WL_MIXED : GH_WL_CHURN), threads[t], s < 5 ? sizes[s] : 0, 7, 0, 0};
      w[t][s] = x;
      if (s < 5)
        snprintf(names[t][s], sizeof names[t][s], "alloc/fixed/threads:%u/bytes:%u", threads[t], sizes[s]);
      else
        snprintf(names[t][s], sizeof names[t][s], "alloc/%s/threads:%u", gh_wl_name(x.kind), threads[t]);
      gh_bench_register(names[t][s], bm_workload, &w[t][s], 3, 7);
    }
  }
  gh_bench_register("efficiency/mixed16-4096/heap:2GiB", bm_efficiency, NULL, 1, 5);
  static fill_arg_t fills[5] = {{0.5, 1u << 14}, {0.9, 1u << 14}, {0.95, 1u << 14}, {0.99, 1u << 14}, {0.995, 1u << 14}};
  static char fill_names[5][64];
  for (int i = 0; i < 5; i++) {
    snprintf(fill_names[i], sizeof fill_names[i], "fill/%.1f/requests:%u", fills[i].fill * 100, fills[i].requests);
    gh_bench_register(fill_names[i], bm_fill, &fills[i], 1, 7);
  }
  const int rc = gh_bench_main(argc, argv);
  gh_heap_destroy(g_heap);
  gh_heap_destroy(g_fill_heap);
  return rc;
}
