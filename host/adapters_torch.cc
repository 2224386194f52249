/* gpuheap: PyTorch's allocation entry point, failing the way PyTorch expects.
 *
 * PyTorch's CUDAPluggableAllocator makes a tensor of whatever pointer its
 * allocation function returns and does not look at it: a NULL for a
 * non-empty tensor is a tensor at address 0, and the first kernel that
 * touches it faults (an illegal-address error that ends the process's
 * CUDA context). What it does handle is a C++ exception thrown by that
 * function: it reaches Python as a RuntimeError carrying the exception's
 * message, and the program may catch it and go on. So PyTorch is given
 * gh_torch_alloc_or_throw, which is gh_torch_alloc that throws where that
 * one returns NULL for a non-empty request.
 *
 * The exception derives from std::bad_alloc (an allocation that failed);
 * its message starts with "gpuheap: out of memory" for a request neither
 * tier could hold and with "gpuheap:" followed by the error's name
 * otherwise, then gh_last_error_detail().
 *
 * CUDA graphs. PyTorch's torch.cuda.graph tells its allocator when a
 * capture begins to allocate to a pool and when it ends (a pluggable
 * allocator hears of it through the callbacks set_begin_allocate_to_pool,
 * set_end_allocate_to_pool_fn and set_release_pool, which
 * gpuheap.torch.enable installs), and when the graph that used the pool is
 * gone. Memory handed out during a capture is used by every replay of the
 * graph, on whatever stream it is replayed, long after PyTorch has freed
 * it at the capture's end: so it must not go back to the manager until
 * the pool is released. A graph pool here:
 *   - serves the allocations on a stream that one of its captures' filters
 *     (PyTorch's: "this stream captures my graph") accepts, between begin
 *     and end; another capturing stream is refused as before
 *     (_gh_torch_alloc);
 *   - makes its blocks with _gh_torch_pool_block: each a tensor pinned on
 *     the device (no eviction may copy memory a replay uses), ready for
 *     any stream;
 *   - keeps a block PyTorch frees, and gives it again to a later
 *     allocation of the same stream (a size from the request to a quarter
 *     more) in the same capture, and after its end to anything of the
 *     pool (a later capture, a warm-up) if the capture made or was given
 *     it and freed it before its end (a temporary, as PyTorch's pools
 *     share them; blocks only warm-ups used likewise). A block the program
 *     held when a capture began or ended (an input, the trees' input
 *     copies among them, or an output) belongs to that capture's graph,
 *     which reads or writes it at every replay: no other capture and no
 *     warm-up gets it (but in a pool with no warm-up, such a block that a
 *     later capture frees, a forward's saved activation freed by its
 *     backward, is that capture's temporary from then on), though
 *     PyTorch's own pools share such memory too and rely on CUDA graph
 *     trees to know when a graph's outputs are dead (they did not, once:
 *     bench/results/logs-compile/ run 9, where another function's
 *     recording took the memory of a replayed forward's saved input and
 *     the backward read the other graph's output there; and giving an
 *     output the program dropped after its capture to later captures, as
 *     PyTorch's pools do, made that program's gradients wrong again:
 *     bench/results/logs-visit38/, the trees' replays make storages over
 *     such blocks that no allocator sees).
 *     GPUHEAP_POOL_SHARE=0 keeps temporaries with their graph as well. A
 *     block record_stream'ed on another stream is kept and never given
 *     again;
 *   - at its release, gives its freed blocks back to the manager after a
 *     wait for the device (_gh_torch_pool_give_back), and the rest as
 *     PyTorch frees them (graph outputs the program still holds). Blocks
 *     are given back only while no capture is underway (a wait for the
 *     device would end it): until then they are kept as retired, and given
 *     back at the next release, free or empty_cache with none underway, or
 *     before an allocation that the budget refuses is tried again.
 *   - lives while PyTorch's uses of it last: each begin (a capture, or a
 *     warm-up of CUDA graph trees allocating to the pool with no capture)
 *     takes one, each release gives one back; the pool is released when
 *     none is left (a graph that shares it still replays its blocks);
 *   - for CUDA graph trees' checkpoint restore (torch.compile's
 *     reduce-overhead; python/gpuheap/torch.py, _GraphTrees), keeps blocks
 *     "adopted": live again for storages PyTorch made over a replay's
 *     output without a deleter, until gpuheap's Python side gives them up.
 * While a capture is underway the manager leaves capturing streams alone
 * (_gh_tmgr_capture_scope; host/TENSORS.md, "CUDA graphs").
 *
 * cacheInfo. cuDNN's benchmark mode asks PyTorch's allocator for its
 * largest free block, and the pluggable allocator throws there, with no
 * callback to set. gh_torch_serve_cache_info gives that allocator object a
 * copy of its table of virtual functions with gpuheap's cacheInfo
 * (_gh_vtable_swap), found and checked by the exported symbols of
 * PyTorch's libraries, or changes nothing.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "adapters_torch.h"
#include "internal.h"

namespace {

class gh_alloc_error final : public std::bad_alloc {
 public:
  explicit gh_alloc_error(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

/* ---------------------------------------------------------------- graph pools */

