/* gpuheap: error codes, messages and the per-thread detail of the last
 * failure. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static _Thread_local char gh_detail[256];

const char* gh_strerror(int err) {
  switch (err) {
    case GH_OK:
      return "success";
#define GH__ERR_TEXT(name, code, text) \
  case GH_ERR_##name:                  \
    return text;
      GH_ERRNO_MAP(GH__ERR_TEXT)
#undef GH__ERR_TEXT
    default:
      return "unknown error";
  }
}

const char* gh_err_name(int err) {
  switch (err) {
    case GH_OK:
      return "GH_OK";
#define GH__ERR_NAME(name, code, text) \
  case GH_ERR_##name:                  \
    return "GH_ERR_" #name;
      GH_ERRNO_MAP(GH__ERR_NAME)
#undef GH__ERR_NAME
    default:
      return "GH_ERR_UNKNOWN";
  }
}

const char* gh_last_error_detail(void) { return gh_detail; }

int _gh_error(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(gh_detail, sizeof gh_detail, fmt, ap);
  va_end(ap);
  return err;
}

/* The library's host allocations. A test may refuse the nth from the time
 * it asks (_gh_fail_alloc), once or that one and every later one: each
 * caller's answer to NULL is then exercised (test_tensor.c's nomem_sweep). One
 * relaxed load when nothing is asked. */
static atomic_int gh_alloc_armed, gh_alloc_set;
static atomic_int gh_alloc_persist;
static atomic_llong gh_alloc_left;
static atomic_ullong gh_alloc_refused;

static int alloc_refused(void) {
  if (!atomic_load_explicit(&gh_alloc_armed, memory_order_relaxed)) return 0;
  const long long left = atomic_fetch_sub(&gh_alloc_left, 1);
  if (left == 1 || (left < 1 && atomic_load(&gh_alloc_persist))) {
    atomic_fetch_add(&gh_alloc_refused, 1);
    return 1;
  }
  return 0;
}

void* _gh_malloc(size_t bytes) { return alloc_refused() ? NULL : malloc(bytes); }
void* _gh_calloc(size_t n, size_t size) { return alloc_refused() ? NULL : calloc(n, size); }
void* _gh_realloc(void* p, size_t bytes) { return alloc_refused() ? NULL : realloc(p, bytes); }

void _gh_fail_alloc(uint64_t nth, int persist) {
  atomic_store(&gh_alloc_armed, 0);
  atomic_store(&gh_alloc_left, (long long)nth);
  atomic_store(&gh_alloc_persist, persist);
  atomic_store(&gh_alloc_refused, 0);
  atomic_store(&gh_alloc_set, nth != 0);
  atomic_store(&gh_alloc_armed, nth != 0);
}

void _gh_fail_alloc_hold(int hold) { atomic_store(&gh_alloc_armed, !hold && atomic_load(&gh_alloc_set)); }

uint64_t _gh_failed_allocs(void) { return atomic_load(&gh_alloc_refused); }
