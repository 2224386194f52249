/* gpuheap: the warp layer of the device allocator (CUDA only).
 *
 * gh_warp_malloc is called by whichever lanes of a warp are active together
 * (any subset, any mix of sizes). Lanes asking for the same class form a
 * group (__match_any_sync); the group's leader reserves for all of them with
 * one fetch-add on its hint page and takes their chunks with one fetch-or per
 * bitmap word, and shuffles hand the chunks out. What the hint cannot serve
 * goes to the slow path, where the whole set of active lanes searches
 * together for one group at a time: each step reads 32 consecutive words of
 * the page bitmap (1024 pages) or 32 consecutive page counts in one
 * coalesced load, and claims what it needs from all of them at once. The
 * worst lane of a warp therefore waits as long as one warp-wide search, not
 * 32 separate ones. Multi-page runs are searched by each lane on its own
 * (core.h), as is whatever the collective steps leave (the sweeps).
 *
 * Every collective loop below is warp-uniform over the mask it names: its
 * trip count depends only on values broadcast to all lanes of that mask.
 */
#ifndef GPUHEAP_WARP_CUH
#define GPUHEAP_WARP_CUH

#include "core.h"

#define GH_DEV __device__ __forceinline__

#define GH_KEY_PAGE 0x100u  /* a request of exactly one page */
#define GH_KEY_RUN 0x200u   /* + lane: a multi-page run, served alone */
#define GH_KEY_NONE 0x300u  /* + lane: larger than the heap: NULL */

