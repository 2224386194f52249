/* gpuheap: one lane's allocation and free, the same on device and CPU.
 *
 * The CPU build runs exactly this; the GPU runs the warp layer (warp.cuh),
 * which asks the same sources for a group of lanes at once (gh_grant_next)
 * and falls back to one lane at a time for what is left. A request of n
 * chunks of a class is served, in order, from:
 *   1. the page in the caller's hint slot (one fetch-add, one fetch-or), or
 *      the page its refiller installs there (one thread refills a slot);
 *   2. a page of the class with room, from the class's room bitmap;
 *   3. a free page near the slot's frame hint or at random words
 *      (gh_page_claim_one), formatted for the class (and installed as the
 *      slot's hint by its refiller);
 *   4. a page of the class with room, by random probes of xcount;
 *   5. the sweeps: every word of the page bitmap, empty pages stolen from
 *      hint slots, every page of the class; and when they find nothing,
 *      after a short pause for what other threads are formatting, both
 *      sweeps once more.
 * Only when all of these find nothing is NULL returned.
 */
#ifndef GPUHEAP_CORE_H
#define GPUHEAP_CORE_H

#include "run.h"

/* A reservation of `left` chunks on `page`, to be taken bit by bit
 * (gh_chunks_take: from word `cursor`, knowing `seen` of it). */
typedef struct gh_grant_s {
  uint32_t page;
  uint32_t left;
  uint32_t cursor;
  uint32_t seen;
} gh_grant_t;

GH_FN void gh_grant_set(const gh_dheap_t* h, gh_grant_t* g, uint32_t p, uint32_t cls, uint32_t k, uint32_t used_before) {
  g->page = p;
  g->left = k;
  g->cursor = gh_chunks_cursor(&h->classes[cls], used_before);
  g->seen = gh_chunks_seen(used_before);
}

/* Take chunks of grant g (class cls): gh_chunks_take on its fields. */
GH_FN uint32_t gh_grant_take(const gh_dheap_t* h, gh_grant_t* g, const gh_class_t* cl) {
  return gh_chunks_take(h, g->page, cl, &g->left, &g->cursor, &g->seen);
}

GH_FN void* gh_chunk_ptr(const gh_dheap_t* h, uint32_t p, uint32_t cls, uint32_t idx) {
  return gh_page_ptr(h, p) + (size_t)idx * h->classes[cls].size;
}

/* Source 1: reserve up to n chunks on the hint slot's page. When it has no
 * room, one thread moves the slot to GH_REFILL and becomes its refiller (it
 * goes on to find the next page; *hs says so). The others wait for the new
 * page (bounded) instead of each formatting a page of its own: always for
 * the slot's first page (GH_REFILL_COLD: all of a slot's first requests
 * arrive together, and each page they opened would stay mostly empty in a
 * class asked for rarely: bench/NOTES.md, visit 20), and later only for
 * classes with many chunks per page, where a refill is rare. Returns the
 * chunks reserved; fewer than n: the rest come from the next sources.
 * Model `hint_grant`. */
GH_FN uint32_t gh_grant_from_hint(const gh_dheap_t* h, uint32_t cls, uint32_t slot, uint32_t n, gh_hint_t* hs,
                                  gh_grant_t* g) {
  uint32_t* s = gh_hint_slot(h, cls, slot);
  const bool wait = h->classes[cls].per_page >= h->refill_min;
  hs->refiller = false;
  hs->old = GH_NO_PAGE;
  for (uint32_t i = 0;; i++) {
    uint32_t p = gh_atomic_load_acquire(s);
    hs->seen = p;
    if (gh_hint_refilling(p)) {
      if ((!wait && p == GH_REFILL) || i >= GH_REFILL_WAIT) return 0; /* the next sources, alone */
      gh_backoff(i);
      continue;
    }
    uint32_t k = 0;
    if (p < GH_DROPPED) {
      uint32_t used = 0;
      k = gh_page_reserve(h, p, cls, n, &used);
      if (k) gh_grant_set(h, g, p, cls, k, used);
      if (k == n) return k;
    }
    /* The page is full (we may have taken its last chunks), or there is
     * none: refill the slot. */
    const uint32_t mark = p == GH_NO_PAGE ? GH_REFILL_COLD : GH_REFILL;
    if (gh_atomic_cas_acq_rel(s, &p, mark)) {
      hs->refiller = true;
      hs->old = hs->seen < GH_DROPPED ? hs->seen : GH_NO_PAGE;
      hs->seen = mark;
      return k;
    }
    if (k) return k;
  }
}

