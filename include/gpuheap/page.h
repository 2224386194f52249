/* gpuheap: the page-state protocol of chunk pages.
 *
 * Model: proofs/spin/page.pml checks this protocol (reserve, format, take,
 * release, close, pin and hint install, and the runs of run.h) for 3 threads
 * and 2 pages; each function below names the inline of the model that
 * models it (proofs/spin/README.md has the table).
 *
 * A chunk page lives through: claimed (page bit set by gh_pages_claim, run.h)
 * -> formatted (gh_page_format: xstate, then OPEN|class|n in xcount) ->
 * reserved from and released to any number of times -> closed (the one
 * thread whose CAS moves xcount from OPEN|class|0 to 0) -> free (xstate FREE,
 * page bit cleared).
 *
 * Reservation before bits: a lane first reserves k chunks by adding to used
 * (gh_page_reserve), then takes k bits (gh_chunks_take); a release clears bits
 * first and then subtracts (gh_chunks_release, gh_page_unreserve). Hence the
 * number of set bits never exceeds used, and a reservation always finds its
 * bits. The race between "page became empty" and "chunk reserved" is decided
 * on the one word xcount: close is a CAS from exactly OPEN|class|0, and a
 * reservation is a fetch-add whose returned value shows whether the page was
 * open and of the right class. A reservation that lost (page closed, wrong
 * class, full) subtracts what it added; whoever brings used to zero on an
 * open, unpinned page tries to close it, so no empty page is lost.
 */
#ifndef GPUHEAP_PAGE_H
#define GPUHEAP_PAGE_H

#include "atomic.h"
#include "bits.h"
#include "sizeclass.h"
#include "types.h"

GH_FN uint8_t* gh_page_ptr(const gh_dheap_t* h, uint32_t p) { return h->base + ((size_t)p << h->page_shift); }
GH_FN uint32_t* gh_chunk_bitmap(const gh_dheap_t* h, uint32_t p) { return h->xchunks + (size_t)p * h->chunk_words; }

GH_FN void gh_count_error(const gh_dheap_t* h, int which) { gh_atomic_add64_relaxed(&h->xerrors[which], 1); }

/* Page bitmap: claim the bits of want that are free; returns those claimed. */
GH_FN uint32_t gh_pages_claim(const gh_dheap_t* h, uint32_t w, uint32_t want) {
  return want & ~gh_atomic_or_acquire(&h->xpages[w], want);
}

/* Clear page bits the caller holds: model `pages_release`. */
GH_FN void gh_pages_release(const gh_dheap_t* h, uint32_t w, uint32_t mask) {
  const uint32_t old = gh_atomic_and_release(&h->xpages[w], ~mask);
  gh_assert_internal((old & mask) == mask);
  (void)old;
}

/* The room bitmaps and their summaries (hints: see types.h). A bit is tested
 * before the atomic, so setting a set bit or clearing a clear one costs a
 * load; a summary bit goes with its room word turning non-zero or zero (the
 * clear is followed by a re-check, so a racing set is not lost). */
GH_FN uint32_t* gh_room_word(const gh_dheap_t* h, uint32_t cls, uint32_t w) { return &h->xroom[(size_t)cls * h->n_words + w]; }
GH_FN uint32_t* gh_roomsum_word(const gh_dheap_t* h, uint32_t cls, uint32_t w) {
  return &h->xroomsum[(size_t)cls * h->n_sum + (w >> 5)];
}
GH_FN void gh_room_set(const gh_dheap_t* h, uint32_t cls, uint32_t p) {
  uint32_t* rw = gh_room_word(h, cls, p >> 5);
  const uint32_t bit = 1u << (p & 31u);
  if (gh_atomic_load_relaxed(rw) & bit) return;
  if (gh_atomic_or_relaxed(rw, bit) == 0u) gh_atomic_or_relaxed(gh_roomsum_word(h, cls, p >> 5), 1u << ((p >> 5) & 31u));
}
GH_FN void gh_room_clear(const gh_dheap_t* h, uint32_t cls, uint32_t p) {
  const uint32_t w = p >> 5;
  uint32_t* rw = gh_room_word(h, cls, w);
  const uint32_t bit = 1u << (p & 31u);
  if (!(gh_atomic_load_relaxed(rw) & bit)) return;
  if (gh_atomic_and_relaxed(rw, ~bit) == bit) {
    uint32_t* sw = gh_roomsum_word(h, cls, w);
    gh_atomic_and_relaxed(sw, ~(1u << (w & 31u)));
    if (gh_atomic_load_relaxed(rw) != 0u) gh_atomic_or_relaxed(sw, 1u << (w & 31u));
  }
}
GH_FN uint32_t gh_count_cls(uint32_t c) { return (c & GH_COUNT_CLASS_MASK) >> GH_COUNT_CLASS_SHIFT; }

