/* gpuheap: bit tricks on 32-bit bitmap words, identical on device and CPU. */
#ifndef GPUHEAP_BITS_H
#define GPUHEAP_BITS_H

#include "config.h"

GH_HD uint32_t gh_popc(uint32_t x) {
#if GH_ON_DEVICE
  return (uint32_t)__popc(x);
#else
  return (uint32_t)__builtin_popcount(x);
#endif
}

/* Index of the lowest set bit; x != 0. */
GH_HD uint32_t gh_ctz(uint32_t x) {
#if GH_ON_DEVICE
  return (uint32_t)__ffs((int)x) - 1u;
#else
  return (uint32_t)__builtin_ctz(x);
#endif
}

/* Position of the n-th set bit (n counts from 0); 32 if x has no n-th bit. */
GH_HD uint32_t gh_nth_set_bit(uint32_t x, uint32_t n) {
  if (n >= gh_popc(x)) return 32u;
  uint32_t pos = 0;
  for (uint32_t width = 16; width != 0; width >>= 1) {
    const uint32_t low = gh_popc(x & ((1u << width) - 1u));
    if (n >= low) {
      n -= low;
      x >>= width;
      pos += width;
    }
  }
  return pos;
}

/* The lowest k set bits of x (all of x if it has fewer). */
GH_HD uint32_t gh_lowest_bits(uint32_t x, uint32_t k) {
  const uint32_t p = gh_nth_set_bit(x, k);
  return p >= 32u ? x : x & ((1u << p) - 1u);
}

/* x without its lowest k set bits. */
GH_HD uint32_t gh_drop_lowest_bits(uint32_t x, uint32_t k) { return x & ~gh_lowest_bits(x, k); }

/* Mask of bit positions i at which n (1..32) consecutive set bits of x
 * begin, i.e. bits i..i+n-1 all set, within the word. */
GH_HD uint32_t gh_run_starts(uint32_t x, uint32_t n) {
  if (n >= 32u) return x == 0xFFFFFFFFu ? 1u : 0u;
  uint32_t have = 1; /* x now marks starts of runs of length >= have */
  while (have < n && x) {
    const uint32_t step = (have <= n - have) ? have : n - have;
    x &= x >> step;
    have += step;
  }
  return x;
}

/* The set bit of x at or after position r, wrapping around (x != 0): a
 * way to spread threads over the set bits of one word. */
GH_HD uint32_t gh_set_bit_from(uint32_t x, uint32_t r) {
  r &= 31u;
  const uint32_t hi = x & ~((1u << r) - 1u);
  return gh_ctz(hi ? hi : x);
}

/* k of the set bits of x, from the one of rank r % popc(x) on, wrapping to
 * the lowest: all of x if it has k or fewer. Threads that pick from one
 * word with distinct r take different bits (gh_chunks_take's retries). */
GH_HD uint32_t gh_pick_spread(uint32_t x, uint32_t k, uint32_t r) {
  const uint32_t n = gh_popc(x);
  if (k >= n) return x;
  const uint32_t want = gh_lowest_bits(gh_drop_lowest_bits(x, r % n), k);
  const uint32_t got = gh_popc(want);
  return got < k ? want | gh_lowest_bits(x, k - got) : want;
}

/* Mask of n bits starting at bit i (i + n <= 32). */
GH_HD uint32_t gh_bit_range(uint32_t i, uint32_t n) { return (n >= 32u ? 0xFFFFFFFFu : ((1u << n) - 1u)) << i; }

#endif /* GPUHEAP_BITS_H */