/* Reserve on a page of the room bitmap's word w; stale bits are cleared.
 * Model `room_grant` (with gh_grant_from_room). */
GH_FN uint32_t gh_grant_from_room_word(const gh_dheap_t* h, uint32_t cls, uint32_t slot, uint32_t w, uint32_t n,
                                       gh_hint_t* hs, gh_grant_t* g, uint32_t r) {
  uint32_t v = gh_atomic_load_relaxed(gh_room_word(h, cls, w));
  while (v) {
    const uint32_t b = gh_set_bit_from(v, r); /* searchers start at different bits */
    const uint32_t p = (w << 5) + b;
    v &= ~(1u << b);
    uint32_t used = 0;
    const uint32_t k = gh_page_reserve(h, p, cls, n, &used);
    if (!k) {
      gh_room_clear(h, cls, p); /* full, closed or another class now */
      continue;
    }
    gh_grant_set(h, g, p, cls, k, used);
    if (hs->refiller && used + k < h->classes[cls].per_page && gh_page_pin(h, p, cls)) {
      gh_atomic_store_relaxed(&h->xstate[p], gh_state_chunk(cls, slot)); /* the slot that holds it now */
      gh_hint_install(h, cls, slot, hs, p);
    }
    return k;
  }
  /* A zero room word behind a set summary bit: clear the bit (and re-check). */
  uint32_t* sw = gh_roomsum_word(h, cls, w);
  gh_atomic_and_relaxed(sw, ~(1u << (w & 31u)));
  if (gh_atomic_load_relaxed(gh_room_word(h, cls, w)) != 0u) gh_atomic_or_relaxed(sw, 1u << (w & 31u));
  return 0;
}

#define GH_ROOM_BLOCK 8u /* summary words read together: 8 x 1024 pages per round trip */

/* Source 2: a page of the class with room, from the class's room bitmap,
 * read through its summary (one summary word covers 32 room words, 1024
 * pages). Blocks of GH_ROOM_BLOCK summary words are loaded at once: first
 * the block over the slot's frame hint (where the slot's pages cluster),
 * then random blocks, probe_limit / 4 blocks in all (a longer search cost
 * more time than the pages it found saved: bench/NOTES.md, visit 7). A refiller installs the
 * page it finds as the slot's hint. `all`: every block, in order from the
 * hint's. Model `room_grant` (search abstracted). */
GH_FN_SLOW uint32_t gh_grant_from_room(const gh_dheap_t* h, uint32_t cls, uint32_t slot, uint32_t n, gh_hint_t* hs,
                                  gh_rng_t* rng, gh_grant_t* g, uint32_t* probes, bool all) {
  const uint32_t* sum = h->xroomsum + (size_t)cls * h->n_sum;
  const uint32_t blocks = (h->n_sum + GH_ROOM_BLOCK - 1u) / GH_ROOM_BLOCK;
  const uint32_t hint = gh_atomic_load_relaxed(&h->xfhints[slot]);
  uint32_t b = hint < h->n_words ? (hint >> 5) / GH_ROOM_BLOCK : gh_rng_below(rng, blocks);
  uint32_t tries = all ? blocks : (h->probe_limit / 4u ? h->probe_limit / 4u : 1u);
  if (tries > blocks) tries = blocks;
  for (uint32_t i = 0; i < tries; i++) {
    if (i) b = tries == blocks ? (b + 1u == blocks ? 0u : b + 1u) : gh_rng_below(rng, blocks);
    (*probes)++;
    /* The block's words in an order rotated by r (where this searcher starts
     * in the block; r's higher bits: where in each word). The rotation is
     * applied to the addresses, so sv is indexed by constants only and stays
     * in registers. */
    const uint32_t r = gh_rng_next(rng);
    uint32_t sv[GH_ROOM_BLOCK], sw[GH_ROOM_BLOCK];
#if GH_ON_DEVICE
#pragma unroll
#endif
    for (uint32_t j = 0; j < GH_ROOM_BLOCK; j++) {
      sw[j] = b * GH_ROOM_BLOCK + ((j + r) & (GH_ROOM_BLOCK - 1u));
      sv[j] = sw[j] < h->n_sum ? gh_atomic_load_relaxed(&sum[sw[j]]) : 0u;
    }
#if GH_ON_DEVICE
#pragma unroll
#endif
    for (uint32_t j = 0; j < GH_ROOM_BLOCK; j++) {
      while (sv[j]) {
        const uint32_t bit = gh_set_bit_from(sv[j], r >> 8);
        sv[j] &= ~(1u << bit);
        const uint32_t k = gh_grant_from_room_word(h, cls, slot, (sw[j] << 5) + bit, n, hs, g, r >> 16);
        if (k) return k;
      }
    }
  }
  return 0;
}

