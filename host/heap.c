/* gpuheap: the host lifecycle of a GPU heap: create, reset, destroy, stats. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal.h"

struct gh_heap_s {
  int device;
  gh_dheap_t view;     /* the header as on the device (device pointers) */
  gh_dheap_t* d_heap;  /* the header in device memory, start of the metadata block */
  gh_layout_t layout;
  gh_backing_t* backing;   /* NULL for a managed heap */
  const gh_backing_ops_t* ops;
  gh_tmgr_t* tm;           /* the tensor manager that owns a managed heap */
  uint32_t online_pages;   /* pages [online_pages, n_pages) are offline (managed heaps) */
  uint32_t frame_words;    /* page-bitmap words per frame */
  cudaStream_t side;       /* managed heaps: a stream that does not wait for the legacy one */
  uint32_t* zeros;         /* managed heaps: GH_HEAP_ZEROS bytes of pinned zeros, copied over page words to
                              publish pages (a copy engine's work, which no running kernel holds up), then
                              a word to stage the header's xgrown */
  uint32_t grown;          /* growths published (the header's xgrown) */
};

#define GH_HEAP_ZEROS ((size_t)65536)

/* All metadata as new; pages from online_pages on offline (bits set). */
static int zero_metadata(gh_heap_t* heap) {
  GH_CUDA_TRY(cudaMemset((uint8_t*)heap->d_heap + heap->layout.pages_off, 0,
                         heap->layout.total - heap->layout.pages_off));
  GH_CUDA_TRY(cudaMemset((uint8_t*)heap->d_heap + heap->layout.hints_off, 0xFF, heap->layout.hints_bytes));
  const uint32_t first = heap->online_pages / 32u;
  if (first < heap->view.n_words)
    GH_CUDA_TRY(cudaMemset(heap->view.xpages + first, 0xFF, (size_t)(heap->view.n_words - first) * 4u));
  return GH_OK;
}

static int destroy_parts(gh_heap_t* heap) {
  int err = GH_OK;
  if (heap->zeros) {
    const cudaError_t e = cudaFreeHost(heap->zeros);
    if (e != cudaSuccess) err = _gh_cuda_error((int)e, "cudaFreeHost(zeros)", __FILE__, __LINE__);
  }
  if (heap->side) {
    const cudaError_t e = cudaStreamDestroy(heap->side);
    if (e != cudaSuccess) err = _gh_cuda_error((int)e, "cudaStreamDestroy", __FILE__, __LINE__);
  }
  if (heap->d_heap) {
    const cudaError_t e = cudaFree(heap->d_heap);
    if (e != cudaSuccess) err = _gh_cuda_error((int)e, "cudaFree(metadata)", __FILE__, __LINE__);
  }
  if (heap->backing) {
    const int e = heap->ops->close(heap->backing);
    if (err == GH_OK) err = e;
  }
  free(heap);
  return err;
}

static int pick_device(const gh_heap_options_t* o, int* device, uint32_t* sms) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return _gh_error(GH_ERR_NO_DEVICE, "cudaGetDeviceCount: %s", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  if (o->device >= count) return _gh_error(GH_ERR_INVAL, "device %d of %d", o->device, count);
  if (o->device >= 0) GH_CUDA_TRY(cudaSetDevice(o->device));
  GH_CUDA_TRY(cudaGetDevice(device));
  int n = 0;
  GH_CUDA_TRY(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, *device));
  *sms = (uint32_t)n;
  return GH_OK;
}

/* A heap of `bytes` whose data is at `base` (managed: placed by tm, pages
 * from online_bytes on offline) or in a backing of its own (base NULL). */
