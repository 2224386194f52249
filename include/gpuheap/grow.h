/* gpuheap: growth on demand (GH_TMGR_GROW_ON_DEMAND): an allocation that
 * found no room asks the host to grow the heap and waits for the answer.
 *
 * The channel is GH_GROW_WORDS words of host memory the device can read and
 * write (pinned and mapped on CUDA; ordinary memory in the CPU build), at
 * h->grow. Generations number the requests: h->xgrow (heap metadata) is
 * the latest one asked for, GH_GROW_DONE the latest the host has answered,
 * so at most one request is outstanding and every waiter waits for it.
 *
 *   lane                                     host (the manager's thread)
 *   s = xgrown; searches: no room
 *   d = DONE; a = xgrow
 *   a == d: CAS xgrow d -> d+1; the winner
 *     writes FRAMES, SEEN = s,
 *     then WANT = d+1  -------------------->  sees WANT != DONE; SEEN older
 *                                             than its growths: answers at
 *                                             once (grown since the search);
 *                                             else maps frames (no waits on
 *                                             the GPU), clears their page
 *                                             words, bumps xgrown, writes
 *   waits until DONE >= a (or d+1)  <------   DENIED (if it could not grow),
 *   DENIED >= that generation: NULL           then DONE = WANT
 *   else: searches again
 *
 * SEEN keeps a crowd of lanes that all found the heap full from growing it
 * once each: a request made before the latest growth is answered by it.
 *
 * The device waits only for the host, never the reverse: the host grows
 * with memory it can take without waiting for any stream (the device
 * budget's free frames, new host frames), clears the page words with a
 * copy engine, and gives up (DENIED) when the manager's lock stays taken
 * (another thread may be waiting on the GPU with it). A lane that hears
 * nothing within GH_GROW_WAIT_NS returns NULL. Requests travel as plain
 * stores to host memory (no atomics there: mapped host memory does not
 * promise them); only the election is an atomic, in device memory.
 */
#ifndef GPUHEAP_GROW_H
#define GPUHEAP_GROW_H

#include "core.h"

#if !GH_ON_DEVICE
#include <time.h>
#endif

#define GH_GROW_WANT 0u    /* written by the lane that won the election: the generation asked */
#define GH_GROW_DONE 1u    /* written by the host: the latest generation answered */
#define GH_GROW_DENIED 2u  /* written by the host before DONE: the latest generation it could not grow for */
#define GH_GROW_FRAMES 3u  /* written before WANT: frames the asking lane needs at least (a run's; 1 for chunks) */
#define GH_GROW_CLOSED 4u  /* written by the host when it stops serving: lanes no longer wait */
#define GH_GROW_SEEN 5u    /* written before WANT: xgrown as the asking lane read it before its search */
#define GH_GROW_WORDS 16u  /* the channel's size, in 32-bit words (64 bytes) */

#define GH_GROW_WAIT_NS 1000000000ull /* a lane's longest wait for an answer (1 s; the host answers within
                                         ~0.1-50 ms, or says DENIED) */
/* Growths one allocation waits for before NULL. Others may take each growth
 * first; every round either grows the heap by a frame or more or ends in
 * DENIED, so the heap's most bounds the rounds: this bound is for safety. */
#define GH_GROW_ROUNDS 1024u

/* The channel's words: system scope on the device (the host reads and
 * writes them), the CPU build's atomics otherwise. */
#if GH_ON_DEVICE
GH_FN uint32_t gh_grow_load(const uint32_t* p) {
  return __nv_atomic_load_n((uint32_t*)p, __NV_ATOMIC_ACQUIRE, __NV_THREAD_SCOPE_SYSTEM);
}
GH_FN void gh_grow_store(uint32_t* p, uint32_t v) {
  __nv_atomic_store_n(p, v, __NV_ATOMIC_RELEASE, __NV_THREAD_SCOPE_SYSTEM);
}
GH_FN uint64_t gh_grow_now_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/* Each poll of the channel crosses the bus: waiters sleep up to 8 us. */
#define gh_grow_pause(i) __nanosleep(256u << ((i) < 5u ? (i) : 5u))
#else
GH_FN uint32_t gh_grow_load(const uint32_t* p) { return gh_atomic_load_acquire(p); }
GH_FN void gh_grow_store(uint32_t* p, uint32_t v) { gh_atomic_store_release(p, v); }
GH_FN uint64_t gh_grow_now_ns(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define gh_grow_pause(i) gh_backoff(i)
#endif

/* Generations compare modulo 2^32. */
GH_FN bool gh_grow_reached(uint32_t x, uint32_t gen) { return (int32_t)(x - gen) >= 0; }

/* The heap's growths so far, read before a search (gh_grow_ask's seen). */
GH_FN uint32_t gh_grow_seen(const gh_dheap_t* h) { return gh_atomic_load_acquire(&h->xgrown); }

/* Ask for growth (pages: what this lane needs at least, in one run; seen:
 * gh_grow_seen before the search that found no room) and return the
 * generation whose answer to wait for: the outstanding request if there is
 * one, else a new one this lane posts. */
GH_FN uint32_t gh_grow_ask(const gh_dheap_t* h, uint32_t pages, uint32_t seen) {
  uint32_t* ch = h->grow;
  uint32_t* asked = (uint32_t*)&h->xgrow;
  const uint32_t d = gh_grow_load(&ch[GH_GROW_DONE]);
  uint32_t a = gh_atomic_load_acquire(asked);
  if (a != d) return a; /* outstanding: wait for it */
  if (!gh_atomic_cas_acq_rel(asked, &a, d + 1u)) return a; /* another lane asked first */
  const uint64_t frame = (uint64_t)1 << GH_FRAME_SHIFT;
  gh_grow_store(&ch[GH_GROW_FRAMES], (uint32_t)((((uint64_t)pages << h->page_shift) + frame - 1u) / frame));
  gh_grow_store(&ch[GH_GROW_SEEN], seen);
  gh_grow_store(&ch[GH_GROW_WANT], d + 1u);
  return d + 1u;
}

/* Wait for the answer to generation gen: true when the host grew the heap
 * for it (search again), false when it could not, stopped serving, or did
 * not answer in time. */
GH_FN bool gh_grow_wait(const gh_dheap_t* h, uint32_t gen) {
  const uint32_t* ch = h->grow;
  const uint64_t t0 = gh_grow_now_ns();
  for (uint32_t i = 0; !gh_grow_reached(gh_grow_load(&ch[GH_GROW_DONE]), gen); i++) {
    if (gh_grow_load(&ch[GH_GROW_CLOSED]) || gh_grow_now_ns() - t0 > GH_GROW_WAIT_NS) return false;
    gh_grow_pause(i < 8u ? i : 8u);
  }
  return !gh_grow_reached(gh_grow_load(&ch[GH_GROW_DENIED]), gen);
}

/* Pages an allocation of `size` needs (1 for chunks), 0 when not even the
 * whole heap would hold it: growth cannot help. */
GH_FN uint32_t gh_grow_pages(const gh_dheap_t* h, size_t size) {
  return size <= h->max_chunk ? 1u : gh_run_pages(h, size);
}

#endif /* GPUHEAP_GROW_H */
