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

/* "error.c": the library's host allocations, as malloc, calloc and realloc
 * (tests can refuse them: _gh_fail_alloc). */
void* _gh_malloc(size_t bytes);
void* _gh_calloc(size_t n, size_t size);
void* _gh_realloc(void* p, size_t bytes);
/* Tests only: refuse the nth host allocation of the library from now
 * (nth 0: none), and with `persist` every one after it too; while held,
 * allocations are neither counted nor refused (a test's own checks call
 * the library); the count of allocations refused since. Process-wide. */
void _gh_fail_alloc(uint64_t nth, int persist);
void _gh_fail_alloc_hold(int hold);
uint64_t _gh_failed_allocs(void);

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

/* "heap.c": a device heap whose data region a tensor manager places inside
 * its reserved range and grows or shrinks by frames ("tensor.c" calls
 * these). Pages at and beyond the online bound are offline: their page bits
 * are set and no search can claim them. In the CPU library the heap is the
 * CPU core's, over the manager's simulated frames ("frames_select_cpu.c"). */
int _gh_heap_create_managed(gh_heap_t** out, gh_tmgr_t* tm, uint8_t* base, size_t max_bytes, size_t online_bytes,
                            const gh_heap_options_t* opts);
int _gh_heap_destroy_managed(gh_heap_t* heap);
/* Bytes of online pages that are not free, and the online bound. */
int _gh_heap_usage(gh_heap_t* heap, size_t* used_bytes, size_t* online_bytes);
/* The frames up to online_bytes (a multiple of the frame) are mapped now:
 * publish their pages (safe while kernels run). */
int _gh_heap_online(gh_heap_t* heap, size_t online_bytes);
/* Take trailing frames whose pages are all free offline again, down to
 * keep_bytes at most; *online_bytes receives the new bound, after which the
 * caller may unmap the frames beyond it. */
int _gh_heap_offline_tail(gh_heap_t* heap, size_t keep_bytes, size_t* online_bytes);
gh_tmgr_t* _gh_heap_manager(const gh_heap_t* heap);
/* Growth on demand (include/gpuheap/grow.h): `words` (GH_GROW_WORDS words
 * of host memory the device can reach: the provider's word_alloc) become
 * the heap's channel to the host. Before any kernel uses the heap. */
int _gh_heap_grow_channel(gh_heap_t* heap, uint32_t* words);
/* The growths _gh_heap_online has published (the header's xgrown). */
uint32_t _gh_heap_grown(const gh_heap_t* heap);
/* Make the calling thread (the manager's growth thread) ready to call the
 * functions above: the heap's device current. */
int _gh_heap_bind_thread(gh_heap_t* heap);
/* The ordinal of the device a tensor manager's frames are on. */
int _gh_tmgr_device(const gh_tmgr_t* tm);
/* The device's memory in bytes (cudaMemGetInfo's total), and what a
 * device budget can use of it: its free memory and the manager's own device
 * memory, less the device_reserve option (as the default budget at
 * creation). */
int _gh_tmgr_device_memory(gh_tmgr_t* tm, size_t* total, size_t* usable);
/* Whether `stream` is capturing a CUDA graph (the provider's answer). */
int _gh_tmgr_stream_capturing(gh_tmgr_t* tm, gh_stream_t stream, int* capturing);
/* CUDA graph captures (tensor_sync.c, "captures"; adapters_torch.cc): a
 * capture begins (+1) or ends (-1), so that the manager leaves capturing
 * streams alone while any is underway (the first makes the side stream);
 * how many are; the side stream (NULL before the first); a wait for all
 * work on the device (the mover's remaps first). */
int _gh_tmgr_capture_scope(gh_tmgr_t* tm, int delta);
int _gh_tmgr_captures(gh_tmgr_t* tm);
gh_stream_t _gh_tmgr_side_stream(gh_tmgr_t* tm);
int _gh_tmgr_device_sync(gh_tmgr_t* tm);
/* The side stream synchronized (the mover's remaps first). */
int _gh_tmgr_side_sync(gh_tmgr_t* tm);
/* While a capture is underway: the calling thread takes the relaxed
 * capture mode (frames.h, capture_mode; returns 1, the mode to restore in
 * *saved); otherwise 0.
 * _gh_tmgr_unrelax restores it where _gh_tmgr_relax returned 1. */
int _gh_tmgr_relax(gh_tmgr_t* tm, int* saved);
void _gh_tmgr_unrelax(gh_tmgr_t* tm, int relaxed, int saved);
/* In object obj, whose table of virtual functions must be `vtable` (the
 * table's symbol: the offset to the top and the type's information, then
 * entries - 2 functions, the object pointing at the first function), the
 * one entry equal to `orig` made `repl`: the object is given a copy of the
 * table with that entry changed (never freed), the table itself and other
 * objects left alone. GH_OK also when obj has such a copy already;
 * GH_ERR_UNSUPPORTED, nothing changed, when obj points elsewhere or `orig`
 * is not in the table exactly once; GH_ERR_INVAL for NULL arguments. */
