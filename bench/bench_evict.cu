/* bench_evict: how fast the tensor manager moves a tensor between HBM and
 * pinned host memory at the same address -- the operation the product does.
 *
 * A tensor manager on the CUDA VMM provider (host/tensor*.c over host/vmm.c)
 * with a device budget large enough for every batch; for each batch size
 * (2 MiB .. 1 GiB) one tensor of that size, and per repetition:
 *   evict    gh_tensor_evict, timed until it returns: the data is on the
 *            host and the host memory is mapped at the tensor's own address;
 *   restore  gh_tensor_prefetch on the tensor's stream + that stream's
 *            synchronization, timed likewise;
 * wall clock (CLOCK_MONOTONIC), the device idle before each. A kernel checks
 * and rewrites the pattern at the same pointers after each move (while the
 * tensor is host-backed, and again on the device); any miss fails the run.
 *
 * The host pool is filled before timing (host_pool_frames = the largest batch
 * in 64 MiB slabs + 16 single frames, and a host budget of exactly that, so
 * the pool thread does not refill it during a measurement): pinning host
 * memory costs ~0.7 ms a frame and the manager does it ahead of need in a
 * background thread. Device allocations are created and released inside
 * the timed operations, as the manager does.
 *
 * The manager's chunk (frames of a large tensor backed by one allocation
 * and moved as one; host/tensor_internal.h) is swept: every size runs with
 * each chunk of --chunks (set through _gh_tmgr_set_chunk, the pool refilled
 * with slabs of that size before timing).
 *
 * Usage: bench_evict [--reps N>=5] [--max-mib M] [--chunks F,F,...] [--csv PATH] [--json PATH] [--probe]
 *   --chunks chunk sizes in frames (default 4,8,16,32; the library default
 *            is always included)
 *   --csv   direction,batch_bytes,gbps  (median of the repetitions, with
 *           the library's default chunk)
 *   --json  min / median / max for every row and chunk, and the probe
 *   --probe also time the driver's VMM calls apart (see probe() below)
 *   --probe-host only: what mapping 64 MiB of host memory costs for each
 *           kind of host allocation (probe_host_kinds() below)
 *   --probe-overlap only: whether remaps wait for or slow running kernels
 *           (probe_overlap() below)
 *   --probe-mover only: whether remaps on a second thread slow the kernel
 *           launches of the first, and what a stream's wait for a host-written
 *           value costs (probe_mover() below)
 *   --probe-inflight only: whether maps and unmaps of memory a copy or a
 *           kernel uses, or of memory beside it, wait for it
 *           (probe_inflight() below)
 *   --probe-engine only: which work in flight makes a map wait, and copies
 *           by kernels against the copy engine (probe_engine() below)
 *   --probe-offset only: whether cuMemMap maps part of a device allocation
 *           (an offset other than 0), and what that costs against mapping
 *           a whole allocation of the same size (probe_offset() below)
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include <string>
#include <thread>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "gpuheap.h"
#include "gpu_util.cuh" /* CUDA_OK, GH_OK_OR_DIE (tests/gpu) */
#include "../host/tensor_internal.h"

#ifndef GH_GIT_REV
#define GH_GIT_REV "unknown"
#endif


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

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---------------------------------------------------------------------------
 * The probe: where the time of a remap goes. The driver directly (through
 * the runtime's entry points, as host/vmm.c reaches it), outside the
 * library: 64 MiB of one tier mapped as 32 allocations of 2 MiB or as one
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
#define PLOAD(field, name) CUDA_OK(cudaGetDriverEntryPointByVersion(#name, (void**)&pd.field, 12000, cudaEnableDefault, &st))
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

/* A pinned allocation's properties at `where` (device 0, or the host), and
 * read-write access for device 0: what every probe maps. */
static CUmemAllocationProp probe_prop(CUmemLocationType where) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  p.location.type = where;
  p.location.id = 0;
  return p;
}

static CUmemAccessDesc probe_access(void) {
  CUmemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = 0;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d;
}

/* Map allocation h whole at va and make it read-write for device 0. */
static void probe_map_rw(CUdeviceptr va, size_t bytes, CUmemGenericAllocationHandle h) {
  const CUmemAccessDesc d = probe_access();
  PCU(pd.map(va, bytes, 0, h, 0));
  PCU(pd.access(va, bytes, &d, 1));
}

