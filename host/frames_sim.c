/* gpuheap: host memory standing in for both frame tiers (see frames.h).
 *
 * The range is an mmap(PROT_NONE, MAP_NORESERVE) reservation. Each tier is
 * one memfd grown with ftruncate; a physical frame is a frame-sized slot of
 * its tier's memfd (released slots are reused, with their pages). Mapping a frame
 * is mmap(MAP_FIXED | MAP_SHARED) of its slot at the address, so the same
 * frame mapped at two addresses is really the same memory, as with
 * cuMemMap; unmapping maps PROT_NONE anonymous memory back over it, which
 * keeps the reservation.
 *
 * Streams are opaque tokens, copies are memcpy, and an event completes
 * after `lag` queries (0 by default; _gh_frames_sim_configure), so that
 * callers meet GH_ERR_BUSY as they would on a GPU.
 *
 * Invariants, per tier t:  live[t] == |{slots s : used[t][s]}|,  and
 * map_count[t][s] == |{va frames v : mapped[v] == (t, s)}|. A slot is
 * released only when its map count is 0.
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

typedef struct gh_sim_tier_s {
  int fd;
  size_t slots;         /* slots the memfd holds (its size / frame) */
  uint8_t* used;        /* per slot: created and not released */
  uint32_t* map_count;  /* per slot: addresses it is mapped at */
  size_t* free_stack;   /* released slots, reused first */
  size_t n_free;
  size_t live;
  size_t limit;         /* most live frames; 0 = no limit */
} gh_sim_tier_t;

typedef struct gh_sim_event_s {
  uint32_t left;  /* queries until complete */
  struct gh_sim_event_s *prev, *next;
} gh_sim_event_t;

typedef struct gh_sim_stream_s {
  struct gh_sim_stream_s *prev, *next;
} gh_sim_stream_t;

struct gh_frames_s {
  uint8_t* base;
  size_t bytes, frame, n_va;
  gh_pframe_t* mapped;  /* per va frame: the handle mapped there, or 0 */
  gh_sim_tier_t tier[GH_TIER_COUNT];  /* [DEVICE] and [HOST]; [NONE] unused */
  uint32_t lag;
  gh_sim_event_t* events;
  gh_sim_stream_t* streams;
};

static size_t gh_sim_live_all = 0;    /* atomic: frames live over all instances */
static size_t gh_sim_leaked_all = 0;  /* atomic: frames, events, streams cleaned up by close */

static int gh_sim_tier_ok(gh_tier_t t) { return t == GH_TIER_DEVICE || t == GH_TIER_HOST; }

static int gh_sim_open(gh_frames_t** out, int device, size_t va_bytes, uint8_t** base, size_t* frame_bytes) {
  (void)device;
  if (!out || !base || !frame_bytes || va_bytes == 0) return _gh_error(GH_ERR_INVAL, "sim open: bad arguments");
  *out = NULL;
  const size_t frame = GH_SIM_FRAME_BYTES;
  if (va_bytes > ((size_t)1 << 46)) return _gh_error(GH_ERR_INVAL, "sim open: va_bytes %zu too large", va_bytes);
  const size_t n_va = (va_bytes + frame - 1) / frame;
  gh_frames_t* f = calloc(1, sizeof *f);
  if (!f) return _gh_error(GH_ERR_NOMEM, "sim open: out of memory");
  f->frame = frame;
  f->n_va = n_va;
  f->bytes = n_va * frame;
  f->tier[GH_TIER_DEVICE].fd = f->tier[GH_TIER_HOST].fd = f->tier[GH_TIER_NONE].fd = -1;
  f->mapped = calloc(n_va, sizeof *f->mapped);
  if (!f->mapped) goto nomem;
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
    free(T->free_stack);
  }
  for (gh_sim_event_t *e = f->events, *n; e; e = n) {
    n = e->next;
    free(e);
    __atomic_fetch_add(&gh_sim_leaked_all, 1, __ATOMIC_RELAXED);
  }
  for (gh_sim_stream_t *s = f->streams, *n; s; s = n) {
    n = s->next;
    free(s);
    __atomic_fetch_add(&gh_sim_leaked_all, 1, __ATOMIC_RELAXED);
  }
  free(f->mapped);
  free(f);
  return GH_OK;
}

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
  size_t* fs = realloc(T->free_stack, slots * sizeof *fs);
  if (!fs) return GH_ERR_NOMEM;
  T->free_stack = fs;
  if (ftruncate(T->fd, (off_t)(slots * f->frame)) != 0) return GH_ERR_NOMEM;
  for (size_t s = T->slots; s < slots; s++) used[s] = 0, mc[s] = 0;
  /* Push the new slots so that the lowest is popped first. */
  for (size_t s = slots; s-- > T->slots;) fs[T->n_free++] = s;
  T->slots = slots;
  return GH_OK;
}