static int heap_create(gh_heap_t** out, size_t bytes, const gh_heap_options_t* opts, uint8_t* base, gh_tmgr_t* tm,
                       size_t online_bytes) {
  if (out == NULL) return _gh_error(GH_ERR_INVAL, "gh_heap_create: out is NULL");
  *out = NULL;
  gh_heap_options_t o;
  uint32_t shift = 0, pages = 0;
  int err = _gh_options_resolve(opts, bytes, &o, &shift, &pages);
  if (err) return err;
  const uint32_t frame_pages = 1u << (GH_FRAME_SHIFT - shift);
  uint32_t online = pages;
  if (base != NULL) {
    if (((uintptr_t)base & (((uintptr_t)1 << GH_FRAME_SHIFT) - 1u)) != 0u || bytes % ((size_t)1 << GH_FRAME_SHIFT) ||
        online_bytes % ((size_t)1 << GH_FRAME_SHIFT) || online_bytes > bytes || ((size_t)pages << shift) != bytes)
      return _gh_error(GH_ERR_INVAL, "managed heap: base %p, %zu bytes, %zu online: not whole frames", (void*)base,
                       bytes, online_bytes);
    online = (uint32_t)(online_bytes >> shift);
  }

  int device = 0;
  uint32_t sms = 0;
  err = pick_device(&o, &device, &sms);
  if (err) return err;

  gh_heap_t* heap = (gh_heap_t*)_gh_calloc(1, sizeof *heap);
  if (heap == NULL) return _gh_error(GH_ERR_NOMEM, "gh_heap_create: %zu bytes", sizeof *heap);
  heap->device = device;
  heap->ops = &_gh_backing_cuda;
  heap->tm = tm;
  heap->online_pages = online;
  heap->frame_words = frame_pages / 32u;
  /* Default: 64 slots (SMs share them), which bounds the partly used hint
   * pages at 64 per class; bench/NOTES.md has the measurements behind it. */
  const uint32_t slots = o.slots ? o.slots : (sms < 64u ? sms : 64u);
  gh_class_t classes[GH_MAX_CLASSES];
  const uint32_t n_classes = gh_classes_init(classes, shift);
  gh_layout_compute(&heap->layout, pages, shift, n_classes, slots);

  if (base == NULL) {
    err = heap->ops->open(&heap->backing, device, (size_t)pages << shift, (size_t)1 << GH_FRAME_SHIFT, &base);
    if (err) {
      free(heap);
      return err;
    }
  }
  const cudaError_t e = cudaMalloc((void**)&heap->d_heap, heap->layout.total);
  if (e != cudaSuccess) {
    heap->d_heap = NULL;
    err = _gh_cuda_error((int)e, "cudaMalloc(metadata)", __FILE__, __LINE__);
    destroy_parts(heap);
    return err;
  }
  gh_layout_header(&heap->view, &heap->layout, base, (uint8_t*)heap->d_heap, pages, shift, slots, o.probe_limit, o.refill_min);
  heap->view.room_fill = o.room_fill;
  if (tm != NULL) {
    const cudaError_t c = cudaStreamCreateWithFlags(&heap->side, cudaStreamNonBlocking);
    if (c != cudaSuccess) {
      heap->side = NULL;
      err = _gh_cuda_error((int)c, "cudaStreamCreateWithFlags", __FILE__, __LINE__);
      destroy_parts(heap);
      return err;
    }
    const cudaError_t z = cudaHostAlloc((void**)&heap->zeros, GH_HEAP_ZEROS + 64u, cudaHostAllocPortable);
    if (z != cudaSuccess) {
      heap->zeros = NULL;
      err = _gh_cuda_error((int)z, "cudaHostAlloc(zeros)", __FILE__, __LINE__);
      destroy_parts(heap);
      return err;
    }
    memset(heap->zeros, 0, GH_HEAP_ZEROS + 64u);
  }
  err = zero_metadata(heap);
  if (!err) {
    const cudaError_t c = cudaMemcpy(heap->d_heap, &heap->view, sizeof heap->view, cudaMemcpyHostToDevice);
    if (c != cudaSuccess) err = _gh_cuda_error((int)c, "cudaMemcpy(header)", __FILE__, __LINE__);
  }
  if (!err) {
    const cudaError_t c = cudaDeviceSynchronize();
    if (c != cudaSuccess) err = _gh_cuda_error((int)c, "cudaDeviceSynchronize", __FILE__, __LINE__);
  }
  if (err) {
    destroy_parts(heap);
    return err;
  }
  *out = heap;
  return GH_OK;
}

int gh_heap_create(gh_heap_t** out, size_t bytes, const gh_heap_options_t* opts) {
  return heap_create(out, bytes, opts, NULL, NULL, 0);
}

int gh_heap_destroy(gh_heap_t* heap) {
  if (heap == NULL) return GH_OK;
  if (heap->tm) return _gh_error(GH_ERR_INVAL, "gh_heap_destroy: the heap belongs to a tensor manager (gh_tmgr_destroy)");
  return destroy_parts(heap);
}

