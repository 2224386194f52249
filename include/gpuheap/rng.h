/* gpuheap: the random numbers of randomized search.
 *
 * Each allocation seeds a small xorshift generator from the caller's identity
 * (global thread index on the GPU, a per-thread counter on the CPU) and a
 * clock, mixed by a murmur3 finalizer; the quality needed is only that
 * different lanes and different calls probe different places.
 */
#ifndef GPUHEAP_RNG_H
#define GPUHEAP_RNG_H

#include "config.h"

typedef struct gh_rng_s {
  uint32_t s;
} gh_rng_t;

GH_HD uint32_t gh_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}

GH_HD gh_rng_t gh_rng_seed(uint32_t a, uint32_t b) {
  gh_rng_t r;
  r.s = gh_mix32(a * 0x9E3779B9u ^ gh_mix32(b + 0x7F4A7C15u));
  if (r.s == 0) r.s = 0x6D2B79F5u;
  return r;
}

GH_HD uint32_t gh_rng_next(gh_rng_t* r) {
  uint32_t x = r->s;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  r->s = x;
  return x;
}

/* Uniform in [0, n), n >= 1. */
GH_HD uint32_t gh_rng_below(gh_rng_t* r, uint32_t n) { return (uint32_t)(((uint64_t)gh_rng_next(r) * n) >> 32); }

#endif /* GPUHEAP_RNG_H */
