/* bench_evict: how fast frames move between HBM and pinned host memory at
 * the same address, through the VMM frame provider (host/vmm.c).
 *
 * For batches of 2 MiB .. 1 GiB of frames it times
 *   evict    host frames mapped at a staging window of the range, the batch
 *            copied home -> staging on a dedicated stream, stream synced,
 *            the device frames unmapped at home, the host frames mapped at
 *            home (one access call for the contiguous batch), the staging
 *            window unmapped;
 *   restore  the same with device frames in place of host frames;
 * wall-clock (CLOCK_MONOTONIC) around the whole operation, the device idle
 * before it. Creating frames is not timed: both tiers' frames come from pools
 * created ahead (a host frame costs ~750 us to create and pin; the tensor
 * manager keeps such a pool), and the frames set free by an operation go back
 * to their pool untimed instead of being released.
 *
 * Two variants: "full" as above (the CSV), and "prestaged", where the pools'
 * frames stay mapped in windows of the range for good, so that an operation
 * is copy + sync + unmap home + map home (a frame may be mapped at two
 * addresses at once). The phases (stage, copy+sync, remap, unstage) are timed
 * too.
 *
 * Every repetition writes a fresh pattern before the eviction; a kernel
 * checks and rewrites it at the same pointers while the batch is host-backed,
 * and again after the restore. Any miss fails the run (exit status 1).
 *
 * Usage: bench_evict [--reps N] [--max-mib M] [--csv PATH] [--json PATH] [--probe]
 *   --csv   direction,batch_bytes,gbps  (the "full" variant, median)
 *   --json  min / median / max and phase medians for every row and variant
 *   --probe also time the driver's VMM calls apart (see probe() below)
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include <thread>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "../host/frames.h"

#ifndef GH_GIT_REV
#define GH_GIT_REV "unknown"
#endif

static const gh_frames_ops_t* ops = &_gh_frames_vmm;

#define FOK(call)                                                                                          \
  do {                                                                                                     \
    const int e_ = (call);                                                                                 \
    if (e_ != GH_OK) {                                                                                     \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, gh_err_name(e_), gh_last_error_detail()); \
      exit(2);                                                                                             \
    }                                                                                                      \
  } while (0)
#define COK(call)                                                                              \
  do {                                                                                         \
    const cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

__global__ void fill_words(uint64_t* p, size_t words, uint64_t tag) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = tag ^ (i * 0x9e3779b97f4a7c15ull);
}
/* Check the pattern of tag, count misses, write the pattern of tag2. */
__global__ void check_rewrite(uint64_t* p, size_t words, uint64_t tag, uint64_t tag2, unsigned long long* bad) {
  unsigned long long miss = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t h = i * 0x9e3779b97f4a7c15ull;
    miss += p[i] != (tag ^ h);
    p[i] = tag2 ^ h;
  }
  if (miss) atomicAdd(bad, miss);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { PH_STAGE, PH_COPY, PH_REMAP, PH_UNSTAGE, PH_COUNT };
static const char* phase_names[PH_COUNT] = {"stage", "copy", "remap", "unstage"};

typedef struct bench_s {
  gh_frames_t* f;
  uint8_t* base;
  size_t F;        /* frame bytes */
  size_t M;        /* frames of the largest batch */
  uint8_t* home;   /* frames [0, M) */
  uint8_t* stage;  /* frames [M, 2M): the staging window of the full variant */
  uint8_t* hwin;   /* frames [2M, 3M): the host pool, prestaged */
  uint8_t* dwin;   /* frames [3M, 4M): the device pool, prestaged */
  gh_stream_t s;
  std::vector<gh_pframe_t> at_home;  /* the frames mapped at home, in order */
  std::vector<gh_pframe_t> dpool;    /* device frames not at home */
  std::vector<gh_pframe_t> hpool;    /* host frames not at home */
  unsigned long long* d_bad;
} bench_t;

/* Move frames [0, b) of home to the other tier, taking the new frames from
 * the front of `pool` (host frames to evict, device frames to restore); ph
 * receives the phases' seconds. */
