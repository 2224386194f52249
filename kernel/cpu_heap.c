/* gpuheap: the CPU build of the allocator core (see include/gpuheap/cpu.h). */
#include <stdlib.h>
#include <string.h>

#include "gpuheap/core.h"
#include "gpuheap/cpu.h"
#include "gpuheap/layout.h"
#include "../host/internal.h"

#define GH_CPU_DEFAULT_SLOTS 8u

struct gh_cpu_heap_s {
  gh_dheap_t* h; /* header at the start of meta */
  gh_layout_t layout;
  uint8_t* meta;
  uint8_t* data;
};

/* A thread's lane identity: its slot and its random stream. */
static _Thread_local uint32_t gh_cpu_lane_id;
static _Thread_local uint32_t gh_cpu_calls;
static uint32_t gh_cpu_next_lane;

static uint32_t lane_id(void) {
  if (gh_cpu_lane_id == 0) gh_cpu_lane_id = __atomic_add_fetch(&gh_cpu_next_lane, 1u, __ATOMIC_RELAXED);
  return gh_cpu_lane_id;
}

static void clear_metadata(gh_cpu_heap_t* heap) {
  memset(heap->meta + heap->layout.pages_off, 0, heap->layout.total - heap->layout.pages_off);
  memset(heap->meta + heap->layout.hints_off, 0xFF, heap->layout.hints_bytes);
}

int gh_cpu_heap_create(gh_cpu_heap_t** out, size_t bytes, const gh_heap_options_t* opts) {
  if (out == NULL) return _gh_error(GH_ERR_INVAL, "gh_cpu_heap_create: out is NULL");
  *out = NULL;
  gh_heap_options_t o;
  uint32_t shift = 0, pages = 0;
  const int err = _gh_options_resolve(opts, bytes, &o, &shift, &pages);
  if (err) return err;
  const uint32_t slots = o.slots ? o.slots : GH_CPU_DEFAULT_SLOTS;

  gh_cpu_heap_t* heap = (gh_cpu_heap_t*)calloc(1, sizeof *heap);
  if (heap == NULL) return _gh_error(GH_ERR_NOMEM, "gh_cpu_heap_create");
  gh_class_t classes[GH_MAX_CLASSES];
  gh_layout_compute(&heap->layout, pages, shift, gh_classes_init(classes, shift), slots);
  heap->meta = (uint8_t*)aligned_alloc(256, heap->layout.total);
  heap->data = (uint8_t*)aligned_alloc(o.page_bytes, (size_t)pages << shift);
  if (heap->meta == NULL || heap->data == NULL) {
    free(heap->meta);
    free(heap->data);
    free(heap);
    return _gh_error(GH_ERR_NOMEM, "gh_cpu_heap_create: %zu bytes", (size_t)pages << shift);
  }
  heap->h = (gh_dheap_t*)heap->meta;
  gh_layout_header(heap->h, &heap->layout, heap->data, heap->meta, pages, shift, slots, o.probe_limit, o.refill_min);
  heap->h->room_fill = o.room_fill;
  clear_metadata(heap);
  *out = heap;
  return GH_OK;
}

int gh_cpu_heap_destroy(gh_cpu_heap_t* heap) {
  if (heap == NULL) return GH_OK;
  free(heap->meta);
  free(heap->data);
  free(heap);
  return GH_OK;
}

int gh_cpu_heap_reset(gh_cpu_heap_t* heap) {
  if (heap == NULL) return _gh_error(GH_ERR_INVAL, "gh_cpu_heap_reset: heap is NULL");
  clear_metadata(heap);
  return GH_OK;
}

gh_dheap_t* gh_cpu_heap_core(gh_cpu_heap_t* heap) { return heap ? heap->h : NULL; }

int gh_cpu_heap_stats(gh_cpu_heap_t* heap, gh_heap_stats_t* s) {
  if (heap == NULL || s == NULL) return _gh_error(GH_ERR_INVAL, "gh_cpu_heap_stats: NULL argument");
  const gh_dheap_t* h = heap->h;
  _gh_stats_begin(s, h, heap->layout.total);
  for (uint32_t p = 0; p < h->n_pages; p++) {
    const bool bit = (gh_atomic_load_relaxed(&h->xpages[p >> 5]) >> (p & 31u)) & 1u;
    _gh_stats_add_page(s, h, gh_page_view(gh_atomic_load_relaxed(&h->xstate[p]), gh_atomic_load_relaxed(&h->xcount[p]), bit));
  }
  uint32_t* bitmap = (uint32_t*)malloc((size_t)h->n_words * 4u);
  if (bitmap == NULL) return _gh_error(GH_ERR_NOMEM, "gh_cpu_heap_stats");
  for (uint32_t w = 0; w < h->n_words; w++) bitmap[w] = gh_atomic_load_relaxed(&h->xpages[w]);
  uint64_t errors[GH_ERRC_COUNT];
  for (int i = 0; i < GH_ERRC_COUNT; i++) errors[i] = gh_atomic_load64_relaxed(&h->xerrors[i]);
  _gh_stats_finish(s, h, bitmap, errors);
  free(bitmap);
  return GH_OK;
}

void* gh_cpu_malloc_probed(gh_cpu_heap_t* heap, size_t size, uint32_t* probes) {
  const uint32_t id = lane_id();
  gh_rng_t rng = gh_rng_seed(id, ++gh_cpu_calls);
  *probes = 0;
  return gh_lane_malloc(heap->h, size, id % heap->h->n_slots, &rng, probes);
}

void* gh_cpu_malloc(gh_cpu_heap_t* heap, size_t size) {
  uint32_t probes;
  return gh_cpu_malloc_probed(heap, size, &probes);
}

void gh_cpu_free(gh_cpu_heap_t* heap, void* ptr) { gh_lane_free(heap->h, ptr); }
