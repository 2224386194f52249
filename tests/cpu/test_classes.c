/* Size classes, class division and the bit tricks, checked exhaustively
 * against plain arithmetic. */
#include "gpuheap/bits.h"
#include "gpuheap/sizeclass.h"
#include "../test_util.h"

static void test_size_classes(void) {
  for (uint32_t shift = GH_MIN_PAGE_SHIFT; shift <= GH_MAX_PAGE_SHIFT; shift++) {
    gh_class_t t[GH_MAX_CLASSES];
    const uint32_t n = gh_classes_init(t, shift);
    const uint32_t page = 1u << shift;
    CHECK(n >= 8 && n <= GH_MAX_CLASSES);
    CHECK(t[n - 1].size <= page / 4u);
    for (uint32_t c = 0; c < n; c++) {
      CHECK(t[c].size % GH_CHUNK_ALIGN == 0);
      CHECK(c == 0 || t[c].size > t[c - 1].size);
      CHECK(t[c].per_page == page / t[c].size && t[c].per_page >= 4u);
      CHECK(t[c].words * 32u >= t[c].per_page && (t[c].words - 1u) * 32u < t[c].per_page);
      CHECK(t[c].per_page <= gh_chunk_words_for(shift) * 32u);
      /* magic division is exact for every offset in a page */
      for (uint32_t off = 0; off < page; off++) CHECK_EQ_U64(gh_class_div(&t[c], off), off / t[c].size);
    }
    for (uint32_t size = 0; size <= t[n - 1].size; size++) {
      const uint32_t c = gh_size_to_class(size);
      CHECK_MSG(c < n, "size %u -> class %u", size, c);
      if (c >= n) continue;
      CHECK_MSG(t[c].size >= (size ? size : 1u), "size %u in class of %u", size, t[c].size);
      CHECK_MSG(c == 0 || t[c - 1].size < size, "size %u not in the smallest class that fits", size);
      /* rounding waste at most 1/8 of the class above 128 B */
      if (size > 128u) CHECK(t[c].size - size < t[c].size / 8u);
    }
  }
}

static uint32_t naive_nth(uint32_t x, uint32_t n) {
  for (uint32_t b = 0; b < 32; b++)
    if (x & (1u << b)) {
      if (n == 0) return b;
      n--;
    }
  return 32;
}

static uint32_t naive_run_starts(uint32_t x, uint32_t n) {
  uint32_t r = 0;
  for (uint32_t i = 0; i + n <= 32; i++) {
    bool all = true;
    for (uint32_t j = 0; j < n; j++) all = all && (x >> (i + j)) & 1u;
    if (all) r |= 1u << i;
  }
  return r;
}

static void test_bits(void) {
  uint32_t s = 12345;
  for (int i = 0; i < 20000; i++) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    const uint32_t x = (i % 3 == 0) ? s : (i % 3 == 1 ? s & (s >> 3) : s | (s << 2));
    for (uint32_t n = 0; n <= 32; n++) {
      CHECK_EQ_U64(gh_nth_set_bit(x, n), naive_nth(x, n));
      const uint32_t lo = gh_lowest_bits(x, n);
      CHECK((lo & ~x) == 0 && gh_popc(lo) == (n < gh_popc(x) ? n : gh_popc(x)));
      CHECK((gh_drop_lowest_bits(x, n) | lo) == x && (gh_drop_lowest_bits(x, n) & lo) == 0);
      if (n >= 1) CHECK_EQ_U64(gh_run_starts(x, n), naive_run_starts(x, n));
      if (x && n < 32) { /* the first set bit at or after n, wrapping */
        uint32_t want = 32;
        for (uint32_t k = 0; k < 32 && want == 32; k++)
          if (x & (1u << ((n + k) & 31u))) want = (n + k) & 31u;
        CHECK_EQ_U64(gh_set_bit_from(x, n), want);
      }
      /* k bits of x from rank r on, wrapping: within x, min(k, popc) of them;
       * rank 0 is the lowest bits; with k = 1, ranks 0 .. popc-1 pick
       * popc different bits. */
      const uint32_t r = s >> 7, pick = gh_pick_spread(x, n, r);
      CHECK((pick & ~x) == 0 && gh_popc(pick) == gh_popc(lo));
      CHECK(gh_pick_spread(x, n, 0) == lo);
      if (n >= 1 && n < gh_popc(x)) { /* starts at the bit of rank r % popc */
        const uint32_t first = gh_nth_set_bit(x, r % gh_popc(x));
        CHECK((pick >> first) & 1u);
        CHECK(r % gh_popc(x) + n > gh_popc(x) || (pick & ((1u << first) - 1u)) == 0);
      }
    }
    uint32_t all = 0;
    for (uint32_t r = 0; r < gh_popc(x); r++) {
      const uint32_t one = gh_pick_spread(x, 1, r);
      CHECK(gh_popc(one) == 1 && (one & all) == 0);
      all |= one;
    }
    CHECK(all == x);
  }
  CHECK(gh_run_starts(0xFFFFFFFFu, 32) == 1u && gh_run_starts(0x7FFFFFFFu, 32) == 0u);
  CHECK(gh_bit_range(0, 32) == 0xFFFFFFFFu && gh_bit_range(4, 0) == 0u && gh_bit_range(30, 2) == 0xC0000000u);
}

int main(void) {
  test_size_classes();
  test_bits();
  return gh_test_done("test_classes");
}
