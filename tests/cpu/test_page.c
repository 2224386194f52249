/* The page-state protocol: each transition alone, then the race between
 * "page became empty" and "chunk reserved" under threads. */
#include <pthread.h>
#include <string.h>

#include "gpuheap/core.h"
#include "gpuheap/cpu.h"
#include "../test_util.h"

static gh_cpu_heap_t* new_heap(uint32_t pages, uint32_t page_bytes) {
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = page_bytes;
  o.slots = 4;
  gh_cpu_heap_t* heap = NULL;
  const int err = gh_cpu_heap_create(&heap, (size_t)pages * page_bytes, &o);
  CHECK(err == GH_OK && heap != NULL);
  return heap;
}

static bool page_settled_free(const gh_dheap_t* h, uint32_t p) {
  bool ok = (gh_atomic_load_relaxed(&h->xpages[p >> 5]) & (1u << (p & 31))) == 0 &&
            gh_atomic_load_relaxed(&h->xcount[p]) == 0 && gh_atomic_load_relaxed(&h->xstate[p]) == GH_STATE_FREE;
  for (uint32_t w = 0; w < h->chunk_words; w++) ok = ok && gh_chunk_bitmap(h, p)[w] == 0;
  return ok;
}

static void test_transitions(void) {
  gh_cpu_heap_t* heap = new_heap(64, 4096);
  const gh_dheap_t* h = gh_cpu_heap_core(heap);
  const uint32_t cls = gh_size_to_class(64); /* 64 chunks per 4 KiB page */
  const uint32_t per = h->classes[cls].per_page;
  uint32_t used = 99;

  /* A free page cannot be reserved from, and the failed reservation leaves no trace. */
  CHECK(gh_page_reserve(h, 5, cls, 3, &used) == 0);
  CHECK(page_settled_free(h, 5));

  /* Claim, format with 3 reserved, take them. */
  CHECK(gh_pages_claim(h, 0, 1u << 5) == (1u << 5));
  CHECK(gh_pages_claim(h, 0, 1u << 5) == 0); /* claimed only once */
  gh_page_format(h, 5, cls, 2, 3, false);
  CHECK(gh_atomic_load_relaxed(&h->xcount[5]) == (GH_COUNT_OPEN | gh_count_class(cls) | 3u));
  gh_grant_t g;
  gh_grant_set(h, &g, 5, cls, 3, 0);
  uint32_t bits = gh_grant_take(h, &g, &h->classes[cls]);
  CHECK(bits == 0x7u && g.left == 0 && g.cursor == 0);

  /* A take whose first fetch-or gets nothing (its guessed bits were taken
   * meanwhile) picks again from the free bit of rank gh_take_spread(left)
   * on, not the lowest, so that the takers that lost beside it pick apart
   * (on the CPU the spread is the address of the taker's count). */
  {
    uint32_t* bm = gh_chunk_bitmap(h, 5);
    bm[0] = 0xFu | (1u << 6); /* 0-3 and 6 taken; free: 4, 5, 7, 8, ..., per - 1 */
    uint32_t left = 2, cursor = 0, seen = 0;
    const uint32_t free_now = ~bm[0] & gh_bit_range(0, per < 32 ? per : 32);
    const uint32_t want = gh_pick_spread(free_now, 2, gh_take_spread(&left));
    const uint32_t got = gh_chunks_take(h, 5, &h->classes[cls], &left, &cursor, &seen);
    CHECK(left == 0 && cursor == 0 && got == want && gh_popc(got) == 2);
    CHECK(gh_take_spread(&left) % gh_popc(free_now) == 0 || got != gh_lowest_bits(free_now, 2));
    /* Taken bits that are a prefix of the word (a page filled in order):
     * the retry takes the lowest free bits, where later counts point past. */
    bm[0] = 0xFu;
    left = 2, cursor = 0, seen = 0;
    CHECK(gh_chunks_take(h, 5, &h->classes[cls], &left, &cursor, &seen) == 0x30u && left == 0);
    bm[0] = 0x7u; /* the grant's three chunks as before */
  }

  /* Wrong class, then over-capacity: partial grant of what is left. */
  CHECK(gh_page_reserve(h, 5, cls + 1, 1, &used) == 0);
  CHECK(gh_page_reserve(h, 5, cls, per, &used) == per - 3 && used == 3);
  CHECK((gh_atomic_load_relaxed(&h->xcount[5]) & GH_COUNT_USED_MASK) == per);
  CHECK(gh_page_reserve(h, 5, cls, 1, &used) == 0); /* full */
  gh_page_unreserve(h, 5, per - 3);                 /* give the partial grant back */

  /* Release two of three: the page stays; release the last: it closes. */
  CHECK(gh_chunks_release(h, 5, 0, 0x3u) == 0x3u);
  gh_page_unreserve(h, 5, 2);
  CHECK(gh_atomic_load_relaxed(&h->xcount[5]) == (GH_COUNT_OPEN | gh_count_class(cls) | 1u));
  CHECK(gh_chunks_release(h, 5, 0, 0x3u) == 0); /* already free: a double free is seen */
  CHECK(gh_chunks_release(h, 5, 0, 0x4u) == 0x4u);
  gh_page_unreserve(h, 5, 1);
  CHECK(page_settled_free(h, 5));

  /* Hint slots: an empty slot makes its first user the refiller; it installs
   * a pinned page, which survives becoming empty. */
  gh_grant_t hg;
  gh_hint_t hs;
  CHECK(gh_grant_from_hint(h, cls, 1, 1, &hs, &hg) == 0 && hs.refiller && hs.old == GH_NO_PAGE);
  CHECK(*gh_hint_slot(h, cls, 1) == GH_REFILL_COLD); /* the slot's first page: the others wait */
  {
    gh_hint_t waiter;
    CHECK(gh_grant_from_hint(h, cls, 1, 1, &waiter, &hg) == 0 && !waiter.refiller && waiter.seen == GH_REFILL_COLD);
  }
  CHECK(gh_pages_claim(h, 0, 1u << 7) == (1u << 7));
  CHECK(gh_grant_from_new_page(h, 7, cls, 1, 1, &hs, &hg) == 1 && !hs.refiller && hs.seen == 7);
  CHECK(*gh_hint_slot(h, cls, 1) == 7);
  CHECK(gh_atomic_load_relaxed(&h->xcount[7]) == (GH_COUNT_OPEN | GH_COUNT_PINNED | gh_count_class(cls) | 1u));
  CHECK(gh_grant_take(h, &hg, &h->classes[cls]) == 1u);
  CHECK(gh_chunks_release(h, 7, 0, 1u) == 1u);
  gh_page_unreserve(h, 7, 1);
  CHECK(gh_atomic_load_relaxed(&h->xcount[7]) == (GH_COUNT_OPEN | GH_COUNT_PINNED | gh_count_class(cls)));
  /* Fill page 7; the next thread finds it full and becomes the refiller. */
  CHECK(gh_grant_from_hint(h, cls, 1, per, &hs, &hg) == per && !hs.refiller);
  while (hg.left) gh_grant_take(h, &hg, &h->classes[cls]);
  CHECK(gh_grant_from_hint(h, cls, 1, 1, &hs, &hg) == 0 && hs.refiller && hs.old == 7);
  /* Others wait (bounded) and then search alone, without changing the slot. */
  gh_hint_t other;
  CHECK(gh_grant_from_hint(h, cls, 1, 1, &other, &hg) == 0 && !other.refiller && other.seen == GH_REFILL);
  /* The refiller installs page 8; page 7 loses its pin, and closes once emptied. */
  CHECK(gh_pages_claim(h, 0, 1u << 8) == (1u << 8));
  CHECK(gh_grant_from_new_page(h, 8, cls, 1, 1, &hs, &hg) == 1 && *gh_hint_slot(h, cls, 1) == 8);
  CHECK(gh_atomic_load_relaxed(&h->xcount[7]) == (GH_COUNT_OPEN | gh_count_class(cls) | per));
  for (uint32_t w = 0; w < h->classes[cls].words; w++)
    gh_page_unreserve(h, 7, gh_popc(gh_chunks_release(h, 7, w, 0xFFFFFFFFu)));
  CHECK(page_settled_free(h, 7));
  /* Taking a page's last chunks as part of a larger request makes the taker
   * the refiller; one that gives up leaves the slot empty, the page unpinned. */
  gh_grant_take(h, &hg, &h->classes[cls]);
  CHECK(gh_grant_from_hint(h, cls, 1, per, &hs, &hg) == per - 1 && hs.refiller && hs.old == 8);
  gh_page_unreserve(h, 8, per - 1); /* give the grant back untaken */
  gh_hint_abandon(h, cls, 1, &hs);
  CHECK(*gh_hint_slot(h, cls, 1) == GH_DROPPED && !hs.refiller);
  CHECK(gh_atomic_load_relaxed(&h->xcount[8]) == (GH_COUNT_OPEN | gh_count_class(cls) | 1u));
  /* A slot given up is not cold: its next refill is GH_REFILL, which a class
   * with few chunks per page does not wait for. */
  CHECK(gh_grant_from_hint(h, cls, 1, 1, &hs, &hg) == 0 && hs.refiller && hs.old == GH_NO_PAGE);
  CHECK(*gh_hint_slot(h, cls, 1) == GH_REFILL);
  CHECK(gh_grant_from_hint(h, cls, 1, 1, &other, &hg) == 0 && !other.refiller && other.seen == GH_REFILL);
  gh_hint_abandon(h, cls, 1, &hs);
  /* Stealing takes an empty pinned page out of its slot. */
  CHECK(gh_chunks_release(h, 8, 0, 1u) == 1u);
  gh_page_unreserve(h, 8, 1);
  CHECK(page_settled_free(h, 8));
  CHECK(gh_grant_from_hint(h, cls, 2, 1, &hs, &hg) == 0 && hs.refiller);
  CHECK(gh_pages_claim(h, 0, 1u << 9) == (1u << 9));
  gh_grant_from_new_page(h, 9, cls, 2, 1, &hs, &hg);
  CHECK(gh_steal_pinned(h) == 0); /* page 9 has a chunk */
  gh_page_unreserve(h, 9, 1);     /* (reserved, never taken) */
  CHECK(gh_steal_pinned(h) == 1);
  CHECK(page_settled_free(h, 9) && *gh_hint_slot(h, cls, 2) == GH_DROPPED);

  /* Runs: claim across a word boundary, free once, second free refused. */
  CHECK(gh_run_claim(h, 30, 4));
  CHECK(!gh_run_claim(h, 33, 2)); /* overlaps */
  gh_run_mark(h, 30, 4);
  CHECK(gh_state_low(gh_atomic_load_relaxed(&h->xstate[30])) == 4);
  CHECK(gh_run_free(h, 30, gh_state_head(4)));
  CHECK(!gh_run_free(h, 30, gh_state_head(4)));
  CHECK(page_settled_free(h, 31) && page_settled_free(h, 32));

  /* Stealing reads xcount, then xstate; in between the page may have been
   * closed and claimed as a run head (proofs/spin/README.md, "Findings"). The
   * snapshot a stealer can then see: xcount empty-and-pinned, xstate HEAD(L),
   * which would name class 0's slot L. Such a page is skipped: the slot that
   * HEAD(L) would name keeps its page. */
  const uint32_t L = 3;
  CHECK(gh_pages_claim(h, 0, 1u << 12) == (1u << 12));
  gh_atomic_store_relaxed(gh_hint_slot(h, 0, L), 12);
  gh_atomic_store_relaxed(&h->xcount[12], GH_COUNT_OPEN | GH_COUNT_PINNED);
  gh_atomic_store_relaxed(&h->xstate[12], gh_state_head(L));
  CHECK(gh_steal_pinned(h) == 0);
  CHECK(*gh_hint_slot(h, 0, L) == 12);
  CHECK(gh_atomic_load_relaxed(&h->xcount[12]) == (GH_COUNT_OPEN | GH_COUNT_PINNED));
  gh_cpu_heap_destroy(heap);
}

