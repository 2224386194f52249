/* gpuheap: the heap's layout, shared by device code, the CPU build and the
 * host library.
 *
 * Glossary
 *   heap      one data region of n_pages pages plus the metadata below.
 *   page      the unit of randomized search; 2^page_shift bytes (4-64 KiB).
 *   frame     2 MiB, the unit of physical backing (host side).
 *   class     a chunk size; a page is formatted for one class while it holds
 *             chunks. Sizes are multiples of 16, eight classes per doubling.
 *   chunk     one small allocation inside a page: one bit of the page's chunk
 *             bitmap.
 *   run       a large allocation: contiguous pages claimed together.
 *   slot      a hint slot: per class, one per SM (GPU) or per thread (CPU),
 *             holding the page that last served the class there.
 *   lane      a thread taking part in an allocation; on the CPU the only one.
 *
 * Metadata, one entry per page p unless said otherwise (all atomic, "x"):
 *   xpages[p/32]  page bitmap, bit p%32: 1 = page in use (a run, or formatted
 *                 for chunks, or claimed by a thread that is formatting it).
 *   xstate[p]     what the page is (GH_STATE_*, below).
 *   xcount[p]     OPEN | PINNED | class | used (GH_COUNT_*, below): the word
 *                 that reservations race on; holding the class here lets one
 *                 fetch-add both reserve and check the page.
 *   xchunks[p*chunk_words + w]  chunk bitmap of a chunk page: 1 = chunk taken.
 *   xhints[c*n_slots + s]       page index, GH_NO_PAGE (never held one since
 *                 the heap was created or reset), GH_DROPPED (gave its page
 *                 up), or GH_REFILL while the one thread that found the page
 *                 full finds the next (GH_REFILL_COLD for the slot's first
 *                 page, which every class waits for).
 *   xroom[c*n_words + p/32]  per class, bit p%32: page p is probably a page
 *                 of the class with free chunks and in no hint slot. A hint
 *                 only: set and cleared around the transitions (page.h),
 *                 checked by every reservation, so a stale bit costs a probe.
 *   xroomsum[c*n_sum + w/32]  per class, bit w%32: room word w is probably
 *                 not zero (one bit per 1024 pages), so the search for room
 *                 reads a summary word first.
 *   xfhints[s]    per slot, the page-bitmap word its last new page came from:
 *                 new pages are taken next to it, so pages in use cluster in
 *                 few words (frames, with 64 KiB pages) and whole free words
 *                 stay free for large runs.
 *
 * Invariants (values settled, i.e. no operation in flight):
 *   page bit clear  =>  xstate == FREE, xcount == 0, chunk bitmap all zero
 *   xcount & OPEN   =>  page bit set, xstate == CHUNK(class, slot),
 *                       class(xcount) == class(xstate)
 *   popcount(chunk bitmap) == used(xcount) <= per_page(class)
 *   xhints[class][slot] == p  =>  xcount & OPEN|PINNED, xstate ==
 *                       CHUNK(class, slot)
 *   xhints[class][slot] == GH_REFILL(_COLD)  <=>  one thread is the slot's
 *                       refiller
 *   (the converse of the first, xcount & PINNED => p in its slot, holds
 *   only while no refill is in flight: the page a refiller took out stays
 *   pinned, by the refiller, until it installs or abandons. The SPIN model
 *   checks both in every state with -DSLOT_MONITOR.)
 * In flight, a reservation that is being undone adds a transient amount to
 * used (page.h); it is bounded by 32 per resident warp, far below 2^22, so it
 * never carries into class, PINNED or OPEN.
 */
#ifndef GPUHEAP_TYPES_H
#define GPUHEAP_TYPES_H

#include "config.h"

#define GH_CHUNK_ALIGN 16u            /* every pointer handed out is 16-byte aligned */
#define GH_FRAME_SHIFT 21u            /* 2 MiB frames */
#define GH_MIN_PAGE_SHIFT 12u         /* 4 KiB */
#define GH_MAX_PAGE_SHIFT 16u         /* 64 KiB: offsets fit 16 bits (class magic) */
#define GH_MAX_CLASSES 64u            /* 16 B .. 16 KiB */
#define GH_NO_PAGE 0xFFFFFFFFu
#define GH_REFILL 0xFFFFFFFEu         /* a hint slot being refilled by one thread */
#define GH_REFILL_COLD 0xFFFFFFFDu    /* the same, for a slot's first page: the others wait */
#define GH_DROPPED 0xFFFFFFFCu        /* a slot that held a page and gave it up (not cold) */
#define GH_REFILL_WAIT 24u            /* re-reads of a REFILL slot before searching alone */
#define GH_MAX_SLOTS (1u << 16)