/* Is the heap about as full as room_fill (percent) or more? Four random
 * words of the page bitmap, 128 pages: an estimate without a counter. Pages
 * cluster by slot, so words tend to be full or empty, and the estimate is
 * coarse (mostly 0, 25, 50, 75 or 100%). */
GH_FN bool gh_pages_scarce(const gh_dheap_t* h, gh_rng_t* rng) {
  uint32_t free_pages = 0;
  for (uint32_t i = 0; i < 4u; i++) free_pages += 32u - gh_popc(gh_atomic_load_relaxed(&h->xpages[gh_rng_below(rng, h->n_words)]));
  return free_pages * 100u <= 128u * (100u - h->room_fill);
}

/* A freshly claimed page p: format it with a reservation of n chunks. If
 * chunks are left over, the refiller pins it and installs it; anyone else
 * marks it in the room bitmap, where others will find it. Model `new_page`. */
GH_FN uint32_t gh_grant_from_new_page(const gh_dheap_t* h, uint32_t p, uint32_t cls, uint32_t slot, uint32_t n,
                                      gh_hint_t* hs, gh_grant_t* g) {
  const uint32_t per_page = h->classes[cls].per_page;
  const uint32_t k = n < per_page ? n : per_page;
  const bool pin = k < per_page && hs->refiller;
  gh_page_format(h, p, cls, slot, k, pin);
  gh_grant_set(h, g, p, cls, k, 0);
  if (pin)
    gh_hint_install(h, cls, slot, hs, p);
  else if (k < per_page)
    gh_room_set(h, cls, p);
  return k;
}

/* Source 4 and the last: a page of class cls with room, by `count` probes of
 * xcount (random), or by visiting every page (sweep). Model `class_page`. */
GH_FN_SLOW uint32_t gh_grant_from_class_page(const gh_dheap_t* h, uint32_t cls, uint32_t n, gh_rng_t* rng, bool sweep,
                                        gh_grant_t* g, uint32_t* probes) {
  const uint32_t per_page = h->classes[cls].per_page;
  const uint32_t want = GH_COUNT_OPEN | gh_count_class(cls);
  const uint32_t count = sweep ? h->n_pages : h->probe_limit;
  uint32_t p = gh_rng_below(rng, h->n_pages);
  for (uint32_t i = 0; i < count; i++) {
    if (!sweep) p = gh_rng_below(rng, h->n_pages);
    (*probes)++;
    uint32_t c = gh_atomic_load_relaxed(&h->xcount[p]);
    /* A page that looks like it has room is reserved from by CAS, and asked
     * again (in the sweep) when another thread's reservation in flight (a
     * transient) made it look full. */
    for (uint32_t t = 0; t < (sweep ? 4u : 1u) && (c & (GH_COUNT_OPEN | GH_COUNT_CLASS_MASK)) == want &&
                         (c & GH_COUNT_USED_MASK) < per_page;
         t++) {
      uint32_t used = 0;
      const uint32_t k = gh_page_reserve_cas(h, p, cls, n, &used);
      if (k) {
        gh_grant_set(h, g, p, cls, k, used);
        return k;
      }
      gh_backoff(t);
      c = gh_atomic_load_relaxed(&h->xcount[p]);
    }
    if (sweep) p = (p + 1u == h->n_pages) ? 0u : p + 1u;
  }
  return 0;
}