/* Map [va, va + n * chunk) from h[0..n), one access call, unmap; seconds of each. */
static void probe_cycle(CUdeviceptr va, const CUmemGenericAllocationHandle* h, size_t n, size_t chunk, double t[3]) {
  const CUmemAccessDesc d = probe_access();
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
      const CUmemAllocationProp p = probe_prop(types[ti]);
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
              CUDA_OK(cudaSetDevice(0));
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

/* --probe-host: does the kind of host allocation change what mapping it
 * costs? 64 MiB of host memory as one allocation of each location type the
 * driver offers (HOST, HOST_NUMA node 0, HOST_NUMA_CURRENT), mapped, one
 * access call, unmapped; medians of reps. A kind the driver refuses is
 * reported with its CUresult. */
static void probe_host_kinds(int reps) {
  probe_load();
  const size_t total = (size_t)64 << 20;
  CUdeviceptr va = 0;
  PCU(pd.reserve(&va, total, total, 0, 0));
  printf("probe-host: 64 MiB of host memory, one allocation, mapped, one access call, unmapped (medians of %d)\n",
         reps);
  printf("%-18s | %9s %9s %9s %9s\n", "location", "create ms", "map ms", "access ms", "unmap ms");
  const struct { CUmemLocationType type; int id; const char* name; } kinds[3] = {
      {CU_MEM_LOCATION_TYPE_HOST, 0, "host"},
      {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, "host_numa 0"},
      {CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0, "host_numa_current"}};
  for (int k = 0; k < 3; k++) {
    CUmemAllocationProp p = probe_prop(kinds[k].type);
    p.location.id = kinds[k].id;
    CUmemGenericAllocationHandle h;
    const double c0 = now_s();
    const CUresult r = pd.create(&h, total, &p, 0);
    const double c1 = now_s();
    if (r != CUDA_SUCCESS) {
      printf("%-18s | refused by cuMemCreate: CUresult %d\n", kinds[k].name, (int)r);
      continue;
    }
    std::vector<double> tm[3];
    for (int i = -1; i < reps; i++) {
      double t[3];
      probe_cycle(va, &h, 1, total, t);
      if (i >= 0)
        for (int j = 0; j < 3; j++) tm[j].push_back(t[j]);
    }
    printf("%-18s | %9.3f %9.3f %9.3f %9.3f\n", kinds[k].name, 1e3 * (c1 - c0), 1e3 * median(tm[0]),
           1e3 * median(tm[1]), 1e3 * median(tm[2]));
    PCU(pd.release(h));
  }
  PCU(pd.addr_free(va, total));
}

/* The evict step under the microscope (64 MiB, the driver directly): the
 * copy device -> host slab alone; the remap alone (unmap the device
 * allocation at home, map the host slab there, one access call); the copy
 * of a second unit timed by events while the first one is remapped, as in
 * the manager's pipeline; cuMemCreate / cuMemRelease of a 64 MiB device
 * allocation. Medians of reps. */
static double evict_probe_ms[6]; /* copy alone, remap, copy during remap, create, release, wall of copy+remap */

static void evict_probe(int reps) {
  const size_t U = (size_t)64 << 20;
  CUdeviceptr va = 0;
  PCU(pd.reserve(&va, 4 * U, U, 0, 0));
  const CUdeviceptr home[2] = {va, va + U}, alias[2] = {va + 2 * U, va + 3 * U};
  const CUmemAllocationProp pdv = probe_prop(CU_MEM_LOCATION_TYPE_DEVICE), phs = probe_prop(CU_MEM_LOCATION_TYPE_HOST);
  const CUmemAccessDesc d = probe_access();
  CUmemGenericAllocationHandle dev[2], host[2];
  for (int k = 0; k < 2; k++) {
    PCU(pd.create(&dev[k], U, &pdv, 0));
    PCU(pd.create(&host[k], U, &phs, 0));
    PCU(pd.map(home[k], U, 0, dev[k], 0));
    PCU(pd.access(home[k], U, &d, 1));
    PCU(pd.map(alias[k], U, 0, host[k], 0));
    PCU(pd.access(alias[k], U, &d, 1));
  }
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::vector<double> t[6];
  for (int r = -1; r < reps; r++) {
    /* Copy alone. */
    CUDA_OK(cudaEventRecord(e0, s));
    CUDA_OK(cudaMemcpyAsync((void*)alias[1], (void*)home[1], U, cudaMemcpyDefault, s));
    CUDA_OK(cudaEventRecord(e1, s));
    CUDA_OK(cudaStreamSynchronize(s));
    float ms_alone = 0;
    CUDA_OK(cudaEventElapsedTime(&ms_alone, e0, e1));
    /* Remap alone: home[0] from its device allocation to host[0], and back (untimed). */
    double w0 = now_s();
    PCU(pd.unmap(home[0], U));
    PCU(pd.map(home[0], U, 0, host[0], 0));
    PCU(pd.access(home[0], U, &d, 1));
    const double remap = now_s() - w0;
    PCU(pd.unmap(home[0], U));
    PCU(pd.map(home[0], U, 0, dev[0], 0));
    PCU(pd.access(home[0], U, &d, 1));
    /* The copy of unit 1 while unit 0 is remapped. */
    w0 = now_s();
    CUDA_OK(cudaEventRecord(e0, s));
    CUDA_OK(cudaMemcpyAsync((void*)alias[1], (void*)home[1], U, cudaMemcpyDefault, s));
    CUDA_OK(cudaEventRecord(e1, s));
    PCU(pd.unmap(home[0], U));
    PCU(pd.map(home[0], U, 0, host[0], 0));
    PCU(pd.access(home[0], U, &d, 1));
    CUDA_OK(cudaStreamSynchronize(s));
    const double wall = now_s() - w0;
    float ms_during = 0;
    CUDA_OK(cudaEventElapsedTime(&ms_during, e0, e1));
    PCU(pd.unmap(home[0], U));
    PCU(pd.map(home[0], U, 0, dev[0], 0));
    PCU(pd.access(home[0], U, &d, 1));
    /* Create and release a device allocation. */
    CUmemGenericAllocationHandle x;
    w0 = now_s();
    PCU(pd.create(&x, U, &pdv, 0));
    const double c = now_s() - w0;
    w0 = now_s();
    PCU(pd.release(x));
    const double rel = now_s() - w0;
    if (r < 0) continue;
    t[0].push_back(ms_alone), t[1].push_back(1e3 * remap), t[2].push_back(ms_during);
    t[3].push_back(1e3 * c), t[4].push_back(1e3 * rel), t[5].push_back(1e3 * wall);
  }
  for (int k = 0; k < 6; k++) evict_probe_ms[k] = median(t[k]);
  printf("evict probe (64 MiB, medians of %d): copy alone %.3f ms, remap (unmap device, map + access host) %.3f ms, "
         "copy during a remap %.3f ms (wall of both %.3f ms), cuMemCreate / cuMemRelease device %.3f / %.3f ms\n",
         reps, evict_probe_ms[0], evict_probe_ms[1], evict_probe_ms[2], evict_probe_ms[5], evict_probe_ms[3],
         evict_probe_ms[4]);
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  CUDA_OK(cudaStreamDestroy(s));
  for (int k = 0; k < 2; k++) {
    PCU(pd.unmap(home[k], U));
    PCU(pd.unmap(alias[k], U));
    PCU(pd.release(dev[k]));
    PCU(pd.release(host[k]));
  }
  PCU(pd.addr_free(va, 4 * U));
}

/* 16 MiB of address space with a device and a host allocation of that
 * size, the device one mapped there: what the remap probes move between. */
typedef struct probe_range_s {
  size_t bytes;
  CUdeviceptr va;
  CUmemGenericAllocationHandle dev, host;
  CUmemAccessDesc d;
} probe_range_t;

static probe_range_t probe_range_open(void) {
  probe_range_t r;
  r.bytes = (size_t)16 << 20;
  r.va = 0;
  PCU(pd.reserve(&r.va, r.bytes, r.bytes, 0, 0));
  const CUmemAllocationProp pdv = probe_prop(CU_MEM_LOCATION_TYPE_DEVICE), phs = probe_prop(CU_MEM_LOCATION_TYPE_HOST);
  r.d = probe_access();
  PCU(pd.create(&r.dev, r.bytes, &pdv, 0));
  PCU(pd.create(&r.host, r.bytes, &phs, 0));
  PCU(pd.map(r.va, r.bytes, 0, r.dev, 0));
  PCU(pd.access(r.va, r.bytes, &r.d, 1));
  return r;
}

/* Remap the range to allocation h (an eviction's remap: to r->host; a
 * restore's: to r->dev). */
static void probe_range_remap(const probe_range_t* r, CUmemGenericAllocationHandle h) {
  PCU(pd.unmap(r->va, r->bytes));
  PCU(pd.map(r->va, r->bytes, 0, h, 0));
  PCU(pd.access(r->va, r->bytes, &r->d, 1));
}

static void probe_range_close(probe_range_t* r) {
  PCU(pd.unmap(r->va, r->bytes));
  PCU(pd.release(r->dev));
  PCU(pd.release(r->host));
  PCU(pd.addr_free(r->va, r->bytes));
}

/* --probe-overlap: can the host remap frames while kernels run, without
 * waiting for them or slowing them? A 16 MiB range is remapped (unmap the
 * device allocation, map a host allocation, one access call, then back)
 * with the GPU idle, while a kernel that only spins runs (~40 ms), and
 * while a kernel streams 1 GiB of other memory; the host calls are timed,
 * and the streaming kernel with and without the remaps beside it. If the
 * driver waited for the kernels, a remap during the spin would take the
 * spin's remaining time. Medians of reps. */
__global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}
__global__ void stream_words(uint64_t* p, size_t words, int passes) {
  for (int k = 0; k < passes; k++)
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
      p[i] = p[i] * 3 + 1;
}