/* Environment switch `name`: on unless it starts with '0', `dflt` when
 * unset or empty. */
bool gh_env_on(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  return v == nullptr || v[0] == '\0' ? dflt : v[0] != '0';
}

/* GPUHEAP_POOL_LOG=1: each graph pool event as a line on stderr (blocks
 * made, given again, freed, record_stream'ed, adopted and given up; begins,
 * ends and releases), for finding which allocation took memory a graph
 * still uses. Off by default. */
bool gh_pool_logging() {
  static const bool on = gh_env_on("GPUHEAP_POOL_LOG", false);
  return on;
}
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void gh_pool_log(const char* fmt, ...) {
  if (!gh_pool_logging()) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "gpuheap pool: %s\n", line);
}

struct gh_block {
  size_t size;          /* bytes asked for when it was made */
  gh_stream_t stream;   /* the stream it was made for: given again only to that stream */
  gh_mempool_id pool;
  bool held;            /* allocated by PyTorch and not freed */
  bool adopted;         /* held by a storage PyTorch made without a deleter (gh_torch_pool_adopt) */
  bool freed;           /* neither: kept by its pool (for reuse unless shared) */
  bool shared;          /* record_stream'ed on another stream: never given again */
  uint64_t owner;       /* the capture whose graph uses it (its serial), 0 none: given again only in it */
  bool kept;            /* held by the program when a capture of its pool began or ended (an input or an
                           output of that graph): never shared with another capture */
};

/* One begin of a pool: its filter, a serial, whether a capture was seen. */
struct gh_begin {
  gh_capture_filter filter;
  uint64_t serial;
  bool captured;
};

struct gh_pool {
  int active = 0;                            /* captures allocating to it now */
  std::vector<gh_begin> begins;              /* theirs, oldest first */
  std::multimap<std::pair<uintptr_t, size_t>, void*> reusable; /* (stream, size) -> freed block */
  size_t blocks = 0;                         /* blocks it owns, freed or not */
  int uses = 0;                              /* begins not yet released (PyTorch's use count: a graph's
                                                capture holds one until the graph goes) */
  bool released = false;                     /* uses fell to 0 */
  bool warmed = false;                       /* a begin allocated with no capture underway (CUDA graph
                                                trees' warm-ups and input copies): no block kept by
                                                one graph becomes another's temporary */
};

struct gh_pools {
  std::mutex mu;
  std::map<gh_mempool_id, gh_pool> pools;
  std::unordered_map<void*, gh_block> blocks;
  std::vector<void*> retired;                /* blocks of released pools, to give back */
  std::atomic<int> active{0};                /* captures underway (begin without end) */
  std::atomic<size_t> n_blocks{0};           /* blocks.size() */
  std::atomic<size_t> n_retired{0};          /* retired.size() */
  uint64_t serial = 0;                       /* of the last begin */
};

/* Never destroyed: PyTorch may free tensors after static destructors ran. */
gh_pools& gh_pools_get() {
  static gh_pools* p = new gh_pools;
  return *p;
}

/* Give the retired blocks back where no capture is underway; how many
 * were. When the wait for the device fails they stay retired (the detail
 * recorded): none was touched. */