/* Runs of a frame or more start at a frame boundary (first fit), and fall
 * back to any run of free pages where no boundary has room. 64 KiB pages:
 * a frame is 32 pages, one bitmap word. */
static void test_frame_runs(void) {
  gh_cpu_heap_t* heap = new_heap(256, 65536);
  const gh_dheap_t* h = gh_cpu_heap_core(heap);
  gh_rng_t rng = gh_rng_seed(1, 2);
  uint32_t probes = 0;
  CHECK(gh_frame_pages(h) == 32);
  CHECK(gh_pages_claim(h, 0, 1u << 1) == (1u << 1)); /* page 1 in use */
  const uint32_t a = gh_run_alloc(h, 40, &rng, &probes);
  CHECK(a == 32);                                   /* not 2 */
  const uint32_t b = gh_run_alloc(h, 32, &rng, &probes);
  CHECK(b == 96);                                   /* frame 64-95 holds pages 64-71 of a */
  const uint32_t c = gh_run_alloc(h, 64, &rng, &probes);
  CHECK(c == 128);
  /* Only pages 2-31 and 72-95 are free now but for 192-255; fill 192-255
   * with a run, then a 32-page request has no frame boundary left ... */
  CHECK(gh_run_alloc(h, 64, &rng, &probes) == 192);
  CHECK(gh_frame_scan(h, 32, &probes) == GH_NO_PAGE);
  /* ... and no 32 free pages in a row either; 24 pages fit in 2-31 or at
   * 72-95 (shorter runs are placed at random). */
  CHECK(gh_run_alloc(h, 32, &rng, &probes) == GH_NO_PAGE);
  const uint32_t d = gh_run_alloc(h, 24, &rng, &probes);
  CHECK((d >= 2 && d <= 8) || d == 72);
  gh_cpu_heap_destroy(heap);

  /* 4 KiB pages: a frame is 512 pages, 16 words. */
  heap = new_heap(2048, 4096);
  h = gh_cpu_heap_core(heap);
  CHECK(gh_frame_pages(h) == 512);
  CHECK(gh_pages_claim(h, 0, 1u << 1) == (1u << 1));
  CHECK(gh_run_alloc(h, 600, &rng, &probes) == 512);
  CHECK(gh_run_alloc(h, 512, &rng, &probes) == 1536);
  gh_cpu_heap_destroy(heap);
}

