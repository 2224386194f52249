/* gpuheap: frames from the CUDA virtual-memory API, the only file of the
 * library that calls cuMem* (and the driver API at all, through entry points
 * the runtime hands out: see "The driver API" below).
 *
 * Same-address tiering. One VA range is reserved per provider
 * (cuMemAddressReserve); physical allocations of one or more 2 MiB frames
 * are created either in HBM (cuMemCreate at CU_MEM_LOCATION_TYPE_DEVICE) or
 * in pinned host memory (cuMemCreate at CU_MEM_LOCATION_TYPE_HOST) and
 * mapped whole at any frame of the range. A kernel reaches a host-located frame over PCIe through the same
 * device pointer, so moving a frame between tiers changes no pointer:
 *
 *   evict(home)   map host frames at a staging address of the range; copy
 *                 home -> staging on a stream; wait for that stream; unmap
 *                 home; map the host frames at home; unmap staging; release
 *                 (or pool) the device frames.
 *   restore(home) the same with device frames in place of host frames.
 *
 * A physical frame may be mapped at two addresses at once (staging and
 * home), which is what makes the copy possible before the remap. Only the
 * work that touches the moved frames must be finished first: VMM calls do
 * not wait for kernels running on other frames.
 *
 * Costs measured on the H200 (DESIGN.md, CUDA 13.0, driver 580):
 *   cuMemCreate        12 us a device frame, 751 us a host frame (pinning):
 *                      the caller pools host frames ahead of need;
 *   cuMemMap 1.3 us, cuMemSetAccess 28.6 us, cuMemUnmap 29 us (one frame);
 *                      32 frames with one cuMemSetAccess over the range take
 *                      0.80 ms against 1.45 ms with one call a frame, hence
 *                      one access call per map() whatever n is;
 *   kernels read / write host-located frames at 50.7 / 52.4 GB/s, and
 *   copies between device and host frames run at 54-55 GB/s both ways.
 * And by bench/bench_evict --probe (bench/results/evict-h200.md): over 32
 * frames, cuMemSetAccess costs 21 us a device frame and 48 us a host frame,
 * cuMemUnmap 14 / 27 us, cuMemMap 0.6 us; a single 64 MiB allocation remaps
 * ~30x (device) / ~3.5x (host) faster than 32 of 2 MiB: the cost is per
 * mapping, and the driver runs no two VMM calls in parallel. Moving 2 MiB
 * frames one mapping each therefore runs at 15-23 GB/s (the copy alone at
 * 54 GB/s, 39 us a frame, against ~60-70 us of remap).
 *
 * Physical allocations of several frames ("slabs", frames.h) make the
 * remap cheap: the probe above, per 2 MiB, 35.6 us (device) / 76 us (host)
 * of map + access + unmap with one allocation a frame, 1.1 / 22 us with one
 * allocation of 64 MiB. cuMemMap maps a whole allocation (offset 0: the
 * H200's driver 580 refuses part of one, CUDA_ERROR_NOT_SUPPORTED, as
 * `bench_evict --probe-offset` found; bench/NOTES.md, host side, row 85)
 * and cuMemUnmap must cover whole mappings, so the bookkeeping records
 * where each mapping starts.
 *
 * Bookkeeping (all host-side, serialized by the caller as frames.h says):
 * a bitmap of the range's frames that are mapped, a bitmap of the frames
 * where a mapping starts, the allocation mapped at each start and, per
 * allocation, its tier, its size in frames and how many addresses map it.
 * Every call checks its arguments against these before it touches the
 * driver (GH_ERR_INVAL for a map outside the range, unaligned, or over a
 * mapped frame, an unmap of an unmapped frame or one that would split a
 * mapping, the release of an allocation still mapped, an unknown handle),
 * and close() unmaps and releases whatever is left. The tables hold what is
 * in use, not the range: reserving terabytes costs two bits a frame.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include "frames.h"
#include "internal.h"

/* ---------------------------------------------------------------------------
 * The driver API, reached through the runtime's entry-point query rather
 * than by linking libcuda: the library then loads on machines without a
 * driver (CI), where the runtime reports "no device" and the tests skip.
 * The ABI asked for is CUDA 12.0's, the one these declarations describe.
 * ------------------------------------------------------------------------ */

#define VMM_DRIVER_ABI 12000