size_t gh_give_back_retired() {
  gh_pools& P = gh_pools_get();
  if (P.active.load(std::memory_order_acquire) > 0 || P.n_retired.load(std::memory_order_acquire) == 0) return 0;
  std::vector<void*> v;
  {
    std::lock_guard<std::mutex> g(P.mu);
    v.swap(P.retired);
    P.n_retired.store(0, std::memory_order_release);
  }
  if (v.empty()) return 0;
  size_t given = 0;
  (void)_gh_torch_pool_give_back(v.data(), v.size(), &given);  /* (a failure's detail is recorded) */
  if (given == 0) {
    std::lock_guard<std::mutex> g(P.mu);
    P.retired.insert(P.retired.end(), v.begin(), v.end());
    P.n_retired.store(P.retired.size(), std::memory_order_release);
  }
  return given;
}

/* Under P.mu: block b (at it) leaves its pool for the retired list; the
 * pool goes when it owns no more. */
void gh_retire(gh_pools& P, std::unordered_map<void*, gh_block>::iterator it) {
  auto pit = P.pools.find(it->second.pool);
  P.retired.push_back(it->first);
  P.blocks.erase(it);
  P.n_blocks.store(P.blocks.size(), std::memory_order_release);
  P.n_retired.store(P.retired.size(), std::memory_order_release);
  if (pit != P.pools.end() && --pit->second.blocks == 0 && pit->second.released) P.pools.erase(pit);
}

/* Under P.mu: block b (at it), neither held nor adopted any more, is kept
 * by its pool for reuse, or retired when the pool is released (true then:
 * the caller gives the retired blocks back once P.mu is dropped). */
bool gh_block_done(gh_pools& P, std::unordered_map<void*, gh_block>::iterator it) {
  gh_block& b = it->second;
  auto pit = P.pools.find(b.pool);
  if (pit == P.pools.end() || pit->second.released) {
    gh_retire(P, it);
    return true;
  }
  b.freed = true;
  bool open = b.owner == 0;
  for (const auto& g : pit->second.begins) open = open || g.serial == b.owner;
  if (!b.shared && open) pit->second.reusable.insert({{(uintptr_t)b.stream, b.size}, it->first});
  return false;
}

/* Under P.mu: the blocks of pool `id` that the program holds now and no
 * other graph owns become the graph of capture `serial`'s for good (its
 * input copies among them: the graph reads them at every replay). */
void gh_own_held(gh_pools& P, const gh_mempool_id& id, uint64_t serial) {
  for (auto& kv : P.blocks) {
    gh_block& b = kv.second;
    if (b.pool != id || !(b.held || b.adopted) || (b.owner != 0 && b.owner != serial)) continue;
    b.owner = serial;
    b.kept = true;
  }
}

/* A block a capture made or was given and freed before its end (memory
 * the graph uses only while it replays: a temporary) may go to a later
 * capture of its pool or a warm-up, as PyTorch's own pools share it; a
 * block the program held when a capture began or ended (an input or an
 * output) stays that graph's. GPUHEAP_POOL_SHARE=0: every block a capture
 * used stays its graph's (the pools then hold the sum of their graphs'
 * temporaries: bench/results/logs-graph-pools/). */
bool gh_pool_share() {
  static const bool on = gh_env_on("GPUHEAP_POOL_SHARE", true);
  return on;
}

/* Under P.mu: begin g of pool `id` has seen its capture. */
void gh_capture_seen(gh_pools& P, const gh_mempool_id& id, gh_begin& g) {
  if (g.captured) return;
  g.captured = true;
  gh_own_held(P, id, g.serial);
}

/* Under P.mu: the begin of `pool` whose filter takes `stream`, or null. */
gh_begin* gh_begin_for(gh_pool& pool, gh_stream_t stream) {
  for (auto& b : pool.begins)
    if (b.filter && b.filter(stream)) return &b;
  return nullptr;
}

/* Whether `stream` is capturing a graph now (as if it were, when the
 * question fails: ownership is the safe side). */
bool gh_stream_capturing(gh_stream_t stream) {
  gh_tmgr_t* tm = gh_tmgr_global();
  int capturing = 1;
  if (!tm || _gh_tmgr_stream_capturing(tm, stream, &capturing) != GH_OK) return true;
  return capturing != 0;
}

/* Under P.mu: freed block p taken out of its pool's reusable ones. */
void gh_unreuse(gh_pool& pool, const gh_block& b, void* p) {
  auto range = pool.reusable.equal_range({(uintptr_t)b.stream, b.size});
  for (auto r = range.first; r != range.second; ++r)
    if (r->second == p) {
      pool.reusable.erase(r);
      return;
    }
}

