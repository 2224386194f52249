/* gpuheap: build-wide configuration of the portable core.
 *
 * The core headers (types.h, atomic.h, sizeclass.h, bits.h, rng.h, page.h,
 * run.h, core.h) compile twice: as CUDA device code, where a "lane" is a GPU
 * thread, and as plain C11 for the CPU, where the same functions run under
 * pthreads (and ThreadSanitizer in CI). Nothing in them may depend on which.
 */
#ifndef GPUHEAP_CONFIG_H
#define GPUHEAP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GH_FN: a core function. Runs where the heap's metadata lives: on the device
 * in CUDA builds, on the host in the CPU build. GH_HD: pure arithmetic that
 * both the host library and device code use (class math, layout). */
#if defined(__CUDACC__)
#define GH_FN __device__ __forceinline__
#define GH_HD __host__ __device__ __forceinline__
#else
#define GH_FN static inline
#define GH_HD static inline
#endif

/* GH_FN_SLOW: a slow path (search beyond the hint page, sweeps, runs). It
 * is inlined like the rest: out of line, the call boundary raised the alloc
 * kernel from 64 to 108 registers and halved occupancy (bench/NOTES.md).
 * The mark stays so the two paths remain told apart. A kernel with many
 * allocation sites should call the allocator through one __noinline__
 * function of its own, which keeps its compile time down. */
#if defined(__CUDACC__)
#define GH_FN_SLOW __device__ __forceinline__
#else
#define GH_FN_SLOW static inline
#endif

#if defined(__CUDA_ARCH__)
#define GH_ON_DEVICE 1
#else
#define GH_ON_DEVICE 0
#endif

#if defined(__GNUC__) || defined(__CUDACC__)
#define GH_LIKELY(x) __builtin_expect(!!(x), 1)
#define GH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define GH_LIKELY(x) (x)
#define GH_UNLIKELY(x) (x)
#endif

/* Assertion levels, as a build option (GPUHEAP_CHECKED in CMake):
 *   gh_assert_internal(c)  an invariant of the core; checked builds only.
 *   gh_assert_expensive(c) an invariant whose check costs a scan; checked only.
 * A failed assertion traps on the device and aborts on the CPU: it means the
 * allocator itself is broken, never that the user passed a bad pointer (bad
 * pointers are counted and ignored, see GH_ERRC_* in types.h). */
#if defined(GPUHEAP_CHECKED) && GPUHEAP_CHECKED
#define GH_CHECKED 1
#if GH_ON_DEVICE
#define gh_assert_internal(c) ((c) ? (void)0 : __trap())
#elif defined(__CUDACC__)
#include <assert.h>
#define gh_assert_internal(c) assert(c)
#else
#include <assert.h>
#define gh_assert_internal(c) assert(c)
#endif
#define gh_assert_expensive(c) gh_assert_internal(c)
#else
#define GH_CHECKED 0
#define gh_assert_internal(c) ((void)0)
#define gh_assert_expensive(c) ((void)0)
#endif

/* Back off while another thread finishes a step we wait for (bounded by the
 * callers): a short sleep on the device, a pause or a yield on the CPU. */
#if GH_ON_DEVICE
#define gh_backoff(i) __nanosleep(64u << ((i) < 4u ? (i) : 4u))
#else
#include <sched.h>
#define gh_backoff(i) ((i) < 4u ? (void)0 : (void)sched_yield())
#endif

#endif /* GPUHEAP_CONFIG_H */
