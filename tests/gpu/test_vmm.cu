/* The CUDA virtual-memory frame provider (host/vmm.c) on a real device:
 * device frames written by a kernel, the middle ones evicted to host frames
 * at the same addresses, read and modified there by a kernel, restored, and
 * every byte checked; every bad call refused with GH_ERR_INVAL before it
 * reaches the driver; multi-frame allocations ("slabs") mapped back to back,
 * evicted through a host slab mapped at an alias and restored, with the
 * unmaps that would split a mapping refused; close with frames still mapped
 * gives everything back. */
#include <string.h>

#include <vector>

#include "gpu_util.cuh"
#include "../../host/frames.h"

static const gh_frames_ops_t* ops = &_gh_frames_vmm;

#define FRAMES_OK(call) GH_OK_OR_DIE(call)
#define CHECK_INVAL(call)                                                                                  \
  do {                                                                                                     \
    const int r_ = (call);                                                                                 \
    CHECK_MSG(r_ == GH_ERR_INVAL, "%s gave %s (%s)", #call, gh_err_name(r_), gh_last_error_detail());      \
  } while (0)

/* Word i of a block holds tag ^ i. */
__global__ void fill_words(uint64_t* p, size_t words, uint64_t tag) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = tag ^ i;
}
/* Check tag ^ i, count the misses, and write tag2 ^ i in its place. */
__global__ void check_and_rewrite(uint64_t* p, size_t words, uint64_t tag, uint64_t tag2, unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
    if (p[i] != (tag ^ i)) atomicAdd(bad, 1ull);
    p[i] = tag2 ^ i;
  }
}
/* Keep a stream busy for about `cycles` clocks. */
__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

static unsigned long long device_misses(unsigned long long* d_bad) {
  unsigned long long bad = 0;
  CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
  return bad;
}

/* Bytes [0, bytes) at va, read back by the host, hold tag ^ word index. */
static size_t host_misses(const uint8_t* va, size_t bytes, uint64_t tag) {
  std::vector<uint64_t> h(bytes / 8);
  CUDA_OK(cudaMemcpy(h.data(), va, bytes, cudaMemcpyDefault));
  size_t bad = 0;
  for (size_t i = 0; i < h.size(); i++) bad += h[i] != (tag ^ i);
  return bad;
}

