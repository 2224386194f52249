/* Uses the installed package: the CPU build of the allocator core. */
#include <stdio.h>
#include <string.h>

#include <gpuheap.h>
#include <gpuheap/cpu.h>

int main(void) {
  gh_cpu_heap_t* heap = NULL;
  if (gh_cpu_heap_create(&heap, 16u << 20, NULL) != GH_OK) return 1;
  char* p = (char*)gh_cpu_malloc(heap, 100);
  if (p == NULL) return 1;
  strcpy(p, "installed");
  gh_cpu_free(heap, p);
  gh_heap_stats_t st;
  const int ok = gh_cpu_heap_stats(heap, &st) == GH_OK && st.bytes_in_use == 0 && GPUHEAP_VERSION >= 100;
  gh_cpu_heap_destroy(heap);
  printf("consumer_cpu: %s (gpuheap %d.%d.%d)\n", ok ? "ok" : "FAILED", GPUHEAP_VERSION_MAJOR, GPUHEAP_VERSION_MINOR,
         GPUHEAP_VERSION_PATCH);
  return ok ? 0 : 1;
}