/* An allocation while a capture is underway: *served when a pool takes it
 * (its result returned then). */
int gh_pool_alloc(ptrdiff_t size, int device, gh_stream_t stream, bool* served, void** out) {
  gh_pools& P = gh_pools_get();
  const size_t want = (size_t)size;
  gh_mempool_id id{};
  uint64_t owner = 0;
  {
    std::lock_guard<std::mutex> g(P.mu);
    auto pit = P.pools.begin();
    gh_begin* mine = nullptr;
    while (pit != P.pools.end() && !(mine = gh_begin_for(pit->second, stream))) ++pit;
    if (!mine) return GH_OK;  /* not a pool's: the plain path */
    *served = true;
    id = pit->first;
    gh_pool& pool = pit->second;
    const bool capturing = gh_stream_capturing(stream);
    if (capturing) {
      gh_capture_seen(P, id, *mine);
      owner = mine->serial;
    } else {
      pool.warmed = true;
    }
    /* A freed block of this stream and size that no graph owns, or this
     * capture's own. */
    auto fits = [&](decltype(pool.reusable)::iterator r) {
      return r != pool.reusable.end() && r->first.first == (uintptr_t)stream && r->first.second - want <= want / 4;
    };
    auto r = pool.reusable.lower_bound({(uintptr_t)stream, want});
    for (; fits(r); ++r) {
      const uint64_t o = P.blocks[r->second].owner;
      if (o == 0 || (capturing && o == owner)) break;
    }
    if (fits(r)) {
      *out = r->second;
      gh_block& b = P.blocks[r->second];
      b.freed = false;
      b.held = true;
      if (capturing) b.owner = owner;
      pool.reusable.erase(r);
      gh_pool_log("again %p %zu (block %zu) stream %p pool %llu,%llu%s", *out, want, b.size, stream,
                  (unsigned long long)id.first, (unsigned long long)id.second, capturing ? "" : " (no capture)");
      return GH_OK;
    }
  }
  void* p = nullptr;
  const int rc = _gh_torch_pool_block(size, device, &p);
  if (rc != GH_OK) return rc;
  std::lock_guard<std::mutex> g(P.mu);
  P.blocks[p] = gh_block{want, stream, id, true, false, false, false, owner, false};
  P.n_blocks.store(P.blocks.size(), std::memory_order_release);
  P.pools[id].blocks++;
  *out = p;
  gh_pool_log("new %p %zu stream %p pool %llu,%llu owner %llu", p, want, stream, (unsigned long long)id.first,
              (unsigned long long)id.second, (unsigned long long)owner);
  return GH_OK;
}

/* A pool's block freed by PyTorch: kept, or retired once its pool is
 * released. false for memory of no pool. */
bool gh_pool_free(void* ptr, gh_stream_t stream) {
  gh_pools& P = gh_pools_get();
  bool retired = false;
  {
    std::lock_guard<std::mutex> g(P.mu);
    auto it = P.blocks.find(ptr);
    if (it == P.blocks.end()) return false;
    if (!it->second.held) {
      _gh_error(GH_ERR_DOUBLE_FREE, "gh_torch_free: %p, a CUDA graph pool's block, freed already", ptr);
      return true;
    }
    it->second.held = false;
    /* Freed in a capture of its pool: used by that graph (read before the
     * free, at every replay). */
    auto pit = P.pools.find(it->second.pool);
    gh_begin* b = pit != P.pools.end() ? gh_begin_for(pit->second, stream) : nullptr;
    /* (this pool's capture or another's; asked only where it matters: a
     * begin of this pool takes the stream, or the log says it) */
    const bool capturing = (b || gh_pool_logging()) && gh_stream_capturing(stream);
    if (b && capturing) {
      gh_capture_seen(P, it->second.pool, *b);
      gh_block& k = it->second;
      if (k.owner == 0) {
        k.owner = b->serial;
      } else if (k.owner != b->serial && k.kept && !pit->second.warmed && gh_pool_share()) {
        /* Kept by an earlier graph (its output, say a forward's saved
         * activation) and dead in this one (the backward that reads it):
         * this capture's temporary from here, as PyTorch's pools have it,
         * the order of replays being the order of captures. Not where CUDA
         * graph trees warm up (run 9's block freed just so). */
        k.owner = b->serial;
        k.kept = false;
        gh_pool_log("free %p: dead in a later capture, its temporary", ptr);
      }
    }
    gh_pool_log("free %p%s%s", ptr, it->second.adopted ? " (adopted: kept)" : it->second.shared ? " (shared)" : "",
                capturing ? " (capture)" : " (no capture)");
    if (!it->second.adopted) retired = gh_block_done(P, it);  /* else its storage keeps it */
  }
  if (retired) gh_give_back_retired();
  return true;
}

}  // namespace