static void probe_overlap(int reps) {
  probe_load();
  probe_range_t rg = probe_range_open();
  const size_t big = (size_t)1 << 30;
  uint64_t* buf = NULL;
  CUDA_OK(cudaMalloc(&buf, big));
  CUDA_OK(cudaMemset(buf, 0, big));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  /* One evict-like remap and one restore-like remap of the range: ms each. */
  auto cycle = [&](double* out_ms, double* back_ms) {
    double w0 = now_s();
    probe_range_remap(&rg, rg.host);
    const double w1 = now_s();
    probe_range_remap(&rg, rg.dev);
    *out_ms = 1e3 * (w1 - w0), *back_ms = 1e3 * (now_s() - w1);
  };
  const int cycles = 8;
  std::vector<double> idle_o, idle_b, spin_o, spin_b, spin_left, st_o, st_b, st_alone, st_with;
  for (int r = -1; r < reps; r++) {
    double o, b;
    cycle(&o, &b);
    if (r >= 0) idle_o.push_back(o), idle_b.push_back(b);
    /* During a 40 ms spin: remaps right after the launch. */
    CUDA_OK(cudaEventRecord(e0, s));
    spin_ns<<<1, 32, 0, s>>>(40ull * 1000 * 1000);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(e1, s));
    const double l0 = now_s();
    double so = 0, sb = 0;
    for (int c = 0; c < cycles; c++) {
      cycle(&o, &b);
      so += o, sb += b;
    }
    const double remaps = 1e3 * (now_s() - l0);
    const int busy = cudaEventQuery(e1) == cudaErrorNotReady;
    CUDA_OK(cudaStreamSynchronize(s));
    const double total = 1e3 * (now_s() - l0);
    if (r >= 0) spin_o.push_back(so / cycles), spin_b.push_back(sb / cycles), spin_left.push_back(busy ? total - remaps : 0);
    /* A streaming kernel alone, then with remaps beside it. */
    float ka = 0, kw = 0;
    CUDA_OK(cudaEventRecord(e0, s));
    stream_words<<<132 * 8, 256, 0, s>>>(buf, big / 8, 8);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(e1, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaEventElapsedTime(&ka, e0, e1));
    CUDA_OK(cudaEventRecord(e0, s));
    stream_words<<<132 * 8, 256, 0, s>>>(buf, big / 8, 8);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(e1, s));
    so = sb = 0;
    for (int c = 0; c < cycles; c++) {
      cycle(&o, &b);
      so += o, sb += b;
    }
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaEventElapsedTime(&kw, e0, e1));
    if (r >= 0) st_o.push_back(so / cycles), st_b.push_back(sb / cycles), st_alone.push_back(ka), st_with.push_back(kw);
  }
  printf("probe-overlap (16 MiB remapped device -> host / host -> device, ms, medians of %d; %d cycles per kernel)\n",
         reps, cycles);
  printf("  GPU idle:            evict-remap %.3f  restore-remap %.3f\n", median(idle_o), median(idle_b));
  printf("  during a 40 ms spin: evict-remap %.3f  restore-remap %.3f  (spin still running after the remaps: "
         "%.1f ms more)\n",
         median(spin_o), median(spin_b), median(spin_left));
  printf("  during a 1 GiB x8 streaming kernel: evict-remap %.3f  restore-remap %.3f; kernel %.3f ms alone, %.3f ms "
         "with the remaps\n",
         median(st_o), median(st_b), median(st_alone), median(st_with));
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(buf));
  probe_range_close(&rg);
}

/* --probe-mover: could a thread of the manager's own do the remaps while
 * the calling thread goes on queuing kernels? (1) Thread A queues 20 000
 * empty kernels, alone and while thread B remaps 16 MiB device <-> host
 * (unmap, map, access) in a loop: µs per launch for A, ms per remap for B,
 * alone and together. (2) A stream waits (cuStreamWaitValue32, >=) for a
 * word of pinned host memory that the host writes 2 ms later: the delay
 * from the write to an event after the wait. Medians of reps. */
__global__ void empty_kernel(void) {}

