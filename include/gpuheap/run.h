/* gpuheap: runs of pages, and the search over the page bitmap.
 *
 * A run of n pages is claimed word by word in ascending order, each word by
 * CAS on exactly its bits; if a word's bits are no longer free, the words
 * already claimed are given back and the search goes on. No thread ever waits
 * for another, so claims cannot deadlock. The run's first page records its
 * length in xstate (HEAD); freeing is a CAS from that HEAD to FREE, so of two
 * frees of one run only one clears the bits.
 *
 * Search: random probes over the page bitmap (h->probe_limit words), then a
 * deterministic sweep of every word from a random start; runs of more than
 * 32 pages go straight to a first-fit sweep from word 0. In the sweep a run
 * is found whenever the bitmap, as read, has n free pages in a row, so a
 * quiescent heap never returns NULL while it has room. Before giving up, a
 * run takes the empty pages that hint slots hold along with its free pages
 * (gh_run_take), and then the sweep takes back empty pages that only a
 * hint slot still holds (gh_steal_pinned), since those are room too.
 */
#ifndef GPUHEAP_RUN_H
#define GPUHEAP_RUN_H

#include "page.h"
#include "rng.h"

/* Clear the page bits of [p0, p1), all the caller's, word by word. */
GH_FN void gh_pages_release_range(const gh_dheap_t* h, uint32_t p0, uint32_t p1) {
  for (uint32_t q = p0; q < p1;) {
    const uint32_t lo = q & 31u, cnt = (p1 - q < 32u - lo) ? p1 - q : 32u - lo;
    gh_pages_release(h, q >> 5, gh_bit_range(lo, cnt));
    q += cnt;
  }
}

/* Claim pages [s, s+n) or nothing: model `run_claim`. */
GH_FN bool gh_run_claim(const gh_dheap_t* h, uint32_t s, uint32_t n) {
  const uint32_t end = s + n;
  uint32_t p = s;
  while (p < end) {
    const uint32_t w = p >> 5, lo = p & 31u;
    const uint32_t cnt = (end - p < 32u - lo) ? end - p : 32u - lo;
    const uint32_t mask = gh_bit_range(lo, cnt);
    uint32_t v = gh_atomic_load_relaxed(&h->xpages[w]);
    bool ok = false;
    while ((v & mask) == 0u) {
      if (gh_atomic_cas_acq_rel(&h->xpages[w], &v, v | mask)) {
        ok = true;
        break;
      }
    }
    if (!ok) {
      gh_pages_release_range(h, s, p); /* give back the words already claimed */
      return false;
    }
    p += cnt;
  }
  return true;
}

/* Scan `count` words from word `w0` (wrapping at the end, where runs break)
 * for n free pages in a row. Returns the first page of a run as read, or
 * GH_NO_PAGE. *probes counts the words read. */
GH_FN uint32_t gh_run_scan(const gh_dheap_t* h, uint32_t n, uint32_t w0, uint32_t count, uint32_t* probes) {
  uint32_t run = 0, start = 0, w = w0;
  for (uint32_t i = 0; i < count; i++) {
    if (w == 0) run = 0; /* runs do not wrap around the end of the heap */
    const uint32_t v = gh_atomic_load_relaxed(&h->xpages[w]);
    (*probes)++;
    if (v == 0u) {
      if (run == 0) start = w << 5;
      run += 32u;
      if (run >= n) return start;
    } else {
      const uint32_t low = gh_ctz(v); /* free pages at the bottom continue the run */
      if (run + low >= n) return run ? start : (w << 5);
      if (n <= 32u) {
        const uint32_t starts = gh_run_starts(~v, n);
        if (starts) return (w << 5) + gh_ctz(starts);
      }
      const uint32_t high = 31u - gh_log2_floor(v); /* free pages at the top start the next run */
      run = high;
      start = (w << 5) + 32u - high;
    }
    w = (w + 1u == h->n_words) ? 0u : w + 1u;
  }
  return GH_NO_PAGE;
}

/* Find and claim n free pages in a row: `count` words from w0. A claim that
 * loses a race resumes the scan at the lost run's first word, so the pages
 * that the winner left are still seen; a pass that lost races is repeated
 * (at most 4 passes), since runs given back behind it may have made room. */
