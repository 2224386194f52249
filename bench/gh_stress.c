/* gh_stress: the stress benchmark, gpuheap's main job.
 *
 * On a machine with a CUDA device it runs the peer-table workloads (fixed 16
 * B to 4 KiB, mixed 16-4096, churn) at 2^16 and 2^20 threads, every block
 * stamped and checked, `--reps` times each (median and range reported), then
 * the fill-level sweep and the memory efficiency at the first NULL. Without a
 * device it says so and runs the CPU build of the same allocator core on all
 * cores, with the same workloads.
 *
 * Usage: gh_stress [--reps N] [--quick] [--cpu] [--csv FILE] [--fill-grid FILE]
 *                  [--only ROW] [--threads N]
 *   --csv FILE        the workload table as workload,threads,bytes,alloc_ms,free_ms,mops
 *   --only ROW        one row of the table: a fixed size (16, 64, 256, 1024,
 *                     4096), mixed or churn; no fill sweep or efficiency after
 *                     it (for profilers and A/B runs of one workload)
 *   --threads N       the GPU's rows at N threads only (2^16 and 2^20 by
 *                     default); on the CPU, N allocations (2^18 by default)
 *   --fill-grid FILE  only the proofs' validation grid (fill x requests), as CSV
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpuheap.h"
#include "gpuheap/cpu.h"
#ifdef GH_STRESS_CUDA
#include <cuda_runtime_api.h>

#include "workloads.h"
#endif

typedef struct row_s {
  const char* workload;
  unsigned threads;
  char bytes[16];
  double alloc_ms, free_ms, mops, mops_min, mops_max;
  unsigned long long nulls, bad;
} row_t;

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A row's labels: the workload, threads and sizes. */
static void row_init(row_t* r, const char* workload, unsigned threads, unsigned bytes) {
  memset(r, 0, sizeof *r);
  r->workload = workload;
  r->threads = threads;
  if (bytes)
    snprintf(r->bytes, sizeof r->bytes, "%u", bytes);
  else
    snprintf(r->bytes, sizeof r->bytes, strcmp(workload, "mixed") == 0 ? "16-4096" : "16-1024");
}

/* The fixed sizes of the table's rows; mixed and churn follow them. */
static const unsigned fixed_sizes[5] = {16, 64, 256, 1024, 4096};

/* Whether --only (NULL: every row) names the row of `workload` and `bytes`. */
static int row_selected(const char* only, const char* workload, unsigned bytes) {
  if (only == NULL) return 1;
  char label[16];
  snprintf(label, sizeof label, "%u", bytes);
  return bytes ? strcmp(only, label) == 0 : strcmp(only, workload) == 0;
}

/* --only's argument: a row of the table. */
static int row_known(const char* only) {
  for (int k = 0; k < 5; k++)
    if (row_selected(only, "fixed", fixed_sizes[k])) return 1;
  return row_selected(only, "mixed", 0) || row_selected(only, "churn", 0);
}

/* A row's figures: medians and range of nr runs (sorts the arrays). */
static void row_finish(row_t* r, double* alloc_ms, double* free_ms, double* mops, int nr) {
  r->alloc_ms = median(alloc_ms, nr);
  r->free_ms = median(free_ms, nr);
  r->mops = median(mops, nr);
  r->mops_min = mops[0];
  r->mops_max = mops[nr - 1];
}

static void progress(int i, int n, const char* what) {
  fprintf(stderr, "[%2d/%2d] %s\n", i, n, what);
  fflush(stderr);
}

static void print_rows(const row_t* rows, int n, FILE* csv) {
  printf("\n%-8s %9s %9s %10s %10s %12s %23s %6s %5s\n", "workload", "threads", "bytes", "alloc_ms", "free_ms",
         "Mops/s", "(min - max)", "NULLs", "bad");
  for (int i = 0; i < n; i++) {
    const row_t* r = &rows[i];
    printf("%-8s %9u %9s %10.3f %10.3f %12.1f  (%9.1f - %9.1f) %6llu %5llu\n", r->workload, r->threads, r->bytes,
           r->alloc_ms, r->free_ms, r->mops, r->mops_min, r->mops_max, r->nulls, r->bad);
    if (csv)
      fprintf(csv, "%s,%u,%s,%.4f,%.4f,%.1f\n", r->workload, r->threads, r->bytes, r->alloc_ms, r->free_ms, r->mops);
  }
}

