/* gpuheap: host memory standing in for both frame tiers (see frames.h).
 *
 * The range is an mmap(PROT_NONE, MAP_NORESERVE) reservation. Each tier is
 * one memfd grown with ftruncate; a physical allocation of n frames is a run
 * of n frame-sized slots of its tier's memfd, first fit (released slots are
 * reused, with their pages). Mapping an allocation is one
 * mmap(MAP_FIXED | MAP_SHARED) of its slots at the address, so the same
 * allocation mapped at two addresses is really the same memory, as with
 * cuMemMap; unmapping maps PROT_NONE anonymous memory back over it, which
 * keeps the reservation. The mapping rules of frames.h (whole allocations,
 * unmap of whole mappings only) are checked as vmm.c checks them.
 *
 * Streams are opaque tokens, copies are memcpy, and an event completes
 * after `lag` queries (0 by default; _gh_frames_sim_configure), so that
 * callers meet GH_ERR_BUSY as they would on a GPU. With copies deferred
 * (_gh_frames_sim_defer) a copy runs only when something waits for it: an
 * event recorded after it on its stream completes (a query that returns
 * GH_OK, or a sync), its stream is synchronized, or a stream that was made
 * to wait for such an event (stream_wait) is synchronized. A caller that
 * reads memory a copy writes without one of these sees the old bytes, as a
 * kernel not ordered after the copy would on a GPU; a copy whose memory
 * was unmapped before it ran faults. Each stream keeps its own order and
 * no other: what an event or a stream waits for is a vector clock (per
 * stream, its last copy waited for), so a sync runs the copies of its
 * stream and of those it was made to wait for, and leaves the other
 * streams' copies queued, however early they were issued. Two copies on
 * different streams with no wait between them thus run in whichever order
 * their waiters come, as on a GPU they may. With eager runs on
 * (_gh_frames_sim_eager) the simulation also runs, at random moments, a
 * queued copy that nothing waits for yet but that a GPU could run already
 * (the first of its stream, with every copy it was made to wait for done,
 * and no word it waits for short of its value): so a copy runs too early
 * as well as too late, and a wait missing either way shows. A stream made to wait for a word
 * (stream_wait_value) holds the events recorded on it after the wait until
 * the word reaches the value (a query says GH_ERR_BUSY); synchronizing such
 * a stream or event before then fails with GH_ERR_CORRUPT, for on a GPU it
 * would wait for a writer that the caller may be keeping from writing.
 *
 * Invariants, per tier t:  live[t] == |{slots s : used[t][s] != 0}| (frames),
 * and for an allocation starting at slot s (used[t][s] == SIM_HEAD):
 * map_count[t][s] == |{va frames v : head[v] and mapped[v] == (t, s)}|. An
 * allocation is released only when its map count is 0.
 *
 * Linux only (memfd_create). Not thread-safe, as frames.h says; the
 * process-wide counters of frames_sim.h are atomic.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "frames_sim.h"
#include "internal.h"

/* A pframe handle: the tier in bits 48.., the slot + 1 below (0 is never a
 * valid handle). */
#define GH_SIM_TIER_SHIFT 48
#define GH_SIM_SLOT_MASK ((UINT64_C(1) << GH_SIM_TIER_SHIFT) - 1)
/* What device_free reports when the device tier has no configured limit. */
#define GH_SIM_DEVICE_BYTES ((size_t)16 << 30)

enum { SIM_FREE = 0, SIM_HEAD = 1, SIM_BODY = 2 };

typedef struct gh_sim_tier_s {
  int fd;
  size_t slots;         /* slots the memfd holds (its size / frame) */
  uint8_t* used;        /* per slot: SIM_FREE, SIM_HEAD (an allocation's first), SIM_BODY */
  uint32_t* map_count;  /* per head slot: addresses its allocation is mapped at */
  size_t* len;          /* per head slot: frames of its allocation */
  size_t live;          /* frames */
  size_t limit;         /* most live frames; 0 = no limit */
} gh_sim_tier_t;

/* A vector clock: per stream index (gh_frames_s.ss), the sequence number
 * of that stream's last copy waited for (0: none); entries past n are 0. */
typedef struct gh_sim_vc_s {
  uint64_t* c;
  size_t n;
} gh_sim_vc_t;

typedef struct gh_sim_event_s {
  uint32_t left;  /* queries until complete */
  gh_sim_vc_t covers; /* the deferred copies that run when it completes */
  const uint32_t* word; /* ... and not before *word >= value (when word) */
  uint32_t value;
  struct gh_sim_event_s *prev, *next;
} gh_sim_event_t;

/* A deferred copy, and what a stream token has queued or waits for. */
typedef struct gh_sim_copy_s {
  void* dst;
  const void* src;
  size_t bytes;
  uint64_t seq;
  size_t stream;  /* its stream's index (gh_frames_s.ss) */
  gh_sim_vc_t deps;       /* with eager runs: its stream's clock when it was queued (what it waits for) */
  const uint32_t* word;   /* ... and the word its stream waited for then, and its value */
  uint32_t value;
  int early;              /* queued with eager runs on: may run early */
} gh_sim_copy_t;

typedef struct gh_sim_sstate_s {
  gh_stream_t s;
  gh_sim_vc_t vc;   /* what its work so far waits for: its own copies, and those of the events it waited for */
  const uint32_t* word; /* the word it waits for (stream_wait_value), or NULL */
  uint32_t value;       /* ... until it reaches this */
} gh_sim_sstate_t;

typedef struct gh_sim_stream_s {
  struct gh_sim_stream_s *prev, *next;
} gh_sim_stream_t;