GH_FN_SLOW uint32_t gh_run_find_claim(const gh_dheap_t* h, uint32_t n, uint32_t w0, uint32_t count, uint32_t* probes) {
  for (uint32_t pass = 0; pass < 4u; pass++) {
    bool raced = false;
    uint32_t pos = 0, retries = 0;
    while (pos < count) {
      uint32_t w = w0 + pos;
      if (w >= h->n_words) w -= h->n_words;
      const uint32_t s = gh_run_scan(h, n, w, count - pos, probes);
      if (s == GH_NO_PAGE) break;
      if (gh_run_claim(h, s, n)) return s;
      raced = true;
      const uint32_t sw = s >> 5;
      uint32_t off = sw >= w ? sw - w : sw + h->n_words - w;
      if (off == 0u && ++retries > 64u) off++; /* lost again and again at one place: move on */
      pos += off;
    }
    if (!raced) break;
  }
  return GH_NO_PAGE;
}

/* Pages per frame (the unit the host maps), and page-bitmap words per frame. */
GH_FN uint32_t gh_frame_pages(const gh_dheap_t* h) { return 1u << (GH_FRAME_SHIFT - h->page_shift); }

/* Frame runs: the first n free pages in a row that start at a frame
 * boundary, from the bottom of the heap. Whole words must be free but the
 * last, of which only the pages the run needs. GH_NO_PAGE: none. */
GH_FN uint32_t gh_frame_scan(const gh_dheap_t* h, uint32_t n, uint32_t* probes) {
  const uint32_t fw = gh_frame_pages(h) / 32u;
  const uint32_t need = (n + 31u) / 32u, tail = n & 31u;
  uint32_t got = 0;
  for (uint32_t w = 0; w < h->n_words; w++) {
    if (got == 0u && w % fw != 0u) { /* runs start at frame boundaries */
      w += fw - 1u - w % fw;
      continue;
    }
    const uint32_t v = gh_atomic_load_relaxed(&h->xpages[w]);
    (*probes)++;
    const uint32_t want = (got + 1u == need && tail) ? gh_bit_range(0, tail) : 0xFFFFFFFFu;
    if (v & want) {
      got = 0;
      continue;
    }
    if (++got == need) return (w + 1u - need) << 5;
  }
  return GH_NO_PAGE;
}

/* The hint slot holding page p when p reads as an empty chunk page that
 * only a hint slot holds (xcount OPEN|PINNED|class|0, left in *c; then a
 * CHUNK state naming the slot), else NULL. The page may have been
 * unpinned, closed and claimed again (even as a run head, whose state
 * would name no hint slot) since xcount was read: only a CHUNK state names
 * a slot, and a CAS of the slot from p succeeds only while that slot holds
 * p, i.e. while p is pinned for it. */
GH_FN uint32_t* gh_page_holder(const gh_dheap_t* h, uint32_t p, uint32_t* c) {
  *c = gh_atomic_load_relaxed(&h->xcount[p]);
  if ((*c & (GH_COUNT_OPEN | GH_COUNT_PINNED | GH_COUNT_USED_MASK)) != (GH_COUNT_OPEN | GH_COUNT_PINNED)) return NULL;
  const uint32_t st = gh_atomic_load_relaxed(&h->xstate[p]);
  if (gh_state_kind(st) != GH_STATE_KIND_CHUNK) return NULL;
  return gh_hint_slot(h, gh_state_class(st), gh_state_slot(st));
}

/* Take page p out of its hint slot (found by gh_page_holder): the CAS of
 * the slot from p to GH_DROPPED, whose winner owns the page's pin. */
GH_FN bool gh_page_unslot(uint32_t* slot, uint32_t p) {
  uint32_t expected = p;
  return gh_atomic_cas_acq_rel(slot, &expected, GH_DROPPED);
}

/* Empty chunk pages in [p0, p1) held only by a hint slot: take each out of
 * its slot and drop its pin, which closes it. Returns how many were freed.
 * Model `steal_in` (`steal` over every page). */