int main() {
  skip_without_gpu("test_vmm");
  CUDA_OK(cudaSetDevice(0));
  unsigned long long* d_bad;
  CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));
  CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
  /* Load the kernels now, so that their code does not count in the memory
   * balance at the end. */
  fill_words<<<1, 32>>>((uint64_t*)d_bad, 1, 0);
  check_and_rewrite<<<1, 32>>>((uint64_t*)d_bad, 1, 0, 0, d_bad);
  spin<<<1, 1>>>(1);
  KERNEL_OK();
  CUDA_OK(cudaMemset(d_bad, 0, sizeof *d_bad));
  size_t free0 = 0, total0 = 0;
  CUDA_OK(cudaMemGetInfo(&free0, &total0));

  /* open: 40 frames asked for as 40 frames less one byte. */
  gh_frames_t* f = NULL;
  uint8_t* base = NULL;
  size_t F = 0;
  FRAMES_OK(ops->open(&f, 0, ((size_t)40 << 21) - 1, &base, &F));
  printf("test_vmm: provider %s, frame %zu bytes, range at %p\n", ops->name, F, (void*)base);
  CHECK_EQ_U64(F, (size_t)2 << 20); /* the H200's granularity (DESIGN.md) */
  CHECK(F != 0 && (F & (F - 1)) == 0);
  CHECK(((uintptr_t)base & (F - 1)) == 0);
  const size_t nframes = ((size_t)40 << 21) / F; /* frames the range must hold */
  size_t dfree = 0, dtotal = 0;
  FRAMES_OK(ops->device_free(f, &dfree, &dtotal));
  CHECK(dfree > 0 && dfree <= dtotal);

  gh_stream_t s = NULL;
  FRAMES_OK(ops->stream_create(f, &s));

  /* Home: 8 device frames at frames [0, 8). Staging window at [16, 20). */
  const size_t H = 8, E = 4, E0 = 2; /* evict frames [E0, E0 + E) */
  uint8_t* home = base;
  uint8_t* staging = base + 16 * F;
  gh_pframe_t dev[H], host[E], dev2[E];
  for (size_t i = 0; i < H; i++) FRAMES_OK(ops->create(f, GH_TIER_DEVICE, 1, &dev[i]));
  FRAMES_OK(ops->map(f, home, dev, H));
  const size_t words = H * F / 8;
  const uint64_t tag = 0x5eed0001ull, tag2 = 0xfeed0002ull;
  fill_words<<<1024, 256>>>((uint64_t*)home, words, tag);
  KERNEL_OK();

  /* Evict the middle frames: host frames mapped at staging, copy, wait,
   * unmap the device frames at home, map the host frames at home, unmap
   * staging, release the device frames. */
  for (size_t i = 0; i < E; i++) FRAMES_OK(ops->create(f, GH_TIER_HOST, 1, &host[i]));
  FRAMES_OK(ops->map(f, staging, host, E));
  FRAMES_OK(ops->copy(f, staging, home + E0 * F, E * F, s));
  gh_fevent_t ev = 0;
  FRAMES_OK(ops->event_record(f, s, &ev));
  FRAMES_OK(ops->event_sync(f, ev));
  CHECK_EQ_U64(ops->event_query(f, ev), GH_OK);
  FRAMES_OK(ops->event_destroy(f, ev));
  FRAMES_OK(ops->stream_sync(f, s));
  FRAMES_OK(ops->unmap(f, home + E0 * F, E));
  FRAMES_OK(ops->map(f, home + E0 * F, host, E));
  /* The same host frames at two addresses: a word written through home is
   * seen through staging. */
  {
    const uint64_t marker = 0x0123456789abcdefull;
    uint64_t seen = 0, old = 0;
    CUDA_OK(cudaMemcpy(&old, home + E0 * F + 8, 8, cudaMemcpyDefault));
    CUDA_OK(cudaMemcpy(home + E0 * F + 8, &marker, 8, cudaMemcpyDefault));
    CUDA_OK(cudaMemcpy(&seen, staging + 8, 8, cudaMemcpyDefault));
    CHECK_EQ_U64(seen, marker);
    CUDA_OK(cudaMemcpy(home + E0 * F + 8, &old, 8, cudaMemcpyDefault));
  }
  CHECK_INVAL(ops->release(f, host[0])); /* mapped twice */
  FRAMES_OK(ops->unmap(f, staging, E));
  CHECK_INVAL(ops->release(f, host[0])); /* still mapped at home */
  for (size_t i = 0; i < E; i++) FRAMES_OK(ops->release(f, dev[E0 + i]));

  /* A kernel reads the pattern at the same pointers (the middle now in host
   * memory), checks it and rewrites it. */
  check_and_rewrite<<<1024, 256>>>((uint64_t*)home, words, tag, tag2, d_bad);
  KERNEL_OK();
  CHECK_EQ_U64(device_misses(d_bad), 0);

  /* Restore: device frames at staging, copy, wait, unmap home, map the
   * device frames at home, unmap staging, release the host frames. */
  for (size_t i = 0; i < E; i++) FRAMES_OK(ops->create(f, GH_TIER_DEVICE, 1, &dev2[i]));
  FRAMES_OK(ops->map(f, staging, dev2, E));
  FRAMES_OK(ops->copy(f, staging, home + E0 * F, E * F, s));
  FRAMES_OK(ops->stream_sync(f, s));
  FRAMES_OK(ops->unmap(f, home + E0 * F, E));
  FRAMES_OK(ops->map(f, home + E0 * F, dev2, E));
  FRAMES_OK(ops->unmap(f, staging, E));
  for (size_t i = 0; i < E; i++) FRAMES_OK(ops->release(f, host[i]));
  /* Released already. Checked before any other frame is created: the driver
   * may hand a released handle's value to a new frame (it does under
   * compute-sanitizer). */
  CHECK_INVAL(ops->release(f, host[0]));
  for (size_t i = 0; i < E; i++) dev[E0 + i] = dev2[i];

  /* Every word of the 8 frames, from the host: tag2 ^ i. */
  CHECK_EQ_U64(host_misses(home, H * F, tag2), 0);
  /* And a kernel sees the same. */
  check_and_rewrite<<<1024, 256>>>((uint64_t*)home, words, tag2, tag, d_bad);
  KERNEL_OK();
  CHECK_EQ_U64(device_misses(d_bad), 0);
  CHECK_EQ_U64(host_misses(home, H * F, tag), 0);

  /* Events: BUSY while the stream has not reached the event. */
  spin<<<1, 1, 0, (cudaStream_t)s>>>(200ll * 1000 * 1000); /* ~0.1 s */
  CUDA_OK(cudaGetLastError());
  FRAMES_OK(ops->event_record(f, s, &ev));
  CHECK_EQ_U64(ops->event_query(f, ev), GH_ERR_BUSY);
  FRAMES_OK(ops->event_sync(f, ev));
  CHECK_EQ_U64(ops->event_query(f, ev), GH_OK);
  FRAMES_OK(ops->event_destroy(f, ev));

  /* Bad calls: GH_ERR_INVAL, and nothing changed. */
  gh_pframe_t spare = 0;
  FRAMES_OK(ops->create(f, GH_TIER_DEVICE, 1, &spare));
  CHECK_INVAL(ops->map(f, base - F, &spare, 1));                  /* below the range */
  CHECK_INVAL(ops->map(f, base + nframes * F, &spare, 1));        /* just past its end */
  CHECK_INVAL(ops->map(f, base + (nframes - 1) * F, dev2, 2));    /* straddles the end */
  CHECK_INVAL(ops->map(f, base + 20 * F + F / 2, &spare, 1));     /* unaligned */
  CHECK_INVAL(ops->map(f, base + 20 * F + 4096, &spare, 1));      /* unaligned */
  CHECK_INVAL(ops->map(f, home + 7 * F, dev2, 2));                /* frame 7 is mapped, 8 is not */
  CHECK_INVAL(ops->map(f, home + 3 * F, &spare, 1));              /* over a mapped frame */
  CHECK_INVAL(ops->map(f, base + 20 * F, &spare, 0));             /* no frames */
  CHECK_INVAL(ops->map(f, base + 20 * F, NULL, 1));               /* no frames */
  const gh_pframe_t bogus[1] = {(gh_pframe_t)0x5eedull};
  CHECK_INVAL(ops->map(f, base + 20 * F, bogus, 1));              /* unknown handle */
  const gh_pframe_t half[2] = {spare, (gh_pframe_t)0x5eedull};
  CHECK_INVAL(ops->map(f, base + 20 * F, half, 2));               /* one unknown handle */
  CHECK_INVAL(ops->unmap(f, base + 30 * F, 1));                   /* never mapped */
  CHECK_INVAL(ops->unmap(f, home + 7 * F, 2));                    /* 7 mapped, 8 not */
  CHECK_INVAL(ops->unmap(f, home + F / 2, 1));                    /* unaligned */
  CHECK_INVAL(ops->unmap(f, base + nframes * F, 1));              /* outside */
  CHECK_INVAL(ops->unmap(f, home, 0));                            /* no frames */
  CHECK_INVAL(ops->release(f, dev[0]));                           /* mapped */
  CHECK_INVAL(ops->release(f, (gh_pframe_t)0x5eedull));           /* unknown */
  CHECK_INVAL(ops->create(f, GH_TIER_NONE, 1, &spare));
  CHECK_INVAL(ops->create(f, (gh_tier_t)7, 1, &spare));
  CHECK_INVAL(ops->event_query(f, 0));
  CHECK_INVAL(ops->stream_destroy(f, NULL));
  /* Nothing changed: the refused frames map where they should, the last
   * frame of the range maps, the mapped ones still hold their data. */
  FRAMES_OK(ops->map(f, home + H * F, &spare, 1));
  FRAMES_OK(ops->map(f, base + (nframes - 1) * F, &spare, 1)); /* the same frame at two addresses */
  fill_words<<<256, 256>>>((uint64_t*)(home + H * F), F / 8, tag2);
  KERNEL_OK();
  CHECK_EQ_U64(host_misses(base + (nframes - 1) * F, F, tag2), 0);
  CHECK_EQ_U64(host_misses(home, H * F, tag), 0);
  FRAMES_OK(ops->unmap(f, base + (nframes - 1) * F, 1));

  /* Slabs: device allocations of 4 and 2 frames mapped back to back at
   * frames [10, 16) in one call, evicted into a host slab of 6 frames mapped
   * at an alias [28, 34), restored through a device slab of 6 frames staged
   * at [20, 26). */
  {
    const size_t S = 6;
    uint8_t* shome = base + 10 * F;
    uint8_t* alias = base + 28 * F;
    uint8_t* sstage = base + 20 * F;
    gh_pframe_t d4 = 0, d2 = 0, h6 = 0, d6 = 0, none = 0;
    CHECK_INVAL(ops->create(f, GH_TIER_DEVICE, 0, &none));            /* no frames */
    CHECK_INVAL(ops->create(f, GH_TIER_DEVICE, nframes + 1, &none));  /* larger than the range */
    FRAMES_OK(ops->create(f, GH_TIER_DEVICE, 4, &d4));
    FRAMES_OK(ops->create(f, GH_TIER_DEVICE, 2, &d2));
    FRAMES_OK(ops->create(f, GH_TIER_HOST, S, &h6));
    FRAMES_OK(ops->create(f, GH_TIER_DEVICE, S, &d6));
    const gh_pframe_t two[2] = {d4, d2};
    CHECK_INVAL(ops->map(f, base + (nframes - 3) * F, two, 2));     /* 6 frames past the end */
    CHECK_INVAL(ops->map(f, home + 5 * F, two, 2));                  /* over mapped frames */
    FRAMES_OK(ops->map(f, shome, two, 2));
    fill_words<<<1024, 256>>>((uint64_t*)shome, S * F / 8, tag);
    KERNEL_OK();
    FRAMES_OK(ops->map(f, alias, &h6, 1));
    FRAMES_OK(ops->copy(f, alias, shome, S * F, s));
    FRAMES_OK(ops->stream_sync(f, s));
    CHECK_INVAL(ops->unmap(f, shome, 1));           /* part of d4 */
    CHECK_INVAL(ops->unmap(f, shome + F, 3));       /* d4's tail */
    CHECK_INVAL(ops->unmap(f, shome, 5));           /* d4 and half of d2 */
    CHECK_INVAL(ops->unmap(f, shome + 3 * F, 3));   /* d4's last frame and d2 */
    CHECK_INVAL(ops->unmap(f, shome + 4 * F, 3));   /* d2 and an unmapped frame */
    CHECK_INVAL(ops->unmap(f, alias + F, 5));       /* part of the alias */
    CHECK_INVAL(ops->release(f, d4));               /* mapped */
    CHECK_EQ_U64(host_misses(shome, S * F, tag), 0); /* nothing changed */
    FRAMES_OK(ops->unmap(f, shome, S));             /* both mappings, one call */
    FRAMES_OK(ops->map(f, shome, &h6, 1));
    FRAMES_OK(ops->release(f, d4));
    FRAMES_OK(ops->release(f, d2));
    CHECK_INVAL(ops->release(f, h6));               /* mapped twice */
    /* A kernel at the same pointers, now host memory; seen through the alias. */
    check_and_rewrite<<<1024, 256>>>((uint64_t*)shome, S * F / 8, tag, tag2, d_bad);
    KERNEL_OK();
    CHECK_EQ_U64(device_misses(d_bad), 0);
    CHECK_EQ_U64(host_misses(alias, S * F, tag2), 0);
    /* Restore through a device slab at the staging window. */
    FRAMES_OK(ops->map(f, sstage, &d6, 1));
    FRAMES_OK(ops->copy(f, sstage, shome, S * F, s));
    FRAMES_OK(ops->stream_sync(f, s));
    FRAMES_OK(ops->unmap(f, shome, S));
    FRAMES_OK(ops->map(f, shome, &d6, 1));
    FRAMES_OK(ops->unmap(f, sstage, S));
    FRAMES_OK(ops->unmap(f, alias, S));
    FRAMES_OK(ops->release(f, h6));
    check_and_rewrite<<<1024, 256>>>((uint64_t*)shome, S * F / 8, tag2, tag, d_bad);
    KERNEL_OK();
    CHECK_EQ_U64(device_misses(d_bad), 0);
    CHECK_EQ_U64(host_misses(shome, S * F, tag), 0);
    /* d6 stays mapped at [10, 16): close cleans it up below. */
  }

  /* Close with frames still mapped (home and its neighbour), one host frame
   * mapped at two addresses and one frame mapped nowhere: clean, and the
   * device memory comes back. */
  gh_pframe_t h2 = 0, loose = 0;
  FRAMES_OK(ops->create(f, GH_TIER_HOST, 1, &h2));
  FRAMES_OK(ops->map(f, base + 24 * F, &h2, 1));
  FRAMES_OK(ops->map(f, base + 26 * F, &h2, 1));
  FRAMES_OK(ops->create(f, GH_TIER_DEVICE, 1, &loose));
  FRAMES_OK(ops->stream_destroy(f, s));
  CHECK_EQ_U64(ops->close(f), GH_OK);
  size_t free1 = 0, total1 = 0;
  CUDA_OK(cudaMemGetInfo(&free1, &total1));
  CHECK_MSG(free1 + 4 * F >= free0, "device memory before open %zu, after close %zu (16 frames were held)", free0,
            free1);

  /* A second provider on the same device opens and closes cleanly. */
  FRAMES_OK(ops->open(&f, 0, 1, &base, &F));
  FRAMES_OK(ops->create(f, GH_TIER_DEVICE, 1, &spare));
  FRAMES_OK(ops->map(f, base, &spare, 1));
  CHECK_INVAL(ops->map(f, base + F, &spare, 1)); /* one frame only */
  CHECK_EQ_U64(ops->close(f), GH_OK);

  CUDA_OK(cudaFree(d_bad));
  return gh_test_done("test_vmm");
}
