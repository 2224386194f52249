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
  gh_backing_t* backing;
  const gh_backing_ops_t* ops;
};

static int zero_metadata(gh_heap_t* heap) {
  GH_CUDA_TRY(cudaMemset((uint8_t*)heap->d_heap + heap->layout.pages_off, 0,
                         heap->layout.total - heap->layout.pages_off));
  GH_CUDA_TRY(cudaMemset((uint8_t*)heap->d_heap + heap->layout.hints_off, 0xFF, heap->layout.hints_bytes));
  return GH_OK;
}

static int destroy_parts(gh_heap_t* heap) {
  int err = GH_OK;
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

int gh_heap_create(gh_heap_t** out, size_t bytes, const gh_heap_options_t* opts) {
  if (out == NULL) return _gh_error(GH_ERR_INVAL, "gh_heap_create: out is NULL");
  *out = NULL;
  gh_heap_options_t o;
  uint32_t shift = 0, pages = 0;
  int err = _gh_options_resolve(opts, bytes, &o, &shift, &pages);
  if (err) return err;

  int device = 0;
  uint32_t sms = 0;
  err = pick_device(&o, &device, &sms);
  if (err) return err;

  gh_heap_t* heap = (gh_heap_t*)calloc(1, sizeof *heap);
  if (heap == NULL) return _gh_error(GH_ERR_NOMEM, "gh_heap_create: %zu bytes", sizeof *heap);
  heap->device = device;
  heap->ops = &_gh_backing_cuda;
  /* Default: 64 slots (SMs share them), which bounds the partly used hint
   * pages at 64 per class; bench/NOTES.md has the measurements behind it. */
  const uint32_t slots = o.slots ? o.slots : (sms < 64u ? sms : 64u);
  gh_class_t classes[GH_MAX_CLASSES];
  const uint32_t n_classes = gh_classes_init(classes, shift);
  gh_layout_compute(&heap->layout, pages, shift, n_classes, slots);

  uint8_t* base = NULL;
  err = heap->ops->open(&heap->backing, device, (size_t)pages << shift, (size_t)1 << GH_FRAME_SHIFT, &base);
  if (err) {
    free(heap);
    return err;
  }
  const cudaError_t e = cudaMalloc((void**)&heap->d_heap, heap->layout.total);
  if (e != cudaSuccess) {
    heap->d_heap = NULL;
    err = _gh_cuda_error((int)e, "cudaMalloc(metadata)", __FILE__, __LINE__);
    destroy_parts(heap);
    return err;
  }
  gh_layout_header(&heap->view, &heap->layout, base, (uint8_t*)heap->d_heap, pages, shift, slots, o.probe_limit, o.refill_min);
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

int gh_heap_destroy(gh_heap_t* heap) {
  if (heap == NULL) return GH_OK;
  return destroy_parts(heap);
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
  uint32_t* bitmap = (uint32_t*)malloc((size_t)heap->view.n_words * 4u);
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
