/* Fill until NULL, free all, refill to the same count; NULL only when the
 * heap truly has no room; memory efficiency of mixed sizes at the first NULL. */
#include <pthread.h>
#include <string.h>

#include "gpuheap/core.h"
#include "gpuheap/cpu.h"
#include "../test_util.h"

#define HEAP_BYTES ((size_t)32 << 20)

static gh_cpu_heap_t* new_heap_of(size_t page, size_t bytes) {
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = page;
  gh_cpu_heap_t* heap = NULL;
  CHECK(gh_cpu_heap_create(&heap, bytes, &o) == GH_OK);
  return heap;
}

static gh_cpu_heap_t* new_heap(size_t page) { return new_heap_of(page, HEAP_BYTES); }

static size_t fill(gh_cpu_heap_t* heap, size_t size, void** out, size_t cap) {
  size_t n = 0;
  while (n < cap) {
    void* p = gh_cpu_malloc(heap, size);
    if (!p) break;
    out[n++] = p;
  }
  return n;
}

/* No room left for `size`: no free run long enough, and for chunk sizes no
 * page of the class with a free chunk. */
static bool truly_full(gh_cpu_heap_t* heap, size_t size) {
  const gh_dheap_t* h = gh_cpu_heap_core(heap);
  gh_heap_stats_t st;
  gh_cpu_heap_stats(heap, &st);
  if (size <= h->max_chunk) {
    const uint32_t c = gh_size_to_class((uint32_t)size);
    if (st.pages_free != 0) return false;
    /* empty pages held only by hints are room too */
    for (uint32_t k = 0; k < st.n_classes; k++)
      if (k != c && st.classes[k].pages && st.classes[k].chunks_used == 0) return false;
    return st.classes[c].chunks_used == st.classes[c].chunks_capacity;
  }
  const uint32_t pages = (uint32_t)((size + st.page_bytes - 1) / st.page_bytes);
  return st.largest_free_run < pages && st.pages_chunk == 0;
}

static void test_fill_refill(size_t page, size_t size) {
  gh_cpu_heap_t* heap = new_heap(page);
  const size_t cap = HEAP_BYTES / 16 + 1;
  void** ptrs = (void**)malloc(cap * sizeof *ptrs);
  const size_t n1 = fill(heap, size, ptrs, cap);
  CHECK_MSG(n1 > 0 && truly_full(heap, size), "page %zu size %zu: NULL after %zu with room left", page, size, n1);
  for (size_t i = 0; i < n1; i++) gh_cpu_free(heap, ptrs[i]);
  gh_heap_stats_t st;
  gh_cpu_heap_stats(heap, &st);
  CHECK_EQ_U64(st.bytes_in_use, 0);
  const size_t n2 = fill(heap, size, ptrs, cap);
  const uint32_t pages = (uint32_t)((size + page - 1) / page);
  if (size <= gh_cpu_heap_core(heap)->max_chunk || pages == 1)
    CHECK_MSG(n1 == n2, "page %zu size %zu: %zu then %zu", page, size, n1, n2);
  else /* multi-page runs: placement is random, the count need not repeat */
    CHECK_MSG(n2 > 0 && truly_full(heap, size), "page %zu size %zu: refill %zu", page, size, n2);
  for (size_t i = 0; i < n2; i++) gh_cpu_free(heap, ptrs[i]);
  gh_cpu_heap_stats(heap, &st);
  CHECK_EQ_U64(st.bytes_in_use, 0);
  CHECK_EQ_U64(st.double_frees + st.foreign_frees, 0);
  free(ptrs);
  gh_cpu_heap_destroy(heap);
}

/* Mixed sizes from 8 threads until each sees NULL; then everything freed,
 * the whole heap must come back as one run. The heap is large against the
 * hint pages (8 slots x 48 classes x 16 KiB = 6 MiB), as heaps are. */
#define MIXED_BYTES ((size_t)128 << 20)
typedef struct {
  gh_cpu_heap_t* heap;
  uint32_t id;
  void** ptrs;
  size_t n, cap;
  unsigned long long bytes;
} filler_t;

static void* filler(void* a) {
  filler_t* f = (filler_t*)a;
  uint32_t s = 77u + f->id * 7919u;
  while (f->n < f->cap) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    const size_t size = 16 + s % 4081; /* uniform 16..4096 */
    void* p = gh_cpu_malloc(f->heap, size);
    if (!p) break;
    memset(p, (int)f->id, 16);
    f->ptrs[f->n++] = p;
    f->bytes += size;
  }
  return NULL;
}

static void test_mixed_threads(void) {
  gh_cpu_heap_t* heap = new_heap_of(16384, MIXED_BYTES);
  filler_t f[8];
  pthread_t t[8];
  for (uint32_t i = 0; i < 8; i++) {
    f[i] = (filler_t){heap, i, NULL, 0, MIXED_BYTES / 16 / 8, 0};
    f[i].ptrs = (void**)malloc(f[i].cap * sizeof(void*));
    pthread_create(&t[i], NULL, filler, &f[i]);
  }
  unsigned long long bytes = 0;
  for (uint32_t i = 0; i < 8; i++) {
    pthread_join(t[i], NULL);
    bytes += f[i].bytes;
  }
  const double eff = (double)bytes / MIXED_BYTES;
  printf("mixed 16-4096 from 8 threads: %.3f of the heap granted before NULL\n", eff);
  CHECK(eff > 0.80);
  for (uint32_t i = 0; i < 8; i++) {
    for (size_t k = 0; k < f[i].n; k++) gh_cpu_free(heap, f[i].ptrs[k]);
    free(f[i].ptrs);
  }
  void* all = gh_cpu_malloc(heap, MIXED_BYTES);
  CHECK(all != NULL);
  gh_cpu_free(heap, all);
  gh_cpu_heap_destroy(heap);
}

/* Efficiency at the first NULL, single thread, as the GPU benchmark measures
 * it: rounds of allocations of uniform [16, 4096] bytes, never freed. */
static void test_efficiency(void) {
  gh_cpu_heap_t* heap = new_heap(65536);
  uint32_t s = 12345;
  unsigned long long bytes = 0;
  for (;;) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    const size_t size = 16 + s % 4081;
    if (!gh_cpu_malloc(heap, size)) break;
    bytes += size;
  }
  const double eff = (double)bytes / HEAP_BYTES;
  printf("mixed 16-4096, one thread: efficiency %.3f at the first NULL\n", eff);
  CHECK(eff >= 0.85);
  gh_cpu_heap_destroy(heap);
}

int main(void) {
  const size_t pages[2] = {4096, 65536};
  for (int i = 0; i < 2; i++) {
    const size_t page = pages[i];
    const size_t sizes[7] = {1, 16, 100, page / 4, page / 4 + 1, page, 3 * page + 5};
    for (int k = 0; k < 7; k++) test_fill_refill(page, sizes[k]);
  }
  test_mixed_threads();
  test_efficiency();
  return gh_test_done("test_fill");
}