/* Close an empty page: model `close`. `seen` is the xcount value
 * OPEN|class|0 that the caller brought about. Only one CAS can succeed; the
 * winner frees the page. A failed CAS means someone reserved in between, and
 * the page lives on (that someone will bring used to zero again). */
GH_FN void gh_page_try_close(const gh_dheap_t* h, uint32_t p, uint32_t seen) {
  const uint32_t seen_class = seen;
  if (!gh_atomic_cas_acq_rel(&h->xcount[p], &seen, 0u)) return;
#if GH_CHECKED
  {
    const uint32_t* bm = gh_chunk_bitmap(h, p);
    for (uint32_t i = 0; i < h->chunk_words; i++) gh_assert_expensive(gh_atomic_load_relaxed(&bm[i]) == 0u);
  }
#endif
  gh_room_clear(h, gh_count_cls(seen_class), p);
  gh_atomic_store_relaxed(&h->xstate[p], GH_STATE_FREE);
  gh_pages_release(h, p >> 5, 1u << (p & 31u)); /* release: publishes FREE and the empty bitmap */
}

/* After subtracting from xcount (was `old`, now `now`): close the page if it
 * is empty; mark it as having room if this subtraction is the one that took
 * an open, unpinned page below full. Part of model `unreserve` and `unpin`. */
GH_FN void gh_page_settle(const gh_dheap_t* h, uint32_t p, uint32_t old, uint32_t now) {
  if ((now & (GH_COUNT_OPEN | GH_COUNT_PINNED | GH_COUNT_USED_MASK)) == GH_COUNT_OPEN) {
    gh_page_try_close(h, p, now);
    return;
  }
  if ((now & (GH_COUNT_OPEN | GH_COUNT_PINNED)) == GH_COUNT_OPEN) {
    const uint32_t cls = gh_count_cls(now), per_page = h->classes[cls].per_page;
    if ((old & GH_COUNT_USED_MASK) >= per_page && (now & GH_COUNT_USED_MASK) < per_page) gh_room_set(h, cls, p);
  }
}

/* Give back k reserved chunks (or undo a reservation): model `unreserve`. */
GH_FN void gh_page_unreserve(const gh_dheap_t* h, uint32_t p, uint32_t k) {
  const uint32_t old = gh_atomic_sub_acq_rel(&h->xcount[p], k);
  gh_page_settle(h, p, old, old - k);
}

/* Reserve up to n chunks of class cls on page p: model `reserve`. Returns
 * how many (0 if the page is closed, of another class or full) and in
 * *used_before the count before ours, a guess of where free bits start. */