/* ---- The CPU build: the same workloads on threads. ---- */

typedef struct cpu_job_s {
  gh_cpu_heap_t* heap;
  int kind; /* 0 fixed, 1 mixed, 2 churn */
  unsigned bytes, begin, end;
  void** ptrs;
  pthread_barrier_t* barrier;
  unsigned long long nulls, bad;
  double t[4]; /* alloc start, alloc end, free start, free end (ms) */
} cpu_job_t;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static unsigned size_of(int kind, unsigned bytes, unsigned i, unsigned round) {
  uint32_t x = i * 0x9E3779B9u ^ (round + 1u) * 0x85EBCA6Bu;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  return kind == 0 ? bytes : kind == 1 ? 16u + x % 4081u : 16u + x % 1009u;
}

static void stamp(void* p, unsigned size, uint64_t id) {
  memcpy(p, &id, 8);
  memcpy((char*)p + (size - 8) / 8 * 8, &id, 8);
}
static int stamp_ok(const void* p, unsigned size, uint64_t id) {
  return memcmp(p, &id, 8) == 0 && memcmp((const char*)p + (size - 8) / 8 * 8, &id, 8) == 0;
}

static void* cpu_worker(void* arg) {
  cpu_job_t* j = (cpu_job_t*)arg;
  pthread_barrier_wait(j->barrier);
  j->t[0] = now_ms();
  if (j->kind == 2) {
    for (unsigned i = j->begin; i < j->end; i++)
      for (unsigned r = 0; r < 8; r++) {
        const unsigned size = size_of(2, 0, i, r);
        void* p = gh_cpu_malloc(j->heap, size);
        if (!p) {
          j->nulls++;
          continue;
        }
        stamp(p, size, i);
        j->bad += !stamp_ok(p, size, i);
        gh_cpu_free(j->heap, p);
      }
    j->t[1] = j->t[2] = j->t[3] = now_ms();
    return NULL;
  }
  for (unsigned i = j->begin; i < j->end; i++) {
    const unsigned size = size_of(j->kind, j->bytes, i, 0);
    j->ptrs[i] = gh_cpu_malloc(j->heap, size);
    if (j->ptrs[i]) stamp(j->ptrs[i], size, i);
  }
  j->t[1] = now_ms();
  pthread_barrier_wait(j->barrier); /* alloc phase ends */
  for (unsigned i = j->begin; i < j->end; i++) {
    if (!j->ptrs[i])
      j->nulls++;
    else
      j->bad += !stamp_ok(j->ptrs[i], size_of(j->kind, j->bytes, i, 0), i);
  }
  pthread_barrier_wait(j->barrier); /* check phase ends (untimed) */
  j->t[2] = now_ms();
  for (unsigned i = j->begin; i < j->end; i++) gh_cpu_free(j->heap, j->ptrs[i]);
  j->t[3] = now_ms();
  return NULL;
}