static double move(bench_t* B, size_t b, int to_host, int prestaged, double ph[PH_COUNT]) {
  std::vector<gh_pframe_t>& pool = to_host ? B->hpool : B->dpool;
  uint8_t* win = prestaged ? (to_host ? B->hwin : B->dwin) : B->stage;
  COK(cudaDeviceSynchronize());
  const double t0 = now_s();
  if (!prestaged) FOK(ops->map(B->f, win, pool.data(), b));
  const double t1 = now_s();
  FOK(ops->copy(B->f, win, B->home, b * B->F, B->s));
  FOK(ops->stream_sync(B->f, B->s));
  const double t2 = now_s();
  FOK(ops->unmap(B->f, B->home, b));
  FOK(ops->map(B->f, B->home, pool.data(), b));
  const double t3 = now_s();
  if (!prestaged) FOK(ops->unmap(B->f, win, b));
  const double t4 = now_s();
  ph[PH_STAGE] = t1 - t0;
  ph[PH_COPY] = t2 - t1;
  ph[PH_REMAP] = t3 - t2;
  ph[PH_UNSTAGE] = t4 - t3;
  /* Untimed bookkeeping. Full variant: the frames now at home leave their
   * pool and the ones that left home join the pool of their tier. Prestaged:
   * the pools' frames stay mapped in their windows and serve every
   * operation, so the pools do not change. */
  std::vector<gh_pframe_t> old(B->at_home.begin(), B->at_home.begin() + (ptrdiff_t)b);
  std::copy(pool.begin(), pool.begin() + (ptrdiff_t)b, B->at_home.begin());
  if (!prestaged) {
    pool.erase(pool.begin(), pool.begin() + (ptrdiff_t)b);
    std::vector<gh_pframe_t>& back = to_host ? B->dpool : B->hpool;
    back.insert(back.end(), old.begin(), old.end());
  }
  return t4 - t0;
}

static unsigned long long check(bench_t* B, size_t b, uint64_t tag, uint64_t tag2) {
  COK(cudaMemset(B->d_bad, 0, sizeof *B->d_bad));
  check_rewrite<<<132 * 8, 256>>>((uint64_t*)B->home, b * B->F / 8, tag, tag2, B->d_bad);
  COK(cudaGetLastError());
  COK(cudaDeviceSynchronize());
  unsigned long long bad = 0;
  COK(cudaMemcpy(&bad, B->d_bad, sizeof bad, cudaMemcpyDeviceToHost));
  return bad;
}