#define VMM_DRIVER_FUNCTIONS(X)                      \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000)        \
  X(cuGetErrorString, PFN_cuGetErrorString_v6000)    \
  X(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000)      \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000)              \
  X(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000) \
  X(cuMemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020) \
  X(cuMemAddressReserve, PFN_cuMemAddressReserve_v10020) \
  X(cuMemAddressFree, PFN_cuMemAddressFree_v10020)   \
  X(cuMemCreate, PFN_cuMemCreate_v10020)             \
  X(cuMemRelease, PFN_cuMemRelease_v10020)           \
  X(cuMemMap, PFN_cuMemMap_v10020)                   \
  X(cuMemUnmap, PFN_cuMemUnmap_v10020)               \
  X(cuMemSetAccess, PFN_cuMemSetAccess_v10020)      \
  X(cuStreamWaitValue32, PFN_cuStreamWaitValue32_v11070) \
  X(cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000)

static struct vmm_driver_s {
#define VMM_FIELD(name, type) type name;
  VMM_DRIVER_FUNCTIONS(VMM_FIELD)
#undef VMM_FIELD
  int err;                /* GH_OK once every function was found */
  char missing[64];       /* the first one that was not */
  cudaError_t cuda_err;   /* what the runtime said about it */
} vmm_drv;

static pthread_once_t vmm_drv_once = PTHREAD_ONCE_INIT;