static int run_cpu(int reps, int quick, const char* only, unsigned threads, FILE* csv) {
  const unsigned nthreads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
  const unsigned n = threads ? threads : quick ? 1u << 14 : 1u << 18;
  printf("gh_stress: no CUDA device here: running the CPU build of the allocator core on %u threads\n", nthreads);
  gh_cpu_heap_t* heap = NULL;
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  int err = gh_cpu_heap_create(&heap, (size_t)2 << 30, &o);
  if (err) {
    fprintf(stderr, "gh_cpu_heap_create: %s\n", gh_strerror(err));
    return 1;
  }
  /* Touch the heap once, so the timings are the allocator's, not the first
   * page faults of host memory (random search spreads blocks over it). */
  void* all = gh_cpu_malloc(heap, (size_t)2 << 30);
  if (all) memset(all, 0, (size_t)2 << 30);
  gh_cpu_free(heap, all);
  void** ptrs = (void**)calloc(n, sizeof *ptrs);
  cpu_job_t* jobs = (cpu_job_t*)calloc(nthreads, sizeof *jobs);
  pthread_t* tids = (pthread_t*)calloc(nthreads, sizeof *tids);
  row_t rows[7];
  int nrows = 0, failed = 0;
  for (int k = 0; k < 7; k++) {
    const int kind = k < 5 ? 0 : k - 4;
    const char* name = kind == 0 ? "fixed" : kind == 1 ? "mixed" : "churn";
    if (!row_selected(only, name, kind == 0 ? fixed_sizes[k] : 0)) continue;
    row_t* r = &rows[nrows++];
    row_init(r, name, n, kind == 0 ? fixed_sizes[k] : 0);
    char what[64];
    snprintf(what, sizeof what, "%s %u x %s B on %u threads", r->workload, n, r->bytes, nthreads);
    progress(nrows, only ? 1 : 7, what);
    double a[64], f[64], m[64];
    for (int rep = 0; rep < reps && rep < 64; rep++) {
      pthread_barrier_t bar;
      pthread_barrier_init(&bar, NULL, nthreads);
      for (unsigned t = 0; t < nthreads; t++) {
        jobs[t] = (cpu_job_t){heap, kind, kind == 0 ? fixed_sizes[k] : 0, n / nthreads * t,
                              t + 1 == nthreads ? n : n / nthreads * (t + 1), ptrs, &bar, 0, 0, {0, 0, 0, 0}};
        pthread_create(&tids[t], NULL, cpu_worker, &jobs[t]);
      }
      /* A phase lasts from its first thread's start to its last thread's end. */
      double t0 = 1e300, t1 = 0, t2 = 1e300, t3 = 0;
      for (unsigned t = 0; t < nthreads; t++) {
        pthread_join(tids[t], NULL);
        r->nulls += jobs[t].nulls;
        r->bad += jobs[t].bad;
        t0 = jobs[t].t[0] < t0 ? jobs[t].t[0] : t0;
        t1 = jobs[t].t[1] > t1 ? jobs[t].t[1] : t1;
        t2 = jobs[t].t[2] < t2 ? jobs[t].t[2] : t2;
        t3 = jobs[t].t[3] > t3 ? jobs[t].t[3] : t3;
      }
      if (kind == 2) t2 = t3;
      pthread_barrier_destroy(&bar);
      a[rep] = t1 - t0;
      f[rep] = t3 - t2;
      m[rep] = (kind == 2 ? 16.0 : 2.0) * n / (a[rep] + f[rep]) / 1e3;
    }
    row_finish(r, a, f, m, reps < 64 ? reps : 64);
    failed |= r->nulls != 0 || r->bad != 0;
  }
  print_rows(rows, nrows, csv);
  printf("\n(CPU timings of the portable core, not GPU figures.)\n");
  free(ptrs);
  free(jobs);
  free(tids);
  gh_cpu_heap_destroy(heap);
  return failed;
}

/* ---- The GPU ---- */

#ifdef GH_STRESS_CUDA
/* The proofs' validation grid: fills 50-99.5% x N = 2^10..2^20 one-page
 * requests on 2^22 pages of 4 KiB, where N is at most half the free pages;
 * medians of `reps` runs, one CSV line each (proofs/README.md compares
 * them with gh_model predict). */
