/* gpuheap: the CPU build of the allocator core.
 *
 * The same page-state, bitmap and size-class code as the device allocator
 * (core.h), over a heap in host memory, one lane per calling thread. It is
 * how CI exercises the core without a GPU (under pthreads and
 * ThreadSanitizer) and what the stress tool runs on a machine without one.
 */
#ifndef GPUHEAP_CPU_H
#define GPUHEAP_CPU_H

#include "../gpuheap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gh_cpu_heap_s gh_cpu_heap_t;

/* opts: page_bytes, slots (0 = 64) and probe_limit as for gh_heap_create;
 * device is ignored. */
int gh_cpu_heap_create(gh_cpu_heap_t** heap, size_t bytes, const gh_heap_options_t* opts);
int gh_cpu_heap_destroy(gh_cpu_heap_t* heap);
int gh_cpu_heap_reset(gh_cpu_heap_t* heap);
int gh_cpu_heap_stats(gh_cpu_heap_t* heap, gh_heap_stats_t* stats);
/* The allocator's own view (for tests of the core). */
gh_dheap_t* gh_cpu_heap_core(gh_cpu_heap_t* heap);

void* gh_cpu_malloc(gh_cpu_heap_t* heap, size_t size);
/* As gh_cpu_malloc; *probes receives the search steps it took. */
void* gh_cpu_malloc_probed(gh_cpu_heap_t* heap, size_t size, uint32_t* probes);
/* As gh_cpu_malloc; on a tensor manager's heap made with
 * GH_TMGR_GROW_ON_DEMAND, asks the manager's thread to grow a full heap
 * and waits (as gh_heap_malloc_grow on the GPU). */
void* gh_cpu_malloc_grow(gh_cpu_heap_t* heap, size_t size);
void gh_cpu_free(gh_cpu_heap_t* heap, void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_CPU_H */