/* A frame run's last resort (gh_run_take): a frame whose pages are free
 * or empty pages that hint slots hold is claimed whole, the held pages
 * going from their slots to the run without ever being free; a frame with
 * a page in use, or a held page that cannot be taken, is left as it was.
 * 64 KiB pages: a frame is 32 pages, one bitmap word; each frame gets a
 * held page at offset 5. */
static void hold_empty(const gh_dheap_t* h, uint32_t p, uint32_t cls, uint32_t slot) {
  CHECK(gh_pages_claim(h, p >> 5, 1u << (p & 31)) == (1u << (p & 31)));
  gh_page_format(h, p, cls, slot, 0, true);
  gh_atomic_store_relaxed(gh_hint_slot(h, cls, slot), p);
}

static void test_frame_take(void) {
  gh_cpu_heap_t* heap = new_heap(128, 65536);
  const gh_dheap_t* h = gh_cpu_heap_core(heap);
  const uint32_t cls = gh_size_to_class(64), held_count = GH_COUNT_OPEN | GH_COUNT_PINNED | gh_count_class(cls);
  gh_rng_t rng = gh_rng_seed(3, 4);
  uint32_t probes = 0, used = 0;
  for (uint32_t f = 0; f < 4; f++) hold_empty(h, f * 32 + 5, cls, f);
  /* Frame 0: a page in use besides; nothing is touched. */
  CHECK(gh_pages_claim(h, 0, 1u << 9) == (1u << 9));
  gh_page_format(h, 9, cls + 1, 0, 1, false);
  uint32_t blocked = 99;
  CHECK(!gh_run_take(h, 0, 32, &blocked) && blocked == 9);
  CHECK(gh_atomic_load_relaxed(&h->xpages[0]) == ((1u << 5) | (1u << 9)));
  CHECK(*gh_hint_slot(h, cls, 0) == 5 && gh_atomic_load_relaxed(&h->xcount[5]) == held_count);
  /* Frame 1: taken whole; page 37 leaves slot 1 closed, its bit the run's. */
  CHECK(gh_run_take(h, 32, 32, &blocked));
  CHECK(gh_atomic_load_relaxed(&h->xpages[1]) == 0xFFFFFFFFu);
  CHECK(*gh_hint_slot(h, cls, 1) == GH_DROPPED);
  CHECK(gh_atomic_load_relaxed(&h->xcount[37]) == 0 && gh_atomic_load_relaxed(&h->xstate[37]) == GH_STATE_FREE);
  /* Frame 2: its held page's slot is being refilled (the refiller took the
   * page out and owns its pin): not taken, the free pages given back. */
  gh_atomic_store_relaxed(gh_hint_slot(h, cls, 2), GH_REFILL);
  CHECK(!gh_run_take(h, 64, 32, &blocked) && blocked == 69);
  CHECK(gh_atomic_load_relaxed(&h->xpages[2]) == (1u << 5));
  CHECK(gh_atomic_load_relaxed(&h->xcount[69]) == held_count);
  /* A held page with a chunk reserved is not taken: its slot keeps it.
   * (A reservation between the slot's CAS and the close's is the SPIN
   * model's case: the page is unpinned and lives on.) */
  CHECK(gh_page_reserve(h, 101, cls, 1, &used) == 1 && used == 0);
  CHECK(!gh_page_take_held(h, 101));
  CHECK(*gh_hint_slot(h, cls, 3) == 101);
  gh_page_unreserve(h, 101, 1);
  /* gh_run_alloc: no free frame and no 32 free pages in a row (the held
   * pages sit 32 apart); frames 0-2 refuse, frame 3 is taken. */
  CHECK(gh_frame_scan(h, 32, &probes) == GH_NO_PAGE);
  CHECK(gh_run_alloc(h, 32, &rng, &probes) == 96);
  CHECK(*gh_hint_slot(h, cls, 3) == GH_DROPPED && gh_atomic_load_relaxed(&h->xcount[101]) == 0);
  CHECK(gh_atomic_load_relaxed(&h->xpages[3]) == 0xFFFFFFFFu);
  /* Given back, the run's pages are free pages like any other. */
  gh_pages_release(h, 1, 0xFFFFFFFFu);
  gh_pages_release(h, 3, 0xFFFFFFFFu);
  CHECK(page_settled_free(h, 37) && page_settled_free(h, 101));
  gh_cpu_heap_destroy(heap);
}