GH_FN_SLOW uint32_t gh_steal_pinned_in(const gh_dheap_t* h, uint32_t p0, uint32_t p1) {
  uint32_t freed = 0;
  for (uint32_t p = p0; p < p1; p++) {
    uint32_t c;
    uint32_t* slot = gh_page_holder(h, p, &c);
    if (slot && gh_page_unslot(slot, p)) {
      gh_page_unpin(h, p);
      freed++;
    }
  }
  return freed;
}

/* The same over the whole heap: an allocation that found no room. */
GH_FN_SLOW uint32_t gh_steal_pinned(const gh_dheap_t* h) { return gh_steal_pinned_in(h, 0u, h->n_pages); }

/* Take the empty page p that a hint slot holds into a run being claimed:
 * take it out of its slot (the CAS of the slot from p to GH_DROPPED, which
 * gives this thread the pin), then close it with its bit still set (the
 * CAS of xcount from OPEN|PINNED|class|0 to 0): the page goes from the
 * slot to the run with no moment free, so no refill can take it in
 * between. false, with nothing changed, if the page is not such a page
 * any more; a page reserved from after it left its slot is unpinned as the
 * slot's owner would (it lives on). Model `take_held`. */
GH_FN_SLOW bool gh_page_take_held(const gh_dheap_t* h, uint32_t p) {
  uint32_t c;
  uint32_t* slot = gh_page_holder(h, p, &c);
  if (!slot || !gh_page_unslot(slot, p)) return false;
  if (!gh_atomic_cas_acq_rel(&h->xcount[p], &c, 0u)) {
    gh_page_unpin(h, p);
    return false;
  }
  gh_room_clear(h, gh_count_cls(c), p);
  gh_atomic_store_release(&h->xstate[p], GH_STATE_FREE);
  return true;
}

/* Claim the run of n pages at s when its pages are free or empty pages held
 * by hint slots: a run's last resort before gh_steal_pinned (which frees
 * such pages for anyone, so that a refill beside it can take them back
 * before the run's claim: bench/NOTES.md, device visits 21 and 23). A look
 * first, which changes nothing, then word by word in ascending order: the
 * free pages of the word by one fetch-or, then its held pages by
 * gh_page_take_held. A page in use, a free page lost to another claim or a
 * held page that could not be taken gives back everything taken so far
 * (its pages are free then: bits only) and returns false; *blocked is then
 * that page (the first the look found in use, or the one the take lost): a
 * run that holds it is not to be had now, so the caller's next start lies
 * after it.
 * Model `run_take`. */
GH_FN_SLOW bool gh_run_take(const gh_dheap_t* h, uint32_t s, uint32_t n, uint32_t* blocked) {
  const uint32_t end = s + n;
  uint32_t c;
  *blocked = s;
  for (uint32_t p = s; p < end; p++)
    if ((gh_atomic_load_relaxed(&h->xpages[p >> 5]) >> (p & 31u)) & 1u && !gh_page_holder(h, p, &c)) {
      *blocked = p;
      return false;
    }
  for (uint32_t p = s; p < end;) {
    const uint32_t w = p >> 5, lo = p & 31u, cnt = (end - p < 32u - lo) ? end - p : 32u - lo;
    const uint32_t mask = gh_bit_range(lo, cnt);
    const uint32_t free = mask & ~gh_atomic_load_relaxed(&h->xpages[w]);
    uint32_t mine = gh_pages_claim(h, w, free);
    uint32_t lost = free & ~mine;
    for (uint32_t held = mask & ~free; !lost && held; held &= held - 1u) {
      const uint32_t bit = held & (0u - held);
      if (gh_page_take_held(h, (w << 5) + gh_ctz(bit)))
        mine |= bit;
      else
        lost = bit;
    }
    if (lost) {
      *blocked = (w << 5) + gh_ctz(lost);
      if (mine) gh_pages_release(h, w, mine);
      gh_pages_release_range(h, s, p); /* the words before: all the run's */
      return false;
    }
    p += cnt;
  }
  return true;
}

/* Claim a free page of word w, whose value was read as v: the first free
 * one from bit r on (r spreads threads that race for one word): model
 * `claim_in_word`. */