static void probe_mover(int reps) {
  probe_load();
  PFN_cuStreamWaitValue32_v11070 waitv = NULL;
  enum cudaDriverEntryPointQueryResult q;
  CUDA_OK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", (void**)&waitv, 12000, cudaEnableDefault, &q));
  probe_range_t rg = probe_range_open();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int launches = 20000;
  auto launch_us = [&]() {
    const double t0 = now_s();
    for (int i = 0; i < launches; i++) empty_kernel<<<1, 32, 0, s>>>();
    CUDA_OK(cudaGetLastError());
    const double t = now_s() - t0;
    CUDA_OK(cudaStreamSynchronize(s));
    return 1e6 * t / launches;
  };
  /* One remap there and back: ms. */
  auto remap_ms = [&]() {
    const double w0 = now_s();
    probe_range_remap(&rg, rg.host);
    probe_range_remap(&rg, rg.dev);
    return 1e3 * (now_s() - w0);
  };
  std::vector<double> a_alone, a_with, b_alone, b_with;
  for (int r = -1; r < reps; r++) {
    const double la = launch_us();
    double bs = 0;
    for (int i = 0; i < 20; i++) bs += remap_ms();
    volatile int stop = 0;
    std::vector<double> bt;
    std::thread th([&] {
      CUDA_OK(cudaSetDevice(0));
      while (!stop) bt.push_back(remap_ms());
    });
    const double lw = launch_us();
    stop = 1;
    th.join();
    if (r >= 0) {
      a_alone.push_back(la), a_with.push_back(lw), b_alone.push_back(bs / 20);
      b_with.push_back(bt.empty() ? 0 : median(bt));
    }
  }
  printf("probe-mover (medians of %d): launch %.2f us alone, %.2f us while another thread remaps; remap there and "
         "back %.3f ms alone, %.3f ms while the other thread launches\n",
         reps, median(a_alone), median(a_with), median(b_alone), median(b_with));
  /* (2) a stream's wait for a host-written value. */
  uint32_t* flag = NULL;
  CUDA_OK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  uint32_t* dflag = NULL;
  CUDA_OK(cudaHostGetDevicePointer((void**)&dflag, flag, 0));
  cudaEvent_t e;
  CUDA_OK(cudaEventCreate(&e));
  std::vector<double> delay;
  for (int r = 0; r < reps; r++) {
    __atomic_store_n(flag, (uint32_t)(2 * r), __ATOMIC_SEQ_CST);
    PCU(waitv((CUstream)s, (CUdeviceptr)(uintptr_t)dflag, (cuuint32_t)(2 * r + 1), CU_STREAM_WAIT_VALUE_GEQ));
    empty_kernel<<<1, 32, 0, s>>>();
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(e, s));
    const double t0 = now_s();
    while (now_s() - t0 < 2e-3) {}
    const int early = cudaEventQuery(e) == cudaSuccess;
    const double w = now_s();
    __atomic_store_n(flag, (uint32_t)(2 * r + 1), __ATOMIC_SEQ_CST);
    while (cudaEventQuery(e) == cudaErrorNotReady) {}
    delay.push_back(1e6 * (now_s() - w));
    if (early) printf("probe-mover: the stream passed its wait before the value was written (rep %d)\n", r);
  }
  printf("probe-mover: a stream waiting for a host-written word goes on %.1f us after the write (median; max %.1f)\n",
         median(delay), *std::max_element(delay.begin(), delay.end()));
  CUDA_OK(cudaEventDestroy(e));
  CUDA_OK(cudaFreeHost(flag));
  CUDA_OK(cudaStreamDestroy(s));
  probe_range_close(&rg);
}

/* --probe-inflight: does a map or unmap of memory that a copy is using
 * wait for the copy? What the training run's timing by call site suggests
 * (bench/results/logs-8d54eab-sites: with homeless evictions a new run
 * mapping a spare whose eviction copy still runs took 0.69 ms a call
 * against 0.09). A device allocation X of 36 MiB (a chunk of 18 frames) is
 * mapped at a home H and at an alias A; a copy of 36 MiB reads A into
 * pinned host memory (or writes A from it), and right after queuing it the
 * host times, with the copy still running: unmapping H, then mapping X at
 * a third address N with its access call. Against the same calls with the
 * GPU idle. Then the kernel launches of another thread while this one
 * repeats the in-flight map: if the driver held its lock while it waits,
 * they would stall. Medians of reps, ms. */
static void probe_inflight(int reps) {
  probe_load();
  const size_t bytes = (size_t)36 << 20;
  const CUmemAllocationProp pdv = probe_prop(CU_MEM_LOCATION_TYPE_DEVICE);
  const CUmemAccessDesc d = probe_access();
  CUdeviceptr base = 0;
  PCU(pd.reserve(&base, 5 * bytes, 2 << 20, 0, 0));
  const CUdeviceptr H = base, A = base + bytes, N = base + 2 * bytes, Y = base + 3 * bytes;
  CUmemGenericAllocationHandle x, y;
  PCU(pd.create(&x, bytes, &pdv, 0));
  PCU(pd.create(&y, bytes, &pdv, 0));
  probe_map_rw(Y, bytes, y);
  probe_map_rw(H, bytes, x);
  probe_map_rw(A, bytes, x);
  void* hbuf = NULL;
  CUDA_OK(cudaHostAlloc(&hbuf, bytes, cudaHostAllocDefault));
  cudaStream_t cs;
  CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  /* kind 0: GPU idle; 1: a copy reads X; 2: a copy writes X; 3: a copy
   * reads another allocation Y; 4: a kernel reads and writes X (through A);
   * 5: a kernel reads and writes Y. unmap_home: H unmapped first (an
   * eviction's home), else only N mapped. t[0] unmap H, t[1] map N +
   * access, t[2] the copy's or kernel's remaining time after the calls. */
  const size_t words = bytes / sizeof(uint64_t);
  auto once = [&](int kind, int unmap_home, double t[3]) {
    if (kind == 1) CUDA_OK(cudaMemcpyAsync(hbuf, (void*)A, bytes, cudaMemcpyDeviceToHost, cs));
    if (kind == 2) CUDA_OK(cudaMemcpyAsync((void*)A, hbuf, bytes, cudaMemcpyHostToDevice, cs));
    if (kind == 3) CUDA_OK(cudaMemcpyAsync(hbuf, (void*)Y, bytes, cudaMemcpyDeviceToHost, cs));
    if (kind == 4 || kind == 5) {
      stream_words<<<264, 256, 0, cs>>>((uint64_t*)(kind == 4 ? A : Y), words, 40);
      CUDA_OK(cudaGetLastError());
    }
    const double t0 = now_s();
    if (unmap_home) PCU(pd.unmap(H, bytes));
    const double t1 = now_s();
    PCU(pd.map(N, bytes, 0, x, 0));
    PCU(pd.access(N, bytes, &d, 1));
    const double t2 = now_s();
    CUDA_OK(cudaStreamSynchronize(cs));
    const double t3 = now_s();
    t[0] = 1e3 * (t1 - t0), t[1] = 1e3 * (t2 - t1), t[2] = 1e3 * (t3 - t2);
    PCU(pd.unmap(N, bytes));
    if (unmap_home) {
      PCU(pd.map(H, bytes, 0, x, 0));
      PCU(pd.access(H, bytes, &d, 1));
    }
  };
  const char* kinds[6] = {"GPU idle",          "a copy reading it",  "a copy writing it",
                          "a copy reading Y",  "a kernel using it",  "a kernel using Y"};
  printf("probe-inflight: 36 MiB device allocation, medians of %d (ms)\n", reps);
  for (int kind = 0; kind < 6; kind++)
    for (int uh = 1; uh >= 0; uh--) {
      std::vector<double> a, b, c;
      for (int r = -1; r < reps; r++) {
        double t[3];
        once(kind, uh, t);
        if (r >= 0) a.push_back(t[0]), b.push_back(t[1]), c.push_back(t[2]);
      }
      printf("probe-inflight: %-18s %s unmap home %.3f, map elsewhere + access %.3f, copy left after them %.3f\n",
             kinds[kind], uh ? "home unmapped first:" : "home kept mapped:  ", uh ? median(a) : 0.0, median(b),
             median(c));
    }
  /* Maps of idle memory on this thread while another thread maps and
   * unmaps other memory in a loop: whether the driver's calls on two
   * threads wait for each other. */
  {
    const CUdeviceptr Z = base + 4 * bytes;
    std::vector<double> b;
    volatile int stop = 0;
    std::thread th([&] {
      CUDA_OK(cudaSetDevice(0));
      while (!stop) {
        PCU(pd.map(Z, bytes, 0, y, 0));
        PCU(pd.access(Z, bytes, &d, 1));
        PCU(pd.unmap(Z, bytes));
      }
    });
    for (int r = 0; r < reps; r++) {
      double t[3];
      once(0, 0, t);
      b.push_back(t[1]);
    }
    stop = 1;
    th.join();
    printf("probe-inflight: map elsewhere + access %.3f while another thread maps and unmaps other memory\n",
           median(b));
  }
  /* Launches of another thread while this one maps in flight. */
  cudaStream_t ks;
  CUDA_OK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
  const int launches = 5000;
  std::vector<double> alone, with;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    for (int i = 0; i < launches; i++) empty_kernel<<<1, 32, 0, ks>>>();
    CUDA_OK(cudaGetLastError());
    alone.push_back(1e6 * (now_s() - t0) / launches);
    CUDA_OK(cudaStreamSynchronize(ks));
    volatile int stop = 0;
    std::thread th([&] {
      CUDA_OK(cudaSetDevice(0));
      double t[3];
      while (!stop) once(1, 1, t);
    });
    double lmax = 0;
    t0 = now_s();
    for (int i = 0; i < launches; i++) {
      const double l0 = now_s();
      empty_kernel<<<1, 32, 0, ks>>>();
      const double l = now_s() - l0;
      if (l > lmax) lmax = l;
    }
    CUDA_OK(cudaGetLastError());
    with.push_back(1e6 * (now_s() - t0) / launches);
    stop = 1;
    th.join();
    CUDA_OK(cudaStreamSynchronize(ks));
    printf("probe-inflight: rep %d: the longest launch beside in-flight maps %.3f ms\n", r, 1e3 * lmax);
  }
  printf("probe-inflight: a launch %.2f us alone, %.2f us while another thread maps memory a copy reads\n",
         median(alone), median(with));
  CUDA_OK(cudaStreamDestroy(ks));
  CUDA_OK(cudaStreamDestroy(cs));
  CUDA_OK(cudaFreeHost(hbuf));
  PCU(pd.unmap(H, bytes));
  PCU(pd.unmap(A, bytes));
  PCU(pd.unmap(Y, bytes));
  PCU(pd.release(x));
  PCU(pd.release(y));
  PCU(pd.addr_free(base, 5 * bytes));
}