GH_FN uint32_t gh_page_reserve(const gh_dheap_t* h, uint32_t p, uint32_t cls, uint32_t n, uint32_t* used_before) {
  const uint32_t per_page = h->classes[cls].per_page;
  const uint32_t old = gh_atomic_add_acquire(&h->xcount[p], n);
  const uint32_t used = old & GH_COUNT_USED_MASK;
  if ((old & (GH_COUNT_OPEN | GH_COUNT_CLASS_MASK)) != (GH_COUNT_OPEN | gh_count_class(cls)) || used >= per_page) {
    gh_page_unreserve(h, p, n);
    return 0;
  }
  const uint32_t k = (n <= per_page - used) ? n : per_page - used;
  if (k < n) gh_page_unreserve(h, p, n - k);
  if (used + k == per_page) { /* we filled it: no longer room (unless a free came in between) */
    gh_room_clear(h, cls, p);
    const uint32_t now = gh_atomic_load_relaxed(&h->xcount[p]);
    if ((now & (GH_COUNT_OPEN | GH_COUNT_PINNED)) == GH_COUNT_OPEN && (now & GH_COUNT_USED_MASK) < per_page)
      gh_room_set(h, cls, p);
  }
  *used_before = used;
  return k;
}

/* Reserve as gh_page_reserve does, but by CAS on the value seen, so a
 * failed attempt leaves no transient for others to see: model `reserve_cas`.
 * The slow sources use it, where many threads may be after the last free
 * chunks of a nearly full heap and each transient would make a page with
 * room look full to the rest. Returns 0 only when the page is not open for
 * the class or is full. */
GH_FN uint32_t gh_page_reserve_cas(const gh_dheap_t* h, uint32_t p, uint32_t cls, uint32_t n, uint32_t* used_before) {
  const uint32_t per_page = h->classes[cls].per_page;
  const uint32_t want = GH_COUNT_OPEN | gh_count_class(cls);
  uint32_t c = gh_atomic_load_relaxed(&h->xcount[p]);
  for (;;) {
    const uint32_t used = c & GH_COUNT_USED_MASK;
    if ((c & (GH_COUNT_OPEN | GH_COUNT_CLASS_MASK)) != want || used >= per_page) return 0;
    const uint32_t k = (n <= per_page - used) ? n : per_page - used;
    if (gh_atomic_cas_acq_rel(&h->xcount[p], &c, c + k)) {
      if (used + k == per_page) gh_room_clear(h, cls, p);
      *used_before = used;
      return k;
    }
  }
}

/* Format a page the caller has claimed (page bit set by it, xcount 0 up to
 * transients) for class cls, reserving n chunks for the caller and, with pin,
 * holding it for hint slot `slot`: model `format`. */
GH_FN void gh_page_format(const gh_dheap_t* h, uint32_t p, uint32_t cls, uint32_t slot, uint32_t n, bool pin) {
  gh_assert_internal(n <= h->classes[cls].per_page);
  gh_atomic_store_relaxed(&h->xstate[p], gh_state_chunk(cls, slot));
  gh_atomic_add_release(&h->xcount[p], GH_COUNT_OPEN | (pin ? GH_COUNT_PINNED : 0u) | gh_count_class(cls) | n);
}

/* Drop the pin of a page that the caller removed from its hint slot (or
 * failed to install): model `unpin`. */
GH_FN void gh_page_unpin(const gh_dheap_t* h, uint32_t p) {
  const uint32_t old = gh_atomic_sub_acq_rel(&h->xcount[p], GH_COUNT_PINNED);
  gh_assert_internal((old & (GH_COUNT_OPEN | GH_COUNT_PINNED)) == (GH_COUNT_OPEN | GH_COUNT_PINNED));
  const uint32_t now = old - GH_COUNT_PINNED;
  if ((now & GH_COUNT_USED_MASK) != 0u && (now & GH_COUNT_USED_MASK) < h->classes[gh_count_cls(now)].per_page)
    gh_room_set(h, gh_count_cls(now), p);
  gh_page_settle(h, p, old, now);
}

/* Pin an open, unpinned page of class cls that has room, for a refiller to
 * install: model `pin`. false if the page is not that (any more). */
GH_FN bool gh_page_pin(const gh_dheap_t* h, uint32_t p, uint32_t cls) {
  const uint32_t want = GH_COUNT_OPEN | gh_count_class(cls), per_page = h->classes[cls].per_page;
  uint32_t c = gh_atomic_load_relaxed(&h->xcount[p]);
  while ((c & (GH_COUNT_OPEN | GH_COUNT_PINNED | GH_COUNT_CLASS_MASK)) == want && (c & GH_COUNT_USED_MASK) < per_page) {
    if (gh_atomic_cas_acq_rel(&h->xcount[p], &c, c | GH_COUNT_PINNED)) {
      gh_room_clear(h, cls, p);
      return true;
    }
  }
  return false;
}