/* Where a search for chunks stands: the next source to ask, and the hint. */
#define GH_SRC_HINT 0u
#define GH_SRC_ROOM 1u
#define GH_SRC_NEW 2u      /* a free page near the frame hint or at random words */
#define GH_SRC_CLASS 3u    /* random probes of xcount */
#define GH_SRC_SWEEP 4u    /* every word of the page bitmap, then stealing */
#define GH_SRC_CLASS_ALL 5u
#define GH_SRC_AGAIN 6u    /* after a pause: the bitmap sweep and the class sweep once more */
#define GH_SRC_AGAIN_ALL 7u
#define GH_SRC_DONE 8u

typedef struct gh_search_s {
  uint32_t src;
  gh_hint_t hs;
} gh_search_t;

/* The next grant of up to n chunks of class cls, asking the sources in order
 * and staying with one while it gives. Stops before source `stop` (returning
 * 0 with s->src == stop), or returns 0 with s->src == GH_SRC_DONE when no
 * source has room: only then is the heap full for this class. A refiller
 * that has installed nothing by then gives its slot up. Model `grant_next`. */
GH_FN_SLOW uint32_t gh_grant_next(const gh_dheap_t* h, uint32_t cls, uint32_t slot, uint32_t n, gh_search_t* s, uint32_t stop,
                             gh_rng_t* rng, gh_grant_t* g, uint32_t* probes) {
  while (s->src < stop) {
    uint32_t k = 0, p;
    const uint32_t src = s->src;
    switch (src) {
      case GH_SRC_HINT:
        /* Whole pages for requests that fill them: no need to share. */
        if (n >= h->classes[cls].per_page && (p = gh_page_claim_one(h, slot, false, rng, probes)) != GH_NO_PAGE)
          return gh_grant_from_new_page(h, p, cls, slot, n, &s->hs, g);
        k = gh_grant_from_hint(h, cls, slot, n, &s->hs, g);
        break;
      case GH_SRC_ROOM:
        /* The refiller of a class that others wait for goes straight to a
         * new page: keeping them waiting costs more than the room saves. */
        if (!(s->hs.refiller && h->classes[cls].per_page >= h->refill_min))
          k = gh_grant_from_room(h, cls, slot, n, &s->hs, rng, g, probes, false);
        break;
      case GH_SRC_AGAIN:
        /* Nothing anywhere, as seen: let the pages other threads are
         * claiming or formatting right now land, then look once more. */
        for (uint32_t i = 0; i < 8u; i++) gh_backoff(i);
        /* fall through */
      case GH_SRC_NEW:
        /* From the fill `room_fill` on, room anywhere comes before a new
         * page: each page opened while others have room is one fewer for
         * the class that runs out first. Efficiency against throughput:
         * bench/NOTES.md, visits 13-14. 100 (the default) is off: the
         * estimate's loads are not made at all. */
        if (h->room_fill < 100u && !(s->hs.refiller && h->classes[cls].per_page >= h->refill_min) &&
            gh_pages_scarce(h, rng))
          k = gh_grant_from_room(h, cls, slot, n, &s->hs, rng, g, probes, true);
        if (k) break;
        /* fall through */
      case GH_SRC_SWEEP:
        p = gh_page_claim_one(h, slot, src != GH_SRC_NEW, rng, probes);
        if (p != GH_NO_PAGE) k = gh_grant_from_new_page(h, p, cls, slot, n, &s->hs, g);
        break;
      default: /* GH_SRC_CLASS, GH_SRC_CLASS_ALL, GH_SRC_AGAIN_ALL */
        k = gh_grant_from_class_page(h, cls, n, rng, src != GH_SRC_CLASS, g, probes);
        break;
    }
    if (src == GH_SRC_HINT || !k) s->src = src + 1u; /* the hint is asked once; others while they give */
    if (s->src == GH_SRC_DONE) gh_hint_abandon(h, cls, slot, &s->hs);
    if (k) return k;
  }
  return 0;
}

/* Pages for a request of `size` bytes served as a run; 0 if it cannot fit. */
GH_FN uint32_t gh_run_pages(const gh_dheap_t* h, size_t size) {
  if (size > ((size_t)h->n_pages << h->page_shift)) return 0u; /* also keeps the rounding below from wrapping */
  return (uint32_t)((size + ((size_t)1 << h->page_shift) - 1u) >> h->page_shift);
}

/* One lane's malloc. size 0 is served as 1 byte (a unique pointer). Model
 * `malloc_chunk` and `malloc_run`. */