struct gh_frames_s {
  int device;           /* as open was given it (0 for -1): the simulation is one device */
  gh_stream_t capture;  /* the stream tests say is capturing a graph (read atomically), or NULL */
  uint64_t capture_touches; /* event records, waits, syncs and copies on that stream while it captures:
                               CUDA forbids them or makes them part of the graph (_gh_frames_sim_capture) */
  uint8_t* base;
  size_t bytes, frame, n_va;
  gh_pframe_t* mapped;  /* per va frame: the handle mapped there, or 0 */
  uint8_t* head;        /* per va frame: a mapping starts there */
  gh_sim_tier_t tier[GH_TIER_COUNT];  /* [DEVICE] and [HOST]; [NONE] unused */
  uint32_t lag;
  gh_sim_event_t* events;
  gh_sim_stream_t* streams;
  int defer;                  /* copies wait until something waits for them */
  gh_sim_copy_t* copies;      /* deferred copies not run yet, in order */
  size_t n_copies, cap_copies;
  uint64_t seq;               /* the last copy's sequence number */
  gh_sim_sstate_t* ss;        /* per stream token seen by copy, event_record or stream_wait */
  size_t n_ss, cap_ss;
  uint64_t stream_waits;      /* stream_wait calls */
  uint64_t value_waits;       /* stream_wait_value calls */
  uint64_t copies_to_host;    /* copy_to_host calls that copied */
  uint64_t frames_mapped[GH_TIER_COUNT], frames_unmapped[GH_TIER_COUNT]; /* by the tier of their memory */
  uint64_t allocs_mapped[GH_TIER_COUNT], allocs_unmapped[GH_TIER_COUNT]; /* mappings made and undone, by tier */
  uint32_t fail_map;          /* tests: the fail_map-th map from now fails (0: none) */
  uint32_t fail_event;        /* tests: the fail_event-th event record from now fails (0: none) */
  int fail_events_on;         /* tests: ... and every one after it (_gh_frames_sim_fail_events_from) */
  int fail_event_hit;         /* tests: fail_event reached */
  uint32_t fail_copy;         /* tests: the fail_copy-th copy from now fails (0: none) */
  uint32_t fail_sync;         /* tests: the fail_sync-th event or stream sync from now fails (0: none) */
  uint64_t events_recorded;   /* event records that succeeded */
  uint64_t eager;             /* eager runs: the random state (0: off) */
  uint64_t eager_runs;        /* copies run early so far */
};

static size_t gh_sim_live_all = 0;    /* atomic: frames live over all instances */
static size_t gh_sim_leaked_all = 0;  /* atomic: frames, events, streams cleaned up by close */
static uint32_t gh_sim_fail_stream = 0; /* atomic: stream creations until one fails (0: none) */
static uint32_t gh_sim_fail_word = 0;   /* atomic: word allocations until one fails (0: none) */
static size_t gh_sim_words_live = 0;    /* atomic: words allocated and not freed, all frames */

static int gh_sim_tier_ok(gh_tier_t t) { return t == GH_TIER_DEVICE || t == GH_TIER_HOST; }

static int gh_sim_open(gh_frames_t** out, int device, size_t va_bytes, uint8_t** base, size_t* frame_bytes) {
  if (!out || !base || !frame_bytes || va_bytes == 0 || device < -1)
    return _gh_error(GH_ERR_INVAL, "sim open: bad arguments");
  *out = NULL;
  const size_t frame = GH_SIM_FRAME_BYTES;
  if (va_bytes > ((size_t)1 << 46)) return _gh_error(GH_ERR_INVAL, "sim open: va_bytes %zu too large", va_bytes);
  const size_t n_va = (va_bytes + frame - 1) / frame;
  gh_frames_t* f = calloc(1, sizeof *f);
  if (!f) return _gh_error(GH_ERR_NOMEM, "sim open: out of memory");
  f->device = device < 0 ? 0 : device;
  f->frame = frame;
  f->n_va = n_va;
  f->bytes = n_va * frame;
  f->tier[GH_TIER_DEVICE].fd = f->tier[GH_TIER_HOST].fd = f->tier[GH_TIER_NONE].fd = -1;
  f->mapped = calloc(n_va, sizeof *f->mapped);
  f->head = calloc(n_va, 1);
  if (!f->mapped || !f->head) goto nomem;
  /* Over-reserve by one frame to align the base to the frame. */
  void* p = mmap(NULL, f->bytes + frame, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) goto nomem;
  uint8_t* raw = p;
  uint8_t* aligned = (uint8_t*)(((uintptr_t)raw + frame - 1) & ~(uintptr_t)(frame - 1));
  if (aligned > raw) munmap(raw, (size_t)(aligned - raw));
  const size_t tail = (size_t)(raw + f->bytes + frame - (aligned + f->bytes));
  if (tail) munmap(aligned + f->bytes, tail);
  f->base = aligned;
  for (int t = GH_TIER_DEVICE; t <= GH_TIER_HOST; t++) {
    f->tier[t].fd = memfd_create(t == GH_TIER_DEVICE ? "gpuheap-sim-device" : "gpuheap-sim-host", MFD_CLOEXEC);
    if (f->tier[t].fd < 0) {
      const int e = errno;
      for (int u = GH_TIER_DEVICE; u < t; u++) close(f->tier[u].fd);
      munmap(f->base, f->bytes);
      free(f->mapped);
      free(f->head);
      free(f);
      return _gh_error(GH_ERR_NOMEM, "sim open: memfd_create: %s", strerror(e));
    }
  }
  *out = f;
  *base = f->base;
  *frame_bytes = frame;
  return GH_OK;
nomem:
  free(f->mapped);
  free(f->head);
  free(f);
  return _gh_error(GH_ERR_NOMEM, "sim open: cannot reserve %zu bytes", va_bytes);
}