extern "C" void* gh_torch_alloc_or_throw(ptrdiff_t size, int device, gh_stream_t stream) {
  gh_pools& P = gh_pools_get();
  void* p = nullptr;
  bool served = false;
  int err = GH_OK;
  struct hist_scope {  /* the tag taken before any lock (its function may take Python's), cleared after */
    int tagged;
    ~hist_scope() { _gh_torch_hist_end(tagged); }
  } hist_scope_{_gh_torch_hist_begin(size)};
  if (size > 0 && P.active.load(std::memory_order_acquire) > 0) err = gh_pool_alloc(size, device, stream, &served, &p);
  if (!served) {
    err = _gh_torch_alloc(size, device, stream, &p);
    if (err == GH_ERR_BUDGET && gh_give_back_retired() > 0) err = _gh_torch_alloc(size, device, stream, &p);
    if (err == GH_OK && size > 0 && P.active.load(std::memory_order_acquire) > 0)
      gh_pool_log("plain %p %zd stream %p (a pool is allocating: not this stream's)", p, (ssize_t)size, stream);
  }
  if (err == GH_OK) return p;
  std::string what = err == GH_ERR_BUDGET ? "gpuheap: out of memory" : std::string("gpuheap: ") + gh_err_name(err);
  what += " (" + std::to_string(static_cast<long long>(size)) + " bytes on device " + std::to_string(device) + ")";
  const char* detail = gh_last_error_detail();
  if (detail != nullptr && detail[0] != '\0') what += std::string(": ") + detail;
  throw gh_alloc_error(std::move(what));
}

extern "C" void gh_torch_free(void* ptr, ptrdiff_t size, int device, gh_stream_t stream) {
  (void)size, (void)device;
  if (!ptr) return;
  if (gh_pools_get().n_blocks.load(std::memory_order_acquire) > 0 && gh_pool_free(ptr, stream)) return;
  _gh_torch_free(ptr, stream);
}

extern "C" void gh_torch_record_stream(void* ptr, gh_stream_t stream) {
  if (!ptr) return;
  gh_pools& P = gh_pools_get();
  if (P.n_blocks.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> g(P.mu);
    auto it = P.blocks.find(ptr);
    if (it != P.blocks.end()) {
      if (stream != it->second.stream) it->second.shared = true;
      gh_pool_log("record_stream %p stream %p%s", ptr, stream, it->second.shared ? " (shared)" : "");
      return;
    }
  }
  _gh_torch_record_stream(ptr, stream);
}

extern "C" void gh_torch_empty_cache(void) {
  gh_give_back_retired();
  _gh_torch_empty_cache();
}

extern "C" void gh_torch_set_memory_fraction(double fraction, int device) {
  const int rc = _gh_torch_set_memory_fraction(fraction, device);
  if (rc != GH_OK)
    throw std::runtime_error(std::string("gpuheap: ") + gh_err_name(rc) + ": " + gh_last_error_detail());
}

extern "C" void gh_torch_begin_allocate_to_pool(int device, gh_mempool_id id, gh_capture_filter filter) {
  gh_tmgr_t* tm = gh_tmgr_global();
  if (!tm) throw std::runtime_error(std::string("gpuheap: no manager for a CUDA graph's pool: ") + gh_last_error_detail());
  if (device != _gh_tmgr_device(tm)) return;  /* its allocations are refused (another device) */
  if (_gh_tmgr_capture_scope(tm, +1) != GH_OK)
    throw std::runtime_error(std::string("gpuheap: a CUDA graph's pool: ") + gh_last_error_detail());
  gh_pools& P = gh_pools_get();
  std::lock_guard<std::mutex> g(P.mu);
  gh_pool& pool = P.pools[id];
  pool.active++;
  pool.uses++;
  pool.released = false;
  pool.begins.push_back(gh_begin{std::move(filter), ++P.serial, false});
  P.active.fetch_add(1, std::memory_order_acq_rel);
  gh_pool_log("begin pool %llu,%llu (active %d, uses %d)", (unsigned long long)id.first, (unsigned long long)id.second,
              pool.active, pool.uses);
}