static int run_fill_grid(int reps, const char* path) {
  FILE* f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = 4096;
  gh_heap_t* fh = NULL;
  int err = gh_heap_create(&fh, (size_t)16 << 30, &o);
  if (err) {
    fprintf(stderr, "gh_heap_create: %s (%s)\n", gh_strerror(err), gh_last_error_detail());
    fclose(f);
    return 1;
  }
  fprintf(f, "pages,fill,fill_actual,requests,mean_probes,worst_lane,max_probes,latency_ns,p99_latency_ns,nulls\n");
  const double fills[5] = {0.5, 0.9, 0.95, 0.99, 0.995};
  const double pages = 4194304.0;
  for (int i = 0; i < 5; i++)
    for (unsigned lg = 10; lg <= 20; lg += 2) {
      const unsigned n = 1u << lg;
      if (n > (1.0 - fills[i]) * pages / 2) continue;
      char what[64];
      snprintf(what, sizeof what, "fill grid %.1f%% x 2^%u", fills[i] * 100, lg);
      progress(i * 6 + (int)(lg - 10) / 2 + 1, 30, what);
      double fa[64], mp[64], wl[64], lat[64], p99[64];
      unsigned mx = 0;
      unsigned long long nulls = 0;
      int nr = 0;
      for (; nr < reps && nr < 64; nr++) {
        gh_fill_result_t r;
        if ((err = gh_wl_fill_sweep(fh, fills[i], n, 1000u + (unsigned)nr, &r)) != GH_OK) break;
        fa[nr] = r.fill_actual;
        mp[nr] = r.mean_probes;
        wl[nr] = r.mean_worst_lane;
        lat[nr] = r.mean_latency_ns;
        p99[nr] = r.p99_latency_ns;
        if (r.max_probes > mx) mx = r.max_probes;
        nulls += r.nulls;
      }
      if (err) break;
      fprintf(f, "%.0f,%.3f,%.6f,%u,%.4f,%.4f,%u,%.0f,%.0f,%llu\n", pages, fills[i], median(fa, nr), n, median(mp, nr),
              median(wl, nr), mx, median(lat, nr), median(p99, nr), nulls);
      fflush(f);
    }
  fclose(f);
  gh_heap_destroy(fh);
  return err != GH_OK;
}