/* Map PROT_NONE reserved memory over [va, va + n frames). */
static int gh_sim_unmap_raw(gh_frames_t* f, uint8_t* va, size_t n) {
  void* p = mmap(va, n * f->frame, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? _gh_error(GH_ERR_NOMEM, "sim unmap: mmap: %s", strerror(errno)) : GH_OK;
}

static int gh_sim_close(gh_frames_t* f) {
  if (!f) return _gh_error(GH_ERR_INVAL, "sim close: NULL");
  munmap(f->base, f->bytes);
  for (int t = GH_TIER_DEVICE; t <= GH_TIER_HOST; t++) {
    gh_sim_tier_t* T = &f->tier[t];
    __atomic_fetch_sub(&gh_sim_live_all, T->live, __ATOMIC_RELAXED);
    __atomic_fetch_add(&gh_sim_leaked_all, T->live, __ATOMIC_RELAXED);
    close(T->fd);
    free(T->used);
    free(T->map_count);
    free(T->len);
  }
  for (gh_sim_event_t *e = f->events, *n; e; e = n) {
    n = e->next;
    free(e->covers.c);
    free(e);
    __atomic_fetch_add(&gh_sim_leaked_all, 1, __ATOMIC_RELAXED);
  }
  for (gh_sim_stream_t *s = f->streams, *n; s; s = n) {
    n = s->next;
    free(s);
    __atomic_fetch_add(&gh_sim_leaked_all, 1, __ATOMIC_RELAXED);
  }
  for (size_t i = 0; i < f->n_copies; i++) free(f->copies[i].deps.c);
  free(f->copies);
  for (size_t i = 0; i < f->n_ss; i++) free(f->ss[i].vc.c);
  free(f->ss);
  free(f->mapped);
  free(f->head);
  free(f);
  return GH_OK;
}

static int gh_sim_device(gh_frames_t* f) { return f->device; }

static int gh_sim_device_free(gh_frames_t* f, size_t* free_bytes, size_t* total_bytes) {
  if (!f || !free_bytes || !total_bytes) return _gh_error(GH_ERR_INVAL, "sim device_free: bad arguments");
  const gh_sim_tier_t* T = &f->tier[GH_TIER_DEVICE];
  *total_bytes = T->limit ? T->limit * f->frame : GH_SIM_DEVICE_BYTES;
  *free_bytes = *total_bytes - T->live * f->frame;
  return GH_OK;
}

/* Grow a tier's arrays and memfd to hold `slots` slots. */
static int gh_sim_tier_grow(gh_frames_t* f, gh_sim_tier_t* T, size_t slots) {
  uint8_t* used = realloc(T->used, slots);
  if (!used) return GH_ERR_NOMEM;
  T->used = used;
  uint32_t* mc = realloc(T->map_count, slots * sizeof *mc);
  if (!mc) return GH_ERR_NOMEM;
  T->map_count = mc;
  size_t* len = realloc(T->len, slots * sizeof *len);
  if (!len) return GH_ERR_NOMEM;
  T->len = len;
  if (ftruncate(T->fd, (off_t)(slots * f->frame)) != 0) return GH_ERR_NOMEM;
  for (size_t s = T->slots; s < slots; s++) used[s] = SIM_FREE, mc[s] = 0, len[s] = 0;
  T->slots = slots;
  return GH_OK;
}

/* First fit: the lowest run of n free slots, or SIZE_MAX. Lowest first, so
 * that slots (and their pages) are reused. */
static size_t gh_sim_fit(const gh_sim_tier_t* T, size_t n) {
  for (size_t i = 0; i + n <= T->slots;) {
    size_t j = 0;
    while (j < n && T->used[i + j] == SIM_FREE) j++;
    if (j == n) return i;
    i += j + 1;
  }
  return SIZE_MAX;
}

static int gh_sim_create(gh_frames_t* f, gh_tier_t tier, size_t frames, gh_pframe_t* out) {
  if (!f || !out || !gh_sim_tier_ok(tier)) return _gh_error(GH_ERR_INVAL, "sim create: bad arguments");
  if (frames == 0 || frames > f->n_va)
    return _gh_error(GH_ERR_INVAL, "sim create: %zu frames (the range holds %zu)", frames, f->n_va);
  gh_sim_tier_t* T = &f->tier[tier];
  const int nomem = tier == GH_TIER_DEVICE ? GH_ERR_DEVICE_NOMEM : GH_ERR_NOMEM;
  if (T->limit && (T->live >= T->limit || frames > T->limit - T->live))
    return _gh_error(nomem, "sim create: the %s tier is full (%zu of %zu frames, %zu asked)",
                     tier == GH_TIER_DEVICE ? "device" : "host", T->live, T->limit, frames);
  size_t s = gh_sim_fit(T, frames);
  if (s == SIZE_MAX) {
    size_t want = T->slots ? 2 * T->slots : 16;
    while (want < T->slots + frames) want *= 2;
    if (gh_sim_tier_grow(f, T, want) != GH_OK) return _gh_error(nomem, "sim create: cannot grow the memfd");
    s = gh_sim_fit(T, frames);
  }
  T->used[s] = SIM_HEAD;
  for (size_t k = 1; k < frames; k++) T->used[s + k] = SIM_BODY;
  T->map_count[s] = 0;
  T->len[s] = frames;
  T->live += frames;
  __atomic_fetch_add(&gh_sim_live_all, frames, __ATOMIC_RELAXED);
  *out = ((gh_pframe_t)tier << GH_SIM_TIER_SHIFT) | (gh_pframe_t)(s + 1);
  return GH_OK;
}

/* Decode a handle; NULL for one that is no live allocation. */
static gh_sim_tier_t* gh_sim_decode(gh_frames_t* f, gh_pframe_t pf, size_t* slot) {
  const uint64_t t = pf >> GH_SIM_TIER_SHIFT, s1 = pf & GH_SIM_SLOT_MASK;
  if (!gh_sim_tier_ok((gh_tier_t)t) || s1 == 0) return NULL;
  gh_sim_tier_t* T = &f->tier[t];
  if (s1 - 1 >= T->slots || T->used[s1 - 1] != SIM_HEAD) return NULL;
  *slot = (size_t)(s1 - 1);
  return T;
}

static int gh_sim_release(gh_frames_t* f, gh_pframe_t pf) {
  size_t s;
  gh_sim_tier_t* T = f ? gh_sim_decode(f, pf, &s) : NULL;
  if (!T) return _gh_error(GH_ERR_INVAL, "sim release: unknown allocation %#llx", (unsigned long long)pf);
  if (T->map_count[s])
    return _gh_error(GH_ERR_INVAL, "sim release: allocation %#llx is still mapped", (unsigned long long)pf);
  /* The slots keep their pages for the next allocation made in them (as
   * with CUDA, a new allocation's contents are undefined): punching them out
   * made every reuse fault them in and clear them again, which dominated
   * the tests' time. close() gives all of them back. */
  const size_t n = T->len[s];
  for (size_t k = 0; k < n; k++) T->used[s + k] = SIM_FREE;
  T->len[s] = 0;
  T->live -= n;
  __atomic_fetch_sub(&gh_sim_live_all, n, __ATOMIC_RELAXED);
  return GH_OK;
}

/* The first va frame of [va, va + n frames) inside the range, or SIZE_MAX. */
static size_t gh_sim_va_index(const gh_frames_t* f, const uint8_t* va, size_t n) {
  if (n == 0 || va < f->base || va >= f->base + f->bytes) return SIZE_MAX;
  const size_t off = (size_t)(va - f->base);
  if (off % f->frame || n > f->n_va - off / f->frame) return SIZE_MAX;
  return off / f->frame;
}

static int gh_sim_map(gh_frames_t* f, uint8_t* va, const gh_pframe_t* pfs, size_t n) {
  if (!f || !pfs || n == 0) return _gh_error(GH_ERR_INVAL, "sim map: bad arguments");
  if (f->fail_map && --f->fail_map == 0)  /* as a driver out of memory for page tables: nothing mapped */
    return _gh_error(GH_ERR_DEVICE_NOMEM, "sim map: %p refused on purpose (_gh_frames_sim_fail_map)", (void*)va);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    size_t s;
    const gh_sim_tier_t* T = gh_sim_decode(f, pfs[i], &s);
    if (!T) return _gh_error(GH_ERR_INVAL, "sim map: unknown allocation %#llx", (unsigned long long)pfs[i]);
    if (T->map_count[s] == UINT32_MAX) return _gh_error(GH_ERR_INVAL, "sim map: allocation mapped too often");
    if (T->len[s] > f->n_va - total) return _gh_error(GH_ERR_INVAL, "sim map: allocations larger than the range");
    total += T->len[s];
  }
  const size_t v0 = gh_sim_va_index(f, va, total);
  if (v0 == SIZE_MAX)
    return _gh_error(GH_ERR_INVAL, "sim map: %p + %zu frames is outside the range or unaligned", (void*)va, total);
  for (size_t i = 0; i < total; i++)
    if (f->mapped[v0 + i]) return _gh_error(GH_ERR_INVAL, "sim map: %p is mapped already", (void*)(va + i * f->frame));
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    size_t s;
    gh_sim_tier_t* T = gh_sim_decode(f, pfs[i], &s);
    const size_t len = T->len[s];
    /* MAP_POPULATE: one call sets up the page tables instead of a fault per
     * page on first touch. */
    void* p = mmap(va + off * f->frame, len * f->frame, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_SHARED | MAP_POPULATE,
                   T->fd, (off_t)(s * f->frame));
    if (p == MAP_FAILED) {
      const int e = errno;
      for (size_t u = 0; u < off;) {  /* roll back */
        size_t su;
        gh_sim_tier_t* Tu = gh_sim_decode(f, f->mapped[v0 + u], &su);
        Tu->map_count[su]--;
        const size_t lu = Tu->len[su];
        for (size_t k = 0; k < lu; k++) f->mapped[v0 + u + k] = 0;
        f->head[v0 + u] = 0;
        u += lu;
      }
      gh_sim_unmap_raw(f, va, total);
      return _gh_error(GH_ERR_NOMEM, "sim map: mmap: %s", strerror(e));
    }
    T->map_count[s]++;
    f->head[v0 + off] = 1;
    for (size_t k = 0; k < len; k++) f->mapped[v0 + off + k] = pfs[i];
    off += len;
  }
  for (size_t i = 0; i < total; i++) f->frames_mapped[f->mapped[v0 + i] >> GH_SIM_TIER_SHIFT]++;  /* all mapped */
  for (size_t i = 0; i < n; i++) f->allocs_mapped[pfs[i] >> GH_SIM_TIER_SHIFT]++;
  return GH_OK;
}

