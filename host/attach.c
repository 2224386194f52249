/* gpuheap: the default heap of gh_malloc / gh_free across translation units.
 *
 * Each CUDA unit that includes gpuheap_device.cuh holds its own copy of the
 * default heap pointer and registers a setter for it before main runs (or
 * when a library holding it is loaded). gh_device_attach calls every setter;
 * a unit registered after an attach is set at once. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

typedef struct unit_s {
  gh_unit_attach_fn fn;
  struct unit_s* next;
} unit_t;

static pthread_mutex_t gh_units_lock = PTHREAD_MUTEX_INITIALIZER;
static unit_t* gh_units;
static const gh_dheap_t* gh_attached;

int gh_register_unit(gh_unit_attach_fn fn) {
  unit_t* u = (unit_t*)_gh_malloc(sizeof *u);
  if (u == NULL) return GH_ERR_NOMEM;
  pthread_mutex_lock(&gh_units_lock);
  u->fn = fn;
  u->next = gh_units;
  gh_units = u;
  const gh_dheap_t* now = gh_attached;
  pthread_mutex_unlock(&gh_units_lock);
  return now ? fn(now) : GH_OK;
}

int gh_device_attach(const gh_heap_t* heap) {
  const gh_dheap_t* d = gh_heap_device(heap);
  int err = GH_OK;
  pthread_mutex_lock(&gh_units_lock);
  gh_attached = d;
  for (unit_t* u = gh_units; u; u = u->next) {
    const int e = u->fn(d);
    if (e && !err) err = _gh_error(e, "gh_device_attach: a unit's cudaMemcpyToSymbol failed");
  }
  pthread_mutex_unlock(&gh_units_lock);
  return err;
}