/* ---- managed heaps: the tensor manager's device heap ("tensor.c") ---- */

int _gh_heap_create_managed(gh_heap_t** out, gh_tmgr_t* tm, uint8_t* base, size_t max_bytes, size_t online_bytes,
                            const gh_heap_options_t* opts) {
  if (tm == NULL || base == NULL) return _gh_error(GH_ERR_INVAL, "_gh_heap_create_managed: NULL argument");
  return heap_create(out, max_bytes, opts, base, tm, online_bytes);
}

int _gh_heap_destroy_managed(gh_heap_t* heap) { return heap ? destroy_parts(heap) : GH_OK; }

gh_tmgr_t* _gh_heap_manager(const gh_heap_t* heap) { return heap ? heap->tm : NULL; }

int _gh_heap_usage(gh_heap_t* heap, size_t* used_bytes, size_t* online_bytes) {
  if (heap == NULL || heap->tm == NULL || used_bytes == NULL || online_bytes == NULL)
    return _gh_error(GH_ERR_INVAL, "_gh_heap_usage: NULL argument or not a managed heap");
  const uint32_t words = heap->online_pages / 32u;
  uint32_t* bits = (uint32_t*)_gh_malloc((size_t)words * 4u + 4u);
  if (bits == NULL) return _gh_error(GH_ERR_NOMEM, "_gh_heap_usage: %u words", words);
  /* On the side stream, which does not wait for the legacy stream: tensor
   * calls ask this while kernels may run, and must not wait for them. */
  cudaError_t e = cudaMemcpyAsync(bits, heap->view.xpages, (size_t)words * 4u, cudaMemcpyDeviceToHost, heap->side);
  const cudaError_t f = cudaStreamSynchronize(heap->side);
  if (e == cudaSuccess) e = f;
  if (e != cudaSuccess) {
    free(bits);
    return _gh_cuda_error((int)e, "cudaMemcpyAsync(page bitmap)", __FILE__, __LINE__);
  }
  size_t used = 0;
  for (uint32_t w = 0; w < words; w++) used += (size_t)__builtin_popcount(bits[w]);
  free(bits);
  *used_bytes = used << heap->view.page_shift;
  *online_bytes = (size_t)heap->online_pages << heap->view.page_shift;
  return GH_OK;
}

int _gh_heap_online(gh_heap_t* heap, size_t online_bytes) {
  if (heap == NULL || heap->tm == NULL) return _gh_error(GH_ERR_INVAL, "_gh_heap_online: not a managed heap");
  uint32_t pages = 0;
  const int err = _gh_heap_online_pages(online_bytes, heap->view.page_shift, heap->view.n_pages, &pages);
  if (err) return err;
  if (pages <= heap->online_pages) return GH_OK;
  /* The frames are mapped; clearing their words publishes the pages. A copy
   * engine writes the words while kernels may run: no searcher changes an
   * all-ones word (its claims need a zero bit), so nothing is lost. A copy
   * of zeros, not a memset: kernels that wait in place for this growth
   * (grow.h) may hold every SM. */
  const uint32_t w0 = heap->online_pages / 32u, w1 = pages / 32u;
  cudaError_t e = cudaSuccess;
  for (size_t at = (size_t)w0 * 4u, end = (size_t)w1 * 4u; at < end && e == cudaSuccess; at += GH_HEAP_ZEROS) {
    const size_t n = end - at < GH_HEAP_ZEROS ? end - at : GH_HEAP_ZEROS;
    e = cudaMemcpyAsync((uint8_t*)heap->view.xpages + at, heap->zeros, n, cudaMemcpyHostToDevice, heap->side);
  }
  /* Then the growth's number, after the words (stream order): a lane that
   * reads it sees the pages (grow.h). */
  uint32_t* stage = heap->zeros + GH_HEAP_ZEROS / 4u;
  *stage = heap->grown + 1u;
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(&heap->d_heap->xgrown, stage, sizeof *stage, cudaMemcpyHostToDevice, heap->side);
  const cudaError_t f = cudaStreamSynchronize(heap->side);
  if (e == cudaSuccess) e = f;
  if (e != cudaSuccess) return _gh_cuda_error((int)e, "cudaMemcpyAsync(page bitmap)", __FILE__, __LINE__);
  heap->online_pages = pages;
  heap->grown++;
  return GH_OK;
}