static int run_gpu(int reps, int quick, const char* only, unsigned nthreads, FILE* csv) {
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("gh_stress on %s (%d SMs, %.1f GiB)\n", prop.name, prop.multiProcessorCount,
         prop.totalGlobalMem / 1073741824.0);
  gh_heap_t* heap = NULL;
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  int err = gh_heap_create(&heap, quick ? (size_t)1 << 30 : (size_t)8 << 30, &o);
  if (err) {
    fprintf(stderr, "gh_heap_create: %s (%s)\n", gh_strerror(err), gh_last_error_detail());
    return 1;
  }
  const unsigned threads[2] = {nthreads ? nthreads : 1u << 16, quick ? 1u << 17 : 1u << 20};
  const int nthread_counts = nthreads ? 1 : 2;
  row_t rows[14];
  int nrows = 0, failed = 0;
  for (int t = 0; t < nthread_counts; t++)
    for (int k = 0; k < 7; k++) {
      const gh_wl_kind_t kind = k < 5 ? GH_WL_FIXED : (k == 5 ? GH_WL_MIXED : GH_WL_CHURN);
      if (!row_selected(only, gh_wl_name(kind), k < 5 ? fixed_sizes[k] : 0)) continue;
      gh_wl_t w = {kind, threads[t], k < 5 ? fixed_sizes[k] : 0, 7, 0, 0};
      row_t* r = &rows[nrows++];
      row_init(r, gh_wl_name(kind), threads[t], k < 5 ? fixed_sizes[k] : 0);
      char what[64];
      snprintf(what, sizeof what, "%s %u threads x %s B", r->workload, threads[t], r->bytes);
      progress(nrows, (only ? 1 : 7) * nthread_counts, what);
      double a[64], f[64], m[64];
      gh_wl_result_t res;
      if ((err = gh_wl_run(heap, &w, &res)) != GH_OK) break; /* warm-up */
      int nr = 0;
      for (; nr < reps && nr < 64; nr++) {
        if ((err = gh_wl_run(heap, &w, &res)) != GH_OK) break;
        a[nr] = res.alloc_ms;
        f[nr] = res.free_ms;
        m[nr] = res.mops;
        r->nulls += res.nulls;
        r->bad += res.bad;
      }
      if (err || nr == 0) break;
      row_finish(r, a, f, m, nr);
      failed |= r->nulls != 0 || r->bad != 0;
    }
  if (err) fprintf(stderr, "workload failed: %s\n", gh_strerror(err));
  print_rows(rows, nrows, csv);
  gh_heap_destroy(heap);
  failed |= err != GH_OK;
  if (only) return failed;

  /* The fill-level sweep: 2^22 pages of 4 KiB. */
  gh_heap_t* fh = NULL;
  o.page_bytes = 4096;
  if (!quick && gh_heap_create(&fh, (size_t)16 << 30, &o) == GH_OK) {
    const double fills[5] = {0.5, 0.9, 0.95, 0.99, 0.995};
    printf("\nfill sweep: 2^22 pages of 4 KiB pre-filled at random, 2^14 one-page requests (median of %d)\n", reps);
    printf("%7s %12s %12s %10s %14s %14s\n", "fill", "mean probes", "worst lane", "max", "latency ns", "p99 ns");
    for (int i = 0; i < 5; i++) {
      char what[64];
      snprintf(what, sizeof what, "fill sweep at %.1f%%", fills[i] * 100);
      progress(i + 1, 5, what);
      double mp[64], wl[64], lat[64], p99[64];
      unsigned mx = 0;
      int nr = 0;
      for (; nr < reps && nr < 64; nr++) {
        gh_fill_result_t fr;
        if (gh_wl_fill_sweep(fh, fills[i], 1u << 14, 100u + (unsigned)nr, &fr) != GH_OK) break;
        mp[nr] = fr.mean_probes;
        wl[nr] = fr.mean_worst_lane;
        lat[nr] = fr.mean_latency_ns;
        p99[nr] = fr.p99_latency_ns;
        if (fr.max_probes > mx) mx = fr.max_probes;
        failed |= fr.nulls != 0;
      }
      if (nr)
        printf("%6.1f%% %12.3f %12.3f %10u %14.0f %14.0f\n", fills[i] * 100, median(mp, nr), median(wl, nr), mx,
               median(lat, nr), median(p99, nr));
    }
    gh_heap_destroy(fh);
  }
  /* Memory efficiency at the first NULL. */
  o.page_bytes = 65536;
  gh_heap_t* eh = NULL;
  if (gh_heap_create(&eh, (size_t)2 << 30, &o) == GH_OK) {
    progress(1, 1, "memory efficiency, mixed 16-4096, 2 GiB heap");
    double eff[64];
    int nr = 0;
    for (; nr < reps && nr < 64; nr++) {
      uint64_t rounds = 0;
      if (gh_wl_efficiency(eh, 1u << 16, 1u + (unsigned)nr, &eff[nr], &rounds) != GH_OK) break;
    }
    if (nr) {
      const double med = median(eff, nr);
      printf("\nmemory efficiency at the first NULL (mixed 16-4096, 2 GiB heap, rounds of 2^16): median %.3f "
             "(%.3f - %.3f, %d runs)\n",
             med, eff[0], eff[nr - 1], nr);
    }
    gh_heap_destroy(eh);
  }
  return failed;
}
/* --efficiency: only the memory efficiency, and where the heap's bytes are
 * at the first NULL: free pages, and the free chunks of formatted pages per
 * class (bench/NOTES.md, "Efficiency"). The heap's options come from the
 * GPUHEAP_* environment, so variants are compared without rebuilding. */
