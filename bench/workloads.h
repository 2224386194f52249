/* gpuheap: the in-kernel allocation workloads, shared by the benchmarks, the
 * stress tool and the GPU tests (C API over CUDA kernels).
 *
 * The workload (as in DESIGN.md's peer table): blocks of 256 threads; an
 * alloc kernel where each thread calls gh_malloc(S) and writes its thread id
 * into the first and last 8 bytes of its block (or, with full_stamp, all of
 * it); an untimed check kernel; a free kernel. The alloc and free kernels are
 * timed with CUDA events. "mixed" draws each thread's size uniformly from
 * [16, 4096]; "churn" is one kernel where each thread does 8 rounds of
 * malloc (uniform [16, 1024]), write, check, free.
 */
#ifndef GPUHEAP_BENCH_WORKLOADS_H
#define GPUHEAP_BENCH_WORKLOADS_H

#include <stdint.h>

#include "gpuheap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gh_wl_kind_e { GH_WL_FIXED = 0, GH_WL_MIXED = 1, GH_WL_CHURN = 2 } gh_wl_kind_t;

typedef struct gh_wl_s {
  gh_wl_kind_t kind;
  uint32_t threads;
  uint32_t bytes;       /* FIXED: the size */
  uint32_t seed;        /* MIXED, CHURN: size draws */
  int full_stamp;       /* stamp whole blocks (tests) instead of first/last 8 bytes */
  uint32_t lanes_mask;  /* which lanes of each warp allocate (0 = all) */
} gh_wl_t;

typedef struct gh_wl_result_s {
  float alloc_ms;       /* CHURN: the whole kernel */
  float free_ms;        /* CHURN: 0 */
  uint64_t ops;         /* mallocs + frees timed */
  uint64_t nulls;       /* mallocs that returned NULL */
  uint64_t bad;         /* stamps broken, misaligned or out-of-heap pointers */
  uint64_t bytes;       /* requested bytes granted */
  double mops;          /* ops / (alloc_ms + free_ms) / 1000 */
} gh_wl_result_t;

const char* gh_wl_name(gh_wl_kind_t kind);

/* Run one workload on `heap` (which it leaves as it found it when all
 * mallocs succeed). Returns a GH_ERR_* on a CUDA failure. */
int gh_wl_run(gh_heap_t* heap, const gh_wl_t* w, gh_wl_result_t* r);

/* Memory efficiency at the first NULL: rounds of `per_round` allocations of
 * uniform [16, 4096] bytes, never freed, until a round sees a NULL. Returns
 * granted requested bytes over heap bytes in *efficiency; the heap is reset
 * afterwards. */
int gh_wl_efficiency(gh_heap_t* heap, uint32_t per_round, uint32_t seed, double* efficiency, uint64_t* rounds);
/* The same; also the heap's statistics at the first NULL (before the reset)
 * and the NULLs of the last round. at_null and nulls may be NULL. */
int gh_wl_efficiency_detail(gh_heap_t* heap, uint32_t per_round, uint32_t seed, double* efficiency, uint64_t* rounds,
                            gh_heap_stats_t* at_null, uint64_t* nulls);

/* Fill-level sweep: pre-fill `fill` of the pages (each independently, at
 * random), then `requests` threads each ask for one page. Reports the mean
 * probes per thread, the mean over warps of the worst lane's probes, the mean
 * per-thread latency of the call (ns) and the kernel time. The heap is reset
 * before and after. */
typedef struct gh_fill_result_s {
  double fill_actual;
  double mean_probes;
  double mean_worst_lane;
  uint32_t max_probes;
  double mean_latency_ns;
  double p99_latency_ns;
  float kernel_ms;
  uint64_t nulls;
} gh_fill_result_t;
int gh_wl_fill_sweep(gh_heap_t* heap, double fill, uint32_t requests, uint32_t seed, gh_fill_result_t* r);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_BENCH_WORKLOADS_H */