int _gh_heap_grow_channel(gh_heap_t* heap, uint32_t* words) {
  if (heap == NULL || heap->tm == NULL || words == NULL)
    return _gh_error(GH_ERR_INVAL, "_gh_heap_grow_channel: NULL argument or not a managed heap");
  void* d = NULL;
  GH_CUDA_TRY(cudaHostGetDevicePointer(&d, words, 0));
  heap->view.grow = (uint32_t*)d;
  cudaError_t e = cudaMemcpyAsync(&heap->d_heap->grow, &heap->view.grow, sizeof heap->view.grow,
                                  cudaMemcpyHostToDevice, heap->side);
  const cudaError_t f = cudaStreamSynchronize(heap->side);
  if (e == cudaSuccess) e = f;
  if (e != cudaSuccess) {
    heap->view.grow = NULL;
    return _gh_cuda_error((int)e, "cudaMemcpyAsync(heap header: grow)", __FILE__, __LINE__);
  }
  return GH_OK;
}

uint32_t _gh_heap_grown(const gh_heap_t* heap) { return heap ? heap->grown : 0u; }

int _gh_heap_bind_thread(gh_heap_t* heap) {
  if (heap == NULL) return _gh_error(GH_ERR_INVAL, "_gh_heap_bind_thread: NULL heap");
  GH_CUDA_TRY(cudaSetDevice(heap->device));
  return GH_OK;
}

int _gh_heap_offline_tail(gh_heap_t* heap, size_t keep_bytes, size_t* online_bytes) {
  if (heap == NULL || heap->tm == NULL || online_bytes == NULL)
    return _gh_error(GH_ERR_INVAL, "_gh_heap_offline_tail: NULL argument or not a managed heap");
  const uint32_t shift = heap->view.page_shift;
  const uint32_t keep = _gh_heap_keep_pages(keep_bytes, shift, heap->view.n_pages, heap->frame_words);
  if (keep < heap->online_pages) {
    uint32_t end = 0;
    const int err = _gh_device_offline_tail(heap->d_heap, keep / 32u, heap->online_pages / 32u, heap->frame_words,
                                            heap->side, &end);
    if (err) return err;
    heap->online_pages = end * 32u;
  }
  *online_bytes = (size_t)heap->online_pages << shift;
  return GH_OK;
}

int gh_heap_reset(gh_heap_t* heap) {
  if (heap == NULL) return _gh_error(GH_ERR_INVAL, "gh_heap_reset: heap is NULL");
  GH_CUDA_TRY(cudaDeviceSynchronize());
  const int err = zero_metadata(heap);
  if (err) return err;
  GH_CUDA_TRY(cudaDeviceSynchronize());
  return GH_OK;
}

gh_dheap_t* gh_heap_device(const gh_heap_t* heap) { return heap ? heap->d_heap : NULL; }

int gh_heap_stats(gh_heap_t* heap, gh_heap_stats_t* stats) {
  if (heap == NULL || stats == NULL) return _gh_error(GH_ERR_INVAL, "gh_heap_stats: NULL argument");
  _gh_stats_begin(stats, &heap->view, heap->layout.total);
  int err = _gh_device_stats(heap->d_heap, &heap->view, stats);
  if (err) return err;
  /* Offline pages (set bits, FREE state) are neither free nor in use. */
  stats->pages_total = heap->online_pages;
  stats->heap_bytes = (uint64_t)heap->online_pages << heap->view.page_shift;
  uint32_t* bitmap = (uint32_t*)_gh_malloc((size_t)heap->view.n_words * 4u);
  if (bitmap == NULL) return _gh_error(GH_ERR_NOMEM, "gh_heap_stats: page bitmap copy");
  uint64_t errors[GH_ERRC_COUNT];
  cudaError_t e = cudaMemcpy(bitmap, heap->view.xpages, (size_t)heap->view.n_words * 4u, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaMemcpy(errors, heap->view.xerrors, sizeof errors, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    free(bitmap);
    return _gh_cuda_error((int)e, "cudaMemcpy(stats)", __FILE__, __LINE__);
  }
  _gh_stats_finish(stats, &heap->view, bitmap, errors);
  free(bitmap);
  return GH_OK;
}