/* A run shorter than a frame takes the empty pages that hint slots hold in
 * its window with the free ones, and leaves the other slots' pages where
 * they are: before, it freed every such page in the heap (gh_steal_pinned)
 * and then claimed what it found free, so that a refill beside it could
 * take that room first (bench/NOTES.md, device visit 23). */
static void test_run_take_held(void) {
  gh_cpu_heap_t* heap = new_heap(128, 65536);
  const gh_dheap_t* h = gh_cpu_heap_core(heap);
  const uint32_t cls = gh_size_to_class(64), held_count = GH_COUNT_OPEN | GH_COUNT_PINNED | gh_count_class(cls);
  gh_rng_t rng = gh_rng_seed(5, 6);
  uint32_t probes = 0;
  /* Every page in use but 10 and 12 (held by slots 0 and 1), 11 (free),
   * 40 and 70 (held by slots 2 and 3, between pages in use). */
  const uint32_t keep[4] = {(1u << 10) | (1u << 11) | (1u << 12), 1u << 8, 1u << 6, 0u};
  for (uint32_t w = 0; w < 4; w++) CHECK(gh_pages_claim(h, w, ~keep[w]) == ~keep[w]);
  hold_empty(h, 10, cls, 0);
  hold_empty(h, 12, cls, 1);
  hold_empty(h, 40, cls, 2);
  hold_empty(h, 70, cls, 3);
  /* No window of 4: the run gets none, and its last resort, the steal,
   * leaves the held pages free for others. */
  CHECK(gh_run_alloc(h, 4, &rng, &probes) == GH_NO_PAGE);
  CHECK(*gh_hint_slot(h, cls, 2) == GH_DROPPED && page_settled_free(h, 40) && page_settled_free(h, 10));
  hold_empty(h, 10, cls, 0);
  hold_empty(h, 12, cls, 1);
  hold_empty(h, 40, cls, 2);
  hold_empty(h, 70, cls, 3);
  CHECK(gh_run_alloc(h, 3, &rng, &probes) == 10);
  CHECK(gh_atomic_load_relaxed(&h->xpages[0]) == 0xFFFFFFFFu);
  CHECK(*gh_hint_slot(h, cls, 0) == GH_DROPPED && *gh_hint_slot(h, cls, 1) == GH_DROPPED);
  CHECK(gh_atomic_load_relaxed(&h->xcount[10]) == 0 && gh_atomic_load_relaxed(&h->xcount[12]) == 0);
  CHECK(*gh_hint_slot(h, cls, 2) == 40 && gh_atomic_load_relaxed(&h->xcount[40]) == held_count);
  CHECK(*gh_hint_slot(h, cls, 3) == 70 && gh_atomic_load_relaxed(&h->xcount[70]) == held_count);
  gh_pages_release(h, 0, gh_bit_range(10, 3));
  CHECK(page_settled_free(h, 10) && page_settled_free(h, 11) && page_settled_free(h, 12));
  gh_cpu_heap_destroy(heap);
}

