/* gpuheap: prototypes shared across the host library's files, grouped by the
 * file that defines them. Internal names start with _gh_. */
#ifndef GPUHEAP_HOST_INTERNAL_H
#define GPUHEAP_HOST_INTERNAL_H

#include "gpuheap.h"
#include "gpuheap/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "error.c" */
int _gh_error(int err, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* "cuda_error.c" */
int _gh_cuda_error(int cuda_err, const char* what, const char* file, int line);

/* Check a CUDA runtime call; on failure record it and return its GH_ERR_*. */
#define GH_CUDA_TRY(call)                                                 \
  do {                                                                    \
    const int gh_e_ = (int)(call);                                        \
    if (gh_e_ != 0) return _gh_cuda_error(gh_e_, #call, __FILE__, __LINE__); \
  } while (0)

/* "options.c": defaults and checks shared by GPU and CPU heaps. */
int _gh_options_resolve(const gh_heap_options_t* in, size_t bytes, gh_heap_options_t* out, uint32_t* page_shift,
                        uint32_t* pages);

/* "stats.c": totals over pages, shared by GPU heaps and the CPU build. */
void _gh_stats_begin(gh_heap_stats_t* s, const gh_dheap_t* h, size_t meta_bytes);
void _gh_stats_add_page(gh_heap_stats_t* s, const gh_dheap_t* h, gh_page_view_t v);
void _gh_stats_finish(gh_heap_stats_t* s, const gh_dheap_t* h, const uint32_t* page_bitmap, const uint64_t* errors);

/* "backing_cuda.c": the memory a heap's data lives in (one small interface;
 * the VMM backing replaces it). */
typedef struct gh_backing_s gh_backing_t;
typedef struct gh_backing_ops_s {
  const char* name;
  int (*open)(gh_backing_t** b, int device, size_t bytes, size_t align, uint8_t** base);
  int (*close)(gh_backing_t* b);
} gh_backing_ops_t;
extern const gh_backing_ops_t _gh_backing_cuda;

/* "kernel/heap.cu": device-side reductions the host calls. */
int _gh_device_stats(const gh_dheap_t* d_heap, const gh_dheap_t* view, gh_heap_stats_t* s);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_HOST_INTERNAL_H */