typedef struct row_s {
  const char* variant;
  const char* direction;
  size_t bytes;
  double med_s, min_s, max_s;
  double phase_med_s[PH_COUNT];
} row_t;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---------------------------------------------------------------------------
 * The probe: where the time of a remap goes. The driver directly (through
 * the runtime's entry points, as host/vmm.c reaches it), outside the
 * provider: 64 MiB of one tier mapped as 32 allocations of 2 MiB or as one
 * of 64 MiB, cuMemMap, one cuMemSetAccess and one cuMemUnmap timed apart;
 * and the 2 MiB case split over 1 or 4 threads, to see whether the driver
 * runs VMM calls in parallel.
 * ------------------------------------------------------------------------ */

static struct probe_drv_s {
  PFN_cuMemCreate_v10020 create;
  PFN_cuMemRelease_v10020 release;
  PFN_cuMemMap_v10020 map;
  PFN_cuMemUnmap_v10020 unmap;
  PFN_cuMemSetAccess_v10020 access;
  PFN_cuMemAddressReserve_v10020 reserve;
  PFN_cuMemAddressFree_v10020 addr_free;
} pd;

#define PCU(call)                                                                        \
  do {                                                                                   \
    const CUresult r_ = (call);                                                          \
    if (r_ != CUDA_SUCCESS) {                                                            \
      fprintf(stderr, "%s:%d: %s: CUresult %d\n", __FILE__, __LINE__, #call, (int)r_);   \
      exit(2);                                                                           \
    }                                                                                    \
  } while (0)

static void probe_load(void) {
  enum cudaDriverEntryPointQueryResult st;
#define PLOAD(field, name) COK(cudaGetDriverEntryPointByVersion(#name, (void**)&pd.field, 12000, cudaEnableDefault, &st))
  PLOAD(create, cuMemCreate);
  PLOAD(release, cuMemRelease);
  PLOAD(map, cuMemMap);
  PLOAD(unmap, cuMemUnmap);
  PLOAD(access, cuMemSetAccess);
  PLOAD(reserve, cuMemAddressReserve);
  PLOAD(addr_free, cuMemAddressFree);
#undef PLOAD
}

typedef struct probe_row_s {
  const char* tier;
  size_t alloc_bytes;
  int threads;
  double create_ms, map_ms, access_ms, unmap_ms; /* medians, for the 64 MiB */
} probe_row_t;

static std::vector<probe_row_t> probe_rows;

/* Map [va, va + n * chunk) from h[0..n), one access call, unmap; seconds of each. */
static void probe_cycle(CUdeviceptr va, const CUmemGenericAllocationHandle* h, size_t n, size_t chunk, double t[3]) {
  CUmemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = 0;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const double t0 = now_s();
  for (size_t i = 0; i < n; i++) PCU(pd.map(va + i * chunk, chunk, 0, h[i], 0));
  const double t1 = now_s();
  PCU(pd.access(va, n * chunk, &d, 1));
  const double t2 = now_s();
  PCU(pd.unmap(va, n * chunk));
  const double t3 = now_s();
  t[0] = t1 - t0;
  t[1] = t2 - t1;
  t[2] = t3 - t2;
}

static void probe(int reps) {
  probe_load();
  const size_t total = (size_t)64 << 20;
  CUdeviceptr va = 0;
  PCU(pd.reserve(&va, total, total, 0, 0));
  printf("probe: 64 MiB mapped, one access call, unmapped (medians of %d)\n", reps);
  printf("%-7s %10s %7s | %9s %9s %9s %9s | %12s\n", "tier", "alloc MiB", "threads", "create ms", "map ms",
         "access ms", "unmap ms", "us per 2 MiB");
  const CUmemLocationType types[2] = {CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_HOST};
  for (int ti = 0; ti < 2; ti++) {
    const size_t chunks[3] = {(size_t)2 << 20, (size_t)2 << 20, total};
    const int threads[3] = {1, 4, 1};
    for (int ci = 0; ci < 3; ci++) {
      const size_t chunk = chunks[ci], n = total / chunk;
      const int T = threads[ci];
      CUmemAllocationProp p;
      memset(&p, 0, sizeof p);
      p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
      p.location.type = types[ti];
      p.location.id = 0;
      std::vector<CUmemGenericAllocationHandle> h(n);
      const double c0 = now_s();
      for (size_t i = 0; i < n; i++) PCU(pd.create(&h[i], chunk, &p, 0));
      const double c1 = now_s();
      std::vector<double> tm[3];
      for (int r = -1; r < reps; r++) {
        double t[3] = {0, 0, 0};
        if (T == 1) {
          probe_cycle(va, h.data(), n, chunk, t);
        } else {
          /* Each thread its share of the range, all phases together. */
          const double w0 = now_s();
          std::vector<std::thread> th;
          for (int k = 0; k < T; k++)
            th.emplace_back([&, k] {
              COK(cudaSetDevice(0));
              double tk[3];
              const size_t per = n / (size_t)T;
              probe_cycle(va + (size_t)k * per * chunk, h.data() + (size_t)k * per, per, chunk, tk);
            });
          for (auto& x : th) x.join();
          t[0] = now_s() - w0; /* the whole cycle, wall clock, in the map column */
        }
        if (r >= 0)
          for (int k = 0; k < 3; k++) tm[k].push_back(t[k]);
      }
      probe_row_t row;
      row.tier = ti == 0 ? "device" : "host";
      row.alloc_bytes = chunk;
      row.threads = T;
      row.create_ms = 1e3 * (c1 - c0);
      row.map_ms = 1e3 * median(tm[0]);
      row.access_ms = 1e3 * median(tm[1]);
      row.unmap_ms = 1e3 * median(tm[2]);
      probe_rows.push_back(row);
      printf("%-7s %10zu %7d | %9.3f %9.3f %9.3f %9.3f | %12.1f%s\n", row.tier, chunk >> 20, T, row.create_ms,
             row.map_ms, row.access_ms, row.unmap_ms,
             1e3 * (row.map_ms + row.access_ms + row.unmap_ms) / (double)(total >> 21),
             T > 1 ? "  (map column: whole cycle, wall clock)" : "");
      for (size_t i = 0; i < n; i++) PCU(pd.release(h[i]));
    }
  }
  PCU(pd.addr_free(va, total));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int reps = 7;
  size_t max_mib = 1024;
  const char* csv_path = NULL;
  const char* json_path = NULL;
  int do_probe = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc) max_mib = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--probe")) do_probe = 1;
    else {
      fprintf(stderr, "usage: %s [--reps N>=5] [--max-mib M] [--csv PATH] [--json PATH] [--probe]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 5) reps = 5;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("bench_evict: no CUDA device, nothing to measure\n");
    return 77;
  }
  cudaDeviceProp prop;
  COK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  COK(cudaDriverGetVersion(&driver));
  COK(cudaRuntimeGetVersion(&runtime));

  const size_t sizes_mib[] = {2, 8, 32, 64, 128, 256, 512, 1024};
  bench_t B;
  B.f = NULL;
  FOK(ops->open(&B.f, 0, ((size_t)4 * max_mib) << 20, &B.base, &B.F));
  B.M = (max_mib << 20) / B.F;
  if (B.M == 0) B.M = 1;
  B.home = B.base;
  B.stage = B.base + B.M * B.F;
  B.hwin = B.base + 2 * B.M * B.F;
  B.dwin = B.base + 3 * B.M * B.F;
  FOK(ops->stream_create(B.f, &B.s));
  COK(cudaMalloc(&B.d_bad, sizeof *B.d_bad));
  printf("bench_evict: %s, driver %d, runtime %d, frame %zu KiB, largest batch %zu frames, %d reps, rev %s\n",
         prop.name, driver, runtime, B.F >> 10, B.M, reps, GH_GIT_REV);

  /* The pools, untimed. */
  const double tc0 = now_s();
  B.at_home.resize(B.M);
  B.dpool.resize(B.M);
  B.hpool.resize(B.M);
  for (size_t i = 0; i < B.M; i++) FOK(ops->create(B.f, GH_TIER_DEVICE, &B.at_home[i]));
  for (size_t i = 0; i < B.M; i++) FOK(ops->create(B.f, GH_TIER_DEVICE, &B.dpool[i]));
  const double tc1 = now_s();
  for (size_t i = 0; i < B.M; i++) FOK(ops->create(B.f, GH_TIER_HOST, &B.hpool[i]));
  const double tc2 = now_s();
  printf("pools: %zu device frames in %.1f ms (%.1f us each), %zu host frames in %.1f ms (%.1f us each)\n", 2 * B.M,
         1e3 * (tc1 - tc0), 1e6 * (tc1 - tc0) / (double)(2 * B.M), B.M, 1e3 * (tc2 - tc1),
         1e6 * (tc2 - tc1) / (double)B.M);
  FOK(ops->map(B.f, B.home, B.at_home.data(), B.M));

  std::vector<row_t> rows;
  unsigned long long misses = 0;
  uint64_t tag = 0x1000;
  printf("%-9s %-7s %9s %9s %9s %9s %9s | %8s %8s %8s %8s (ms, medians)\n", "variant", "dir", "MiB", "GB/s med",
         "GB/s min", "GB/s max", "ms med", "stage", "copy", "remap", "unstage");
  for (int prestaged = 0; prestaged <= 1; prestaged++) {
    if (prestaged) {
      /* The pools' frames mapped in their windows for good (untimed). */
      if (B.hpool.size() != B.M || B.dpool.size() != B.M) {
        fprintf(stderr, "bench_evict: pools of %zu / %zu frames, expected %zu\n", B.hpool.size(), B.dpool.size(), B.M);
        return 2;
      }
      FOK(ops->map(B.f, B.hwin, B.hpool.data(), B.M));
      FOK(ops->map(B.f, B.dwin, B.dpool.data(), B.M));
    }
    for (size_t si = 0; si < sizeof sizes_mib / sizeof sizes_mib[0]; si++) {
      if (sizes_mib[si] > max_mib) continue;
      const size_t b = (sizes_mib[si] << 20) / B.F ? (sizes_mib[si] << 20) / B.F : 1;
      const size_t bytes = b * B.F;
      std::vector<double> t[2], ph[2][PH_COUNT];
      for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        double p[PH_COUNT];
        fill_words<<<132 * 8, 256>>>((uint64_t*)B.home, bytes / 8, tag);
        COK(cudaGetLastError());
        const double te = move(&B, b, 1, prestaged, p);
        if (r >= 0) {
          t[0].push_back(te);
          for (int k = 0; k < PH_COUNT; k++) ph[0][k].push_back(p[k]);
        }
        misses += check(&B, b, tag, tag + 1); /* host-backed, same pointers */
        const double tr = move(&B, b, 0, prestaged, p);
        if (r >= 0) {
          t[1].push_back(tr);
          for (int k = 0; k < PH_COUNT; k++) ph[1][k].push_back(p[k]);
        }
        misses += check(&B, b, tag + 1, tag + 2); /* back in HBM */
        tag += 4;
      }
      for (int d = 0; d < 2; d++) {
        row_t row;
        row.variant = prestaged ? "prestaged" : "full";
        row.direction = d == 0 ? "evict" : "restore";
        row.bytes = bytes;
        row.med_s = median(t[d]);
        row.min_s = *std::min_element(t[d].begin(), t[d].end());
        row.max_s = *std::max_element(t[d].begin(), t[d].end());
        for (int k = 0; k < PH_COUNT; k++) row.phase_med_s[k] = median(ph[d][k]);
        rows.push_back(row);
        printf("%-9s %-7s %9zu %9.2f %9.2f %9.2f %9.3f | %8.3f %8.3f %8.3f %8.3f\n", row.variant, row.direction,
               bytes >> 20, bytes / row.med_s / 1e9, bytes / row.max_s / 1e9, bytes / row.min_s / 1e9,
               1e3 * row.med_s, 1e3 * row.phase_med_s[0], 1e3 * row.phase_med_s[1], 1e3 * row.phase_med_s[2],
               1e3 * row.phase_med_s[3]);
      }
    }
  }
  if (do_probe) probe(reps);
  printf("verification: %llu word(s) wrong over all repetitions%s\n", misses, misses ? "  <-- FAILED" : "");

  if (csv_path) {
    FILE* c = fopen(csv_path, "w");
    if (!c) {
      perror(csv_path);
      return 2;
    }
    fprintf(c, "direction,batch_bytes,gbps\n");
    for (const row_t& r : rows)
      if (!strcmp(r.variant, "full")) fprintf(c, "%s,%zu,%.3f\n", r.direction, r.bytes, r.bytes / r.med_s / 1e9);
    fclose(c);
  }
  if (json_path) {
    FILE* j = fopen(json_path, "w");
    if (!j) {
      perror(json_path);
      return 2;
    }
    char date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(j, "{\n  \"bench\": \"bench_evict\",\n  \"date\": \"%s\",\n  \"gpu\": \"%s\",\n", date, prop.name);
    fprintf(j, "  \"driver\": %d,\n  \"runtime\": %d,\n  \"rev\": \"%s\",\n  \"frame_bytes\": %zu,\n", driver, runtime,
            GH_GIT_REV, B.F);
    fprintf(j, "  \"reps\": %d,\n  \"timing\": \"wall clock around the whole operation, device idle before; pools "
               "created ahead, untimed\",\n  \"verified\": %s,\n  \"rows\": [\n", reps, misses ? "false" : "true");
    for (size_t i = 0; i < rows.size(); i++) {
      const row_t& r = rows[i];
      fprintf(j,
              "    {\"variant\": \"%s\", \"direction\": \"%s\", \"batch_bytes\": %zu, \"gbps_median\": %.3f, "
              "\"gbps_min\": %.3f, \"gbps_max\": %.3f, \"ms_median\": %.4f, \"ms_min\": %.4f, \"ms_max\": %.4f, "
              "\"phase_ms_median\": {",
              r.variant, r.direction, r.bytes, r.bytes / r.med_s / 1e9, r.bytes / r.max_s / 1e9,
              r.bytes / r.min_s / 1e9, 1e3 * r.med_s, 1e3 * r.min_s, 1e3 * r.max_s);
      for (int k = 0; k < PH_COUNT; k++)
        fprintf(j, "\"%s\": %.4f%s", phase_names[k], 1e3 * r.phase_med_s[k], k + 1 < PH_COUNT ? ", " : "");
      fprintf(j, "}}%s\n", i + 1 < rows.size() ? "," : "");
    }
    fprintf(j, "  ],\n  \"probe\": [\n");
    for (size_t i = 0; i < probe_rows.size(); i++) {
      const probe_row_t& r = probe_rows[i];
      fprintf(j,
              "    {\"tier\": \"%s\", \"alloc_bytes\": %zu, \"threads\": %d, \"bytes\": %zu, \"create_ms\": %.4f, "
              "\"map_ms_median\": %.4f, \"access_ms_median\": %.4f, \"unmap_ms_median\": %.4f}%s\n",
              r.tier, r.alloc_bytes, r.threads, (size_t)64 << 20, r.create_ms, r.map_ms, r.access_ms, r.unmap_ms,
              i + 1 < probe_rows.size() ? "," : "");
    }
    fprintf(j, "  ]\n}\n");
    fclose(j);
  }
  FOK(ops->stream_destroy(B.f, B.s));
  COK(cudaFree(B.d_bad));
  FOK(ops->close(B.f)); /* unmaps and releases the pools too */
  return misses ? 1 : 0;
}