extern "C" void gh_torch_end_allocate_to_pool(int device, gh_mempool_id id) {
  (void)device;
  gh_pools& P = gh_pools_get();
  {
    std::lock_guard<std::mutex> g(P.mu);
    auto pit = P.pools.find(id);
    if (pit == P.pools.end() || pit->second.active == 0) return;  /* begun for another device */
    gh_pool& pool = pit->second;
    pool.active--;
    /* A capture's end: what the program holds now (outputs) is its graph's
     * too; its freed blocks it did not keep (temporaries) go to anything of
     * the pool, the others (or, with GPUHEAP_POOL_SHARE=0, all) to nothing
     * more. */
    gh_begin done = std::move(pool.begins.front());
    pool.begins.erase(pool.begins.begin());
    if (done.captured) {
      gh_own_held(P, id, done.serial);
      const bool share = gh_pool_share();
      for (auto r = pool.reusable.begin(); r != pool.reusable.end();) {
        gh_block& b = P.blocks[r->second];
        if (b.owner != done.serial) {
          ++r;
        } else if (share && !b.kept) {
          b.owner = 0;
          ++r;
        } else {
          r = pool.reusable.erase(r);
        }
      }
    }
    P.active.fetch_sub(1, std::memory_order_acq_rel);
    gh_pool_log("end pool %llu,%llu (active %d)", (unsigned long long)id.first, (unsigned long long)id.second,
                pool.active);
  }
  gh_tmgr_t* tm = gh_tmgr_global();
  if (tm) _gh_tmgr_capture_scope(tm, -1);
}

extern "C" void gh_torch_release_pool(int device, gh_mempool_id id) {
  (void)device;
  gh_pools& P = gh_pools_get();
  {
    std::lock_guard<std::mutex> g(P.mu);
    auto pit = P.pools.find(id);
    if (pit == P.pools.end()) return;
    gh_pool_log("release pool %llu,%llu (uses %d)", (unsigned long long)id.first, (unsigned long long)id.second,
                pit->second.uses);
    if (pit->second.uses > 1) {  /* another graph (or warm-up) still uses it */
      pit->second.uses--;
      return;
    }
    pit->second.uses = 0;
    pit->second.released = true;
    pit->second.reusable.clear();
    std::vector<std::unordered_map<void*, gh_block>::iterator> freed;
    for (auto it = P.blocks.begin(); it != P.blocks.end(); ++it)
      if (it->second.pool == id && it->second.freed) freed.push_back(it);
    for (auto it : freed) gh_retire(P, it);  /* (the last one may take the pool with it) */
    pit = P.pools.find(id);
    if (pit != P.pools.end() && pit->second.blocks == 0) P.pools.erase(pit);
  }
  gh_give_back_retired();
}

extern "C" void gh_torch_pool_counts(size_t* pools, size_t* blocks, size_t* freed, size_t* retired) {
  gh_pools& P = gh_pools_get();
  std::lock_guard<std::mutex> g(P.mu);
  size_t f = 0;
  for (const auto& kv : P.blocks) f += kv.second.freed;
  if (pools) *pools = P.pools.size();
  if (blocks) *blocks = P.blocks.size();
  if (freed) *freed = f;
  if (retired) *retired = P.retired.size();
}

/* ---------------------------------------------------------------- graph trees */

namespace {
int gh_block_state(const gh_block& b) {
  return b.freed ? GH_POOL_BLOCK_FREED : b.adopted ? GH_POOL_BLOCK_ADOPTED : GH_POOL_BLOCK_LIVE;
}

/* The blocks of pool *only (every pool's when null), up to cap of them into
 * ptrs, pools (each one's id, its two halves) and states, any of them
 * null; how many there are. */
size_t gh_list_blocks(const gh_mempool_id* only, uintptr_t* ptrs, unsigned long long* pools, int* states,
                      size_t cap) {
  gh_pools& P = gh_pools_get();
  std::lock_guard<std::mutex> g(P.mu);
  size_t n = 0;
  for (const auto& kv : P.blocks) {
    if (only && kv.second.pool != *only) continue;
    if (n < cap) {
      if (ptrs) ptrs[n] = (uintptr_t)kv.first;
      if (pools) {
        pools[2 * n] = kv.second.pool.first;
        pools[2 * n + 1] = kv.second.pool.second;
      }
      if (states) states[n] = gh_block_state(kv.second);
    }
    n++;
  }
  return n;
}
}  // namespace