static void vmm_driver_load(void) {
  enum cudaDriverEntryPointQueryResult status;
  cudaError_t e;
#define VMM_LOAD(name, type)                                                                             \
  e = cudaGetDriverEntryPointByVersion(#name, (void**)&vmm_drv.name, VMM_DRIVER_ABI, cudaEnableDefault, &status); \
  if (e != cudaSuccess || status != cudaDriverEntryPointSuccess || vmm_drv.name == NULL) {              \
    strncpy(vmm_drv.missing, #name, sizeof vmm_drv.missing - 1);                                        \
    vmm_drv.cuda_err = e;                                                                                \
    vmm_drv.err = GH_ERR_UNSUPPORTED;                                                                    \
    return;                                                                                              \
  }
  VMM_DRIVER_FUNCTIONS(VMM_LOAD)
#undef VMM_LOAD
  vmm_drv.err = GH_OK;
}

/* Find the driver's functions (once per process). */
static int vmm_driver(void) {
  if (pthread_once(&vmm_drv_once, vmm_driver_load) != 0) return _gh_error(GH_ERR_CUDA, "vmm: pthread_once failed");
  if (vmm_drv.err == GH_OK) return GH_OK;
  if (vmm_drv.cuda_err != cudaSuccess) return _gh_cuda_error((int)vmm_drv.cuda_err, vmm_drv.missing, __FILE__, __LINE__);
  return _gh_error(vmm_drv.err, "vmm: the driver lacks %s", vmm_drv.missing);
}

/* ---------------------------------------------------------------------------
 * Errors of the driver API
 * ------------------------------------------------------------------------ */

/* Record a failed driver call; CUDA_ERROR_OUT_OF_MEMORY becomes `nomem`
 * (GH_ERR_DEVICE_NOMEM, or GH_ERR_NOMEM for host frames). */
static int vmm_cu_error(CUresult r, int nomem, const char* what, int line) {
  const char* name = NULL;
  const char* text = NULL;
  if (vmm_drv.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "CUDA_ERROR_?";
  if (vmm_drv.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = "unknown driver error";
  int err = GH_ERR_CUDA;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) err = nomem;
  if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE) err = GH_ERR_NO_DEVICE;
  return _gh_error(err, "%s:%d: %s: %s (%s)", __FILE__, line, what, text, name);
}

/* Check a driver call; on failure record it and return its GH_ERR_*. */
#define VMM_CU_TRY(call)                                                          \
  do {                                                                            \
    const CUresult vmm_r_ = (call);                                               \
    if (vmm_r_ != CUDA_SUCCESS) return vmm_cu_error(vmm_r_, GH_ERR_DEVICE_NOMEM, #call, __LINE__); \
  } while (0)

/* ---------------------------------------------------------------------------
 * A small map from 64-bit keys to 64-bit values: open addressing, linear
 * probing, load at most 1/2, deletion by backward shift (no tombstones).
 * ------------------------------------------------------------------------ */

typedef struct vmm_slot_s {
  uint64_t key;
  uint64_t val;
  uint8_t used;
} vmm_slot_t;

typedef struct vmm_table_s {
  vmm_slot_t* slots;
  size_t cap; /* a power of two, or 0 */
  size_t count;
} vmm_table_t;

static size_t vmm_hash(uint64_t k) {
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  k ^= k >> 31;
  return (size_t)k;
}

static vmm_slot_t* vmm_table_find(const vmm_table_t* t, uint64_t key) {
  if (t->cap == 0) return NULL;
  for (size_t i = vmm_hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    if (!t->slots[i].used) return NULL;
    if (t->slots[i].key == key) return &t->slots[i];
  }
}

/* Insert a key known to be absent; room was made by vmm_table_reserve. */
static void vmm_table_put(vmm_table_t* t, uint64_t key, uint64_t val) {
  size_t i = vmm_hash(key) & (t->cap - 1);
  while (t->slots[i].used) i = (i + 1) & (t->cap - 1);
  t->slots[i].key = key;
  t->slots[i].val = val;
  t->slots[i].used = 1;
  t->count++;
}

/* Make room for `more` insertions, so that they cannot fail afterwards. */
static int vmm_table_reserve(vmm_table_t* t, size_t more) {
  if (more > SIZE_MAX / 4 - t->count) return _gh_error(GH_ERR_NOMEM, "vmm: table of %zu entries", t->count);
  const size_t need = 2 * (t->count + more);
  if (need <= t->cap) return GH_OK;
  size_t cap = t->cap ? t->cap : 64;
  while (cap < need) cap *= 2;
  vmm_slot_t* slots = (vmm_slot_t*)_gh_calloc(cap, sizeof *slots);
  if (slots == NULL) return _gh_error(GH_ERR_NOMEM, "vmm: table of %zu slots", cap);
  vmm_table_t bigger = {slots, cap, 0};
  for (size_t i = 0; i < t->cap; i++)
    if (t->slots[i].used) vmm_table_put(&bigger, t->slots[i].key, t->slots[i].val);
  free(t->slots);
  *t = bigger;
  return GH_OK;
}

static void vmm_table_remove(vmm_table_t* t, vmm_slot_t* s) {
  const size_t mask = t->cap - 1;
  size_t hole = (size_t)(s - t->slots);
  /* Shift later members of the probe chain back over the hole, as long as
   * the hole lies between their home slot and where they sit. */
  for (size_t j = (hole + 1) & mask; t->slots[j].used; j = (j + 1) & mask) {
    const size_t home = vmm_hash(t->slots[j].key) & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      t->slots[hole] = t->slots[j];
      hole = j;
    }
  }
  t->slots[hole].used = 0;
  t->count--;
}

static void vmm_table_free(vmm_table_t* t) {
  free(t->slots);
  memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------------------
 * The provider
 * ------------------------------------------------------------------------ */

/* An allocation's record in `phys`: its tier in bits 0-7, the number of
 * addresses that map it in bits 8-31, its size in frames in bits 32-63. */
#define VMM_TIER(v) ((gh_tier_t)((v) & 0xffu))
#define VMM_MAPS(v) (((v) >> 8) & 0xffffffu)
#define VMM_FRAMES(v) ((size_t)((v) >> 32))
#define VMM_ONE_MAP ((uint64_t)1 << 8)
#define VMM_MAX_MAPS 0xffffffu

struct gh_frames_s {
  int device;
  CUcontext ctx;       /* the device's primary context */
  CUdeviceptr base;    /* the reserved range: [base, base + frames * frame) */
  size_t frame;        /* bytes a frame: the granularity of both tiers */
  size_t frames;       /* frames in the range */
  int host_ok;         /* host-located frames are supported */
  uint64_t* mapped;    /* bit i: frame i of the range is mapped */
  uint64_t* head;      /* bit i: a mapping starts at frame i */
  vmm_table_t at;      /* index of a mapping's first frame -> the gh_pframe_t mapped there */
  vmm_table_t phys;    /* gh_pframe_t -> tier | maps << 8 | frames << 32, for every live allocation */
};

/* Calls run in the device's primary context; make it current on threads
 * where it is not (this also makes f->device the runtime's current device). */
static int vmm_enter(gh_frames_t* f) {
  CUcontext cur = NULL;
  VMM_CU_TRY(vmm_drv.cuCtxGetCurrent(&cur));
  if (cur != f->ctx) GH_CUDA_TRY(cudaSetDevice(f->device));
  return GH_OK;
}

static int vmm_test(const uint64_t* b, size_t i) { return (int)((b[i / 64] >> (i % 64)) & 1u); }
static void vmm_set(uint64_t* b, size_t i) { b[i / 64] |= (uint64_t)1 << (i % 64); }
static void vmm_clear(uint64_t* b, size_t i) { b[i / 64] &= ~((uint64_t)1 << (i % 64)); }
static int vmm_bit(const gh_frames_t* f, size_t i) { return vmm_test(f->mapped, i); }

/* The index of the frame at va for an n-frame range inside the reserved
 * one, or GH_ERR_INVAL. */
static int vmm_range(const gh_frames_t* f, const uint8_t* va, size_t n, size_t* first) {
  const uintptr_t a = (uintptr_t)va;
  if (f == NULL || n == 0) return _gh_error(GH_ERR_INVAL, "vmm: %s", f == NULL ? "no provider" : "zero frames");
  if (a < (uintptr_t)f->base || (a - (uintptr_t)f->base) % f->frame != 0)
    return _gh_error(GH_ERR_INVAL, "vmm: %p is not a frame of the range [%p, +%zu frames)", (const void*)va,
                     (void*)(uintptr_t)f->base, f->frames);
  const size_t i = (a - (uintptr_t)f->base) / f->frame;
  if (i >= f->frames || n > f->frames - i)
    return _gh_error(GH_ERR_INVAL, "vmm: frames [%zu, +%zu) outside the range of %zu frames", i, n, f->frames);
  *first = i;
  return GH_OK;
}

static int vmm_granularity(CUmemLocationType type, int id, size_t* g) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  p.location.type = type;
  p.location.id = id;
  const CUresult r = vmm_drv.cuMemGetAllocationGranularity(g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return vmm_cu_error(r, GH_ERR_DEVICE_NOMEM, "cuMemGetAllocationGranularity", __LINE__);
  return GH_OK;
}

static int vmm_open(gh_frames_t** out, int device, size_t va_bytes, uint8_t** base, size_t* frame_bytes) {
  if (out == NULL || base == NULL || frame_bytes == NULL || va_bytes == 0 || device < -1)
    return _gh_error(GH_ERR_INVAL, "vmm_open: bad arguments (device %d, %zu bytes)", device, va_bytes);
  /* The primary context of the device (-1: the current one), current on
   * this thread. */
  if (device < 0)
    GH_CUDA_TRY(cudaGetDevice(&device));
  else
    GH_CUDA_TRY(cudaSetDevice(device));
  GH_CUDA_TRY(cudaFree(0));
  const int derr = vmm_driver();
  if (derr != GH_OK) return derr;
  CUdevice dev;
  VMM_CU_TRY(vmm_drv.cuDeviceGet(&dev, device));
  int vmm_ok = 0;
  VMM_CU_TRY(vmm_drv.cuDeviceGetAttribute(&vmm_ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  if (!vmm_ok) return _gh_error(GH_ERR_UNSUPPORTED, "vmm: device %d lacks the virtual-memory API", device);

  gh_frames_t* f = (gh_frames_t*)_gh_calloc(1, sizeof *f);
  if (f == NULL) return _gh_error(GH_ERR_NOMEM, "vmm: %zu bytes of host memory", sizeof *f);
  f->device = device;
  int err = GH_OK;
  CUresult r = vmm_drv.cuCtxGetCurrent(&f->ctx);
  if (r != CUDA_SUCCESS) {
    err = vmm_cu_error(r, GH_ERR_DEVICE_NOMEM, "cuCtxGetCurrent", __LINE__);
    goto fail;
  }
  /* A frame is the larger of the two tiers' granularities (both powers of
   * two, 2 MiB on the H200), so that any frame of the range takes either. */
  err = vmm_granularity(CU_MEM_LOCATION_TYPE_DEVICE, device, &f->frame);
  if (err != GH_OK) goto fail;
  size_t host_g = 0;
  f->host_ok = vmm_granularity(CU_MEM_LOCATION_TYPE_HOST, 0, &host_g) == GH_OK && host_g != 0;
  if (f->host_ok && host_g > f->frame) f->frame = host_g;
  if (va_bytes > SIZE_MAX - f->frame) {
    err = _gh_error(GH_ERR_INVAL, "vmm: %zu bytes of address space", va_bytes);
    goto fail;
  }
  f->frames = (va_bytes + f->frame - 1) / f->frame;
  f->mapped = (uint64_t*)_gh_calloc((f->frames + 63) / 64, sizeof(uint64_t));
  f->head = (uint64_t*)_gh_calloc((f->frames + 63) / 64, sizeof(uint64_t));
  if (f->mapped == NULL || f->head == NULL) {
    err = _gh_error(GH_ERR_NOMEM, "vmm: bitmap of %zu frames", f->frames);
    goto fail;
  }
  r = vmm_drv.cuMemAddressReserve(&f->base, f->frames * f->frame, f->frame, 0, 0);
  if (r != CUDA_SUCCESS) {
    f->base = 0;
    err = vmm_cu_error(r, GH_ERR_DEVICE_NOMEM, "cuMemAddressReserve", __LINE__);
    goto fail;
  }
  *out = f;
  *base = (uint8_t*)(uintptr_t)f->base;
  *frame_bytes = f->frame;
  return GH_OK;
fail:
  free(f->mapped);
  free(f->head);
  free(f);
  return err;
}

/* Unmap every run of mapped frames, release every physical frame, free the
 * range. Goes on past a failure and returns the first. */
static int vmm_close(gh_frames_t* f) {
  if (f == NULL) return GH_OK;
  int err = vmm_enter(f);
  for (size_t i = 0; i < f->frames;) {
    if (f->mapped[i / 64] == 0 && i % 64 == 0) {
      i += 64;
      continue;
    }
    if (!vmm_bit(f, i)) {
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < f->frames && vmm_bit(f, j)) j++;
    const CUresult r = vmm_drv.cuMemUnmap(f->base + i * f->frame, (j - i) * f->frame);
    if (r != CUDA_SUCCESS && err == GH_OK) err = vmm_cu_error(r, GH_ERR_DEVICE_NOMEM, "cuMemUnmap (close)", __LINE__);
    i = j;
  }
  for (size_t i = 0; i < f->phys.cap; i++) {
    if (!f->phys.slots[i].used) continue;
    const CUresult r = vmm_drv.cuMemRelease((CUmemGenericAllocationHandle)f->phys.slots[i].key);
    if (r != CUDA_SUCCESS && err == GH_OK)
      err = vmm_cu_error(r, GH_ERR_DEVICE_NOMEM, "cuMemRelease (close)", __LINE__);
  }
  if (f->base != 0) {
    const CUresult r = vmm_drv.cuMemAddressFree(f->base, f->frames * f->frame);
    if (r != CUDA_SUCCESS && err == GH_OK) err = vmm_cu_error(r, GH_ERR_DEVICE_NOMEM, "cuMemAddressFree", __LINE__);
  }
  vmm_table_free(&f->at);
  vmm_table_free(&f->phys);
  free(f->mapped);
  free(f->head);
  free(f);
  return err;
}

static int vmm_device(gh_frames_t* f) { return f->device; }

static int vmm_device_free(gh_frames_t* f, size_t* free_bytes, size_t* total_bytes) {
  if (f == NULL || free_bytes == NULL || total_bytes == NULL) return _gh_error(GH_ERR_INVAL, "vmm_device_free: NULL");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes));
  return GH_OK;
}

static int vmm_create(gh_frames_t* f, gh_tier_t tier, size_t frames, gh_pframe_t* out) {
  if (f == NULL || out == NULL || (tier != GH_TIER_DEVICE && tier != GH_TIER_HOST))
    return _gh_error(GH_ERR_INVAL, "vmm_create: bad arguments (tier %d)", (int)tier);
  if (frames == 0 || frames > f->frames)
    return _gh_error(GH_ERR_INVAL, "vmm_create: %zu frames (the range holds %zu)", frames, f->frames);
  if (tier == GH_TIER_HOST && !f->host_ok)
    return _gh_error(GH_ERR_UNSUPPORTED, "vmm: host-located frames are not supported on device %d", f->device);
  int err = vmm_enter(f);
  if (err == GH_OK) err = vmm_table_reserve(&f->phys, 1);
  if (err != GH_OK) return err;
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE; /* HOST allocations must ask for none */
  p.location.type = tier == GH_TIER_DEVICE ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  p.location.id = tier == GH_TIER_DEVICE ? f->device : 0; /* ignored for HOST */
  CUmemGenericAllocationHandle h = 0;
  const CUresult r = vmm_drv.cuMemCreate(&h, frames * f->frame, &p, 0);
  if (r != CUDA_SUCCESS)
    return vmm_cu_error(r, tier == GH_TIER_DEVICE ? GH_ERR_DEVICE_NOMEM : GH_ERR_NOMEM,
                        tier == GH_TIER_DEVICE ? "cuMemCreate(device)" : "cuMemCreate(host)", __LINE__);
  vmm_table_put(&f->phys, (uint64_t)h, (uint64_t)tier | ((uint64_t)frames << 32));
  *out = (gh_pframe_t)h;
  return GH_OK;
}

static int vmm_release(gh_frames_t* f, gh_pframe_t pf) {
  if (f == NULL) return _gh_error(GH_ERR_INVAL, "vmm_release: no provider");
  vmm_slot_t* s = vmm_table_find(&f->phys, pf);
  if (s == NULL) return _gh_error(GH_ERR_INVAL, "vmm_release: unknown frame %#llx", (unsigned long long)pf);
  if (VMM_MAPS(s->val) != 0)
    return _gh_error(GH_ERR_INVAL, "vmm_release: frame %#llx is still mapped at %llu address(es)",
                     (unsigned long long)pf, (unsigned long long)VMM_MAPS(s->val));
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  VMM_CU_TRY(vmm_drv.cuMemRelease((CUmemGenericAllocationHandle)pf));
  vmm_table_remove(&f->phys, s);
  return GH_OK;
}

static int vmm_map(gh_frames_t* f, uint8_t* va, const gh_pframe_t* pfs, size_t n) {
  if (f == NULL) return _gh_error(GH_ERR_INVAL, "vmm_map: no provider");
  if (pfs == NULL || n == 0) return _gh_error(GH_ERR_INVAL, "vmm_map: no allocations");
  /* The frames the allocations take together, each one known and mappable
   * once more. */
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    const vmm_slot_t* s = vmm_table_find(&f->phys, pfs[i]);
    if (s == NULL) return _gh_error(GH_ERR_INVAL, "vmm_map: unknown allocation %#llx", (unsigned long long)pfs[i]);
    if (VMM_MAPS(s->val) == VMM_MAX_MAPS)
      return _gh_error(GH_ERR_INVAL, "vmm_map: allocation %#llx is mapped too often", (unsigned long long)pfs[i]);
    if (VMM_FRAMES(s->val) > f->frames - total)
      return _gh_error(GH_ERR_INVAL, "vmm_map: %zu allocations larger than the range", n);
    total += VMM_FRAMES(s->val);
  }
  size_t first = 0;
  int err = vmm_range(f, va, total, &first);
  if (err != GH_OK) return err;
  for (size_t i = 0; i < total; i++)
    if (vmm_bit(f, first + i))
      return _gh_error(GH_ERR_INVAL, "vmm_map: frame %zu of the range is already mapped", first + i);
  err = vmm_enter(f);
  if (err == GH_OK) err = vmm_table_reserve(&f->at, n);
  if (err != GH_OK) return err;

  const CUdeviceptr at = (CUdeviceptr)(uintptr_t)va;
  size_t done = 0, off = 0; /* allocations mapped, frames they cover */
  CUresult r = CUDA_SUCCESS;
  for (; done < n; done++) {
    const size_t nf = VMM_FRAMES(vmm_table_find(&f->phys, pfs[done])->val);
    r = vmm_drv.cuMemMap(at + off * f->frame, nf * f->frame, 0, (CUmemGenericAllocationHandle)pfs[done], 0);
    if (r != CUDA_SUCCESS) break;
    off += nf;
  }
  const char* what = "cuMemMap";
  if (r == CUDA_SUCCESS) {
    /* One access call for the whole range: far cheaper than one a mapping. */
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = f->device;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = vmm_drv.cuMemSetAccess(at, total * f->frame, &d, 1);
    what = "cuMemSetAccess";
  }
  if (r != CUDA_SUCCESS) {
    err = vmm_cu_error(r, GH_ERR_DEVICE_NOMEM, what, __LINE__);
    /* Back to the state before the call; its own failure cannot be undone. */
    if (off > 0) (void)vmm_drv.cuMemUnmap(at, off * f->frame);
    return err;
  }
  off = 0;
  for (size_t i = 0; i < n; i++) {
    vmm_slot_t* s = vmm_table_find(&f->phys, pfs[i]);
    const size_t nf = VMM_FRAMES(s->val);
    s->val += VMM_ONE_MAP;
    vmm_set(f->head, first + off);
    vmm_table_put(&f->at, first + off, pfs[i]);
    for (size_t k = 0; k < nf; k++) vmm_set(f->mapped, first + off + k);
    off += nf;
  }
  return GH_OK;
}

static int vmm_unmap(gh_frames_t* f, uint8_t* va, size_t n) {
  size_t first = 0;
  int err = vmm_range(f, va, n, &first);
  if (err != GH_OK) return err;
  for (size_t i = 0; i < n; i++)
    if (!vmm_bit(f, first + i)) return _gh_error(GH_ERR_INVAL, "vmm_unmap: frame %zu of the range is not mapped", first + i);
  /* Whole mappings only: cuMemUnmap cannot unmap part of one. */
  const size_t end = first + n;
  if (!vmm_test(f->head, first) || (end < f->frames && vmm_bit(f, end) && !vmm_test(f->head, end)))
    return _gh_error(GH_ERR_INVAL, "vmm_unmap: frames [%zu, %zu) would split a mapping", first, end);
  err = vmm_enter(f);
  if (err != GH_OK) return err;
  /* Any run of whole mappings goes in one call. */
  VMM_CU_TRY(vmm_drv.cuMemUnmap((CUdeviceptr)(uintptr_t)va, n * f->frame));
  for (size_t i = first; i < end; i++) {
    vmm_clear(f->mapped, i);
    if (!vmm_test(f->head, i)) continue;
    vmm_clear(f->head, i);
    vmm_slot_t* s = vmm_table_find(&f->at, i);
    vmm_table_find(&f->phys, s->val)->val -= VMM_ONE_MAP;
    vmm_table_remove(&f->at, s);
  }
  return GH_OK;
}

/* ---------------------------------------------------------------------------
 * Streams, copies and events: the runtime API
 * ------------------------------------------------------------------------ */

static int vmm_stream_create(gh_frames_t* f, gh_stream_t* out) {
  if (f == NULL || out == NULL) return _gh_error(GH_ERR_INVAL, "vmm_stream_create: NULL");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  /* The greatest priority: the copies by kernel (copy_to_host) get SMs
   * before the blocks of the work they make room for. */
  int least = 0, greatest = 0;
  GH_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = NULL;
  GH_CUDA_TRY(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  *out = (gh_stream_t)s;
  return GH_OK;
}

static int vmm_stream_destroy(gh_frames_t* f, gh_stream_t s) {
  if (f == NULL || s == NULL) return _gh_error(GH_ERR_INVAL, "vmm_stream_destroy: %s", f ? "the default stream" : "NULL");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaStreamDestroy((cudaStream_t)s));
  return GH_OK;
}

static int vmm_copy(gh_frames_t* f, void* dst, const void* src, size_t bytes, gh_stream_t stream) {
  if (f == NULL || ((dst == NULL || src == NULL) && bytes != 0)) return _gh_error(GH_ERR_INVAL, "vmm_copy: NULL");
  if (bytes == 0) return GH_OK;
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream));
  return GH_OK;
}

