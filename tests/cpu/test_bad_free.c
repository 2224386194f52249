/* Bad input never corrupts the heap: NULL, double frees, foreign and interior
 * pointers, zero and huge sizes, an exhausted heap. */
#include <stdint.h>
#include <string.h>

#include "gpuheap/core.h"
#include "gpuheap/cpu.h"
#include "../test_util.h"

int main(void) {
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = 4096;
  gh_cpu_heap_t* heap = NULL;
  CHECK(gh_cpu_heap_create(&heap, 4u << 20, &o) == GH_OK);
  if (!heap) return gh_test_done("test_bad_free");

  /* Bad options are refused with GH_ERR_INVAL and no heap. */
  gh_cpu_heap_t* bad = (gh_cpu_heap_t*)1;
  o.page_bytes = 3000;
  CHECK(gh_cpu_heap_create(&bad, 4u << 20, &o) == GH_ERR_INVAL && bad == NULL);
  o.page_bytes = 4096;
  CHECK(gh_cpu_heap_create(&bad, 4096 * 31, &o) == GH_ERR_INVAL);
  CHECK(gh_cpu_heap_create(NULL, 4u << 20, &o) == GH_ERR_INVAL);
  CHECK(strcmp(gh_err_name(GH_ERR_INVAL), "GH_ERR_INVAL") == 0);
  CHECK(strlen(gh_strerror(GH_ERR_DOUBLE_FREE)) > 0 && strcmp(gh_strerror(12345), "unknown error") == 0);

  uint64_t expect_double = 0, expect_foreign = 0;
  gh_cpu_free(heap, NULL); /* nothing */

  /* malloc(0): a unique, freeable pointer */
  void* z1 = gh_cpu_malloc(heap, 0);
  void* z2 = gh_cpu_malloc(heap, 0);
  CHECK(z1 && z2 && z1 != z2);

  /* chunks: double free, interior pointer */
  char* a = (char*)gh_cpu_malloc(heap, 100);
  char* b = (char*)gh_cpu_malloc(heap, 100);
  CHECK(a && b);
  memset(b, 0xAB, 100);
  gh_cpu_free(heap, a);
  gh_cpu_free(heap, a), expect_double++;
  gh_cpu_free(heap, b + 16), expect_foreign++; /* inside a chunk, not its start */
  gh_cpu_free(heap, b + 1), expect_foreign++;
  for (int i = 0; i < 100; i++) CHECK((unsigned char)b[i] == 0xAB); /* b untouched */

  /* runs: double free, interior pointer */
  char* r = (char*)gh_cpu_malloc(heap, 3 * 4096);
  CHECK(r != NULL);
  gh_cpu_free(heap, r + 4096), expect_foreign++;
  gh_cpu_free(heap, r);
  gh_cpu_free(heap, r), expect_double++;

  /* foreign: outside the heap */
  int on_stack = 0;
  gh_cpu_free(heap, &on_stack), expect_foreign++;
  const gh_dheap_t* h = gh_cpu_heap_core(heap);
  gh_cpu_free(heap, h->base - 16), expect_foreign++;
  gh_cpu_free(heap, h->base + ((size_t)h->n_pages << h->page_shift)), expect_foreign++;

  /* huge sizes: NULL, nothing counted */
  CHECK(gh_cpu_malloc(heap, SIZE_MAX) == NULL);
  CHECK(gh_cpu_malloc(heap, (size_t)h->n_pages << h->page_shift) == NULL); /* b, z1, z2 hold pages */
  CHECK(gh_cpu_malloc(heap, ((size_t)h->n_pages << h->page_shift) + 1) == NULL);

  gh_heap_stats_t st;
  CHECK(gh_cpu_heap_stats(heap, &st) == GH_OK);
  CHECK_EQ_U64(st.double_frees, expect_double);
  CHECK_EQ_U64(st.foreign_frees, expect_foreign);

  /* exhausted: NULL, then a free makes room again */
  gh_cpu_free(heap, b);
  gh_cpu_free(heap, z1);
  gh_cpu_free(heap, z2);
  CHECK(gh_cpu_heap_reset(heap) == GH_OK);
  void* last = NULL;
  size_t n = 0;
  for (void* p; (p = gh_cpu_malloc(heap, 1000)) != NULL; n++) last = p;
  CHECK(n > 0 && gh_cpu_malloc(heap, 1000) == NULL);
  gh_cpu_free(heap, last);
  CHECK(gh_cpu_malloc(heap, 1000) == last);
  CHECK(gh_cpu_heap_stats(heap, &st) == GH_OK);
  CHECK_EQ_U64(st.double_frees + st.foreign_frees, 0); /* reset cleared the counters */

  gh_cpu_heap_destroy(heap);
  return gh_test_done("test_bad_free");
}
