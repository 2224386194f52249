/* gpuheap: heap options: defaults, environment overrides and validation.
 *
 * Environment variables (read by gh_heap_options_init), as in the table:
 *   GPUHEAP_PAGE_BYTES   page size (power of two, 4096..65536)
 *   GPUHEAP_SLOTS        hint slots per class
 *   GPUHEAP_PROBE_LIMIT  random search steps before the sweep
 *   GPUHEAP_REFILL_MIN   chunks per page from which a class waits for its
 *                        slot's refill instead of searching on
 *   GPUHEAP_ROOM_FILL    estimated fill (percent) from which a request looks
 *                        for room in the whole heap before opening a page
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define GH_OPTION_TABLE(X)                                                   \
  X(page_bytes, "GPUHEAP_PAGE_BYTES", 65536u, "page size")                   \
  X(slots, "GPUHEAP_SLOTS", 0u, "hint slots per class (0: min(SMs, 64); CPU 8)") \
  X(probe_limit, "GPUHEAP_PROBE_LIMIT", 8u, "random steps before the sweep")        \
  X(refill_min, "GPUHEAP_REFILL_MIN", 2048u, "chunks per page from which a class waits for a refill") \
  X(room_fill, "GPUHEAP_ROOM_FILL", 100u, "estimated fill (%) from which a new page waits for a whole-heap room search (100: off)")

void gh_heap_options_init(gh_heap_options_t* opts) {
  if (opts == NULL) return;
  memset(opts, 0, sizeof *opts);
  opts->device = -1;
#define GH__OPT_DEFAULT(field, env, def, text)              \
  opts->field = def;                                        \
  {                                                         \
    const char* v = getenv(env);                            \
    if (v && *v) opts->field = (uint32_t)strtoul(v, NULL, 0); \
  }
  GH_OPTION_TABLE(GH__OPT_DEFAULT)
#undef GH__OPT_DEFAULT
}

int _gh_options_resolve(const gh_heap_options_t* in, size_t bytes, gh_heap_options_t* out, uint32_t* shift,
                        uint32_t* pages) {
  if (in)
    *out = *in;
  else
    gh_heap_options_init(out);
  if (out->page_bytes == 0) out->page_bytes = 65536u;
  if (out->probe_limit == 0) out->probe_limit = 8u;
  if (out->refill_min == 0) out->refill_min = 2048u;
  if (out->room_fill == 0) out->room_fill = 100u;
  if (out->room_fill > 100u) return _gh_error(GH_ERR_INVAL, "room_fill %u: a percentage", out->room_fill);
  if (out->page_bytes < (1u << GH_MIN_PAGE_SHIFT) || out->page_bytes > (1u << GH_MAX_PAGE_SHIFT) ||
      (out->page_bytes & (out->page_bytes - 1u)))
    return _gh_error(GH_ERR_INVAL, "page_bytes %zu: want a power of two from 4096 to 65536", out->page_bytes);
  *shift = gh_log2_floor((uint32_t)out->page_bytes);
  const size_t n = (bytes >> *shift) & ~(size_t)31;
  if (n < 32u || n > GH_STATE_LOW_MASK)
    return _gh_error(GH_ERR_INVAL, "heap of %zu bytes: want 32 to 2^30 pages of %zu bytes", bytes, out->page_bytes);
  if (out->slots > GH_MAX_SLOTS) return _gh_error(GH_ERR_INVAL, "slots %u: at most %u", out->slots, GH_MAX_SLOTS);
  *pages = (uint32_t)n;
  return GH_OK;
}