static int gh_sim_unmap(gh_frames_t* f, uint8_t* va, size_t n) {
  if (!f) return _gh_error(GH_ERR_INVAL, "sim unmap: NULL");
  const size_t v0 = gh_sim_va_index(f, va, n);
  if (v0 == SIZE_MAX) return _gh_error(GH_ERR_INVAL, "sim unmap: %p + %zu frames is outside the range or unaligned", (void*)va, n);
  for (size_t i = 0; i < n; i++)
    if (!f->mapped[v0 + i]) return _gh_error(GH_ERR_INVAL, "sim unmap: %p is not mapped", (void*)(va + i * f->frame));
  const size_t end = v0 + n;
  if (!f->head[v0] || (end < f->n_va && f->mapped[end] && !f->head[end]))
    return _gh_error(GH_ERR_INVAL, "sim unmap: frames [%zu, %zu) would split a mapping", v0, end);
  /* A copy not run yet that reads or writes there would fault on a GPU. */
  for (size_t i = 0; i < f->n_copies; i++) {
    const gh_sim_copy_t* c = &f->copies[i];
    const uint8_t *lo = va, *hi = va + n * f->frame;
    if (((const uint8_t*)c->dst < hi && (const uint8_t*)c->dst + c->bytes > lo) ||
        ((const uint8_t*)c->src < hi && (const uint8_t*)c->src + c->bytes > lo))
      return _gh_error(GH_ERR_CORRUPT, "sim unmap: %p + %zu frames is used by a copy not run yet", (void*)va, n);
  }
  const int rc = gh_sim_unmap_raw(f, va, n);
  if (rc != GH_OK) return rc;
  for (size_t i = v0; i < end; i++) {
    if (f->head[i]) {
      size_t s;
      gh_sim_tier_t* T = gh_sim_decode(f, f->mapped[i], &s);
      T->map_count[s]--;
      f->head[i] = 0;
      f->allocs_unmapped[f->mapped[i] >> GH_SIM_TIER_SHIFT]++;
    }
    f->frames_unmapped[f->mapped[i] >> GH_SIM_TIER_SHIFT]++;
    f->mapped[i] = 0;
  }
  return GH_OK;
}

