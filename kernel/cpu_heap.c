/* gpuheap: the CPU build of the allocator core (see include/gpuheap/cpu.h). */
#include <stdlib.h>
#include <string.h>

#include "gpuheap/core.h"
#include "gpuheap/grow.h"
#include "gpuheap/cpu.h"
#include "gpuheap/layout.h"
#include "../host/internal.h"

#define GH_CPU_DEFAULT_SLOTS 8u

struct gh_cpu_heap_s {
  gh_dheap_t* h; /* header at the start of meta */
  gh_layout_t layout;
  uint8_t* meta;
  uint8_t* data;
  int own_data;      /* data allocated here (not placed by a tensor manager) */
  uint32_t online;   /* pages [online, n_pages) are offline: bits set (managed heaps) */
};

/* A thread's lane identity: its slot and its random stream. */
static _Thread_local uint32_t gh_cpu_lane_id;
static _Thread_local uint32_t gh_cpu_calls;
static uint32_t gh_cpu_next_lane;

static uint32_t lane_id(void) {
  if (gh_cpu_lane_id == 0) gh_cpu_lane_id = __atomic_add_fetch(&gh_cpu_next_lane, 1u, __ATOMIC_RELAXED);
  return gh_cpu_lane_id;
}

/* All metadata as new; pages from `online` on offline (bits set). */
static void clear_metadata(gh_cpu_heap_t* heap) {
  memset(heap->meta + heap->layout.pages_off, 0, heap->layout.total - heap->layout.pages_off);
  memset(heap->meta + heap->layout.hints_off, 0xFF, heap->layout.hints_bytes);
  const uint32_t first = heap->online / 32u;
  if (first < heap->h->n_words) memset(heap->h->xpages + first, 0xFF, (size_t)(heap->h->n_words - first) * 4u);
}

int _gh_cpu_heap_create_at(gh_cpu_heap_t** out, size_t bytes, const gh_heap_options_t* opts, uint8_t* data,
                           size_t online_bytes) {
  if (out == NULL) return _gh_error(GH_ERR_INVAL, "gh_cpu_heap_create: out is NULL");
  *out = NULL;
  gh_heap_options_t o;
  uint32_t shift = 0, pages = 0;
  const int err = _gh_options_resolve(opts, bytes, &o, &shift, &pages);
  if (err) return err;
  const uint32_t slots = o.slots ? o.slots : GH_CPU_DEFAULT_SLOTS;
  uint32_t online = pages;
  if (data != NULL) {
    const size_t frame = (size_t)1 << GH_FRAME_SHIFT;
    if (((uintptr_t)data & (frame - 1u)) != 0u || bytes % frame || online_bytes % frame || online_bytes > bytes ||
        ((size_t)pages << shift) != bytes)
      return _gh_error(GH_ERR_INVAL, "managed heap: data %p, %zu bytes, %zu online: not whole frames", (void*)data,
                       bytes, online_bytes);
    online = (uint32_t)(online_bytes >> shift);
  }

  gh_cpu_heap_t* heap = (gh_cpu_heap_t*)calloc(1, sizeof *heap);
  if (heap == NULL) return _gh_error(GH_ERR_NOMEM, "gh_cpu_heap_create");
  gh_class_t classes[GH_MAX_CLASSES];
  gh_layout_compute(&heap->layout, pages, shift, gh_classes_init(classes, shift), slots);
  heap->meta = (uint8_t*)aligned_alloc(256, heap->layout.total);
  heap->own_data = data == NULL;
  heap->data = data ? data : (uint8_t*)aligned_alloc(o.page_bytes, (size_t)pages << shift);
  heap->online = online;
  if (heap->meta == NULL || heap->data == NULL) {
    free(heap->meta);
    if (heap->own_data) free(heap->data);
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

int gh_cpu_heap_create(gh_cpu_heap_t** out, size_t bytes, const gh_heap_options_t* opts) {
  return _gh_cpu_heap_create_at(out, bytes, opts, NULL, 0);
}

int gh_cpu_heap_destroy(gh_cpu_heap_t* heap) {
  if (heap == NULL) return GH_OK;
  free(heap->meta);
  if (heap->own_data) free(heap->data);
  free(heap);
  return GH_OK;
}

/* ---- a tensor manager's heap in the CPU library (host/frames_select_cpu.c) ---- */

int _gh_cpu_heap_usage(gh_cpu_heap_t* heap, size_t* used_bytes, size_t* online_bytes) {
  const gh_dheap_t* h = heap->h;
  size_t used = 0;
  for (uint32_t w = 0; w < heap->online / 32u; w++) used += (size_t)__builtin_popcount(gh_atomic_load_relaxed(&h->xpages[w]));
  *used_bytes = used << h->page_shift;
  *online_bytes = (size_t)heap->online << h->page_shift;
  return GH_OK;
}

int _gh_cpu_heap_online(gh_cpu_heap_t* heap, uint32_t pages) {
  if (pages > heap->h->n_pages || pages % 32u)
    return _gh_error(GH_ERR_INVAL, "_gh_heap_online: %u pages of a %u-page heap", pages, heap->h->n_pages);
  /* No searcher changes an all-ones word (its claims need a zero bit):
   * clearing the words publishes the pages while other threads allocate. */
  for (uint32_t w = heap->online / 32u; w < pages / 32u; w++) gh_atomic_store_release(&heap->h->xpages[w], 0u);
  if (pages > heap->online) {
    heap->online = pages;
    gh_atomic_store_release(&heap->h->xgrown, heap->h->xgrown + 1u);  /* (only the host writes it) */
  }
  return GH_OK;
}

/* Take free trailing frames offline (gh_offline_tail, as the device
 * heap's kernel does), down to `keep` pages at most: the new bound. */
uint32_t _gh_cpu_heap_offline_tail(gh_cpu_heap_t* heap, uint32_t keep, uint32_t words_per_frame) {
  heap->online = gh_offline_tail(heap->h, keep / 32u, heap->online / 32u, words_per_frame) * 32u;
  return heap->online;
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
  /* Offline pages (a managed heap's: set bits, FREE state) are neither
   * free nor in use. */
  s->pages_total = heap->online;
  s->heap_bytes = (uint64_t)heap->online << h->page_shift;
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

void* gh_cpu_malloc_grow(gh_cpu_heap_t* heap, size_t size) {
  const gh_dheap_t* h = heap->h;
  uint32_t seen = gh_grow_seen(h);
  void* p = gh_cpu_malloc(heap, size);
  const uint32_t pages = gh_grow_pages(h, size);
  if (p != NULL || h->grow == NULL || pages == 0u) return p;
  /* Ask the host, search again (grow.h); after a denial, once more. */
  for (uint32_t r = 0; r < GH_GROW_ROUNDS; r++) {
    const bool grew = gh_grow_wait(h, gh_grow_ask(h, pages, seen));
    seen = gh_grow_seen(h);
    if ((p = gh_cpu_malloc(heap, size)) != NULL || !grew) return p;
  }
  return NULL;
}

void gh_cpu_free(gh_cpu_heap_t* heap, void* ptr) { gh_lane_free(heap->h, ptr); }