GH_FN uint32_t gh_page_claim_in_word(const gh_dheap_t* h, uint32_t w, uint32_t v, uint32_t r) {
  while (~v) {
    const uint32_t bit = 1u << gh_set_bit_from(~v, r);
    const uint32_t old = gh_atomic_or_acquire(&h->xpages[w], bit);
    if (!(old & bit)) return (w << 5) + gh_ctz(bit);
    v = old | bit;
  }
  return GH_NO_PAGE;
}

/* Claim one free page for `slot`: first near its frame hint (probe_limit
 * words from it), then at probe_limit random words, preferring words that
 * already have pages in use, so whole free words stay free for runs; then a
 * word with no page in use; then, with `sweep`, every word, then stealing.
 * Model `page_claim` (with the preference abstracted away). */
GH_FN_SLOW uint32_t gh_page_claim_one(const gh_dheap_t* h, uint32_t slot, bool sweep, gh_rng_t* rng, uint32_t* probes) {
  uint32_t* fhint = &h->xfhints[slot];
  const uint32_t hint = gh_atomic_load_relaxed(fhint);
  uint32_t empty = GH_NO_PAGE;
  for (uint32_t phase = 0; phase < 2u; phase++) {
    uint32_t w = phase == 0u && hint < h->n_words ? hint : gh_rng_below(rng, h->n_words);
    if (phase == 0u && hint >= h->n_words) continue;
    for (uint32_t i = 0; i < h->probe_limit; i++) {
      if (phase == 1u) w = gh_rng_below(rng, h->n_words);
      (*probes)++;
      const uint32_t v = gh_atomic_load_relaxed(&h->xpages[w]);
      if (v == 0u && empty == GH_NO_PAGE) empty = w;
      if (v != 0u && ~v) {
        const uint32_t p = gh_page_claim_in_word(h, w, v, gh_rng_next(rng));
        if (p != GH_NO_PAGE) {
          if (w != hint) gh_atomic_store_relaxed(fhint, w);
          return p;
        }
      }
      if (phase == 0u) w = (w + 1u == h->n_words) ? 0u : w + 1u;
    }
  }
  uint32_t p = empty != GH_NO_PAGE ? gh_page_claim_in_word(h, empty, 0u, gh_rng_next(rng)) : GH_NO_PAGE;
  if (p == GH_NO_PAGE && !sweep) return p;
  if (p == GH_NO_PAGE) p = gh_run_find_claim(h, 1, gh_rng_below(rng, h->n_words), h->n_words, probes);
  if (p == GH_NO_PAGE && gh_steal_pinned(h) != 0u) p = gh_run_find_claim(h, 1, 0u, h->n_words, probes);
  if (p != GH_NO_PAGE) gh_atomic_store_relaxed(fhint, p >> 5);
  return p;
}

/* Claim n free pages in a row anywhere: frame-aligned for a frame or more,
 * else random probes; then the sweep; then free pages together with the
 * empty pages that hint slots hold (gh_run_take); then the sweep again
 * after stealing empty pinned pages. GH_NO_PAGE: no room.
 * Model `malloc_run` (its search abstracted to any start; run_claim as is). */
