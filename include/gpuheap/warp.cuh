/* gpuheap: the warp layer of the device allocator (CUDA only).
 *
 * gh_warp_malloc is called by whichever lanes of a warp are active together
 * (any subset, any mix of sizes). Lanes asking for the same class form a
 * group (__match_any_sync); the group's leader reserves for all of them with
 * one fetch-add on its hint page and takes their chunks with one fetch-or per
 * bitmap word, and shuffles hand the chunks out. What the hint cannot serve
 * goes on to the room bitmap and to new pages, still one search for the
 * group. Requests of one page are served by collective steps: each step
 * reads 32 consecutive words of the page bitmap (1024 pages) in one
 * coalesced load and claims what the warp needs from all of them at once,
 * so the worst lane of a warp waits as long as one warp-wide search, not 32
 * separate ones. Multi-page runs are searched by each lane on its own
 * (core.h), as is whatever a group's search leaves (the sweeps).
 *
 * Every collective loop below is warp-uniform over the mask it names: its
 * trip count depends only on values broadcast to all lanes of that mask.
 */
#ifndef GPUHEAP_WARP_CUH
#define GPUHEAP_WARP_CUH

#include "core.h"
#include "grow.h"

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

/* Hand out the chunks of grants to the lanes that asked for them, lowest
 * lanes first, one bitmap word per round. Executed by all lanes of `mask`,
 * which may hold several groups: each lane names its group's `holder` (the
 * lane holding the group's grant `g`), and `take` says whether its group has
 * a grant to hand out now (the same in all lanes of a group). Every shuffle
 * names the whole of `mask`, the same in all lanes, so the groups of a warp
 * are served together: with one mask per group, a warp whose lanes ask for
 * many classes ran each shuffle once per group (the compiler's divergent
 * path; bench/NOTES.md, "Mixed under Nsight Compute"). Returns this lane's
 * chunk, or NULL if it is not served; *need (the group's lanes still
 * waiting) loses the lanes served. */
GH_DEV void* gh_warp_distribute(const gh_dheap_t* h, uint32_t mask, uint32_t holder, gh_grant_t* g, uint32_t cls,
                                uint32_t* need, bool take) {
  const uint32_t lane = gh_lane_id(), lt = gh_lanemask_lt();
  const gh_class_t* cl = &h->classes[cls];
  const uint32_t page = __shfl_sync(mask, g->page, holder);
  void* mine = NULL;
  uint32_t left = take ? 1u : 0u; /* whether the holder takes a word this round */
  do {
    uint32_t bits = 0, word = 0, more = 0;
    if (lane == holder && left) {
      bits = gh_grant_take(h, g, cl);
      word = g->cursor;
      more = g->left;
    }
    bits = __shfl_sync(mask, bits, holder);
    word = __shfl_sync(mask, word, holder);
    left = __shfl_sync(mask, more, holder);
    const uint32_t cnt = gh_popc(bits);
    if (*need & (1u << lane)) {
      const uint32_t r = gh_popc(*need & lt);
      if (r < cnt) mine = gh_chunk_ptr(h, page, cls, word * 32u + gh_nth_set_bit(bits, r));
    }
    *need = gh_drop_lowest_bits(*need, cnt);
  } while (__any_sync(mask, left));
  return mine;
}

/* One collective step over consecutive words of the page bitmap from word
 * w0, one per lane of `mask` (32 for a whole warp): claim up to `want` free
 * pages in all, from words that already
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
  const uint32_t width = gh_popc(mask); /* words read per step: one per lane */
  const uint32_t sweep_steps = (h->n_words + width - 1u) / width;
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
      w0 += width;
      if (w0 >= h->n_words) w0 -= h->n_words;
    }
  }
  *need = 0u;
  return mine;
}

