/* gpuheap: what the CPU library has of the host side: the host-memory
 * simulation of frames, and a tensor manager's heap on the CPU core. */
#include <stdlib.h>

#include "frames.h"
#include "gpuheap/atomic.h"
#include "gpuheap/cpu.h"
#include "internal.h"

const gh_frames_ops_t* _gh_frames_select(gh_backend_t backend) {
  switch (backend) {
    case GH_BACKEND_DEFAULT:
    case GH_BACKEND_SIM: return &_gh_frames_sim;
    case GH_BACKEND_CUDA_VMM:
      _gh_error(GH_ERR_UNSUPPORTED, "the CPU library has no CUDA virtual-memory backend");
      return NULL;
  }
  _gh_error(GH_ERR_INVAL, "backend %d", (int)backend);
  return NULL;
}

/* A tensor manager's heap in the CPU library: the CPU core's heap (one
 * lane per calling thread) whose data is the manager's first frames, which
 * the simulation maps to host memory. What the device heap does with a
 * side stream and kernels ("heap.c"), this does with atomics on the page
 * words; tests reach it through _gh_heap_cpu. */
struct gh_heap_s {
  gh_cpu_heap_t* cpu;
  gh_tmgr_t* tm;
  uint32_t frame_words; /* page-bitmap words per frame */
};

int _gh_heap_create_managed(gh_heap_t** out, gh_tmgr_t* tm, uint8_t* base, size_t max_bytes, size_t online_bytes,
                            const gh_heap_options_t* opts) {
  if (out == NULL || tm == NULL || base == NULL) return _gh_error(GH_ERR_INVAL, "_gh_heap_create_managed: NULL argument");
  *out = NULL;
  gh_heap_t* heap = (gh_heap_t*)_gh_calloc(1, sizeof *heap);
  if (heap == NULL) return _gh_error(GH_ERR_NOMEM, "_gh_heap_create_managed");
  const int err = _gh_cpu_heap_create_at(&heap->cpu, max_bytes, opts, base, online_bytes);
  if (err) {
    free(heap);
    return err;
  }
  heap->tm = tm;
  heap->frame_words = (uint32_t)(((size_t)1 << GH_FRAME_SHIFT) >> gh_cpu_heap_core(heap->cpu)->page_shift) / 32u;
  *out = heap;
  return GH_OK;
}

int _gh_heap_destroy_managed(gh_heap_t* heap) {
  if (heap == NULL) return GH_OK;
  const int err = gh_cpu_heap_destroy(heap->cpu);
  free(heap);
  return err;
}

int _gh_heap_usage(gh_heap_t* heap, size_t* used_bytes, size_t* online_bytes) {
  if (heap == NULL || used_bytes == NULL || online_bytes == NULL)
    return _gh_error(GH_ERR_INVAL, "_gh_heap_usage: NULL argument");
  return _gh_cpu_heap_usage(heap->cpu, used_bytes, online_bytes);
}

int _gh_heap_online(gh_heap_t* heap, size_t online_bytes) {
  if (heap == NULL) return _gh_error(GH_ERR_INVAL, "_gh_heap_online: NULL heap");
  const gh_dheap_t* h = gh_cpu_heap_core(heap->cpu);
  uint32_t pages = 0;
  const int err = _gh_heap_online_pages(online_bytes, h->page_shift, h->n_pages, &pages);
  return err ? err : _gh_cpu_heap_online(heap->cpu, pages);
}

int _gh_heap_offline_tail(gh_heap_t* heap, size_t keep_bytes, size_t* online_bytes) {
  if (heap == NULL || online_bytes == NULL) return _gh_error(GH_ERR_INVAL, "_gh_heap_offline_tail: NULL argument");
  const gh_dheap_t* h = gh_cpu_heap_core(heap->cpu);
  const uint32_t keep = _gh_heap_keep_pages(keep_bytes, h->page_shift, h->n_pages, heap->frame_words);
  *online_bytes = (size_t)_gh_cpu_heap_offline_tail(heap->cpu, keep, heap->frame_words) << h->page_shift;
  return GH_OK;
}

gh_tmgr_t* _gh_heap_manager(const gh_heap_t* heap) { return heap ? heap->tm : NULL; }

int _gh_heap_grow_channel(gh_heap_t* heap, uint32_t* words) {
  if (heap == NULL || words == NULL) return _gh_error(GH_ERR_INVAL, "_gh_heap_grow_channel: NULL argument");
  gh_cpu_heap_core(heap->cpu)->grow = words;
  return GH_OK;
}

uint32_t _gh_heap_grown(const gh_heap_t* heap) {
  return heap ? gh_atomic_load_acquire(&gh_cpu_heap_core(heap->cpu)->xgrown) : 0u;
}

int _gh_heap_bind_thread(gh_heap_t* heap) {
  return heap ? GH_OK : _gh_error(GH_ERR_INVAL, "_gh_heap_bind_thread: NULL heap");
}

gh_cpu_heap_t* _gh_heap_cpu(gh_heap_t* heap) { return heap ? heap->cpu : NULL; }