int _gh_copy_kernel(void* dst, const void* src, size_t bytes, cudaStream_t stream); /* copy_kernel.cu */

static int vmm_copy_to_host(gh_frames_t* f, void* dst, const void* src, size_t bytes, gh_stream_t stream) {
  if (f == NULL || ((dst == NULL || src == NULL) && bytes != 0)) return _gh_error(GH_ERR_INVAL, "vmm_copy_to_host: NULL");
  if (bytes == 0) return GH_OK;
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY((cudaError_t)_gh_copy_kernel(dst, src, bytes, (cudaStream_t)stream));
  return GH_OK;
}

static int vmm_stream_sync(gh_frames_t* f, gh_stream_t stream) {
  if (f == NULL) return _gh_error(GH_ERR_INVAL, "vmm_stream_sync: no provider");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
  return GH_OK;
}

/* Asked before every allocation PyTorch makes, so the driver's own call
 * (the runtime's costs more), and the context made current only for the
 * legacy stream (NULL): any other stream carries its own. */
static int vmm_stream_capturing(gh_frames_t* f, gh_stream_t stream, int* capturing) {
  if (f == NULL || capturing == NULL) return _gh_error(GH_ERR_INVAL, "vmm_stream_capturing: NULL");
  *capturing = 0;
  if (stream == NULL) {
    const int err = vmm_enter(f);
    if (err != GH_OK) return err;
  }
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = vmm_drv.cuStreamIsCapturing((CUstream)stream, &st);
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) { /* the legacy stream, another stream capturing */
    *capturing = 1;
    return GH_OK;
  }
  if (r != CUDA_SUCCESS) return vmm_cu_error(r, GH_ERR_CUDA, "cuStreamIsCapturing", __LINE__);
  *capturing = st != CU_STREAM_CAPTURE_STATUS_NONE;
  return GH_OK;
}