/* The device allocator's malloc for the active lanes of a warp. Chunk
 * requests: each group's leader asks the hint, room and new-page sources
 * for the whole group (gh_grant_next), all groups at once; what is left, the
 * lanes search alone. 1-page requests: collective steps. Longer runs: each
 * lane alone. Model `malloc_chunk` with MAXREQ=2 (a group of two lanes; the
 * collective page claims are not modeled: proofs/spin/README.md). */
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
  gh_rng_t rng = gh_rng_seed(gh_global_thread_id(), (uint32_t)clock64());
  const uint32_t peers = __match_any_sync(active, key);
  const uint32_t chunk_lanes = __ballot_sync(active, key < GH_KEY_PAGE);
  if (key < GH_KEY_PAGE) {
    /* All groups of chunk requests go round together, each leader asking
     * for its own group, so that every shuffle names the same mask. */
    const uint32_t leader = __ffs(peers) - 1u;
    uint32_t need = peers;
    bool open = true; /* the group still has lanes to serve and sources to ask */
    gh_search_t s = {GH_SRC_HINT, {GH_NO_PAGE, GH_NO_PAGE, false}};
    gh_grant_t g;
    for (;;) {
      uint32_t k = 0;
      if (open && lane == leader) {
        /* The hint page inline; the other sources out of line (GH_FN_SLOW). */
        const uint32_t n = gh_popc(need);
        if (s.src == GH_SRC_HINT && n < h->classes[cls].per_page) {
          k = gh_grant_from_hint(h, cls, slot, n, &s.hs, &g);
          s.src = GH_SRC_ROOM;
        }
        if (!k) k = gh_grant_next(h, cls, slot, n, &s, GH_SRC_CLASS, &rng, &g, &probes);
      }
      k = __shfl_sync(chunk_lanes, k, leader);
      if (!k) open = false;
      void* c = gh_warp_distribute(h, chunk_lanes, leader, &g, cls, &need, k != 0u);
      if (c) ptr = c;
      if (!need) open = false;
      if (!__any_sync(chunk_lanes, open)) break;
    }
    if (lane == leader && s.hs.refiller) gh_hint_abandon(h, cls, slot, &s.hs);
    if (need & (1u << lane)) {
      gh_search_t ls = {GH_SRC_CLASS, {GH_NO_PAGE, GH_NO_PAGE, false}};
      if (gh_grant_next(h, cls, slot, 1, &ls, GH_SRC_DONE, &rng, &g, &probes)) {
        const uint32_t bit = gh_grant_take(h, &g, &h->classes[cls]);
        ptr = gh_chunk_ptr(h, g.page, cls, g.cursor * 32u + gh_ctz(bit));
      }
    }
  } else if (key >= GH_KEY_RUN && key < GH_KEY_NONE) {
    const uint32_t n = gh_run_pages(h, size);
    const uint32_t s = gh_run_alloc(h, n, &rng, &probes);
    if (s != GH_NO_PAGE) {
      gh_run_mark(h, s, n);
      ptr = gh_page_ptr(h, s);
    }
  }
  /* 1-page requests: the whole set of active lanes searches together. */
  uint32_t need = __ballot_sync(active, key == GH_KEY_PAGE);
  if (need) {
    void* got = gh_warp_pages(h, active, &need, slot, &rng, &probes);
    if (key == GH_KEY_PAGE) ptr = got;
  }
  if (probes_out) *probes_out = probes;
  return ptr;
}

/* Growth on demand (grow.h) for the lanes gh_warp_malloc left without
 * memory: one of them asks the host for the most frames any of them needs
 * and waits. r: the growths these lanes waited for so far. Returns the
 * next r, after which they search again, or 0: no search more (no growth
 * channel, a request larger than the heap may be, too many rounds), and
 * GH_GROW_ROUNDS after a denial (one search more). Out of line and small. */
static __device__ __noinline__ uint32_t gh_warp_grow(const gh_dheap_t* h, size_t size, uint32_t r, uint32_t seen) {
  const uint32_t pages = gh_grow_pages(h, size);
  if (h->grow == NULL || pages == 0u || r >= GH_GROW_ROUNDS) return 0u;
  const uint32_t active = __activemask();
  const uint32_t lead = __ffs(active) - 1u;
  const uint32_t most = __reduce_max_sync(active, pages);
  const uint32_t newest = __reduce_max_sync(active, seen);  /* a lane that searched the latest heap */
  bool grew = false;
  if (gh_lane_id() == lead) grew = gh_grow_wait(h, gh_grow_ask(h, most, newest));
  return __shfl_sync(active, grew, lead) ? r + 1u : GH_GROW_ROUNDS;
}

/* gh_warp_malloc, and growth on demand where the heap has it: search,
 * and while nothing was found and the host grows the heap, again. Not
 * gh_warp_malloc's own path: the loop around the search raised the
 * allocation kernel from 80 to 84 registers (a call out of line to a
 * second copy of the search, to 102), which costs a block of 256 threads
 * per SM. */
GH_DEV void* gh_warp_malloc_grow(const gh_dheap_t* h, size_t size, uint32_t* probes_out) {
  void* ptr;
  for (uint32_t r = 0, seen = gh_grow_seen(h); (ptr = gh_warp_malloc(h, size, probes_out)) == NULL &&
                                               (r = gh_warp_grow(h, size, r, seen)) != 0u;
       seen = gh_grow_seen(h)) {
  }
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