GH_DEV uint32_t gh_lane_id(void) {
  uint32_t r;
  asm("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}
GH_DEV uint32_t gh_lanemask_lt(void) {
  uint32_t r;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(r));
  return r;
}
GH_DEV uint32_t gh_sm_id(void) {
  uint32_t r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}
GH_DEV uint32_t gh_global_thread_id(void) {
  const uint32_t block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return block * (blockDim.x * blockDim.y * blockDim.z) + thread;
}

/* Exclusive prefix sum of v over the lanes of `mask`, in lane order. */
GH_DEV uint32_t gh_warp_exclusive_sum(uint32_t mask, uint32_t v) {
  const uint32_t rank = gh_popc(mask & gh_lanemask_lt());
  uint32_t incl = v;
  for (uint32_t d = 1; d < 32u; d <<= 1) {
    const uint32_t src = rank >= d ? gh_nth_set_bit(mask, rank - d) : gh_lane_id();
    const uint32_t t = __shfl_sync(mask, incl, src);
    if (rank >= d) incl += t;
  }
  return incl - v;
}

/* Hand out the chunks of a grant held by lane `holder` to the lanes of
 * `need`, lowest lanes first, one bitmap word per round. Executed by all
 * lanes of `mask` (holder and need are in it). Returns this lane's chunk, or
 * NULL if it is not served; *need loses the lanes served. */
GH_DEV void* gh_warp_distribute(const gh_dheap_t* h, uint32_t mask, uint32_t holder, gh_grant_t* g, uint32_t cls,
                                uint32_t* need) {
  const uint32_t lane = gh_lane_id(), lt = gh_lanemask_lt();
  const gh_class_t* cl = &h->classes[cls];
  const uint32_t page = __shfl_sync(mask, g->page, holder);
  void* mine = NULL;
  uint32_t left;
  do {
    uint32_t bits = 0, word = 0;
    if (lane == holder) {
      bits = gh_chunks_take(h, g->page, cl, &g->left, &g->cursor, &g->seen);
      word = g->cursor;
    }
    bits = __shfl_sync(mask, bits, holder);
    word = __shfl_sync(mask, word, holder);
    left = __shfl_sync(mask, g->left, holder);
    const uint32_t cnt = gh_popc(bits);
    if (*need & (1u << lane)) {
      const uint32_t r = gh_popc(*need & lt);
      if (r < cnt) mine = gh_chunk_ptr(h, page, cls, word * 32u + gh_nth_set_bit(bits, r));
    }
    *need = gh_drop_lowest_bits(*need, cnt);
  } while (left);
  return mine;
}

/* One collective step over 32 consecutive words of the page bitmap from
 * word w0: claim up to `want` free pages in all, from words that already
 * have pages in use first (so whole free words stay free for runs), lowest
 * lanes' words first. Returns this lane's claimed bits; *word its word. */
GH_DEV uint32_t gh_warp_claim_pages(const gh_dheap_t* h, uint32_t mask, uint32_t w0, uint32_t want, uint32_t* word) {
  const uint32_t rank = gh_popc(mask & gh_lanemask_lt());
  uint32_t w = w0 + rank;
  if (w >= h->n_words) w -= h->n_words;
  const bool mine = rank < h->n_words; /* tiny heaps: fewer words than lanes */
  const uint32_t v = mine ? gh_atomic_load_relaxed(&h->xpages[w]) : 0xFFFFFFFFu;
  const uint32_t cnt = gh_popc(~v);
  const uint32_t part = v != 0u ? cnt : 0u, empty = v == 0u ? 32u : 0u;
  const uint32_t before_part = gh_warp_exclusive_sum(mask, part);
  const uint32_t total_part = __reduce_add_sync(mask, part);
  uint32_t quota = before_part >= want ? 0u : (want - before_part < part ? want - before_part : part);
  if (total_part < want) {
    const uint32_t rest = want - total_part;
    const uint32_t before_empty = gh_warp_exclusive_sum(mask, empty);
    quota += before_empty >= rest ? 0u : (rest - before_empty < empty ? rest - before_empty : empty);
  }
  *word = w;
  return quota ? gh_pages_claim(h, w, gh_lowest_bits(~v, quota)) : 0u;
}

/* The window of a collective page step: step 0 starts at the slot's frame
 * hint, later steps at random words (or, sweeping, the next 32 words). */
GH_DEV uint32_t gh_warp_window(const gh_dheap_t* h, uint32_t mask, uint32_t step, uint32_t slot, gh_rng_t* rng) {
  const uint32_t first = __ffs(mask) - 1u;
  uint32_t w = gh_rng_below(rng, h->n_words);
  if (step == 0u) {
    const uint32_t hint = gh_atomic_load_relaxed(&h->xfhints[slot]);
    if (hint < h->n_words) w = hint;
  }
  return __shfl_sync(mask, w, first);
}

/* After a step that claimed pages: the slot's frame hint moves to the last
 * word a page came from. */
GH_DEV void gh_warp_move_hint(const gh_dheap_t* h, uint32_t mask, uint32_t got, uint32_t word, uint32_t slot) {
  const uint32_t holders = __ballot_sync(mask, got != 0u);
  if (holders && gh_lane_id() == 31u - (uint32_t)__clz(holders)) gh_atomic_store_relaxed(&h->xfhints[slot], word);
}

/* One collective step of 1-page requests: claim pages from the window at w0
 * and hand them to the lanes of `need`, lowest first. */
GH_DEV void gh_warp_pages_step(const gh_dheap_t* h, uint32_t mask, uint32_t* need, uint32_t w0, uint32_t slot,
                               void** mine, uint32_t* probes) {
  const uint32_t lane = gh_lane_id(), lt = gh_lanemask_lt();
  if (*need & (1u << lane)) (*probes)++;
  uint32_t word;
  const uint32_t got = gh_warp_claim_pages(h, mask, w0, gh_popc(*need), &word);
  gh_warp_move_hint(h, mask, got, word, slot);
  uint32_t holders = __ballot_sync(mask, got != 0u);
  while (holders) {
    const uint32_t holder = __ffs(holders) - 1u;
    holders &= holders - 1u;
    const uint32_t bits = __shfl_sync(mask, got, holder);
    const uint32_t hw = __shfl_sync(mask, word, holder);
    if (*need & (1u << lane)) {
      const uint32_t r = gh_popc(*need & lt);
      if (r < gh_popc(bits)) {
        const uint32_t p = hw * 32u + gh_nth_set_bit(bits, r);
        gh_run_mark(h, p, 1);
        *mine = gh_page_ptr(h, p);
      }
    }
    *need = gh_drop_lowest_bits(*need, gh_popc(bits));
  }
}

/* Serve the 1-page requests of `need`: probe_limit collective steps (the
 * first at the frame hint, then random), then the collective sweep of every
 * word, then, after stealing empty hint pages, the sweep again. */
GH_DEV void* gh_warp_pages(const gh_dheap_t* h, uint32_t mask, uint32_t* need, uint32_t slot, gh_rng_t* rng,
                           uint32_t* probes) {
  const uint32_t first = __ffs(mask) - 1u;
  const uint32_t sweep_steps = (h->n_words + 31u) / 32u;
  void* mine = NULL;
  for (uint32_t i = 0; i < h->probe_limit && *need; i++)
    gh_warp_pages_step(h, mask, need, gh_warp_window(h, mask, i, slot, rng), slot, &mine, probes);
  for (uint32_t round = 0; round < 2u && *need; round++) {
    if (round == 1u) {
      uint32_t stolen = 0;
      if (gh_lane_id() == first) stolen = gh_steal_pinned(h);
      if (__shfl_sync(mask, stolen, first) == 0u) break;
    }
    uint32_t w0 = __shfl_sync(mask, gh_rng_below(rng, h->n_words), first);
    for (uint32_t i = 0; i < sweep_steps && *need; i++) {
      gh_warp_pages_step(h, mask, need, w0, slot, &mine, probes);
      w0 += 32u;
      if (w0 >= h->n_words) w0 -= h->n_words;
    }
  }
  *need = 0u;
  return mine;
}

/* Pages of class cls with room for the lanes of `need`: `steps` collective
 * windows of 32 consecutive pages, random or (sweep) all pages in turn. */
GH_DEV void* gh_warp_class_pages(const gh_dheap_t* h, uint32_t mask, uint32_t* need, uint32_t cls, gh_rng_t* rng,
                                 bool sweep, uint32_t* probes) {
  const uint32_t lane = gh_lane_id(), first = __ffs(mask) - 1u;
  const uint32_t rank = gh_popc(mask & gh_lanemask_lt());
  const uint32_t per_page = h->classes[cls].per_page, want = GH_COUNT_OPEN | gh_count_class(cls);
  const uint32_t steps = sweep ? (h->n_pages + 31u) / 32u : h->probe_limit;
  void* mine = NULL;
  gh_grant_t g;
  uint32_t p0 = __shfl_sync(mask, gh_rng_below(rng, h->n_pages), first);
  for (uint32_t i = 0; i < steps && *need; i++) {
    if (!sweep) p0 = __shfl_sync(mask, gh_rng_below(rng, h->n_pages), first);
    if (*need & (1u << lane)) (*probes)++;
    uint32_t p = p0 + rank;
    if (p >= h->n_pages) p -= h->n_pages;
    const uint32_t c = rank < h->n_pages ? gh_atomic_load_relaxed(&h->xcount[p]) : 0u;
    uint32_t holders =
        __ballot_sync(mask, (c & (GH_COUNT_OPEN | GH_COUNT_CLASS_MASK)) == want && (c & GH_COUNT_USED_MASK) < per_page);
    while (holders && *need) {
      const uint32_t holder = __ffs(holders) - 1u;
      holders &= holders - 1u;
      uint32_t k = 0;
      if (lane == holder) {
        uint32_t used = 0;
        k = gh_page_reserve(h, p, cls, gh_popc(*need), &used);
        if (k) gh_grant_set(h, &g, p, cls, k, used);
      }
      if (__shfl_sync(mask, k, holder)) {
        void* c2 = gh_warp_distribute(h, mask, holder, &g, cls, need);
        if (c2) mine = c2;
      }
    }
    p0 += 32u;
    if (p0 >= h->n_pages) p0 -= h->n_pages;
  }
  return mine;
}

/* The hint state of a group, as all lanes of `mask` see it after lane `src`
 * changed it. */
GH_DEV void gh_warp_share_hint(uint32_t mask, gh_hint_t* hs, uint32_t src) {
  hs->seen = __shfl_sync(mask, hs->seen, src);
  hs->old = __shfl_sync(mask, hs->old, src);
  hs->refiller = __shfl_sync(mask, (uint32_t)hs->refiller, src) != 0u;
}

/* Slow path for the chunk requests of class cls in `need` (all lanes of
 * `mask` execute it, each with the same *hs): the hint slot again (its
 * refiller may be done), new pages by collective steps, pages of the class
 * with room, then, lane by lane, the sweeps of core.h. A refiller's slot is
 * given its new page by the first page formatted with room to spare, or
 * given up before the lanes go on alone. */
GH_DEV void* gh_warp_chunks_slow(const gh_dheap_t* h, uint32_t mask, uint32_t* need, uint32_t cls, uint32_t slot,
                                 gh_hint_t hs, gh_rng_t* rng, uint32_t* probes) {
  const uint32_t lane = gh_lane_id(), first = __ffs(mask) - 1u;
  const uint32_t per_page = h->classes[cls].per_page;
  void* mine = NULL;
  gh_grant_t g;
  if (!hs.refiller) {
    uint32_t k = 0, now = GH_NO_PAGE;
    if (lane == first) {
      now = gh_atomic_load_acquire(gh_hint_slot(h, cls, slot));
      if (now != hs.seen && now < GH_REFILL) {
        uint32_t used = 0;
        k = gh_page_reserve(h, now, cls, gh_popc(*need), &used);
        if (k) gh_grant_set(h, &g, now, cls, k, used);
      }
    }
    hs.seen = __shfl_sync(mask, now, first);
    if (__shfl_sync(mask, k, first)) mine = gh_warp_distribute(h, mask, first, &g, cls, need);
  }
  for (uint32_t i = 0; i < h->probe_limit && *need; i++) {
    const uint32_t w0 = gh_warp_window(h, mask, i, slot, rng);
    if (*need & (1u << lane)) (*probes)++;
    uint32_t word;
    uint32_t got = gh_warp_claim_pages(h, mask, w0, (gh_popc(*need) + per_page - 1u) / per_page, &word);
    gh_warp_move_hint(h, mask, got, word, slot);
    uint32_t holders = __ballot_sync(mask, got != 0u);
    while (holders) {
      const uint32_t holder = __ffs(holders) - 1u;
      holders &= holders - 1u;
      if (*need == 0u) { /* not expected: claims are capped by the need */
        if (lane == holder) gh_pages_release(h, word, got);
        continue;
      }
      if (lane == holder) {
        const uint32_t p = word * 32u + gh_ctz(got);
        got &= got - 1u;
        gh_grant_from_new_page(h, p, cls, slot, gh_popc(*need), &hs, &g);
      }
      gh_warp_share_hint(mask, &hs, holder);
      if (__shfl_sync(mask, got, holder) != 0u) holders |= 1u << holder; /* it has more pages */
      void* c = gh_warp_distribute(h, mask, holder, &g, cls, need);
      if (c) mine = c;
    }
  }
  if (*need) {
    void* c = gh_warp_class_pages(h, mask, need, cls, rng, false, probes);
    if (c) mine = c;
  }
  if (hs.refiller) { /* no new page to give the slot: give it up */
    if (lane == first) gh_hint_abandon(h, cls, slot, &hs);
    gh_warp_share_hint(mask, &hs, first);
  }
  if (*need & (1u << lane)) {
    /* What the collective steps left: each lane as in core.h. */
    gh_grant_t lg;
    if (gh_grant_slow(h, cls, slot, 1, &hs, rng, &lg, probes)) {
      const uint32_t bit = gh_chunks_take(h, lg.page, &h->classes[cls], &lg.left, &lg.cursor, &lg.seen);
      mine = gh_chunk_ptr(h, lg.page, cls, lg.cursor * 32u + gh_ctz(bit));
    }
  }
  *need = 0u;
  return mine;
}

/* The device allocator's malloc for the active lanes of a warp. */
GH_DEV void* gh_warp_malloc(const gh_dheap_t* h, size_t size, uint32_t* probes_out) {
  const uint32_t active = __activemask();
  const uint32_t lane = gh_lane_id();
  uint32_t key, cls = 0;
  if (size <= h->max_chunk) {
    cls = gh_size_to_class((uint32_t)size);
    key = cls;
  } else {
    const uint32_t n = gh_run_pages(h, size);
    key = n == 1u ? GH_KEY_PAGE : (n == 0u ? GH_KEY_NONE : GH_KEY_RUN) + lane;
  }
  const uint32_t slot = gh_sm_id() % h->n_slots;
  uint32_t probes = 0;
  void* ptr = NULL;
  gh_hint_t hs = {GH_NO_PAGE, GH_NO_PAGE, false};
  const uint32_t peers = __match_any_sync(active, key);
  if (key < GH_KEY_PAGE) {
    /* Fast path: the group's leader reserves on the hint page for all. */
    const uint32_t leader = __ffs(peers) - 1u;
    gh_grant_t g;
    uint32_t k = 0;
    if (lane == leader) k = gh_grant_from_hint(h, cls, slot, gh_popc(peers), &hs, &g);
    gh_warp_share_hint(peers, &hs, leader);
    if (__shfl_sync(peers, k, leader)) {
      uint32_t need = peers;
      ptr = gh_warp_distribute(h, peers, leader, &g, cls, &need);
    }
  }
  gh_rng_t rng = gh_rng_seed(gh_global_thread_id(), (uint32_t)clock64());
  if (key >= GH_KEY_RUN && key < GH_KEY_NONE) {
    const uint32_t n = gh_run_pages(h, size);
    const uint32_t s = gh_run_alloc(h, n, &rng, &probes);
    if (s != GH_NO_PAGE) {
      gh_run_mark(h, s, n);
      ptr = gh_page_ptr(h, s);
    }
  }
  uint32_t pending = __ballot_sync(active, ptr == NULL && key <= GH_KEY_PAGE);
  while (pending) {
    const uint32_t first = __ffs(pending) - 1u;
    const uint32_t gkey = __shfl_sync(active, key, first);
    gh_hint_t ghs = hs;
    gh_warp_share_hint(active, &ghs, first);
    uint32_t need = pending & __ballot_sync(active, key == gkey);
    pending &= ~need;
    void* got;
    if (gkey == GH_KEY_PAGE) {
      got = gh_warp_pages(h, active, &need, slot, &rng, &probes);
    } else {
      got = gh_warp_chunks_slow(h, active, &need, gkey, slot, ghs, &rng, &probes);
    }
    if (got) ptr = got;
  }
  if (probes_out) *probes_out = probes;
  return ptr;
}

/* The device allocator's free for the active lanes of a warp. Lanes freeing
 * chunks of the same bitmap word are served by one fetch-and and one
 * subtract. */
GH_DEV void gh_warp_free(const gh_dheap_t* h, void* ptr) {
  const uint32_t active = __activemask();
  gh_where_t at;
  int err = GH_ERRC_FOREIGN;
  const uint32_t kind = ptr ? gh_locate(h, ptr, &at, &err) : 0u;
  const uint32_t chunk_lanes = __ballot_sync(active, kind == GH_STATE_KIND_CHUNK);
  if (kind == GH_STATE_KIND_CHUNK) {
    const unsigned long long key = (unsigned long long)at.page * h->chunk_words + at.word;
    const uint32_t grp = __match_any_sync(chunk_lanes, key);
    const uint32_t bits = __reduce_or_sync(grp, at.bit);
    if (gh_lane_id() == (uint32_t)__ffs(grp) - 1u) {
      const uint32_t freed = gh_chunks_release(h, at.page, at.word, bits);
      if (freed) gh_page_unreserve(h, at.page, gh_popc(freed));
      const uint32_t bad = gh_popc(grp) - gh_popc(freed); /* already free, or freed twice in this call */
      if (bad) gh_atomic_add64_relaxed(&h->xerrors[GH_ERRC_DOUBLE_FREE], bad);
    }
  } else if (kind == GH_STATE_KIND_HEAD) {
    if (!gh_run_free(h, at.page, at.state)) gh_count_error(h, GH_ERRC_DOUBLE_FREE);
  } else if (ptr != NULL) {
    gh_count_error(h, err);
  }
}

#endif /* GPUHEAP_WARP_CUH */