GH_FN uint32_t* gh_hint_slot(const gh_dheap_t* h, uint32_t cls, uint32_t slot) {
  return &h->xhints[(size_t)cls * h->n_slots + slot];
}

/* What a thread knows of its hint slot: the value it saw, and whether it is
 * the slot's refiller (it moved the slot to GH_REFILL and owns the pin of
 * the page it took out, `old`). */
typedef struct gh_hint_s {
  uint32_t seen;
  uint32_t old;
  bool refiller;
} gh_hint_t;

GH_FN bool gh_hint_refilling(uint32_t v) { return v == GH_REFILL || v == GH_REFILL_COLD; }

/* Put pinned page p_new in the slot: model `install`. Only the slot's
 * refiller changes a slot from GH_REFILL(_COLD), so this is a store; the
 * refiller owns the pin of the page it took out and drops it. */
GH_FN void gh_hint_install(const gh_dheap_t* h, uint32_t cls, uint32_t slot, gh_hint_t* hs, uint32_t p_new) {
  gh_assert_internal(hs->refiller && gh_hint_refilling(gh_atomic_load_relaxed(gh_hint_slot(h, cls, slot))));
  gh_atomic_store_release(gh_hint_slot(h, cls, slot), p_new);
  if (hs->old != GH_NO_PAGE) gh_page_unpin(h, hs->old);
  hs->refiller = false;
  hs->seen = p_new;
}

/* A refiller that found no page to install (or was served without one)
 * gives the slot up, as GH_DROPPED (its next refill is not a cold one):
 * model `abandon`. */
GH_FN void gh_hint_abandon(const gh_dheap_t* h, uint32_t cls, uint32_t slot, gh_hint_t* hs) {
  if (!hs->refiller) return;
  gh_atomic_store_release(gh_hint_slot(h, cls, slot), GH_DROPPED);
  if (hs->old != GH_NO_PAGE) gh_page_unpin(h, hs->old);
  hs->refiller = false;
  hs->seen = GH_DROPPED;
}

/* A number that differs between threads, drawn where a take lost its
 * fetch-or, so that the fast path keeps no register for it (a grant field
 * raised the alloc kernel from 80 to 84 registers, which cost it a block a
 * SM: 16 B -20 %, bench/NOTES.md, device visit 22): the SM's clock on the
 * device (takers that lost together read it cycles apart, on SMs whose
 * clocks are not aligned); the address of the taker's own count (a stack
 * of its own per thread) on the CPU. */
GH_FN uint32_t gh_take_spread(const uint32_t* left) {
#if GH_ON_DEVICE
  (void)left;
  return (uint32_t)clock();
#else
  return (uint32_t)((uintptr_t)left >> 4);
#endif
}

/* One fetch-or of gh_chunks_take on word w, of which `free` (not 0) are
 * the bits known free: the lowest *left of them, or with `spread` *left of
 * them from a free bit of rank drawn by gh_take_spread. Returns the bits
 * got (0: lost); *seen_io then holds what was learned of the word. */
GH_FN uint32_t gh_chunks_try(uint32_t* bm, uint32_t w, uint32_t free, uint32_t* left, uint32_t* seen_io, bool spread) {
  const uint32_t want = spread ? gh_pick_spread(free, *left, gh_take_spread(left)) : gh_lowest_bits(free, *left);
  const uint32_t old = gh_atomic_or_acquire(&bm[w], want);
  *seen_io = old | want;
  return want & ~old;
}

/* The bits of chunk-bitmap word w that are chunks of the class, and the
 * word after w (wrapping). */