/* xstate encodings. */
#define GH_STATE_FREE 0u
#define GH_STATE_KIND_SHIFT 30u
#define GH_STATE_KIND_CHUNK 1u
#define GH_STATE_KIND_HEAD 2u         /* first page of a run; low 30 bits: length in pages */
#define GH_STATE_KIND_BODY 3u         /* later page of a run (checked builds); low bits: offset */
#define GH_STATE_LOW_MASK 0x3FFFFFFFu
#define GH_STATE_CLASS_SHIFT 22u      /* CHUNK: class in bits 22..29, slot in bits 0..21 */
#define GH_STATE_SLOT_MASK 0x3FFFFFu

/* xcount encodings. */
#define GH_COUNT_OPEN 0x80000000u
#define GH_COUNT_PINNED 0x40000000u
#define GH_COUNT_CLASS_SHIFT 22u
#define GH_COUNT_CLASS_MASK 0x3FC00000u
#define GH_COUNT_USED_MASK 0x003FFFFFu

/* Bad-free counters, always kept (a bad free costs nothing until it happens). */
#define GH_ERRC_DOUBLE_FREE 0         /* chunk already free, or run already freed */
#define GH_ERRC_FOREIGN 1             /* not a pointer this heap handed out */
#define GH_ERRC_COUNT 2

typedef struct gh_class_s {
  uint32_t size;      /* bytes, a multiple of 16 */
  uint32_t per_page;  /* chunks per page */
  uint32_t magic;     /* ceil(2^32 / size): offset * magic >> 32 == offset / size for offset < 2^16 */
  uint32_t words;     /* chunk-bitmap words in use: ceil(per_page / 32) */
} gh_class_t;

/* The heap as the allocator sees it. Lives in device memory for GPU heaps and
 * host memory for CPU heaps; fields without the x prefix never change after
 * creation. */
typedef struct gh_dheap_s {
  uint8_t* base;          /* page 0; aligned to the page size */
  uint32_t page_shift;
  uint32_t n_pages;       /* a multiple of 32 */
  uint32_t n_words;       /* n_pages / 32 */
  uint32_t chunk_words;   /* chunk-bitmap words per page: page_bytes / 16 / 32 */
  uint32_t n_classes;
  uint32_t n_slots;
  uint32_t max_chunk;     /* largest class size; larger requests are runs */
  uint32_t probe_limit;   /* random steps before the deterministic sweep */
  uint32_t* xpages;
  uint32_t* xstate;
  uint32_t* xcount;
  uint32_t* xchunks;
  uint32_t* xhints;
  uint32_t* xfhints;      /* [n_slots] */
  uint32_t* xroom;        /* [n_classes * n_words] */
  uint32_t* xroomsum;     /* [n_classes * n_sum] */
  uint32_t n_sum;         /* ceil(n_words / 32) */
  uint32_t refill_min;    /* classes with fewer chunks per page do not wait for a refill */
  uint32_t room_fill;     /* estimated fill (%) from which a new page waits for a whole-heap room search; 100: off */
  uint64_t* xerrors;      /* [GH_ERRC_COUNT] */
  uint32_t* grow;         /* a tensor manager's heap with GH_TMGR_GROW_ON_DEMAND: the channel to the host
                             (grow.h; host memory the device can reach), else NULL */
  uint32_t xgrow;         /* the latest growth generation asked for (grow.h) */
  uint32_t xgrown;        /* growths the host has published (a managed heap's; grow.h) */
  gh_class_t classes[GH_MAX_CLASSES];
} gh_dheap_t;

/* Metadata sizes for a heap of n_pages pages; the host lays them out in one
 * block after the gh_dheap_t (see _gh_layout in host/layout.c). */
GH_HD uint32_t gh_chunk_words_for(uint32_t page_shift) { return (1u << page_shift) / GH_CHUNK_ALIGN / 32u; }

GH_HD uint32_t gh_state_chunk(uint32_t cls, uint32_t slot) {
  return (GH_STATE_KIND_CHUNK << GH_STATE_KIND_SHIFT) | (cls << GH_STATE_CLASS_SHIFT) | (slot & GH_STATE_SLOT_MASK);
}
GH_HD uint32_t gh_count_class(uint32_t cls) { return cls << GH_COUNT_CLASS_SHIFT; }
GH_HD uint32_t gh_state_kind(uint32_t s) { return s >> GH_STATE_KIND_SHIFT; }
GH_HD uint32_t gh_state_class(uint32_t s) { return (s >> GH_STATE_CLASS_SHIFT) & 0xFFu; }
GH_HD uint32_t gh_state_slot(uint32_t s) { return s & GH_STATE_SLOT_MASK; }
GH_HD uint32_t gh_state_head(uint32_t len) { return (GH_STATE_KIND_HEAD << GH_STATE_KIND_SHIFT) | len; }
GH_HD uint32_t gh_state_body(uint32_t off) { return (GH_STATE_KIND_BODY << GH_STATE_KIND_SHIFT) | off; }
GH_HD uint32_t gh_state_low(uint32_t s) { return s & GH_STATE_LOW_MASK; }

#endif /* GPUHEAP_TYPES_H */
