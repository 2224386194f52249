/* gpuheap: the atomics layer.
 *
 * Every atomic access of the core goes through these names, which carry the
 * memory order in the name (as in mimalloc) and always use device scope on
 * the GPU (CUDA's __nv_atomic_* builtins, PTX atom.<order>.gpu) or the
 * compiler's __atomic builtins on the CPU. The hardware contract: 32-bit
 * fetch-add/sub/or/and, compare-and-swap and 64-bit fetch-add on naturally
 * aligned words in global (device) or ordinary (host) memory.
 *
 * Orders used by the protocols (see page.h for why each is needed):
 *   acquire  a claim that hands memory to the caller (bits, reservations)
 *   release  a release that hands memory back (clearing bits, dropping counts)
 *   acq_rel  a transition that both takes and publishes (close, pin, run CAS)
 *   relaxed  hints, probes and statistics, where a stale value only costs time
 */
#ifndef GPUHEAP_ATOMIC_H
#define GPUHEAP_ATOMIC_H

#include "config.h"

#if GH_ON_DEVICE
#define GH__MO(o) __NV_ATOMIC_##o
#define GH__RMW(op, p, v, o) __nv_atomic_##op((p), (v), GH__MO(o), __NV_THREAD_SCOPE_DEVICE)
#define GH__LOAD(p, o) __nv_atomic_load_n((p), GH__MO(o), __NV_THREAD_SCOPE_DEVICE)
#define GH__STORE(p, v, o) __nv_atomic_store_n((p), (v), GH__MO(o), __NV_THREAD_SCOPE_DEVICE)
#define GH__CAS(p, e, d, o, f) \
  __nv_atomic_compare_exchange_n((p), (e), (d), false, GH__MO(o), GH__MO(f), __NV_THREAD_SCOPE_DEVICE)
#define GH__FENCE(o) __nv_atomic_thread_fence(GH__MO(o), __NV_THREAD_SCOPE_DEVICE)
#else
#define GH__MO(o) __ATOMIC_##o
#define GH__RMW(op, p, v, o) __atomic_##op((p), (v), GH__MO(o))
#define GH__LOAD(p, o) __atomic_load_n((p), GH__MO(o))
#define GH__STORE(p, v, o) __atomic_store_n((p), (v), GH__MO(o))
#define GH__CAS(p, e, d, o, f) __atomic_compare_exchange_n((p), (e), (d), false, GH__MO(o), GH__MO(f))
#define GH__FENCE(o) __atomic_thread_fence(GH__MO(o))
#endif

/* 64-bit counters: CUDA's builtins want unsigned long long. */
typedef unsigned long long gh_u64a_t;

GH_FN uint32_t gh_atomic_load_relaxed(const uint32_t* p) { return GH__LOAD((uint32_t*)p, RELAXED); }
GH_FN uint32_t gh_atomic_load_acquire(const uint32_t* p) { return GH__LOAD((uint32_t*)p, ACQUIRE); }
GH_FN void gh_atomic_store_relaxed(uint32_t* p, uint32_t v) { GH__STORE(p, v, RELAXED); }
GH_FN void gh_atomic_store_release(uint32_t* p, uint32_t v) { GH__STORE(p, v, RELEASE); }

GH_FN uint32_t gh_atomic_add_relaxed(uint32_t* p, uint32_t v) { return GH__RMW(fetch_add, p, v, RELAXED); }
GH_FN uint32_t gh_atomic_add_acquire(uint32_t* p, uint32_t v) { return GH__RMW(fetch_add, p, v, ACQUIRE); }
GH_FN uint32_t gh_atomic_add_release(uint32_t* p, uint32_t v) { return GH__RMW(fetch_add, p, v, RELEASE); }
GH_FN uint32_t gh_atomic_sub_acq_rel(uint32_t* p, uint32_t v) { return GH__RMW(fetch_sub, p, v, ACQ_REL); }
GH_FN uint32_t gh_atomic_or_acquire(uint32_t* p, uint32_t v) { return GH__RMW(fetch_or, p, v, ACQUIRE); }
GH_FN uint32_t gh_atomic_and_release(uint32_t* p, uint32_t v) { return GH__RMW(fetch_and, p, v, RELEASE); }
GH_FN uint32_t gh_atomic_or_relaxed(uint32_t* p, uint32_t v) { return GH__RMW(fetch_or, p, v, RELAXED); }
GH_FN uint32_t gh_atomic_and_relaxed(uint32_t* p, uint32_t v) { return GH__RMW(fetch_and, p, v, RELAXED); }

/* Strong CAS; on failure *expected holds the value seen. */
GH_FN bool gh_atomic_cas_acq_rel(uint32_t* p, uint32_t* expected, uint32_t desired) {
  return GH__CAS(p, expected, desired, ACQ_REL, ACQUIRE);
}
GH_FN bool gh_atomic_cas_relaxed(uint32_t* p, uint32_t* expected, uint32_t desired) {
  return GH__CAS(p, expected, desired, RELAXED, RELAXED);
}

GH_FN uint64_t gh_atomic_add64_relaxed(uint64_t* p, uint64_t v) {
  return (uint64_t)GH__RMW(fetch_add, (gh_u64a_t*)p, (gh_u64a_t)v, RELAXED);
}
GH_FN uint64_t gh_atomic_load64_relaxed(const uint64_t* p) { return (uint64_t)GH__LOAD((gh_u64a_t*)p, RELAXED); }

#endif /* GPUHEAP_ATOMIC_H */