static int vmm_event_record(gh_frames_t* f, gh_stream_t stream, gh_fevent_t* out) {
  if (f == NULL || out == NULL) return _gh_error(GH_ERR_INVAL, "vmm_event_record: NULL");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  cudaEvent_t e = NULL;
  GH_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const cudaError_t ce = cudaEventRecord(e, (cudaStream_t)stream);
  if (ce != cudaSuccess) {
    (void)cudaEventDestroy(e);
    (void)cudaGetLastError(); /* reported here; not left for the caller's next check (it is not sticky) */
    return _gh_cuda_error((int)ce, "cudaEventRecord", __FILE__, __LINE__);
  }
  *out = (gh_fevent_t)(uintptr_t)e;
  return GH_OK;
}

static int vmm_event_query(gh_frames_t* f, gh_fevent_t e) {
  if (f == NULL || e == 0) return _gh_error(GH_ERR_INVAL, "vmm_event_query: %s", f ? "no event" : "no provider");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  const cudaError_t ce = cudaEventQuery((cudaEvent_t)(uintptr_t)e);
  if (ce == cudaSuccess) return GH_OK;
  if (ce == cudaErrorNotReady) return _gh_error(GH_ERR_BUSY, "event %#llx not reached yet", (unsigned long long)e);
  return _gh_cuda_error((int)ce, "cudaEventQuery", __FILE__, __LINE__);
}