static int gh_sim_create(gh_frames_t* f, gh_tier_t tier, gh_pframe_t* out) {
  if (!f || !out || !gh_sim_tier_ok(tier)) return _gh_error(GH_ERR_INVAL, "sim create: bad arguments");
  gh_sim_tier_t* T = &f->tier[tier];
  if (T->limit && T->live >= T->limit)
    return _gh_error(tier == GH_TIER_DEVICE ? GH_ERR_DEVICE_NOMEM : GH_ERR_NOMEM,
                     "sim create: the %s tier is full (%zu frames)", tier == GH_TIER_DEVICE ? "device" : "host",
                     T->limit);
  if (T->n_free == 0 && gh_sim_tier_grow(f, T, T->slots ? 2 * T->slots : 16) != GH_OK)
    return _gh_error(tier == GH_TIER_DEVICE ? GH_ERR_DEVICE_NOMEM : GH_ERR_NOMEM, "sim create: cannot grow the memfd");
  const size_t s = T->free_stack[--T->n_free];
  T->used[s] = 1;
  T->map_count[s] = 0;
  T->live++;
  __atomic_fetch_add(&gh_sim_live_all, 1, __ATOMIC_RELAXED);
  *out = ((gh_pframe_t)tier << GH_SIM_TIER_SHIFT) | (gh_pframe_t)(s + 1);
  return GH_OK;
}

/* Decode a handle; NULL for one that is no live frame. */
static gh_sim_tier_t* gh_sim_decode(gh_frames_t* f, gh_pframe_t pf, size_t* slot) {
  const uint64_t t = pf >> GH_SIM_TIER_SHIFT, s1 = pf & GH_SIM_SLOT_MASK;
  if (!gh_sim_tier_ok((gh_tier_t)t) || s1 == 0) return NULL;
  gh_sim_tier_t* T = &f->tier[t];
  if (s1 - 1 >= T->slots || !T->used[s1 - 1]) return NULL;
  *slot = (size_t)(s1 - 1);
  return T;
}

static int gh_sim_release(gh_frames_t* f, gh_pframe_t pf) {
  size_t s;
  gh_sim_tier_t* T = f ? gh_sim_decode(f, pf, &s) : NULL;
  if (!T) return _gh_error(GH_ERR_INVAL, "sim release: unknown frame %#llx", (unsigned long long)pf);
  if (T->map_count[s]) return _gh_error(GH_ERR_INVAL, "sim release: frame %#llx is still mapped", (unsigned long long)pf);
  /* The slot keeps its pages for the next frame created in it (as a
   * CUDA frame, a new frame's contents are undefined): punching them out
   * made every reuse fault them in and clear them again, which dominated
   * the tests' time. close() gives all of them back. */
  T->used[s] = 0;
  T->free_stack[T->n_free++] = s;
  T->live--;
  __atomic_fetch_sub(&gh_sim_live_all, 1, __ATOMIC_RELAXED);
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
  if (!f || !pfs) return _gh_error(GH_ERR_INVAL, "sim map: bad arguments");
  const size_t v0 = gh_sim_va_index(f, va, n);
  if (v0 == SIZE_MAX) return _gh_error(GH_ERR_INVAL, "sim map: %p + %zu frames is outside the range or unaligned", (void*)va, n);
  for (size_t i = 0; i < n; i++) {
    size_t s;
    if (f->mapped[v0 + i]) return _gh_error(GH_ERR_INVAL, "sim map: %p is mapped already", (void*)(va + i * f->frame));
    if (!gh_sim_decode(f, pfs[i], &s)) return _gh_error(GH_ERR_INVAL, "sim map: unknown frame %#llx", (unsigned long long)pfs[i]);
  }
  for (size_t i = 0; i < n; i++) {
    size_t s;
    gh_sim_tier_t* T = gh_sim_decode(f, pfs[i], &s);
    /* MAP_POPULATE: one call sets up the frame's page tables instead of a
     * fault per page on first touch. */
    void* p = mmap(va + i * f->frame, f->frame, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_SHARED | MAP_POPULATE, T->fd,
                   (off_t)(s * f->frame));
    if (p == MAP_FAILED) {
      const int e = errno;
      for (size_t j = 0; j < i; j++) {  /* roll back */
        size_t sj;
        gh_sim_tier_t* Tj = gh_sim_decode(f, pfs[j], &sj);
        Tj->map_count[sj]--;
        f->mapped[v0 + j] = 0;
      }
      gh_sim_unmap_raw(f, va, n);
      return _gh_error(GH_ERR_NOMEM, "sim map: mmap: %s", strerror(e));
    }
    T->map_count[s]++;
    f->mapped[v0 + i] = pfs[i];
  }
  return GH_OK;
}