typedef struct row_s {
  size_t chunk;
  const char* direction;
  size_t bytes;
  double med_s, min_s, max_s;
} row_t;

static unsigned long long check(uint64_t* p, size_t bytes, uint64_t tag, uint64_t tag2, cudaStream_t s,
                                unsigned long long* d_bad) {
  CUDA_OK(cudaMemsetAsync(d_bad, 0, sizeof *d_bad, s));
  check_rewrite<<<132 * 8, 256, 0, s>>>(p, bytes / 8, tag, tag2, d_bad);
  CUDA_OK(cudaGetLastError());
  unsigned long long bad = 0;
  CUDA_OK(cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  return bad;
}

/* --probe-engine: what in flight makes a map wait (probe_inflight found
 * that a device-to-host copy of any memory does, a kernel does not), and
 * what a copy by a kernel (SMs writing host memory through its device
 * address) runs at. Each map: a 36 MiB device allocation X mapped at a free
 * address, then its access call, timed apart; medians of reps (ms). */
__global__ void sm_copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

static void probe_engine(int reps) {
  probe_load();
  const size_t bytes = (size_t)36 << 20;
  const CUmemAllocationProp pdv = probe_prop(CU_MEM_LOCATION_TYPE_DEVICE);
  const CUmemAllocationProp phs = probe_prop(CU_MEM_LOCATION_TYPE_HOST);
  const CUmemAccessDesc d = probe_access();
  CUdeviceptr base = 0;
  PCU(pd.reserve(&base, 5 * bytes, 2 << 20, 0, 0));
  const CUdeviceptr N = base, Y = base + bytes, Y2 = base + 2 * bytes, NH = base + 3 * bytes, HA = base + 4 * bytes;
  CUmemGenericAllocationHandle x, y, y2, hx, ha;
  PCU(pd.create(&x, bytes, &pdv, 0));
  PCU(pd.create(&y, bytes, &pdv, 0));
  PCU(pd.create(&y2, bytes, &pdv, 0));
  PCU(pd.create(&hx, bytes, &phs, 0));
  PCU(pd.create(&ha, bytes, &phs, 0));
  probe_map_rw(HA, bytes, ha);
  probe_map_rw(Y, bytes, y);
  probe_map_rw(Y2, bytes, y2);
  void* hbuf = NULL;
  CUDA_OK(cudaHostAlloc(&hbuf, bytes, cudaHostAllocDefault));
  void* hdev = NULL;
  CUDA_OK(cudaHostGetDevicePointer(&hdev, hbuf, 0));
  cudaStream_t cs, cs2;
  CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&cs2, cudaStreamNonBlocking));
  const size_t n16 = bytes / 16;
  /* what: 0 idle; 1 one D2H copy of Y; 2 four D2H copies of Y/4 queued;
   * 3 two D2H copies of Y/2 on two streams; 4 a D2D copy Y -> Y2; 5 a
   * kernel copying Y to host memory (66 blocks); 6 an H2D copy into Y;
   * 7 a copy of Y to host memory mapped by the driver at HA (as the
   * manager's aliases, cudaMemcpyDefault); 8 a kernel of 8 blocks copying
   * Y to HA.
   * host: map host memory (hx) instead of X. t: map, access, left. */
  auto once = [&](int what, int host, double t[3]) {
    const CUdeviceptr at = host ? NH : N;
    switch (what) {
      case 1: CUDA_OK(cudaMemcpyAsync(hbuf, (void*)Y, bytes, cudaMemcpyDeviceToHost, cs)); break;
      case 2:
        for (int k = 0; k < 4; k++)
          CUDA_OK(cudaMemcpyAsync((char*)hbuf + k * (bytes / 4), (char*)Y + k * (bytes / 4), bytes / 4,
                                  cudaMemcpyDeviceToHost, cs));
        break;
      case 3:
        CUDA_OK(cudaMemcpyAsync(hbuf, (void*)Y, bytes / 2, cudaMemcpyDeviceToHost, cs));
        CUDA_OK(cudaMemcpyAsync((char*)hbuf + bytes / 2, (char*)Y + bytes / 2, bytes / 2, cudaMemcpyDeviceToHost, cs2));
        break;
      case 4: CUDA_OK(cudaMemcpyAsync((void*)Y2, (void*)Y, bytes, cudaMemcpyDeviceToDevice, cs)); break;
      case 5:
        sm_copy16<<<66, 512, 0, cs>>>((const uint4*)Y, (uint4*)hdev, n16);
        CUDA_OK(cudaGetLastError());
        break;
      case 6: CUDA_OK(cudaMemcpyAsync((void*)Y, hbuf, bytes, cudaMemcpyHostToDevice, cs)); break;
      case 7: CUDA_OK(cudaMemcpyAsync((void*)HA, (void*)Y, bytes, cudaMemcpyDefault, cs)); break;
      case 8:
        sm_copy16<<<8, 512, 0, cs>>>((const uint4*)Y, (uint4*)HA, n16);
        CUDA_OK(cudaGetLastError());
        break;
      default: break;
    }
    const double t0 = now_s();
    PCU(pd.map(at, bytes, 0, host ? hx : x, 0));
    const double t1 = now_s();
    PCU(pd.access(at, bytes, &d, 1));
    const double t2 = now_s();
    CUDA_OK(cudaStreamSynchronize(cs));
    CUDA_OK(cudaStreamSynchronize(cs2));
    const double t3 = now_s();
    t[0] = 1e3 * (t1 - t0), t[1] = 1e3 * (t2 - t1), t[2] = 1e3 * (t3 - t2);
    PCU(pd.unmap(at, bytes));
  };
  const char* whats[9] = {"GPU idle",   "one D2H copy",  "four D2H copies queued", "D2H on two streams",
                          "a D2D copy", "a kernel copying to host", "an H2D copy", "a copy to mapped host",
                          "8 blocks copying to mapped host"};
  printf("probe-engine: a 36 MiB allocation mapped while other memory is in flight, medians of %d (ms)\n", reps);
  for (int host = 0; host < 2; host++)
    for (int w = 0; w < 9; w++) {
      std::vector<double> a, b, c;
      for (int r = -1; r < reps; r++) {
        double t[3];
        once(w, host, t);
        if (r >= 0) a.push_back(t[0]), b.push_back(t[1]), c.push_back(t[2]);
      }
      printf("probe-engine: %s memory, %-26s map %.3f access %.3f, the work left after them %.3f\n",
             host ? "host  " : "device", whats[w], median(a), median(b), median(c));
    }
  /* Copy rates: the copy engine against kernels of B blocks, both ways,
   * 36 MiB x 8 a rep. */
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  const int blocks[] = {0, 4, 8, 16, 33, 66, 132};
  for (int dir = 0; dir < 2; dir++)
    for (int bi = 0; bi < (int)(sizeof blocks / sizeof blocks[0]); bi++) {
      std::vector<double> g;
      for (int r = -1; r < reps; r++) {
        CUDA_OK(cudaEventRecord(e0, cs));
        for (int k = 0; k < 8; k++) {
          if (blocks[bi] == 0)
            CUDA_OK(cudaMemcpyAsync(dir ? (void*)Y : hbuf, dir ? hbuf : (void*)Y, bytes,
                                    dir ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, cs));
          else
            sm_copy16<<<blocks[bi], 512, 0, cs>>>(dir ? (const uint4*)hdev : (const uint4*)Y,
                                                  dir ? (uint4*)Y : (uint4*)hdev, n16);
        }
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaEventRecord(e1, cs));
        CUDA_OK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) g.push_back(8.0 * bytes / (ms * 1e6));
      }
      printf("probe-engine: %s %-14s %6.2f GB/s (min %.2f max %.2f)\n", dir ? "H2D" : "D2H",
             blocks[bi] ? (std::to_string(blocks[bi]) + " blocks").c_str() : "copy engine", median(g),
             *std::min_element(g.begin(), g.end()), *std::max_element(g.begin(), g.end()));
    }
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  CUDA_OK(cudaStreamDestroy(cs));
  CUDA_OK(cudaStreamDestroy(cs2));
  CUDA_OK(cudaFreeHost(hbuf));
  PCU(pd.unmap(Y, bytes));
  PCU(pd.unmap(Y2, bytes));
  PCU(pd.unmap(HA, bytes));
  PCU(pd.release(ha));
  PCU(pd.release(x));
  PCU(pd.release(y));
  PCU(pd.release(y2));
  PCU(pd.release(hx));
  PCU(pd.addr_free(base, 5 * bytes));
}

