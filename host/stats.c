/* gpuheap: statistics totals shared by GPU heaps and the CPU build: the
 * per-page part runs on whichever side holds the pages, the finish here. */
#include <string.h>

#include "internal.h"

void _gh_stats_begin(gh_heap_stats_t* s, const gh_dheap_t* h, size_t meta_bytes) {
  memset(s, 0, sizeof *s);
  s->page_bytes = 1u << h->page_shift;
  s->pages_total = h->n_pages;
  s->heap_bytes = (uint64_t)h->n_pages << h->page_shift;
  s->meta_bytes = meta_bytes;
  s->n_classes = h->n_classes;
  for (uint32_t c = 0; c < h->n_classes; c++) s->classes[c].size = h->classes[c].size;
}

void _gh_stats_add_page(gh_heap_stats_t* s, const gh_dheap_t* h, gh_page_view_t v) {
  switch (v.kind) {
    case GH_VIEW_FREE:
      s->pages_free++;
      break;
    case GH_VIEW_CHUNK:
      s->pages_chunk++;
      s->pages_pinned += v.pinned;
      if (v.cls < h->n_classes) {
        s->classes[v.cls].pages++;
        s->classes[v.cls].chunks_used += v.used;
        s->classes[v.cls].chunks_capacity += h->classes[v.cls].per_page;
        s->bytes_in_use += (uint64_t)v.used * h->classes[v.cls].size;
      }
      break;
    case GH_VIEW_HEAD:
      s->runs++;
      s->pages_run += v.length;
      s->bytes_in_use += (uint64_t)v.length << h->page_shift;
      break;
    default:
      break; /* run bodies are counted with their head */
  }
}

void _gh_stats_finish(gh_heap_stats_t* s, const gh_dheap_t* h, const uint32_t* page_bitmap, const uint64_t* errors) {
  uint32_t run = 0, best = 0;
  for (uint32_t w = 0; w < h->n_words; w++) {
    const uint32_t v = page_bitmap[w];
    if (v == 0u) {
      run += 32u;
    } else {
      for (uint32_t b = 0; b < 32u; b++) {
        if (v & (1u << b)) {
          if (run > best) best = run;
          run = 0;
        } else {
          run++;
        }
      }
    }
  }
  s->largest_free_run = run > best ? run : best;
  const uint64_t held = ((uint64_t)(s->pages_total - s->pages_free)) << h->page_shift;
  s->fragmentation = held ? 1.0 - (double)s->bytes_in_use / (double)held : 0.0;
  s->double_frees = errors[GH_ERRC_DOUBLE_FREE];
  s->foreign_frees = errors[GH_ERRC_FOREIGN];
}