static int vmm_event_sync(gh_frames_t* f, gh_fevent_t e) {
  if (f == NULL || e == 0) return _gh_error(GH_ERR_INVAL, "vmm_event_sync: %s", f ? "no event" : "no provider");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)(uintptr_t)e));
  return GH_OK;
}

static int vmm_event_destroy(gh_frames_t* f, gh_fevent_t e) {
  if (f == NULL || e == 0) return _gh_error(GH_ERR_INVAL, "vmm_event_destroy: %s", f ? "no event" : "no provider");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaEventDestroy((cudaEvent_t)(uintptr_t)e));
  return GH_OK;
}

static int vmm_stream_wait(gh_frames_t* f, gh_stream_t stream, gh_fevent_t e) {
  if (f == NULL || e == 0) return _gh_error(GH_ERR_INVAL, "vmm_stream_wait: %s", f ? "no event" : "no provider");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)(uintptr_t)e, 0));
  return GH_OK;
}

static int vmm_word_alloc(gh_frames_t* f, uint32_t** out) {
  if (f == NULL || out == NULL) return _gh_error(GH_ERR_INVAL, "vmm_word_alloc: NULL");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  void* p = NULL;
  GH_CUDA_TRY(cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(p, 0, 64);
  *out = p;
  return GH_OK;
}

static int vmm_word_free(gh_frames_t* f, uint32_t* w) {
  if (f == NULL || w == NULL) return _gh_error(GH_ERR_INVAL, "vmm_word_free: NULL");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaFreeHost(w));
  return GH_OK;
}