extern "C" size_t gh_torch_pool_blocks(unsigned long long id0, unsigned long long id1, uintptr_t* ptrs, int* states,
                                       size_t cap) {
  const gh_mempool_id id{id0, id1};
  return gh_list_blocks(&id, ptrs, nullptr, states, cap);
}

extern "C" size_t gh_torch_pool_list(uintptr_t* ptrs, unsigned long long* pools, int* states, size_t cap) {
  return gh_list_blocks(nullptr, ptrs, pools, states, cap);
}

extern "C" int gh_torch_pool_block_state(const void* ptr) {
  gh_pools& P = gh_pools_get();
  std::lock_guard<std::mutex> g(P.mu);
  auto it = P.blocks.find(const_cast<void*>(ptr));
  return it == P.blocks.end() ? -1 : gh_block_state(it->second);
}

extern "C" int gh_torch_pool_adopt(unsigned long long id0, unsigned long long id1, const uintptr_t* ptrs, size_t n) {
  if (n > 0 && !ptrs) return _gh_error(GH_ERR_INVAL, "gh_torch_pool_adopt: %zu blocks and no array", n);
  gh_pools& P = gh_pools_get();
  const gh_mempool_id id{id0, id1};
  bool retired = false;
  {
    std::lock_guard<std::mutex> g(P.mu);
    auto pit = P.pools.find(id);
    /* Every block named must be a block of this pool. */
    for (size_t i = 0; i < n; i++) {
      auto it = P.blocks.find((void*)ptrs[i]);
      if (it == P.blocks.end() || it->second.pool != id)
        return _gh_error(GH_ERR_FOREIGN, "gh_torch_pool_adopt: %p is not a block of graph pool (%llu, %llu)",
                         (void*)ptrs[i], id0, id1);
    }
    std::unordered_map<void*, bool> named;
    for (size_t i = 0; i < n; i++) named[(void*)ptrs[i]] = true;
    /* Adopted before and not named now: their storages are gone. */
    std::vector<std::unordered_map<void*, gh_block>::iterator> done;
    for (auto it = P.blocks.begin(); it != P.blocks.end(); ++it)
      if (it->second.pool == id && it->second.adopted && !named.count(it->first)) done.push_back(it);
    for (auto it : done) {
      it->second.adopted = false;
      gh_pool_log("adopt: %p given up%s", it->first, it->second.held ? " (held)" : "");
      if (!it->second.held) retired |= gh_block_done(P, it);
    }
    pit = P.pools.find(id);
    for (size_t i = 0; i < n; i++) {
      gh_block& b = P.blocks[(void*)ptrs[i]];
      gh_pool_log("adopt: %p (%s)", (void*)ptrs[i], b.freed ? "freed" : b.adopted ? "adopted" : b.held ? "held" : "?");
      if (b.freed) {
        if (pit != P.pools.end() && !b.shared) gh_unreuse(pit->second, b, (void*)ptrs[i]);
        b.freed = false;
      }
      b.adopted = true;
    }
  }
  if (retired) gh_give_back_retired();
  return GH_OK;
}

extern "C" int gh_torch_pool_unadopt(const void* ptr) {
  gh_pools& P = gh_pools_get();
  bool retired = false;
  {
    std::lock_guard<std::mutex> g(P.mu);
    auto it = P.blocks.find(const_cast<void*>(ptr));
    if (it == P.blocks.end() || !it->second.adopted)
      return _gh_error(GH_ERR_INVAL, "gh_torch_pool_unadopt: %p is not an adopted block of a graph pool", ptr);
    it->second.adopted = false;
    gh_pool_log("unadopt %p%s", ptr, it->second.held ? " (held)" : "");
    if (!it->second.held) retired = gh_block_done(P, it);
  }
  if (retired) gh_give_back_retired();
  return GH_OK;
}

/* ---------------------------------------------------------------- cacheInfo */