GH_FN void* gh_lane_malloc(const gh_dheap_t* h, size_t size, uint32_t slot, gh_rng_t* rng, uint32_t* probes) {
  if (size > h->max_chunk) {
    const uint32_t n = gh_run_pages(h, size);
    if (n == 0u) return NULL;
    const uint32_t s = n == 1u ? gh_page_claim_one(h, slot, true, rng, probes) : gh_run_alloc(h, n, rng, probes);
    if (s == GH_NO_PAGE) return NULL;
    gh_run_mark(h, s, n);
    return gh_page_ptr(h, s);
  }
  const uint32_t cls = gh_size_to_class((uint32_t)size);
  gh_grant_t g;
  gh_search_t s = {GH_SRC_HINT, {GH_NO_PAGE, GH_NO_PAGE, false}};
  const uint32_t k = gh_grant_next(h, cls, slot, 1, &s, GH_SRC_DONE, rng, &g, probes);
  if (s.hs.refiller) gh_hint_abandon(h, cls, slot, &s.hs); /* served before a new page was needed */
  if (!k) return NULL;
  const uint32_t bit = gh_grant_take(h, &g, &h->classes[cls]);
  return gh_chunk_ptr(h, g.page, cls, g.cursor * 32u + gh_ctz(bit));
}

/* Where a pointer lies: the page, and for chunk pages the bitmap word and bit.
 * Returns the page's xstate kind, or 0 with *err set for a bad pointer. */
typedef struct gh_where_s {
  uint32_t page;
  uint32_t state;
  uint32_t word;
  uint32_t bit;
} gh_where_t;

GH_FN uint32_t gh_locate(const gh_dheap_t* h, const void* ptr, gh_where_t* at, int* err) {
  const size_t off = (size_t)((const uint8_t*)ptr - h->base);
  if ((const uint8_t*)ptr < h->base || off >= ((size_t)h->n_pages << h->page_shift)) {
    *err = GH_ERRC_FOREIGN;
    return 0;
  }
  at->page = (uint32_t)(off >> h->page_shift);
  at->state = gh_atomic_load_relaxed(&h->xstate[at->page]);
  const uint32_t in_page = (uint32_t)(off & (((size_t)1 << h->page_shift) - 1u));
  const uint32_t kind = gh_state_kind(at->state);
  if (kind == GH_STATE_KIND_CHUNK) {
    const gh_class_t* cl = &h->classes[gh_state_class(at->state)];
    const uint32_t idx = gh_class_div(cl, in_page);
    if (idx * cl->size != in_page || idx >= cl->per_page) {
      *err = GH_ERRC_FOREIGN;
      return 0;
    }
    at->word = idx >> 5;
    at->bit = 1u << (idx & 31u);
    return kind;
  }
  if (kind == GH_STATE_KIND_HEAD && in_page == 0u) return kind;
  /* A page start with no owner was freed already; anything else (inside a
   * run, misaligned) was never handed out. */
  const bool owned = (gh_atomic_load_relaxed(&h->xpages[at->page >> 5]) >> (at->page & 31u)) & 1u;
  *err = (kind == GH_STATE_FREE && !owned && in_page == 0u) ? GH_ERRC_DOUBLE_FREE : GH_ERRC_FOREIGN;
  return 0;
}

/* One lane's free; NULL does nothing, bad pointers are counted and ignored.
 * Model `free_chunk` and `free_run` (gh_locate: their load of xstate). */
GH_FN void gh_lane_free(const gh_dheap_t* h, void* ptr) {
  if (ptr == NULL) return;
  gh_where_t at;
  int err = GH_ERRC_FOREIGN;
  const uint32_t kind = gh_locate(h, ptr, &at, &err);
  if (kind == GH_STATE_KIND_CHUNK) {
    if (gh_chunks_release(h, at.page, at.word, at.bit))
      gh_page_unreserve(h, at.page, 1);
    else
      gh_count_error(h, GH_ERRC_DOUBLE_FREE);
  } else if (kind == GH_STATE_KIND_HEAD) {
    if (!gh_run_free(h, at.page, at.state)) gh_count_error(h, GH_ERRC_DOUBLE_FREE);
  } else {
    gh_count_error(h, err);
  }
}

#endif /* GPUHEAP_CORE_H */
