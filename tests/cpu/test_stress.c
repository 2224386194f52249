/* The core under many threads: random mixed malloc/free, every block stamped
 * with its owner and checked before it is freed; then the heap must be empty.
 * Usage: test_stress THREADS OPS_PER_THREAD PAGE_BYTES */
#include <pthread.h>
#include <string.h>

#include "gpuheap/core.h"
#include "gpuheap/cpu.h"
#include "../test_util.h"

#define LIVE 128

typedef struct {
  gh_cpu_heap_t* heap;
  uint32_t id;
  uint32_t ops;
  unsigned long long allocs, nulls, bad;
} worker_t;

static uint64_t next_rand(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Mostly small, some page-sized, a few multi-page runs. */
static size_t draw_size(uint64_t* s) {
  const uint64_t r = next_rand(s);
  const uint32_t kind = (uint32_t)(r % 100);
  if (kind < 70) return 1 + (size_t)((r >> 8) % 1024);
  if (kind < 92) return 1024 + (size_t)((r >> 8) % 15360);
  if (kind < 99) return 16384 + (size_t)((r >> 8) % 245760);
  return 262144 + (size_t)((r >> 8) % 1835008);
}

/* Stamp: the owner's tag in the last 8 bytes and every 4 KiB from the start. */
static void stamp(uint8_t* p, size_t n, uint64_t tag) {
  if (n < 8) {
    memset(p, (int)(tag & 0xFF), n);
    return;
  }
  for (size_t o = 0; o + 16 <= n; o += 4096) memcpy(p + o, &tag, 8); /* clear of the last 8 */
  memcpy(p + n - 8, &tag, 8);
}

static bool stamp_ok(const uint8_t* p, size_t n, uint64_t tag) {
  if (n < 8) {
    for (size_t i = 0; i < n; i++)
      if (p[i] != (uint8_t)(tag & 0xFF)) return false;
    return true;
  }
  for (size_t o = 0; o + 16 <= n; o += 4096)
    if (memcmp(p + o, &tag, 8) != 0) return false;
  return memcmp(p + n - 8, &tag, 8) == 0;
}

static void* worker(void* arg) {
  worker_t* w = (worker_t*)arg;
  void* ptr[LIVE] = {0};
  size_t len[LIVE] = {0};
  uint64_t tag[LIVE] = {0};
  uint64_t s = 0x9E3779B97F4A7C15ull * (w->id + 1);
  for (uint32_t op = 0; op < w->ops; op++) {
    const uint32_t i = (uint32_t)(next_rand(&s) % LIVE);
    if (ptr[i]) {
      if (!stamp_ok((const uint8_t*)ptr[i], len[i], tag[i])) {
        if (w->bad++ < 3) fprintf(stderr, "thread %u: block of %zu bytes at %p overwritten\n", w->id, len[i], ptr[i]);
      }
      gh_cpu_free(w->heap, ptr[i]);
      ptr[i] = NULL;
    } else {
      len[i] = draw_size(&s);
      ptr[i] = gh_cpu_malloc(w->heap, len[i]);
      if (ptr[i] == NULL) {
        w->nulls++;
        continue;
      }
      w->allocs++;
      if (((uintptr_t)ptr[i] & 15u) != 0) w->bad++;
      tag[i] = ((uint64_t)w->id << 48) ^ ((uint64_t)op << 8) ^ i ^ 0x5A5A5A5A00000000ull;
      stamp((uint8_t*)ptr[i], len[i], tag[i]);
    }
  }
  for (uint32_t i = 0; i < LIVE; i++)
    if (ptr[i]) {
      if (!stamp_ok((const uint8_t*)ptr[i], len[i], tag[i])) {
        if (w->bad++ < 3) fprintf(stderr, "thread %u: block of %zu bytes at %p overwritten\n", w->id, len[i], ptr[i]);
      }
      gh_cpu_free(w->heap, ptr[i]);
    }
  return NULL;
}

int main(int argc, char** argv) {
  const uint32_t threads = argc > 1 ? (uint32_t)atoi(argv[1]) : 8;
  const uint32_t ops = (uint32_t)((argc > 2 ? atof(argv[2]) : 20000) * gh_test_scale());
  const size_t page = argc > 3 ? (size_t)atol(argv[3]) : 65536;
  gh_heap_options_t o;
  gh_heap_options_init(&o);
  o.page_bytes = page;
  gh_cpu_heap_t* heap = NULL;
  CHECK(gh_cpu_heap_create(&heap, (size_t)512 << 20, &o) == GH_OK);
  if (!heap) return gh_test_done("test_stress");

  pthread_t t[256];
  worker_t w[256];
  for (uint32_t i = 0; i < threads && i < 256; i++) {
    w[i] = (worker_t){heap, i, ops, 0, 0, 0};
    pthread_create(&t[i], NULL, worker, &w[i]);
  }
  unsigned long long allocs = 0, nulls = 0, bad = 0;
  for (uint32_t i = 0; i < threads && i < 256; i++) {
    pthread_join(t[i], NULL);
    allocs += w[i].allocs;
    nulls += w[i].nulls;
    bad += w[i].bad;
  }
  CHECK_EQ_U64(bad, 0);      /* no overlapping or misaligned block */
  CHECK(allocs > 0);
  CHECK_EQ_U64(nulls, 0);    /* 512 MiB is far more than the live set */

  gh_heap_stats_t st;
  CHECK(gh_cpu_heap_stats(heap, &st) == GH_OK);
  CHECK_EQ_U64(st.bytes_in_use, 0); /* nothing leaked */
  CHECK_EQ_U64(st.runs, 0);
  CHECK_EQ_U64(st.pages_chunk, st.pages_pinned); /* only empty hint pages remain */
  CHECK_EQ_U64(st.double_frees + st.foreign_frees, 0);
  /* ...and they are room: the whole heap as one run. */
  {
    const gh_dheap_t* h = gh_cpu_heap_core(heap);
    int shown = 0;
    for (uint32_t p = 0; p < h->n_pages && shown < 8; p++)
      if (((h->xpages[p >> 5] >> (p & 31)) & 1u) && !(h->xcount[p] & GH_COUNT_OPEN)) {
        fprintf(stderr, "page %u in use: state %08x count %08x\n", p, h->xstate[p], h->xcount[p]);
        shown++;
      }
  }
  void* all = gh_cpu_malloc(heap, st.heap_bytes);
  CHECK(all != NULL);
  gh_cpu_free(heap, all);
  CHECK(gh_cpu_heap_stats(heap, &st) == GH_OK);
  CHECK_EQ_U64(st.pages_free, st.pages_total);
  printf("stress: %u threads x %u ops, page %zu: %llu allocations\n", threads, ops, page, allocs);
  gh_cpu_heap_destroy(heap);
  return gh_test_done("test_stress");
}