static int run_efficiency(int reps) {
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  gh_heap_t* eh = NULL;
  int err = gh_heap_create(&eh, (size_t)2 << 30, &o);
  if (err) {
    fprintf(stderr, "gh_heap_create: %s\n", gh_strerror(err));
    return 1;
  }
  printf("memory efficiency at the first NULL: mixed 16-4096, 2 GiB heap, rounds of 2^16; page %u B, slots %u, "
         "probe_limit %u, refill_min %u (0: defaults)\n",
         (unsigned)o.page_bytes, o.slots, o.probe_limit, o.refill_min);
  printf("%4s %10s %7s %6s %11s %11s %11s %11s %11s\n", "run", "efficiency", "rounds", "nulls", "free MiB",
         "in use MiB", "slack MiB", "pinned pg", "worst class");
  double eff[64];
  int nr = 0;
  for (; nr < reps && nr < 64; nr++) {
    uint64_t rounds = 0, nulls = 0;
    gh_heap_stats_t st;
    if ((err = gh_wl_efficiency_detail(eh, 1u << 16, 1u + (unsigned)nr, &eff[nr], &rounds, &st, &nulls)) != GH_OK)
      break;
    /* slack: free chunks in formatted pages; the class holding most of it */
    double slack = 0, worst = 0;
    uint32_t worst_cls = 0;
    for (uint32_t c = 0; c < st.n_classes; c++) {
      const double b = (double)(st.classes[c].chunks_capacity - st.classes[c].chunks_used) * st.classes[c].size;
      slack += b;
      if (b > worst) worst = b, worst_cls = c;
    }
    printf("%4d %10.4f %7llu %6llu %11.1f %11.1f %11.1f %11u %5u:%4.1f\n", nr, eff[nr], (unsigned long long)rounds,
           (unsigned long long)nulls, (double)st.pages_free * st.page_bytes / 1048576.0,
           (double)st.bytes_in_use / 1048576.0, slack / 1048576.0, st.pages_pinned, st.classes[worst_cls].size,
           worst / 1048576.0);
    if (nr == 0) { /* the first run's classes in full */
      printf("     class   pages  used/capacity  slack MiB\n");
      for (uint32_t c = 0; c < st.n_classes; c++)
        if (st.classes[c].pages)
          printf("     %5u %7u %6.3f %14.2f\n", st.classes[c].size, st.classes[c].pages,
                 (double)st.classes[c].chunks_used / (double)st.classes[c].chunks_capacity,
                 (double)(st.classes[c].chunks_capacity - st.classes[c].chunks_used) * st.classes[c].size / 1048576.0);
    }
    fflush(stdout);
  }
  gh_heap_destroy(eh);
  if (err) fprintf(stderr, "efficiency: %s\n", gh_strerror(err));
  if (nr) printf("efficiency: median %.4f of %d runs\n", median(eff, nr), nr);
  return err != GH_OK;
}
#endif

int main(int argc, char** argv) {
  int reps = 9, quick = 0, cpu = 0, efficiency = 0;
  unsigned threads = 0;
  const char* only = NULL;
  const char* csv_path = NULL;
  const char* grid_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--cpu"))
      cpu = 1;
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
      csv_path = argv[++i];
    else if (!strcmp(argv[i], "--fill-grid") && i + 1 < argc)
      grid_path = argv[++i];
    else if (!strcmp(argv[i], "--efficiency"))
      efficiency = 1;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc && row_known(argv[i + 1]))
      only = argv[++i];
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc && atol(argv[i + 1]) > 0 && atol(argv[i + 1]) <= 1L << 24)
      threads = (unsigned)atol(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--reps N] [--quick] [--cpu] [--csv FILE] [--fill-grid FILE] [--efficiency]\n"
              "       [--only 16|64|256|1024|4096|mixed|churn] [--threads N (1 to 2^24)]\n",
              argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  FILE* csv = NULL;
  if (csv_path) {
    csv = fopen(csv_path, "w");
    if (!csv) {
      perror(csv_path);
      return 2;
    }
    fprintf(csv, "workload,threads,bytes,alloc_ms,free_ms,mops\n");
  }
  int rc;
#ifdef GH_STRESS_CUDA
  int n = 0;
  if (grid_path) {
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      fprintf(stderr, "gh_stress --fill-grid needs a CUDA device\n");
      return 2;
    }
    return run_fill_grid(reps, grid_path);
  }
  if (efficiency) {
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      fprintf(stderr, "gh_stress --efficiency needs a CUDA device\n");
      return 2;
    }
    return run_efficiency(reps);
  }
  if (!cpu && cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
    rc = run_gpu(reps, quick, only, threads, csv);
  else
#endif
    rc = run_cpu(reps, quick, only, threads, csv);
  (void)cpu;
  if (csv) fclose(csv);
  printf("%s\n", rc ? "gh_stress: FAILED (NULLs or broken blocks above)" : "gh_stress: all blocks checked, none broken");
  return rc;
}