/* The state of stream token s (created on first sight; NULL when out of memory). */
static gh_sim_sstate_t* gh_sim_ss(gh_frames_t* f, gh_stream_t s) {
  for (size_t i = 0; i < f->n_ss; i++)
    if (f->ss[i].s == s) return &f->ss[i];
  if (f->n_ss == f->cap_ss) {
    const size_t cap = f->cap_ss ? 2 * f->cap_ss : 8;
    gh_sim_sstate_t* p = realloc(f->ss, cap * sizeof *p);
    if (!p) return NULL;
    f->ss = p, f->cap_ss = cap;
  }
  f->ss[f->n_ss] = (gh_sim_sstate_t){s, {NULL, 0}, NULL, 0};
  return &f->ss[f->n_ss++];
}

static uint64_t gh_sim_vc_at(const gh_sim_vc_t* v, size_t i) { return i < v->n ? v->c[i] : 0; }

/* dst = the later of dst and src, entry by entry; GH_ERR_NOMEM (dst
 * unchanged) when it cannot grow. */
static int gh_sim_vc_merge(gh_sim_vc_t* dst, const gh_sim_vc_t* src) {
  if (src->n > dst->n) {
    uint64_t* c = realloc(dst->c, src->n * sizeof *c);
    if (!c) return GH_ERR_NOMEM;
    for (size_t i = dst->n; i < src->n; i++) c[i] = 0;
    dst->c = c, dst->n = src->n;
  }
  for (size_t i = 0; i < src->n; i++)
    if (src->c[i] > dst->c[i]) dst->c[i] = src->c[i];
  return GH_OK;
}

/* Run the deferred copies that `upto` covers (all when NULL), in the
 * order they were issued; the others stay queued, in order. */
static void gh_sim_run_or_drop(gh_frames_t* f, const gh_sim_vc_t* upto, int drop) {
  size_t kept = 0;
  for (size_t i = 0; i < f->n_copies; i++) {
    const gh_sim_copy_t* c = &f->copies[i];
    if (!upto || c->seq <= gh_sim_vc_at(upto, c->stream)) {
      if (!drop) memcpy(c->dst, c->src, c->bytes);
      free(c->deps.c);
    } else {
      f->copies[kept++] = *c;
    }
  }
  f->n_copies = kept;
}
static void gh_sim_run(gh_frames_t* f, const gh_sim_vc_t* upto) { gh_sim_run_or_drop(f, upto, 0); }

/* A sync refused on purpose (_gh_frames_sim_fail_sync): 1 when this one is,
 * after dropping the queued copies it covers (all of them when `upto` is
 * NULL), as copies that failed on the GPU: they write nothing. */
static int gh_sim_sync_fails(gh_frames_t* f, const gh_sim_vc_t* upto) {
  if (!f->fail_sync || --f->fail_sync != 0) return 0;
  gh_sim_run_or_drop(f, upto, 1);
  return 1;
}

/* Run what the work queued on s so far waits for: its own copies and those
 * it was made to wait for (everything when out of memory). */
static void gh_sim_run_stream(gh_frames_t* f, gh_stream_t s) {
  const gh_sim_sstate_t* st = gh_sim_ss(f, s);
  gh_sim_run(f, st ? &st->vc : NULL);
}

static int gh_sim_held(const uint32_t* w, uint32_t value);

/* With eager runs, half the time: one queued copy that a GPU could run now
 * (the first of its stream; every copy of another stream that it waits
 * for done; its stream's word, if any, at its value), chosen at random,
 * runs. */
static int gh_sim_early_ok(const gh_frames_t* f, size_t i) {
  const gh_sim_copy_t* c = &f->copies[i];
  if (!c->early || gh_sim_held(c->word, c->value)) return 0;
  for (size_t j = 0; j < i; j++) {  /* earlier copies are the only ones it can wait for */
    const gh_sim_copy_t* d = &f->copies[j];
    if (d->stream == c->stream || d->seq <= gh_sim_vc_at(&c->deps, d->stream)) return 0;
  }
  return 1;
}

static void gh_sim_eager(gh_frames_t* f) {
  if (!f->eager || !f->n_copies) return;
  f->eager ^= f->eager << 13, f->eager ^= f->eager >> 7, f->eager ^= f->eager << 17;  /* xorshift64 */
  if (f->eager & 1) return;
  size_t n = 0, pick = SIZE_MAX;
  for (size_t i = 0; i < f->n_copies; i++) n += gh_sim_early_ok(f, i);
  if (n == 0) return;
  for (size_t i = 0, k = (size_t)((f->eager >> 8) % n); pick == SIZE_MAX; i++)
    if (gh_sim_early_ok(f, i) && k-- == 0) pick = i;
  const gh_sim_copy_t c = f->copies[pick];
  memcpy(c.dst, c.src, c.bytes);
  free(c.deps.c);
  memmove(f->copies + pick, f->copies + pick + 1, (f->n_copies - pick - 1) * sizeof *f->copies);
  f->n_copies--;
  f->eager_runs++;
}

/* A process-wide countdown of calls to refuse (gh_sim_fail_stream,
 * gh_sim_fail_word): 1 when this call is the one. */