int _gh_vtable_swap(void* obj, void* const* vtable, size_t entries, const void* orig, const void* repl);
/* gh_torch_alloc with its error code (*out NULL on failure and for size 0). */
int _gh_torch_alloc(ptrdiff_t size, int device, gh_stream_t stream, void** out);
/* Before a PyTorch allocation, with no lock held: this thread's history
 * tag from gh_torch_set_history_context's function, 1 when one was set;
 * _gh_torch_hist_end(that) clears it after the allocation (a tag the
 * caller set with gh_hist_context is left alone where no function is). */
int _gh_torch_hist_begin(ptrdiff_t size);
void _gh_torch_hist_end(int tagged);
/* The framework entry points with their error codes (adapters.c), each in
 * the relaxed capture mode while a capture is underway: gh_torch_free,
 * gh_torch_record_stream; a block of a CUDA graph pool (adapters_torch.cc):
 * a tensor pinned on the device, ready for any stream (made on the side
 * stream, which the host has synchronized), in *out; blocks given back
 * (after a wait for the device: a graph may still be replaying). */
int _gh_torch_free(void* ptr, gh_stream_t stream);
int _gh_torch_record_stream(void* ptr, gh_stream_t stream);
int _gh_torch_pool_block(ptrdiff_t size, int device, void** out);
int _gh_torch_pool_give_back(void* const* ptrs, size_t n, size_t* given);
/* gh_tmgr_empty_cache of the global manager (relaxed during a capture). */
int _gh_torch_empty_cache(void);
/* PyTorch's set_per_process_memory_fraction: the global manager's device
 * budget set to `fraction` (0, 1] of the device's memory. */
int _gh_torch_set_memory_fraction(double fraction, int device);
/* Both libraries' managed heaps: online_bytes as pages (whole frames,
 * within the heap's n_pages), and keep_bytes as pages rounded up to whole
 * frames (at most n_pages). */
static inline int _gh_heap_online_pages(size_t online_bytes, uint32_t shift, uint32_t n_pages, uint32_t* pages) {
  if (online_bytes % ((size_t)1 << GH_FRAME_SHIFT) || (online_bytes >> shift) > n_pages)
    return _gh_error(GH_ERR_INVAL, "_gh_heap_online: %zu bytes of a %u-page heap", online_bytes, n_pages);
  *pages = (uint32_t)(online_bytes >> shift);
  return GH_OK;
}
static inline uint32_t _gh_heap_keep_pages(size_t keep_bytes, uint32_t shift, uint32_t n_pages, uint32_t frame_words) {
  const uint32_t frame_pages = frame_words * 32u;
  const uint32_t keep = (uint32_t)((keep_bytes >> shift) < n_pages ? keep_bytes >> shift : n_pages);
  return (keep + frame_pages - 1u) / frame_pages * frame_pages;
}

/* "kernel/cpu_heap.c": the CPU core's heap, also as a tensor manager's
 * heap in the CPU library ("frames_select_cpu.c"): data at `data` (placed
 * by the manager, whole frames, pages from online_bytes on offline) or
 * allocated (NULL); the online bound moved as by the device heap's
 * functions above (offline_tail returns the new bound in pages). */
typedef struct gh_cpu_heap_s gh_cpu_heap_t;
int _gh_cpu_heap_create_at(gh_cpu_heap_t** out, size_t bytes, const gh_heap_options_t* opts, uint8_t* data,
                           size_t online_bytes);
int _gh_cpu_heap_usage(gh_cpu_heap_t* heap, size_t* used_bytes, size_t* online_bytes);
int _gh_cpu_heap_online(gh_cpu_heap_t* heap, uint32_t pages);
uint32_t _gh_cpu_heap_offline_tail(gh_cpu_heap_t* heap, uint32_t keep, uint32_t words_per_frame);

/* "kernel/heap.cu": device-side reductions the host calls. */
int _gh_device_stats(const gh_dheap_t* d_heap, const gh_dheap_t* view, gh_heap_stats_t* s);
/* Take free frames at the end of the bitmap words [from_word, to_word)
 * offline (their words set to all ones), last first; *new_to_word is the
 * first offline word. Runs on `stream` (the heap's side stream, which does
 * not wait for kernels that allocate) and waits for it. */
int _gh_device_offline_tail(const gh_dheap_t* d_heap, uint32_t from_word, uint32_t to_word, uint32_t words_per_frame,
                            gh_stream_t stream, uint32_t* new_to_word);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_HOST_INTERNAL_H */
