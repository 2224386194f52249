/* gpuheap: where the metadata of a heap lies, and how a page is counted in
 * statistics. Pure arithmetic shared by the host library (GPU heaps), the
 * CPU build and the statistics kernel.
 *
 * One metadata block holds, in order: the gh_dheap_t header, the page bitmap,
 * xstate, xcount, the chunk bitmaps, the room bitmaps and their summaries,
 * the hint slots (page
 * hints per class, then frame hints) and the error counters,
 * each 256-byte aligned. All of it starts zero except the hint slots, which
 * start as GH_NO_PAGE (all bytes 0xFF).
 */
#ifndef GPUHEAP_LAYOUT_H
#define GPUHEAP_LAYOUT_H

#include "sizeclass.h"

typedef struct gh_layout_s {
  size_t pages_off, state_off, count_off, chunks_off, room_off, roomsum_off, hints_off, errors_off;
  size_t hints_bytes;
  size_t total;
} gh_layout_t;

GH_HD size_t gh_align_up(size_t x, size_t a) { return (x + a - 1u) & ~(a - 1u); }

GH_HD void gh_layout_compute(gh_layout_t* L, uint32_t n_pages, uint32_t page_shift, uint32_t n_classes, uint32_t n_slots) {
  size_t at = gh_align_up(sizeof(gh_dheap_t), 256);
  L->pages_off = at;
  at = gh_align_up(at + (size_t)(n_pages / 32u) * 4u, 256);
  L->state_off = at;
  at = gh_align_up(at + (size_t)n_pages * 4u, 256);
  L->count_off = at;
  at = gh_align_up(at + (size_t)n_pages * 4u, 256);
  L->chunks_off = at;
  at = gh_align_up(at + (size_t)n_pages * gh_chunk_words_for(page_shift) * 4u, 256);
  L->room_off = at;
  at = gh_align_up(at + (size_t)n_classes * (n_pages / 32u) * 4u, 256);
  L->roomsum_off = at;
  at = gh_align_up(at + (size_t)n_classes * ((n_pages / 32u + 31u) / 32u) * 4u, 256);
  L->hints_off = at;
  L->hints_bytes = ((size_t)n_classes + 1u) * n_slots * 4u; /* page hints, then frame hints */
  at = gh_align_up(at + L->hints_bytes, 256);
  L->errors_off = at;
  L->total = gh_align_up(at + GH_ERRC_COUNT * 8u, 256);
}

/* Fill the header h for data at `base` and metadata block `meta` (addresses
 * as the allocator will use them: device addresses for GPU heaps). */
GH_HD void gh_layout_header(gh_dheap_t* h, const gh_layout_t* L, uint8_t* base, uint8_t* meta, uint32_t n_pages,
                            uint32_t page_shift, uint32_t n_slots, uint32_t probe_limit, uint32_t refill_min) {
  h->base = base;
  h->page_shift = page_shift;
  h->n_pages = n_pages;
  h->n_words = n_pages / 32u;
  h->chunk_words = gh_chunk_words_for(page_shift);
  h->n_classes = gh_classes_init(h->classes, page_shift);
  h->n_slots = n_slots;
  h->max_chunk = h->classes[h->n_classes - 1u].size;
  h->probe_limit = probe_limit;
  h->xpages = (uint32_t*)(meta + L->pages_off);
  h->xstate = (uint32_t*)(meta + L->state_off);
  h->xcount = (uint32_t*)(meta + L->count_off);
  h->xchunks = (uint32_t*)(meta + L->chunks_off);
  h->xhints = (uint32_t*)(meta + L->hints_off);
  h->xfhints = h->xhints + (size_t)h->n_classes * n_slots;
  h->xroom = (uint32_t*)(meta + L->room_off);
  h->xroomsum = (uint32_t*)(meta + L->roomsum_off);
  h->n_sum = (h->n_words + 31u) / 32u;
  h->refill_min = refill_min;
  h->xerrors = (uint64_t*)(meta + L->errors_off);
  h->grow = NULL;
  h->xgrow = 0u;
  h->xgrown = 0u;
}

/* How statistics see one page, from its xstate, xcount and page bit. */
#define GH_VIEW_FREE 0u
#define GH_VIEW_CHUNK 1u
#define GH_VIEW_HEAD 2u
#define GH_VIEW_OTHER 3u /* run body, or claimed and not yet formatted */

typedef struct gh_page_view_s {
  uint32_t kind;
  uint32_t cls;
  uint32_t used;    /* chunks (CHUNK) */
  uint32_t length;  /* pages (HEAD) */
  bool pinned;
} gh_page_view_t;

GH_HD gh_page_view_t gh_page_view(uint32_t state, uint32_t count, bool in_use) {
  gh_page_view_t v = {GH_VIEW_OTHER, 0u, 0u, 0u, false};
  if (!in_use) {
    v.kind = GH_VIEW_FREE;
  } else if (count & GH_COUNT_OPEN) {
    v.kind = GH_VIEW_CHUNK;
    v.cls = (count & GH_COUNT_CLASS_MASK) >> GH_COUNT_CLASS_SHIFT;
    v.used = count & GH_COUNT_USED_MASK;
    v.pinned = (count & GH_COUNT_PINNED) != 0u;
  } else if (gh_state_kind(state) == GH_STATE_KIND_HEAD) {
    v.kind = GH_VIEW_HEAD;
    v.length = gh_state_low(state);
  }
  return v;
}

#endif /* GPUHEAP_LAYOUT_H */