static int gh_sim_countdown(uint32_t* left) {
  uint32_t n = __atomic_load_n(left, __ATOMIC_RELAXED);
  while (n && !__atomic_compare_exchange_n(left, &n, n - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return n == 1;
}

static int gh_sim_stream_create(gh_frames_t* f, gh_stream_t* out) {
  if (!f || !out) return _gh_error(GH_ERR_INVAL, "sim stream_create: bad arguments");
  if (gh_sim_countdown(&gh_sim_fail_stream))  /* as cudaStreamCreate failing: no stream */
    return _gh_error(GH_ERR_CUDA, "sim stream_create: refused on purpose (_gh_frames_sim_fail_stream)");
  gh_sim_stream_t* s = calloc(1, sizeof *s);
  if (!s) return _gh_error(GH_ERR_NOMEM, "sim stream_create: out of memory");
  s->next = f->streams;
  if (s->next) s->next->prev = s;
  f->streams = s;
  *out = (gh_stream_t)(void*)s;
  return GH_OK;
}

static int gh_sim_stream_destroy(gh_frames_t* f, gh_stream_t st) {
  if (!f || !st) return _gh_error(GH_ERR_INVAL, "sim stream_destroy: bad arguments");
  gh_sim_stream_t* s = (gh_sim_stream_t*)(void*)st;
  if (s->prev) s->prev->next = s->next; else f->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  free(s);
  return GH_OK;
}

/* An operation on `stream`: counted when the stream reads as capturing. */
static void gh_sim_touch(gh_frames_t* f, gh_stream_t stream) {
  const gh_stream_t c = __atomic_load_n(&f->capture, __ATOMIC_ACQUIRE);
  if (c != NULL && c == stream) f->capture_touches++;
}

static int gh_sim_copy(gh_frames_t* f, void* dst, const void* src, size_t bytes, gh_stream_t stream) {
  if (!f || (bytes && (!dst || !src))) return _gh_error(GH_ERR_INVAL, "sim copy: bad arguments");
  if (!bytes) return GH_OK;
  gh_sim_touch(f, stream);
  if (f->fail_copy && --f->fail_copy == 0)  /* as cudaMemcpyAsync failing: nothing queued */
    return _gh_error(GH_ERR_CUDA, "sim copy: refused on purpose (_gh_frames_sim_fail_copy)");
  gh_sim_sstate_t* st = f->defer ? gh_sim_ss(f, stream) : NULL;
  const size_t idx = st ? (size_t)(st - f->ss) : 0;
  if (st && f->n_copies == f->cap_copies) {
    const size_t cap = f->cap_copies ? 2 * f->cap_copies : 16;
    gh_sim_copy_t* p = realloc(f->copies, cap * sizeof *p);
    if (p) f->copies = p, f->cap_copies = cap;
  }
  /* Its own entry in its stream's clock (grown first, so that nothing is
   * queued that the clock would not cover). */
  if (st && st->vc.n <= idx) {
    uint64_t* c = realloc(st->vc.c, (idx + 1) * sizeof *c);
    if (c) {
      for (size_t i = st->vc.n; i <= idx; i++) c[i] = 0;
      st->vc.c = c, st->vc.n = idx + 1;
    }
  }
  if (!st || f->n_copies == f->cap_copies || st->vc.n <= idx) {
    /* not deferred (or out of memory): now, after every copy before it */
    gh_sim_run(f, NULL);
    memcpy(dst, src, bytes);
    return GH_OK;
  }
  gh_sim_copy_t* c = &f->copies[f->n_copies];
  *c = (gh_sim_copy_t){dst, src, bytes, ++f->seq, idx, {NULL, 0}, st->word, st->value, 0};
  c->early = f->eager && gh_sim_vc_merge(&c->deps, &st->vc) == GH_OK;  /* (out of memory: never early) */
  f->n_copies++;
  st->vc.c[idx] = f->seq;
  gh_sim_eager(f);
  return GH_OK;
}

/* The simulation copies to the host as any copy, counted apart. */
static int gh_sim_copy_to_host(gh_frames_t* f, void* dst, const void* src, size_t bytes, gh_stream_t stream) {
  const int rc = gh_sim_copy(f, dst, src, bytes, stream);
  if (rc == GH_OK && bytes) f->copies_to_host++;
  return rc;
}

/* 1 while a word that the stream's or event's work waits for is short of its value. */
static int gh_sim_held(const uint32_t* w, uint32_t value) {
  return w && __atomic_load_n(w, __ATOMIC_ACQUIRE) < value;
}

static int gh_sim_stream_sync_or_run(gh_frames_t* f, gh_stream_t stream, int can_fail) {
  if (!f) return _gh_error(GH_ERR_INVAL, "sim stream_sync: NULL");
  if (can_fail) gh_sim_touch(f, stream);
  const gh_sim_sstate_t* st = gh_sim_ss(f, stream);
  if (st && gh_sim_held(st->word, st->value))
    return _gh_error(GH_ERR_CORRUPT, "sim stream_sync: the stream waits for a word not written yet");
  if (can_fail && gh_sim_sync_fails(f, st ? &st->vc : NULL))
    return _gh_error(GH_ERR_CUDA, "sim stream_sync: a copy failed on purpose (_gh_frames_sim_fail_sync)");
  gh_sim_run_stream(f, stream);
  return GH_OK;
}
static int gh_sim_stream_sync(gh_frames_t* f, gh_stream_t stream) { return gh_sim_stream_sync_or_run(f, stream, 1); }

static int gh_sim_stream_capturing(gh_frames_t* f, gh_stream_t stream, int* capturing) {
  if (!f || !capturing) return _gh_error(GH_ERR_INVAL, "sim stream_capturing: NULL");
  const gh_stream_t c = __atomic_load_n(&f->capture, __ATOMIC_ACQUIRE);
  *capturing = c != NULL && c == stream;
  return GH_OK;
}
int _gh_frames_sim_run_stream(gh_frames_t* f, gh_stream_t stream) { return gh_sim_stream_sync_or_run(f, stream, 0); }

static int gh_sim_word_alloc(gh_frames_t* f, uint32_t** out) {
  if (!f || !out) return _gh_error(GH_ERR_INVAL, "sim word_alloc: bad arguments");
  if (gh_sim_countdown(&gh_sim_fail_word))  /* as cudaHostAlloc failing */
    return _gh_error(GH_ERR_NOMEM, "sim word_alloc: refused on purpose (_gh_frames_sim_fail_word)");
  *out = calloc(1, 64);
  if (!*out) return _gh_error(GH_ERR_NOMEM, "sim word_alloc: out of memory");
  __atomic_add_fetch(&gh_sim_words_live, 1, __ATOMIC_RELAXED);
  return GH_OK;
}

static int gh_sim_word_free(gh_frames_t* f, uint32_t* w) {
  if (!f || !w) return _gh_error(GH_ERR_INVAL, "sim word_free: bad arguments");
  free(w);
  __atomic_sub_fetch(&gh_sim_words_live, 1, __ATOMIC_RELAXED);
  return GH_OK;
}

static int gh_sim_stream_wait_value(gh_frames_t* f, gh_stream_t stream, uint32_t* w, uint32_t value) {
  if (!f || !w) return _gh_error(GH_ERR_INVAL, "sim stream_wait_value: bad arguments");
  gh_sim_touch(f, stream);
  gh_sim_sstate_t* st = gh_sim_ss(f, stream);
  if (!st) return _gh_error(GH_ERR_NOMEM, "sim stream_wait_value: out of memory");
  if (st->word && st->word != w) return _gh_error(GH_ERR_UNSUPPORTED, "sim stream_wait_value: one word per stream");
  st->word = w;
  if (value > st->value) st->value = value;
  f->value_waits++;
  return GH_OK;
}

static int gh_sim_stream_wait(gh_frames_t* f, gh_stream_t stream, gh_fevent_t ev) {
  if (!f || !ev) return _gh_error(GH_ERR_INVAL, "sim stream_wait: bad arguments");
  gh_sim_touch(f, stream);
  gh_sim_sstate_t* st = gh_sim_ss(f, stream);
  const gh_sim_vc_t* c = &((gh_sim_event_t*)ev)->covers;
  if (!st || gh_sim_vc_merge(&st->vc, c) != GH_OK) gh_sim_run(f, c);  /* out of memory: as if it had waited already */
  f->stream_waits++;
  return GH_OK;
}

static int gh_sim_event_record(gh_frames_t* f, gh_stream_t stream, gh_fevent_t* out) {
  if (!f || !out) return _gh_error(GH_ERR_INVAL, "sim event_record: bad arguments");
  gh_sim_touch(f, stream);
  if (f->fail_event && --f->fail_event == 0) {  /* as cudaEventRecord failing: no event */
    f->fail_event = f->fail_events_on, f->fail_event_hit = 1;
    return _gh_error(GH_ERR_CUDA, "sim event_record: refused on purpose (_gh_frames_sim_fail_event)");
  }
  gh_sim_event_t* e = calloc(1, sizeof *e);
  if (!e) return _gh_error(GH_ERR_NOMEM, "sim event_record: out of memory");
  const gh_sim_sstate_t* st = gh_sim_ss(f, stream);
  if (!st || gh_sim_vc_merge(&e->covers, &st->vc) != GH_OK) gh_sim_run(f, NULL);  /* out of memory: all done now */
  gh_sim_eager(f);
  if (st) e->word = st->word, e->value = st->value;
  e->left = f->lag;
  e->next = f->events;
  if (e->next) e->next->prev = e;
  f->events = e;
  f->events_recorded++;
  *out = (gh_fevent_t)e;
  return GH_OK;
}

static int gh_sim_event_query(gh_frames_t* f, gh_fevent_t ev) {
  if (!f || !ev) return _gh_error(GH_ERR_INVAL, "sim event_query: bad arguments");
  gh_sim_event_t* e = (gh_sim_event_t*)ev;
  if (e->left == 0 && !gh_sim_held(e->word, e->value)) {
    gh_sim_run(f, &e->covers);
    return GH_OK;
  }
  if (e->left) e->left--;
  gh_sim_eager(f);
  return GH_ERR_BUSY;
}

static int gh_sim_event_sync(gh_frames_t* f, gh_fevent_t ev) {
  if (!f || !ev) return _gh_error(GH_ERR_INVAL, "sim event_sync: bad arguments");
  gh_sim_event_t* e = (gh_sim_event_t*)ev;
  if (gh_sim_held(e->word, e->value))
    return _gh_error(GH_ERR_CORRUPT, "sim event_sync: the event follows a wait for a word not written yet");
  if (gh_sim_sync_fails(f, &e->covers))
    return _gh_error(GH_ERR_CUDA, "sim event_sync: a copy failed on purpose (_gh_frames_sim_fail_sync)");
  e->left = 0;
  gh_sim_run(f, &e->covers);
  return GH_OK;
}

static int gh_sim_event_destroy(gh_frames_t* f, gh_fevent_t ev) {
  if (!f || !ev) return _gh_error(GH_ERR_INVAL, "sim event_destroy: bad arguments");
  gh_sim_event_t* e = (gh_sim_event_t*)ev;
  if (e->prev) e->prev->next = e->next; else f->events = e->next;
  if (e->next) e->next->prev = e->prev;
  free(e->covers.c);
  free(e);
  return GH_OK;
}

/* The calling thread's capture mode (capture_mode), as CUDA keeps it: per
 * thread, global (0) at first. */
static _Thread_local int gh_sim_capture_mode = 0;

static int gh_sim_capture_mode_x(gh_frames_t* f, int* mode) {
  if (!f || !mode) return _gh_error(GH_ERR_INVAL, "sim capture_mode: NULL");
  const int prev = gh_sim_capture_mode;
  gh_sim_capture_mode = *mode;
  *mode = prev;
  return GH_OK;
}

static int gh_sim_device_sync(gh_frames_t* f) {
  if (!f) return _gh_error(GH_ERR_INVAL, "sim device_sync: NULL");
  if (gh_sim_sync_fails(f, NULL))
    return _gh_error(GH_ERR_CUDA, "sim device_sync: a copy failed on purpose (_gh_frames_sim_fail_sync)");
  gh_sim_run(f, NULL);
  return GH_OK;
}

const gh_frames_ops_t _gh_frames_sim = {
    .name = "sim",
    .open = gh_sim_open,
    .close = gh_sim_close,
    .device_free = gh_sim_device_free,
    .device = gh_sim_device,
    .create = gh_sim_create,
    .release = gh_sim_release,
    .map = gh_sim_map,
    .unmap = gh_sim_unmap,
    .stream_create = gh_sim_stream_create,
    .stream_destroy = gh_sim_stream_destroy,
    .copy = gh_sim_copy,
    .copy_to_host = gh_sim_copy_to_host,
    .stream_sync = gh_sim_stream_sync,
    .stream_capturing = gh_sim_stream_capturing,
    .event_record = gh_sim_event_record,
    .event_query = gh_sim_event_query,
    .event_sync = gh_sim_event_sync,
    .event_destroy = gh_sim_event_destroy,
    .stream_wait = gh_sim_stream_wait,
    .word_alloc = gh_sim_word_alloc,
    .word_free = gh_sim_word_free,
    .stream_wait_value = gh_sim_stream_wait_value,
    .capture_mode = gh_sim_capture_mode_x,
    .device_sync = gh_sim_device_sync,
};

void _gh_frames_sim_configure(gh_frames_t* f, uint32_t lag, size_t device_frames, size_t host_frames) {
  if (!f) return;
  f->lag = lag;
  for (gh_sim_event_t* e = f->events; e; e = e->next)  /* events in flight take the new lag too */
    if (e->left > lag) e->left = lag;
  f->tier[GH_TIER_DEVICE].limit = device_frames;
  f->tier[GH_TIER_HOST].limit = host_frames;
}

void _gh_frames_sim_capture(gh_frames_t* f, gh_stream_t stream) {
  if (f) __atomic_store_n(&f->capture, stream, __ATOMIC_RELEASE);
}
uint64_t _gh_frames_sim_capture_touches(gh_frames_t* f) { return f ? f->capture_touches : 0; }

void _gh_frames_sim_defer(gh_frames_t* f, int on) {
  if (!f) return;
  if (!on) gh_sim_run(f, NULL);
  f->defer = on;
}

void _gh_frames_sim_eager(gh_frames_t* f, uint64_t seed) {
  if (f) f->eager = seed;
}
uint64_t _gh_frames_sim_eager_runs(gh_frames_t* f) { return f ? f->eager_runs : 0; }

void _gh_frames_sim_counts(gh_frames_t* f, size_t* deferred, uint64_t* stream_waits) {
  if (!f) return;
  if (deferred) *deferred = f->n_copies;
  if (stream_waits) *stream_waits = f->stream_waits;
}

uint64_t _gh_frames_sim_value_waits(gh_frames_t* f) { return f ? f->value_waits : 0; }

uint64_t _gh_frames_sim_copies_to_host(gh_frames_t* f) { return f ? f->copies_to_host : 0; }
void _gh_frames_sim_frames(gh_frames_t* f, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped) {
  const int ok = f && gh_sim_tier_ok(tier);
  if (mapped) *mapped = ok ? f->frames_mapped[tier] : 0;
  if (unmapped) *unmapped = ok ? f->frames_unmapped[tier] : 0;
}

void _gh_frames_sim_allocs(gh_frames_t* f, gh_tier_t tier, uint64_t* mapped, uint64_t* unmapped) {
  const int ok = f && gh_sim_tier_ok(tier);
  if (mapped) *mapped = ok ? f->allocs_mapped[tier] : 0;
  if (unmapped) *unmapped = ok ? f->allocs_unmapped[tier] : 0;
}

void _gh_frames_sim_fail_map(gh_frames_t* f, uint32_t nth) {
  if (f) f->fail_map = nth;
}

void _gh_frames_sim_fail_copy(gh_frames_t* f, uint32_t nth) {
  if (f) f->fail_copy = nth;
}

int _gh_frames_sim_mapped(gh_frames_t* f, const void* va) {
  const uint8_t* p = va;
  if (!f || p < f->base || p >= f->base + f->bytes) return 0;
  return f->mapped[(size_t)(p - f->base) / f->frame] != 0;
}

int _gh_frames_sim_fail_armed(gh_frames_t* f) {
  return f && (f->fail_map || f->fail_copy || (f->fail_event && !f->fail_event_hit) || f->fail_sync);
}

void _gh_frames_sim_fail_sync(gh_frames_t* f, uint32_t nth) {
  if (f) f->fail_sync = nth;
}

void _gh_frames_sim_fail_stream(uint32_t nth) { __atomic_store_n(&gh_sim_fail_stream, nth, __ATOMIC_RELAXED); }
void _gh_frames_sim_fail_word(uint32_t nth) { __atomic_store_n(&gh_sim_fail_word, nth, __ATOMIC_RELAXED); }
size_t _gh_frames_sim_words_live(void) { return __atomic_load_n(&gh_sim_words_live, __ATOMIC_RELAXED); }

void _gh_frames_sim_fail_events_from(gh_frames_t* f, uint32_t nth) {
  if (!f) return;
  f->fail_event = nth, f->fail_events_on = nth != 0, f->fail_event_hit = 0;
}

uint64_t _gh_frames_sim_fail_event(gh_frames_t* f, uint32_t nth) {
  if (!f) return 0;
  f->fail_event = nth, f->fail_events_on = 0, f->fail_event_hit = 0;
  return f->events_recorded;
}

int _gh_frames_sim_held(gh_frames_t* f, gh_stream_t stream) {
  const gh_sim_sstate_t* st = f ? gh_sim_ss(f, stream) : NULL;
  return st && gh_sim_held(st->word, st->value);
}

size_t _gh_frames_sim_live(gh_frames_t* f, gh_tier_t tier) {
  return f && gh_sim_tier_ok(tier) ? f->tier[tier].live : 0;
}
size_t _gh_frames_sim_live_total(void) { return __atomic_load_n(&gh_sim_live_all, __ATOMIC_RELAXED); }
size_t _gh_frames_sim_leaked_total(void) { return __atomic_load_n(&gh_sim_leaked_all, __ATOMIC_RELAXED); }