/* --probe-offset: whether the driver maps part of an allocation. The
 * manager backs every unit with whole allocations, so a run of 9 frames
 * and a chunk of 18 trade memory through cuMemRelease and cuMemCreate
 * (bench/NOTES.md, host side, rows 66 and 83); with maps at an offset one
 * 18-frame allocation could back two 9-frame units. The driver's
 * documentation has said the offset "must be zero" and, later, that it
 * must be a multiple of the granularity: this asks the driver on hand.
 * One device allocation of 2 * half bytes: its second half mapped alone
 * (offset = half), filled through that mapping, and read back through a
 * mapping of the whole allocation (the bytes must be the second half's);
 * then map + access + unmap of the half at its offset against a whole
 * allocation of `half` bytes at offset 0 (medians of reps). */
static void probe_offset(int reps) {
  probe_load();
  const size_t half = (size_t)18 << 20, whole = 2 * half;
  const CUmemAllocationProp p = probe_prop(CU_MEM_LOCATION_TYPE_DEVICE);
  const CUmemAccessDesc d = probe_access();
  CUmemGenericAllocationHandle big = 0, small = 0;
  PCU(pd.create(&big, whole, &p, 0));
  PCU(pd.create(&small, half, &p, 0));
  CUdeviceptr va = 0, vb = 0;
  PCU(pd.reserve(&va, whole, (size_t)2 << 20, 0, 0));
  PCU(pd.reserve(&vb, whole, (size_t)2 << 20, 0, 0));
  const CUresult r = pd.map(va, half, half, big, 0);
  printf("probe-offset: cuMemMap of %zu MiB at offset %zu MiB of a %zu MiB device allocation: CUresult %d (%s)\n",
         half >> 20, half >> 20, whole >> 20, (int)r, r == CUDA_SUCCESS ? "mapped" : "refused");
  if (r == CUDA_SUCCESS) {
    PCU(pd.access(va, half, &d, 1));
    const size_t words = half / sizeof(uint64_t);
    fill_words<<<264, 256>>>((uint64_t*)(uintptr_t)va, words, 0x5eedULL);
    CUDA_OK(cudaDeviceSynchronize());
    probe_map_rw(vb, whole, big);
    std::vector<uint64_t> back(words);
    CUDA_OK(cudaMemcpy(back.data(), (const void*)(uintptr_t)(vb + half), half, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < words; i++) bad += back[i] != (0x5eedULL ^ (i * 0x9e3779b97f4a7c15ull));
    printf("probe-offset: the bytes written through the offset mapping, read at offset %zu MiB of the whole one: "
           "%zu of %zu words differ (%s)\n", half >> 20, bad, words, bad ? "NOT the second half" : "the second half");
    PCU(pd.unmap(vb, whole));
    PCU(pd.unmap(va, half));
    std::vector<double> t[2][3];
    for (int k = -1; k < reps; k++)
      for (int which = 0; which < 2; which++) {  /* 0: part of big at its offset, 1: small whole */
        const double t0 = now_s();
        PCU(pd.map(va, half, which ? 0 : half, which ? small : big, 0));
        const double t1 = now_s();
        PCU(pd.access(va, half, &d, 1));
        const double t2 = now_s();
        PCU(pd.unmap(va, half));
        const double t3 = now_s();
        if (k < 0) continue;
        t[which][0].push_back(t1 - t0), t[which][1].push_back(t2 - t1), t[which][2].push_back(t3 - t2);
      }
    for (int which = 0; which < 2; which++)
      printf("probe-offset: %s: map %.1f us, access %.1f us, unmap %.1f us (medians of %d)\n",
             which ? "a whole 18 MiB allocation     " : "18 MiB of 36 MiB at its offset", 1e6 * median(t[which][0]),
             1e6 * median(t[which][1]), 1e6 * median(t[which][2]), reps);
  }
  PCU(pd.addr_free(va, whole));
  PCU(pd.addr_free(vb, whole));
  PCU(pd.release(big));
  PCU(pd.release(small));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int reps = 7;
  size_t max_mib = 1024;
  const char* csv_path = NULL;
  const char* json_path = NULL;
  int do_probe = 0, probe_host = 0, probe_ovl = 0, probe_mov = 0, probe_inf = 0, probe_eng = 0, probe_off = 0;
  std::vector<size_t> chunks = {4, 8, 16, 32};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--chunks") && i + 1 < argc) {
      chunks.clear();
      for (char* t = strtok(argv[++i], ","); t; t = strtok(NULL, ",")) chunks.push_back((size_t)atol(t));
    }
    else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc) max_mib = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--probe")) do_probe = 1;
    else if (!strcmp(argv[i], "--probe-host")) probe_host = 1;
    else if (!strcmp(argv[i], "--probe-overlap")) probe_ovl = 1;
    else if (!strcmp(argv[i], "--probe-mover")) probe_mov = 1;
    else if (!strcmp(argv[i], "--probe-inflight")) probe_inf = 1;
    else if (!strcmp(argv[i], "--probe-engine")) probe_eng = 1;
    else if (!strcmp(argv[i], "--probe-offset")) probe_off = 1;
    else {
      fprintf(stderr, "usage: %s [--reps N>=5] [--max-mib M] [--chunks F,...] [--csv PATH] [--json PATH] [--probe] "
              "[--probe-host] [--probe-overlap] [--probe-mover] [--probe-inflight] [--probe-engine] [--probe-offset]\n",
              argv[0]);
      return 2;
    }
  }
  if (reps < 5) reps = 5;
  if (max_mib < 2) max_mib = 2;
  if (std::find(chunks.begin(), chunks.end(), GH_TM_CHUNK_DEFAULT) == chunks.end()) chunks.push_back(GH_TM_CHUNK_DEFAULT);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("bench_evict: no CUDA device, nothing to measure\n");
    return 77;
  }
  CUDA_OK(cudaSetDevice(0));
  if (probe_host || probe_ovl || probe_mov || probe_inf || probe_eng || probe_off) {
    CUDA_OK(cudaFree(0)); /* a context for the driver calls */
    if (probe_host) probe_host_kinds(reps);
    if (probe_ovl) probe_overlap(reps);
    if (probe_mov) probe_mover(reps);
    if (probe_inf) probe_inflight(reps);
    if (probe_eng) probe_engine(reps);
    if (probe_off) probe_offset(reps);
    return 0;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  CUDA_OK(cudaDriverGetVersion(&driver));
  CUDA_OK(cudaRuntimeGetVersion(&runtime));

  /* The manager: device budget for the largest batch twice over; host pool
   * and budget = the largest batch in 64 MiB slabs + 16 single frames. */
  const size_t F = (size_t)2 << 20, slab_mib = 64;
  const size_t slabs = (max_mib + slab_mib - 1) / slab_mib; /* in 64 MiB, a multiple of every chunk swept */
  const size_t pool_frames = slabs * (slab_mib << 20) / F + 16;
  gh_tmgr_options_t o;
  gh_tmgr_options_init(&o);
  o.backend = GH_BACKEND_CUDA_VMM;
  o.device = 0;
  o.device_budget = (2 * max_mib << 20) + ((size_t)512 << 20);
  o.host_budget = pool_frames * F;
  o.host_pool_frames = (uint32_t)pool_frames;
  gh_tmgr_t* tm = NULL;
  GH_OK_OR_DIE(gh_tmgr_create(&tm, &o));
  gh_tmgr_stats_t st;
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &st));
  printf("bench_evict: %s, driver %d, runtime %d, frame %zu KiB, %d reps, rev %s\n", prop.name, driver, runtime,
         st.frame_bytes >> 10, reps, GH_GIT_REV);
  double pool_s = 0;

  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned long long* d_bad;
  CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));

  const size_t sizes_mib[] = {2, 8, 32, 64, 128, 256, 512, 1024};
  std::vector<row_t> rows;
  unsigned long long misses = 0, stat_errors = 0;
  uint64_t tag = 0x1000;
  for (size_t chunk : chunks) {
  GH_OK_OR_DIE(_gh_tmgr_set_chunk(tm, chunk)); /* gives the pool's slabs back; the pool thread makes new ones */
  const double tp0 = now_s();
  for (;;) { /* the pool thread fills the pool */
    GH_OK_OR_DIE(gh_tmgr_stats(tm, &st));
    if (st.host_pool_frames >= pool_frames || now_s() - tp0 > 300) break;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (chunk == GH_TM_CHUNK_DEFAULT) pool_s = now_s() - tp0;
  printf("chunk %zu frames: host pool %zu of %zu frames (16 single frames + slabs of %zu MiB) filled in %.2f s\n",
         chunk, st.host_pool_frames, pool_frames, chunk * F >> 20, now_s() - tp0);
  if (st.host_pool_frames < pool_frames) {
    fprintf(stderr, "bench_evict: the host pool did not fill\n");
    return 2;
  }
  printf("%-6s %-7s %9s %9s %9s %9s %9s\n", "chunk", "dir", "MiB", "GB/s med", "GB/s min", "GB/s max", "ms med");
  for (size_t si = 0; si < sizeof sizes_mib / sizeof sizes_mib[0]; si++) {
    if (sizes_mib[si] > max_mib) continue;
    const size_t bytes = sizes_mib[si] << 20;
    void* p = NULL;
    GH_OK_OR_DIE(gh_tensor_alloc(tm, bytes, GH_KIND_ACTIVATIONS, (gh_stream_t)s, &p));
    uint64_t* w = (uint64_t*)p;
    std::vector<double> t[2];
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
      fill_words<<<132 * 8, 256, 0, s>>>(w, bytes / 8, tag);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaStreamSynchronize(s));
      gh_tmgr_stats_t a, b;
      GH_OK_OR_DIE(gh_tmgr_stats(tm, &a));
      const double e0 = now_s();
      GH_OK_OR_DIE(gh_tensor_evict(tm, p));
      const double e1 = now_s();
      GH_OK_OR_DIE(gh_tmgr_stats(tm, &b));
      gh_tier_t tier = GH_TIER_NONE;
      GH_OK_OR_DIE(gh_tensor_tier(tm, p, &tier));
      stat_errors += tier != GH_TIER_HOST || b.bytes_evicted - a.bytes_evicted != bytes;
      misses += check(w, bytes, tag, tag + 1, s, d_bad); /* host-backed, same pointers */
      const double r0 = now_s();
      GH_OK_OR_DIE(gh_tensor_prefetch(tm, p, (gh_stream_t)s));
      CUDA_OK(cudaStreamSynchronize(s));
      const double r1 = now_s();
      GH_OK_OR_DIE(gh_tmgr_stats(tm, &a));
      GH_OK_OR_DIE(gh_tensor_tier(tm, p, &tier));
      stat_errors += tier != GH_TIER_DEVICE || a.bytes_restored - b.bytes_restored != bytes;
      misses += check(w, bytes, tag + 1, tag + 2, s, d_bad); /* back in HBM */
      tag += 4;
      if (r >= 0) t[0].push_back(e1 - e0), t[1].push_back(r1 - r0);
    }
    GH_OK_OR_DIE(gh_tensor_free(tm, p, (gh_stream_t)s));
    CUDA_OK(cudaStreamSynchronize(s));
    GH_OK_OR_DIE(gh_tmgr_maintain(tm));
    for (int d = 0; d < 2; d++) {
      row_t row;
      row.chunk = chunk;
      row.direction = d == 0 ? "evict" : "restore";
      row.bytes = bytes;
      row.med_s = median(t[d]);
      row.min_s = *std::min_element(t[d].begin(), t[d].end());
      row.max_s = *std::max_element(t[d].begin(), t[d].end());
      rows.push_back(row);
      printf("%-6zu %-7s %9zu %9.2f %9.2f %9.2f %9.3f\n", chunk, row.direction, bytes >> 20, bytes / row.med_s / 1e9,
             bytes / row.max_s / 1e9, bytes / row.min_s / 1e9, 1e3 * row.med_s);
    }
  }
  }
  GH_OK_OR_DIE(gh_tmgr_stats(tm, &st));
  printf("manager: %llu frames evicted, %llu restored; host pool %zu frames at the end\n",
         (unsigned long long)st.evictions, (unsigned long long)st.restores, st.host_pool_frames);
  GH_OK_OR_DIE(gh_tmgr_destroy(tm));
  if (do_probe) {
    probe(reps);
    evict_probe(reps);
  }
  printf("verification: %llu word(s) wrong, %llu tier/statistics mismatch(es) over all repetitions%s\n", misses,
         stat_errors, misses || stat_errors ? "  <-- FAILED" : "");

  if (csv_path) {
    FILE* c = fopen(csv_path, "w");
    if (!c) {
      perror(csv_path);
      return 2;
    }
    fprintf(c, "direction,batch_bytes,gbps\n");
    for (const row_t& r : rows)
      if (r.chunk == GH_TM_CHUNK_DEFAULT) fprintf(c, "%s,%zu,%.3f\n", r.direction, r.bytes, r.bytes / r.med_s / 1e9);
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
            GH_GIT_REV, F);
    fprintf(j,
            "  \"reps\": %d,\n  \"timing\": \"wall clock around gh_tensor_evict (returns with the data on the host, "
            "mapped at home) and around gh_tensor_prefetch + stream sync; one tensor per batch; device idle before; "
            "host pool pre-filled (%zu frames: 16 single frames + slabs of one chunk; %.2f s with the default "
            "chunk), untimed\",\n  \"default_chunk_frames\": %zu,\n",
            reps, pool_frames, pool_s, GH_TM_CHUNK_DEFAULT);
    fprintf(j, "  \"verified\": %s,\n  \"rows\": [\n", misses || stat_errors ? "false" : "true");
    for (size_t i = 0; i < rows.size(); i++) {
      const row_t& r = rows[i];
      fprintf(j,
              "    {\"chunk_frames\": %zu, \"direction\": \"%s\", \"batch_bytes\": %zu, \"gbps_median\": %.3f, "
              "\"gbps_min\": %.3f, \"gbps_max\": %.3f, \"ms_median\": %.4f, \"ms_min\": %.4f, \"ms_max\": %.4f}%s\n",
              r.chunk, r.direction, r.bytes, r.bytes / r.med_s / 1e9, r.bytes / r.max_s / 1e9, r.bytes / r.min_s / 1e9,
              1e3 * r.med_s, 1e3 * r.min_s, 1e3 * r.max_s, i + 1 < rows.size() ? "," : "");
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
    fprintf(j, "  ]");
    if (do_probe)
      fprintf(j,
              ",\n  \"evict_probe_64MiB_ms_median\": {\"copy_alone\": %.4f, \"remap\": %.4f, \"copy_during_remap\": %.4f, "
              "\"copy_and_remap_wall\": %.4f, \"device_create\": %.4f, \"device_release\": %.4f}",
              evict_probe_ms[0], evict_probe_ms[1], evict_probe_ms[2], evict_probe_ms[5], evict_probe_ms[3],
              evict_probe_ms[4]);
    fprintf(j, "\n}\n");
    fclose(j);
  }
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(d_bad));
  return misses || stat_errors ? 1 : 0;
}