extern "C" int _gh_vtable_swap(void* obj, void* const* vtable, size_t entries, const void* orig, const void* repl) {
  if (!obj || !vtable || !orig || !repl || entries < 3)
    return _gh_error(GH_ERR_INVAL, "_gh_vtable_swap: NULL arguments or a table of %zu entries", entries);
  static std::mutex mu;
  static std::vector<void**>* copies = new std::vector<void**>;  /* ours, kept for the life of the process */
  std::lock_guard<std::mutex> g(mu);
  size_t slot = 0, found = 0;
  for (size_t k = 2; k < entries; k++)
    if (vtable[k] == orig) slot = k, found++;
  if (found != 1)
    return _gh_error(GH_ERR_UNSUPPORTED, "_gh_vtable_swap: the function is %zu times in the table (once expected)", found);
  void* const* now = *reinterpret_cast<void* const* const*>(obj);
  if (now != vtable + 2) {
    for (void** c : *copies)
      if (now == c + 2 && c[slot] == repl) return GH_OK;  /* swapped already */
    return _gh_error(GH_ERR_UNSUPPORTED, "_gh_vtable_swap: the object's table of virtual functions is not the one named");
  }
  void** copy = new (std::nothrow) void*[entries];
  if (!copy) return _gh_error(GH_ERR_NOMEM, "_gh_vtable_swap: %zu entries", entries);
  try {
    copies->push_back(copy);
  } catch (const std::bad_alloc&) {
    delete[] copy;
    return _gh_error(GH_ERR_NOMEM, "_gh_vtable_swap: the list of copies");
  }
  std::memcpy(copy, vtable, entries * sizeof(void*));
  copy[slot] = const_cast<void*>(repl);
  reinterpret_cast<std::atomic<void**>*>(obj)->store(copy + 2, std::memory_order_release);
  return GH_OK;
}

namespace {

/* CUDAPluggableAllocator::cacheInfo(c10::DeviceIndex, size_t*), as its
 * table calls it: the object, then the arguments. */
void gh_cache_info_entry(void* self, int8_t device, size_t* largest) {
  (void)self;
  if (largest) *largest = gh_torch_cache_info(device);
}

void* gh_torch_sym(const char* lib, const char* name) {
  void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);  /* loaded by PyTorch already, or nothing */
  if (!h) return nullptr;
  void* s = dlsym(h, name);
  dlclose(h);  /* (drops the reference RTLD_NOLOAD took; PyTorch keeps it loaded) */
  return s;
}

}  // namespace

extern "C" int gh_torch_serve_cache_info(void) {
  /* c10::cuda::CUDACachingAllocator::allocator (an std::atomic<CUDAAllocator*>),
   * torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator's table of
   * virtual functions and its cacheInfo(signed char, unsigned long*). */
  void* current = gh_torch_sym("libc10_cuda.so", "_ZN3c104cuda20CUDACachingAllocator9allocatorE");
  void* table = gh_torch_sym("libtorch_cuda.so", "_ZTVN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocatorE");
  void* orig = gh_torch_sym("libtorch_cuda.so", "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator9cacheInfoEaPm");
  if (!current || !table || !orig)
    return _gh_error(GH_ERR_UNSUPPORTED, "gh_torch_serve_cache_info: PyTorch's CUDA libraries are not loaded or lack "
                                         "the symbols of its pluggable allocator");
  Dl_info info;
  void* extra = nullptr;
  const ElfW(Sym)* sym = nullptr;
  if (dladdr1(table, &info, &extra, RTLD_DL_SYMENT)) sym = static_cast<const ElfW(Sym)*>(extra);
  if (!sym || sym->st_size < 3 * sizeof(void*))
    return _gh_error(GH_ERR_UNSUPPORTED, "gh_torch_serve_cache_info: the size of the pluggable allocator's table");
  void* obj = reinterpret_cast<std::atomic<void*>*>(current)->load(std::memory_order_acquire);
  if (!obj) return _gh_error(GH_ERR_UNSUPPORTED, "gh_torch_serve_cache_info: PyTorch has no current CUDA allocator");
  return _gh_vtable_swap(obj, static_cast<void* const*>(table), sym->st_size / sizeof(void*), orig,
                         reinterpret_cast<const void*>(&gh_cache_info_entry));
}