GH_FN uint32_t gh_chunks_valid(const gh_class_t* cl, uint32_t w) {
  return (w + 1u) * 32u <= cl->per_page ? 0xFFFFFFFFu : gh_bit_range(0, cl->per_page - w * 32u);
}
GH_FN uint32_t gh_chunks_next_word(const gh_class_t* cl, uint32_t w) { return (w + 1u == cl->words) ? 0u : w + 1u; }

/* gh_chunks_take after a lost fetch-or (kept apart, so that the first try
 * runs the code it ran before the spread: bench/NOTES.md, device visit
 * 22): tries again, spread where the word shows holes. */
GH_FN_SLOW uint32_t gh_chunks_take_lost(uint32_t* bm, const gh_class_t* cl, uint32_t* left, uint32_t* cursor,
                                        uint32_t* seen_io, uint32_t w, uint32_t seen) {
  for (;;) {
    const uint32_t free = ~seen & gh_chunks_valid(cl, w);
    if (free == 0u) {
      w = gh_chunks_next_word(cl, w);
      seen = 0u;
      continue;
    }
    const uint32_t got = gh_chunks_try(bm, w, free, left, &seen, (seen & (seen + 1u)) != 0u);
    if (got) {
      *left -= gh_popc(got);
      *cursor = w;
      *seen_io = seen;
      return got;
    }
  }
}

/* Take up to *left of the chunks reserved on page p, from one bitmap word:
 * model `take`. Starts at word *cursor with a guess of which bits are taken
 * (*seen_io, e.g. the bump position implied by used_before) and learns the
 * word's real value from each fetch-or, so it never loads a word separately;
 * *seen_io is left holding what is known of word *cursor for the next call.
 * A fetch-or that finds some wanted bits already set takes the rest: it only
 * sets bits, so bits owned by others are left as they were. A fetch-or that
 * got none of its bits lost to other takers, who learned the same value.
 * Where the word then shows free bits below taken ones (frees left holes,
 * so the reservations' counts no longer say where their bits are), the next
 * pick starts at a free bit of rank drawn by gh_take_spread instead of the
 * lowest, so that those takers do not collide again; where the taken bits
 * are a prefix of the word (a page filled in order), the lowest free bits
 * are the ones the next reservations' counts point past, and the pick
 * stays there (bench/NOTES.md, device visit 22). Returns the bits taken
 * (never 0) and their word in *cursor. Terminates because the reservation
 * guarantees *left free bits in the page. */
GH_FN uint32_t gh_chunks_take(const gh_dheap_t* h, uint32_t p, const gh_class_t* cl, uint32_t* left, uint32_t* cursor,
                              uint32_t* seen_io) {
  uint32_t* bm = gh_chunk_bitmap(h, p);
  uint32_t w = *cursor, seen = *seen_io;
  for (;;) {
    const uint32_t free = ~seen & gh_chunks_valid(cl, w);
    if (free == 0u) {
      w = gh_chunks_next_word(cl, w);
      seen = 0u;
      continue;
    }
    const uint32_t got = gh_chunks_try(bm, w, free, left, &seen, false);
    if (!got) return gh_chunks_take_lost(bm, cl, left, cursor, seen_io, w, seen);
    *left -= gh_popc(got);
    *cursor = w;
    *seen_io = seen;
    return got;
  }
}

/* Where a reservation made at used_before should start looking. */
GH_FN uint32_t gh_chunks_cursor(const gh_class_t* cl, uint32_t used_before) {
  return used_before < cl->per_page ? used_before >> 5 : 0u;
}
GH_FN uint32_t gh_chunks_seen(uint32_t used_before) { return gh_bit_range(0, used_before & 31u); }

/* Clear chunk bits (one word) of page p: model `release`. Returns the bits
 * that were set; the others were already free (a double free). The caller
 * then gives back popcount(returned) with gh_page_unreserve. */
GH_FN uint32_t gh_chunks_release(const gh_dheap_t* h, uint32_t p, uint32_t w, uint32_t mask) {
  const uint32_t old = gh_atomic_and_release(&gh_chunk_bitmap(h, p)[w], ~mask);
  return old & mask;
}

#endif /* GPUHEAP_PAGE_H */