/* The race. Threads share one page. Each loop: reserve a chunk of the
 * thread's class on page 0; if that fails, try to claim and format page 0
 * for its class. Then stamp the whole chunk with the thread id, check the
 * stamp after a pause, release. A chunk handed out of a page that was closed
 * (or reformatted for another class) overlaps another thread's chunk and
 * breaks a stamp; a lost close leaves page 0 unsettled at the end. */
typedef struct {
  gh_cpu_heap_t* heap;
  uint32_t id, cls, iters;
  unsigned long long served, formats;
} race_arg_t;

static int race_errors;

static void* race_thread(void* argp) {
  race_arg_t* a = (race_arg_t*)argp;
  const gh_dheap_t* h = gh_cpu_heap_core(a->heap);
  const gh_class_t* cl = &h->classes[a->cls];
  for (uint32_t i = 0; i < a->iters; i++) {
    uint32_t used = 0, k = gh_page_reserve(h, 0, a->cls, 1, &used);
    if (!k) {
      if (!gh_pages_claim(h, 0, 1u)) continue;
      gh_page_format(h, 0, a->cls, 0, 1, false);
      used = 0;
      a->formats++;
    }
    uint32_t left = 1, cursor = gh_chunks_cursor(cl, used), seen = gh_chunks_seen(used);
    const uint32_t bit = gh_chunks_take(h, 0, cl, &left, &cursor, &seen);
    const uint32_t idx = cursor * 32 + gh_ctz(bit);
    uint8_t* chunk = gh_page_ptr(h, 0) + (size_t)idx * cl->size;
    memset(chunk, (int)a->id, cl->size);
    for (volatile int spin = 0; spin < 50; spin++) {
    }
    for (uint32_t b = 0; b < cl->size; b++)
      if (chunk[b] != (uint8_t)a->id) {
        __atomic_add_fetch(&race_errors, 1, __ATOMIC_RELAXED);
        break;
      }
    if (gh_chunks_release(h, 0, cursor, bit) != bit) __atomic_add_fetch(&race_errors, 1, __ATOMIC_RELAXED);
    gh_page_unreserve(h, 0, 1);
    a->served++;
  }
  return NULL;
}

