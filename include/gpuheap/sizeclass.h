/* gpuheap: size classes.
 *
 * Classes 0..7 are 16, 32, ..., 128 bytes; above 128 each doubling has eight
 * classes (144, 160, ..., 256, 288, 320, ..., 512, ...), so a request wastes
 * at most 1/8 of its class size to rounding, about 1/16 on average. The
 * largest class a heap uses is min(page/4, 16 KiB): a page holds at least
 * four chunks. Larger requests are runs of whole pages.
 */
#ifndef GPUHEAP_SIZECLASS_H
#define GPUHEAP_SIZECLASS_H

#include "types.h"

GH_HD uint32_t gh_log2_floor(uint32_t x) {
#if GH_ON_DEVICE
  return 31u - (uint32_t)__clz(x);
#else
  return 31u - (uint32_t)__builtin_clz(x);
#endif
}

/* The class of a request of 1..max bytes (size 0 is served as 1). */
GH_HD uint32_t gh_size_to_class(uint32_t size) {
  if (size <= 128u) return size == 0 ? 0u : (size - 1u) >> 4;
  const uint32_t s = size - 1u;
  const uint32_t e = gh_log2_floor(s); /* >= 7 */
  return 8u + (e - 7u) * 8u + ((s >> (e - 3u)) & 7u);
}

GH_HD uint32_t gh_class_to_size(uint32_t cls) {
  if (cls < 8u) return 16u * (cls + 1u);
  const uint32_t g = (cls - 8u) >> 3, i = (cls - 8u) & 7u;
  return (128u << g) + (i + 1u) * (16u << g);
}

/* Fill a class table for a page of 2^page_shift bytes; returns the count. */
GH_HD uint32_t gh_classes_init(gh_class_t* t, uint32_t page_shift) {
  const uint32_t page = 1u << page_shift;
  uint32_t limit = page / 4u;
  if (limit > 16384u) limit = 16384u;
  uint32_t n = 0;
  while (n < GH_MAX_CLASSES && gh_class_to_size(n) <= limit) {
    const uint32_t sz = gh_class_to_size(n);
    t[n].size = sz;
    t[n].per_page = page / sz;
    t[n].magic = (uint32_t)((((uint64_t)1 << 32) + sz - 1u) / sz);
    t[n].words = (t[n].per_page + 31u) / 32u;
    n++;
  }
  return n;
}

/* offset / size for an offset inside a page (< 2^16). */
GH_HD uint32_t gh_class_div(const gh_class_t* c, uint32_t offset) {
  return (uint32_t)(((uint64_t)offset * c->magic) >> 32);
}

#endif /* GPUHEAP_SIZECLASS_H */