GH_FN_SLOW uint32_t gh_run_alloc(const gh_dheap_t* h, uint32_t n, gh_rng_t* rng, uint32_t* probes) {
  if (n == 0u || n > h->n_pages) return GH_NO_PAGE;
  /* Runs of a frame or more are frame runs: they start at a frame boundary,
   * first-fit from the bottom, so they pack and leave whole frames free (for
   * the next one, and for the host to take back). A run lost to a race is
   * looked for again. Where no frame boundary has room, the page runs below
   * decide. */
  if (n >= gh_frame_pages(h)) {
    for (uint32_t tries = 0; tries < 64u; tries++) {
      const uint32_t f = gh_frame_scan(h, n, probes);
      if (f == GH_NO_PAGE) break;
      if (gh_run_claim(h, f, n)) return f;
    }
  }
  /* Other runs longer than a word are placed first-fit from the bottom,
   * which packs them; random placement would leave gaps too short for the
   * next one. */
  const bool large = n > 32u;
  uint32_t s = large ? GH_NO_PAGE : gh_run_find_claim(h, n, gh_rng_below(rng, h->n_words), h->probe_limit, probes);
  if (s == GH_NO_PAGE) s = gh_run_find_claim(h, n, large ? 0u : gh_rng_below(rng, h->n_words), h->n_words + 1u, probes);
  /* Any run then takes the empty pages that hint slots hold together with
   * the free ones, first fit from the bottom: a frame run at the frame
   * boundaries, a shorter one from the page after the one that blocked the
   * last start (each page is looked at about once). */
  if (s == GH_NO_PAGE) {
    const uint32_t fp = gh_frame_pages(h);
    const bool frame = n >= fp;
    for (uint32_t f = 0, blocked = 0; f + n <= h->n_pages; f = frame ? (blocked / fp + 1u) * fp : blocked + 1u) {
      (*probes)++;
      if (gh_run_take(h, f, n, &blocked)) return f;
    }
  }
  if (s == GH_NO_PAGE && gh_steal_pinned(h) != 0u) s = gh_run_find_claim(h, n, 0u, h->n_words + 1u, probes);
  return s;
}

/* Mark a claimed run allocated: HEAD on its first page (and, in checked
 * builds, BODY on the others so interior pointers are recognised). */
GH_FN void gh_run_mark(const gh_dheap_t* h, uint32_t s, uint32_t n) {
#if GH_CHECKED
  for (uint32_t i = 1; i < n; i++) gh_atomic_store_relaxed(&h->xstate[s + i], gh_state_body(i));
#endif
  gh_atomic_store_release(&h->xstate[s], gh_state_head(n));
}

/* Free the run headed by page s whose HEAD was read as `head`: model
 * `run_free`. false: someone else freed it first (a double free). */
GH_FN_SLOW bool gh_run_free(const gh_dheap_t* h, uint32_t s, uint32_t head) {
  if (!gh_atomic_cas_acq_rel(&h->xstate[s], &head, GH_STATE_FREE)) return false;
  const uint32_t n = gh_state_low(head), end = s + n;
#if GH_CHECKED
  for (uint32_t i = 1; i < n; i++) gh_atomic_store_relaxed(&h->xstate[s + i], GH_STATE_FREE);
#endif
  gh_pages_release_range(h, s, end);
  return true;
}

/* A managed heap's tail taken offline: whole frames at the end of page
 * bitmap words [from_word, to_word), last first, while every page of a
 * frame is free, by one CAS per word from 0 (all free) to all ones (held
 * by the host, which a claim never changes). A frame whose only pages in
 * use are empty pages held by hint slots has those taken back
 * (gh_steal_pinned_in over that frame) and is tried once more; the slots
 * refill elsewhere at their next allocation. A frame with a page in use,
 * or a word lost to a racing claim, stops the walk; its words already
 * taken are given back. Returns the first offline word. One thread, at a
 * sync point: the device heap's offline_tail_kernel, the CPU library's
 * managed heap (kernel/cpu_heap.c); threads may allocate and free all the
 * while. Model `offliner`. */
GH_FN_SLOW uint32_t gh_offline_tail(const gh_dheap_t* h, uint32_t from_word, uint32_t to_word,
                                    uint32_t words_per_frame) {
  uint32_t end = to_word;
  bool retried = false;
  while (end >= from_word + words_per_frame) {
    const uint32_t first = end - words_per_frame;
    uint32_t w = first;
    for (; w < end; w++) {
      uint32_t expected = 0u;
      if (!gh_atomic_cas_acq_rel(&h->xpages[w], &expected, ~0u)) break;
    }
    if (w < end) {
      for (uint32_t u = first; u < w; u++) gh_atomic_store_release(&h->xpages[u], 0u);
      /* Once a frame: a slot that refills in it again stops the walk. */
      if (!retried && gh_steal_pinned_in(h, first << 5, end << 5) != 0u) {
        retried = true;
        continue;
      }
      break;
    }
    end = first;
    retried = false;
  }
  return end;
}

#endif /* GPUHEAP_RUN_H */