static void test_race(uint32_t threads) {
  gh_cpu_heap_t* heap = new_heap(32, 4096);
  pthread_t t[16];
  race_arg_t args[16];
  const uint32_t iters = (uint32_t)(20000 * gh_test_scale());
  race_errors = 0;
  for (uint32_t i = 0; i < threads; i++) {
    /* two classes whose chunks straddle each other's boundaries */
    args[i] = (race_arg_t){heap, i + 1, gh_size_to_class(i % 2 ? 48 : 80), iters, 0, 0};
    pthread_create(&t[i], NULL, race_thread, &args[i]);
  }
  unsigned long long served = 0, formats = 0;
  for (uint32_t i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    served += args[i].served;
    formats += args[i].formats;
  }
  CHECK_MSG(race_errors == 0, "%d chunks overlapped or were freed twice", race_errors);
  CHECK(served > 0 && formats > 1); /* the page did close and reopen */
  CHECK(page_settled_free(gh_cpu_heap_core(heap), 0));
  printf("race, %u threads: %llu chunks served, page formatted %llu times\n", threads, served, formats);
  gh_cpu_heap_destroy(heap);
}

int main(void) {
  test_transitions();
  test_frame_runs();
  test_frame_take();
  test_run_take_held();
  test_race(2);
  test_race(8);
  return gh_test_done("test_page");
}