static int vmm_stream_wait_value(gh_frames_t* f, gh_stream_t stream, uint32_t* w, uint32_t value) {
  if (f == NULL || w == NULL) return _gh_error(GH_ERR_INVAL, "vmm_stream_wait_value: NULL");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  void* d = NULL;
  GH_CUDA_TRY(cudaHostGetDevicePointer(&d, w, 0));
  VMM_CU_TRY(vmm_drv.cuStreamWaitValue32((CUstream)stream, (CUdeviceptr)(uintptr_t)d, value, CU_STREAM_WAIT_VALUE_GEQ));
  return GH_OK;
}

static int vmm_capture_mode(gh_frames_t* f, int* mode) {
  if (f == NULL || mode == NULL) return _gh_error(GH_ERR_INVAL, "vmm_capture_mode: NULL");
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)*mode;
  GH_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&m));
  *mode = (int)m;
  return GH_OK;
}

static int vmm_device_sync(gh_frames_t* f) {
  if (f == NULL) return _gh_error(GH_ERR_INVAL, "vmm_device_sync: no provider");
  const int err = vmm_enter(f);
  if (err != GH_OK) return err;
  GH_CUDA_TRY(cudaDeviceSynchronize());
  return GH_OK;
}

_Static_assert(GH_FRAMES_CAPTURE_RELAXED == (int)cudaStreamCaptureModeRelaxed, "the relaxed capture mode");

const gh_frames_ops_t _gh_frames_vmm = {
    .name = "cuda-vmm",
    .open = vmm_open,
    .close = vmm_close,
    .device_free = vmm_device_free,
    .device = vmm_device,
    .create = vmm_create,
    .release = vmm_release,
    .map = vmm_map,
    .unmap = vmm_unmap,
    .stream_create = vmm_stream_create,
    .stream_destroy = vmm_stream_destroy,
    .copy = vmm_copy,
    .copy_to_host = vmm_copy_to_host,
    .stream_sync = vmm_stream_sync,
    .stream_capturing = vmm_stream_capturing,
    .event_record = vmm_event_record,
    .event_query = vmm_event_query,
    .event_sync = vmm_event_sync,
    .event_destroy = vmm_event_destroy,
    .stream_wait = vmm_stream_wait,
    .word_alloc = vmm_word_alloc,
    .word_free = vmm_word_free,
    .stream_wait_value = vmm_stream_wait_value,
    .capture_mode = vmm_capture_mode,
    .device_sync = vmm_device_sync,
};