static int gh_sim_unmap(gh_frames_t* f, uint8_t* va, size_t n) {
  if (!f) return _gh_error(GH_ERR_INVAL, "sim unmap: NULL");
  const size_t v0 = gh_sim_va_index(f, va, n);
  if (v0 == SIZE_MAX) return _gh_error(GH_ERR_INVAL, "sim unmap: %p + %zu frames is outside the range or unaligned", (void*)va, n);
  for (size_t i = 0; i < n; i++)
    if (!f->mapped[v0 + i]) return _gh_error(GH_ERR_INVAL, "sim unmap: %p is not mapped", (void*)(va + i * f->frame));
  const int rc = gh_sim_unmap_raw(f, va, n);
  if (rc != GH_OK) return rc;
  for (size_t i = 0; i < n; i++) {
    size_t s;
    gh_sim_tier_t* T = gh_sim_decode(f, f->mapped[v0 + i], &s);
    T->map_count[s]--;
    f->mapped[v0 + i] = 0;
  }
  return GH_OK;
}

static int gh_sim_stream_create(gh_frames_t* f, gh_stream_t* out) {
  if (!f || !out) return _gh_error(GH_ERR_INVAL, "sim stream_create: bad arguments");
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

static int gh_sim_copy(gh_frames_t* f, void* dst, const void* src, size_t bytes, gh_stream_t stream) {
  (void)stream;
  if (!f || (bytes && (!dst || !src))) return _gh_error(GH_ERR_INVAL, "sim copy: bad arguments");
  if (bytes) memcpy(dst, src, bytes);
  return GH_OK;
}

static int gh_sim_stream_sync(gh_frames_t* f, gh_stream_t stream) {
  (void)stream;
  return f ? GH_OK : _gh_error(GH_ERR_INVAL, "sim stream_sync: NULL");
}

static int gh_sim_event_record(gh_frames_t* f, gh_stream_t stream, gh_fevent_t* out) {
  (void)stream;
  if (!f || !out) return _gh_error(GH_ERR_INVAL, "sim event_record: bad arguments");
  gh_sim_event_t* e = calloc(1, sizeof *e);
  if (!e) return _gh_error(GH_ERR_NOMEM, "sim event_record: out of memory");
  e->left = f->lag;
  e->next = f->events;
  if (e->next) e->next->prev = e;
  f->events = e;
  *out = (gh_fevent_t)e;
  return GH_OK;
}

static int gh_sim_event_query(gh_frames_t* f, gh_fevent_t ev) {
  if (!f || !ev) return _gh_error(GH_ERR_INVAL, "sim event_query: bad arguments");
  gh_sim_event_t* e = (gh_sim_event_t*)ev;
  if (e->left == 0) return GH_OK;
  e->left--;
  return GH_ERR_BUSY;
}

static int gh_sim_event_sync(gh_frames_t* f, gh_fevent_t ev) {
  if (!f || !ev) return _gh_error(GH_ERR_INVAL, "sim event_sync: bad arguments");
  ((gh_sim_event_t*)ev)->left = 0;
  return GH_OK;
}

static int gh_sim_event_destroy(gh_frames_t* f, gh_fevent_t ev) {
  if (!f || !ev) return _gh_error(GH_ERR_INVAL, "sim event_destroy: bad arguments");
  gh_sim_event_t* e = (gh_sim_event_t*)ev;
  if (e->prev) e->prev->next = e->next; else f->events = e->next;
  if (e->next) e->next->prev = e->prev;
  free(e);
  return GH_OK;
}

const gh_frames_ops_t _gh_frames_sim = {
    .name = "sim",
    .open = gh_sim_open,
    .close = gh_sim_close,
    .device_free = gh_sim_device_free,
    .create = gh_sim_create,
    .release = gh_sim_release,
    .map = gh_sim_map,
    .unmap = gh_sim_unmap,
    .stream_create = gh_sim_stream_create,
    .stream_destroy = gh_sim_stream_destroy,
    .copy = gh_sim_copy,
    .stream_sync = gh_sim_stream_sync,
    .event_record = gh_sim_event_record,
    .event_query = gh_sim_event_query,
    .event_sync = gh_sim_event_sync,
    .event_destroy = gh_sim_event_destroy,
};

void _gh_frames_sim_configure(gh_frames_t* f, uint32_t lag, size_t device_frames, size_t host_frames) {
  if (!f) return;
  f->lag = lag;
  for (gh_sim_event_t* e = f->events; e; e = e->next)  /* events in flight take the new lag too */
    if (e->left > lag) e->left = lag;
  f->tier[GH_TIER_DEVICE].limit = device_frames;
  f->tier[GH_TIER_HOST].limit = host_frames;
}

size_t _gh_frames_sim_live(gh_frames_t* f, gh_tier_t tier) {
  return f && gh_sim_tier_ok(tier) ? f->tier[tier].live : 0;
}
size_t _gh_frames_sim_live_total(void) { return __atomic_load_n(&gh_sim_live_all, __ATOMIC_RELAXED); }
size_t _gh_frames_sim_leaked_total(void) { return __atomic_load_n(&gh_sim_leaked_all, __ATOMIC_RELAXED); }
