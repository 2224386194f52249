/* gpuheap: a GPU heap. Public host API (C; callable from C++).
 *
 * A heap is created on the host, handed to kernels as a device handle, and
 * destroyed on the host. Kernels allocate with gh_malloc / gh_free (see
 * gpuheap_device.cuh). Every function here returns an error code: GH_OK (0)
 * on success, a negative GH_ERR_* otherwise (gh_strerror names it), and
 * loses nothing on failure.
 */
#ifndef GPUHEAP_H
#define GPUHEAP_H

#include <stddef.h>
#include <stdint.h>

#define GPUHEAP_VERSION_MAJOR 0
#define GPUHEAP_VERSION_MINOR 1
#define GPUHEAP_VERSION_PATCH 0
#define GPUHEAP_VERSION (GPUHEAP_VERSION_MAJOR * 10000 + GPUHEAP_VERSION_MINOR * 100 + GPUHEAP_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: one table generates the enum, gh_strerror and gh_err_name. */
#define GH_ERRNO_MAP(X)                                                          \
  X(INVAL, -1, "invalid argument")                                               \
  X(NOMEM, -2, "out of host memory")                                             \
  X(DEVICE_NOMEM, -3, "out of device memory")                                    \
  X(CUDA, -4, "a CUDA call failed (gh_last_error_detail says which)")            \
  X(NO_DEVICE, -5, "no CUDA device is available")                                \
  X(FOREIGN, -6, "pointer does not belong to this heap")                         \
  X(DOUBLE_FREE, -7, "pointer was already freed")                                \
  X(BUDGET, -8, "the memory budget is exhausted")                                \
  X(UNSUPPORTED, -9, "operation not supported by this build or device")          \
  X(CORRUPT, -10, "heap metadata failed a consistency check")

typedef enum gh_errno_e {
  GH_OK = 0,
#define GH__ERR_ENUM(name, code, text) GH_ERR_##name = code,
  GH_ERRNO_MAP(GH__ERR_ENUM)
#undef GH__ERR_ENUM
  GH__ERR_END = -11
} gh_errno_t;

/* A message for an error code ("success" for GH_OK); never NULL. */
const char* gh_strerror(int err);
/* The code's name, e.g. "GH_ERR_INVAL"; never NULL. */
const char* gh_err_name(int err);
/* What the last failing call on this thread saw (e.g. the CUDA error), or "". */
const char* gh_last_error_detail(void);

/* The heap as the host sees it; device code sees it as a gh_dheap_t. */
typedef struct gh_heap_s gh_heap_t;
typedef struct gh_dheap_s gh_dheap_t;

typedef struct gh_heap_options_s {
  size_t page_bytes;     /* page size: a power of two, 4096..65536. Default 65536 */
  uint32_t slots;        /* hint slots per class; 0 = min(SM count, 64) (CPU: 8) */
  uint32_t probe_limit;  /* random search steps before the sweep; 0 = default (8) */
  uint32_t refill_min;   /* classes with at least this many chunks per page wait for their
                            slot's refill; the others search on (0 = default, 2048) */
  int device;            /* CUDA device ordinal; -1 = the current device */
} gh_heap_options_t;

/* Fill *opts with the defaults. */
void gh_heap_options_init(gh_heap_options_t* opts);

/* Create a heap of `bytes` of data (rounded down to 32 pages; at least 32
 * pages) on a device. opts may be NULL for the defaults. */
int gh_heap_create(gh_heap_t** heap, size_t bytes, const gh_heap_options_t* opts);
/* Destroy a heap; no kernel may be using it. NULL is accepted. */
int gh_heap_destroy(gh_heap_t* heap);
/* Free every allocation at once; no kernel may be using the heap. */
int gh_heap_reset(gh_heap_t* heap);
/* The handle kernels take (gh_heap_malloc and friends); NULL for NULL. */
gh_dheap_t* gh_heap_device(const gh_heap_t* heap);

/* Make `heap` the heap of gh_malloc / gh_free (and of the drop-in malloc of
 * gpuheap/malloc.cuh) in every CUDA translation unit of the program that
 * includes gpuheap_device.cuh, including units loaded later. NULL detaches.
 * No kernel that allocates may run while it changes. */
int gh_device_attach(const gh_heap_t* heap);

/* Internal to gpuheap_device.cuh: each CUDA unit registers the function that
 * sets its own copy of the default heap. */
typedef int (*gh_unit_attach_fn)(const gh_dheap_t* heap);
int gh_register_unit(gh_unit_attach_fn fn);

typedef struct gh_class_stats_s {
  uint32_t size;            /* chunk size, bytes */
  uint32_t pages;           /* pages formatted for the class */
  uint64_t chunks_used;
  uint64_t chunks_capacity;
} gh_class_stats_t;

typedef struct gh_heap_stats_s {
  uint64_t heap_bytes;       /* data region */
  uint64_t meta_bytes;       /* metadata (bitmaps, page words, hints) */
  uint32_t page_bytes;
  uint32_t pages_total;
  uint32_t pages_free;
  uint32_t pages_chunk;      /* formatted for a class */
  uint32_t pages_pinned;     /* chunk pages held by a hint slot */
  uint32_t pages_run;        /* in runs */
  uint32_t runs;
  uint32_t largest_free_run; /* pages */
  uint64_t bytes_in_use;     /* chunk sizes of used chunks + pages of runs */
  double fragmentation;      /* 1 - bytes_in_use / bytes of pages not free; 0 when none */
  uint64_t double_frees;     /* bad frees seen by the device (never corrupting) */
  uint64_t foreign_frees;
  uint32_t n_classes;
  gh_class_stats_t classes[64];
} gh_heap_stats_t;

/* Statistics computed on demand by a reduction over the heap's metadata.
 * Consistent when no kernel is using the heap; approximate while one runs. */
int gh_heap_stats(gh_heap_t* heap, gh_heap_stats_t* stats);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_H */
