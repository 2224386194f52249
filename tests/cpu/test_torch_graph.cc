/* PyTorch's CUDA graph pools on gpuheap (host/adapters_torch.cc), on the
 * simulated frames, whose stream 0x1000 reads as capturing while the test
 * says so and which counts every operation made on it meanwhile:
 *   - without a capture scope, the manager's flush of a free does touch a
 *     capturing stream (what the scope is for: the check can fail);
 *   - a capture into a pool, with the device budget spent so that its
 *     blocks evict tensors (one of them used on the capturing stream, one
 *     freed there just before): no operation on the capturing stream; its
 *     blocks pinned on the device; a block freed in the capture given again
 *     to the next request of its size on its stream, not one
 *     record_stream'ed elsewhere; plain allocations on other streams go on;
 *     the evicted tensors keep their bytes;
 *   - a capture whose pool's filter does not take the stream is refused;
 *     one past both budgets throws and keeps nothing;
 *   - release: the freed blocks go back to the manager, the live ones as
 *     they are freed; blocks retired while another capture is underway wait
 *     for its end (gh_torch_empty_cache gives them back, and so does a
 *     request the budgets refuse before it is tried again); a give-back
 *     whose wait for the device fails keeps them; a pool block freed twice
 *     is reported, not freed again;
 *   - a pool shared by two graphs and a warm-up (no capture) stays until
 *     its last use is released (PyTorch's use count); a block a capture
 *     used is given again in that capture only, never to another graph's
 *     capture or a warm-up, and neither is a block the program held while
 *     a capture ran (the trees' input copies); a warm-up's blocks are; in
 *     a pool with no warm-up, a block a graph kept that a later capture
 *     frees is that capture's temporary (make_graphed_callables' saved
 *     activations), in one with a warm-up still its graph's;
 *   - CUDA graph trees' checkpoint restore: blocks adopted (kept from reuse),
 *     given up (reused), listed; adopting a foreign block refused; a block
 *     held and adopted freed once both let it go; an adopted block outlives
 *     its pool's release until given up;
 *   - at the end nothing is pinned or leaked and the manager's accounts hold. */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "gpuheap.h"
#include "../test_sim.h"
#include "../test_util.h"
#include "../../host/adapters_torch.h"
#include "../../host/tensor_internal.h"


static const size_t MiB = (size_t)1 << 20;
static const gh_stream_t CAP = (gh_stream_t)(uintptr_t)0x1000;   /* the capture's stream */
static const gh_stream_t OTHER = (gh_stream_t)(uintptr_t)0x2000; /* the program's other stream */
static gh_tmgr_t* tm = nullptr;

static void* alloc(size_t bytes, gh_stream_t s) {
  try {
    return gh_torch_alloc_or_throw((ptrdiff_t)bytes, 0, s);
  } catch (const std::bad_alloc& e) {
    std::fprintf(stderr, "unexpected: %s\n", e.what());
    gh_test_failures++;
    return nullptr;
  }
}

static std::string refused(size_t bytes, gh_stream_t s) {
  try {
    void* p = gh_torch_alloc_or_throw((ptrdiff_t)bytes, 0, s);
    gh_torch_free(p, (ptrdiff_t)bytes, 0, s);
  } catch (const std::bad_alloc& e) {
    return e.what();
  }
  return "";
}

static uint64_t touches() {
  uint64_t n = 0;
  CHECK(_gh_tmgr_sim_capture_touches(tm, &n) == GH_OK);
  return n;
}

struct counts {
  size_t pools, blocks, freed, retired;
};
static counts pool_counts() {
  counts c{};
  gh_torch_pool_counts(&c.pools, &c.blocks, &c.freed, &c.retired);
  return c;
}

static gh_tmgr_stats_t stats() {
  gh_tmgr_stats_t s;
  CHECK(gh_tmgr_stats(tm, &s) == GH_OK);
  return s;
}

static gh_tier_t tier(const void* p) {
  gh_tier_t t = GH_TIER_NONE;
  CHECK(gh_tensor_tier(tm, p, &t) == GH_OK);
  return t;
}

static void fill(void* p, size_t bytes, int v) { std::memset(p, v, bytes); }
static bool holds(const void* p, size_t bytes, int v) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < bytes; i += 4096)
    if (b[i] != (unsigned char)v) return false;
  return b[bytes - 1] == (unsigned char)v;
}

static const bool share = [] {              /* GPUHEAP_POOL_SHARE, as the library reads it */
  const char* v = std::getenv("GPUHEAP_POOL_SHARE");
  return v == nullptr || v[0] != '0';
}();
static bool capturing = false; /* what the filters read: the capture has begun on CAP */
static gh_capture_filter cap_filter() {
  return [](gh_stream_t s) { return capturing && s == CAP; };
}
static void capture_begin(gh_mempool_id id, gh_capture_filter f) {
  gh_torch_begin_allocate_to_pool(0, id, std::move(f)); /* PyTorch: before cudaStreamBeginCapture */
  CHECK(_gh_tmgr_sim_capture(tm, CAP) == GH_OK);
  capturing = true;
}
static void capture_end(gh_mempool_id id) {
  CHECK(_gh_tmgr_sim_capture(tm, nullptr) == GH_OK); /* cudaStreamEndCapture, then the end callback */
  capturing = false;
  gh_torch_end_allocate_to_pool(0, id);
}

/* A warm-up's begin (or end) of pool id: allocations of CAP routed to the
 * pool with no capture underway, as CUDA graph trees do. */
static void warm_up(gh_mempool_id id, bool begin) {
  if (begin)
    gh_torch_begin_allocate_to_pool(0, id, [](gh_stream_t s) { return s == CAP; });
  else
    gh_torch_end_allocate_to_pool(0, id);
}

/* A block of `bytes` made in a capture into pool a, freed while a capture
 * into pool b is underway, and pool a released then: retired, since no
 * wait for the device may run during a capture. The capture into b is
 * still underway on return. */
static void retire_during_capture(gh_mempool_id a, gh_mempool_id b, size_t bytes) {
  capture_begin(a, cap_filter());
  void* p = alloc(bytes, CAP);
  capture_end(a);
  capture_begin(b, cap_filter());
  gh_torch_free(p, (ptrdiff_t)bytes, 0, CAP);
  gh_torch_release_pool(0, a);
}

static int block_state(const void* p) { return gh_torch_pool_block_state(p); }

/* Two graphs into one pool, and a warm-up into it (allocations routed to
 * the pool with no capture, as CUDA graph trees do), then the trees'
 * checkpoint restore: blocks adopted and given up. */
static void shared_pool_and_adoption() {
  const gh_mempool_id gs{11, 0};
  capture_begin(gs, cap_filter());               /* graph 1 */
  void* p1 = alloc(2 * MiB, CAP);
  void* p2 = alloc(2 * MiB, CAP);
  gh_torch_free(p2, 2 * MiB, 0, CAP);            /* graph 1's temporary */
  void* p2b = alloc(2 * MiB, CAP);
  CHECK(p2b == p2);                              /* given again in its capture: same stream and size */
  gh_torch_free(p2b, 2 * MiB, 0, CAP);
  capture_end(gs);
  capture_begin(gs, cap_filter());               /* graph 2, the same pool */
  void* p3 = alloc(2 * MiB, CAP);
  CHECK(share ? p3 == p2 : p3 != p2);            /* graph 1's temporary, or (kept) graph 1's memory */
  CHECK(p3 != p1 && p3 != nullptr);              /* graph 1's output: never */
  const size_t nb = share ? 3 : 4;               /* p1, p2 (p3), w; or p3 apart */
  capture_end(gs);
  gh_torch_free(p3, 2 * MiB, 0, CAP);            /* graph 2's output, dropped: still graph 2's */
  /* A warm-up: the pool serves the thread's allocations, no capture underway. */
  gh_torch_begin_allocate_to_pool(0, gs, [](gh_stream_t s) { return s == CAP; });
  void* w = alloc(2 * MiB, CAP);
  CHECK(w != p2 && w != p3 && w != nullptr);     /* no graph's memory to a warm-up either */
  gh_torch_free(w, 2 * MiB, 0, CAP);
  void* w2 = alloc(2 * MiB, CAP);
  CHECK(w2 == w);                                /* a warm-up's own block: given again */
  gh_torch_free(w2, 2 * MiB, 0, CAP);
  gh_torch_end_allocate_to_pool(0, gs);
  gh_torch_release_pool(0, gs);                  /* the warm-up's use: the graphs still hold the pool */
  counts k = pool_counts();
  CHECK(k.blocks == nb && k.retired == 0);
  CHECK(block_state(p2) == GH_POOL_BLOCK_FREED && block_state(p1) == GH_POOL_BLOCK_LIVE);
  gh_torch_release_pool(0, gs);                  /* graph 1 goes: graph 2 still replays p3 */
  CHECK(pool_counts().blocks == nb && block_state(p2) == GH_POOL_BLOCK_FREED);
  CHECK(stats().pinned_tensors >= nb);

  /* The listing. */
  uintptr_t ptrs[8] = {};
  int states[8] = {};
  CHECK(gh_torch_pool_blocks(11, 0, ptrs, states, 8) == nb);
  CHECK(gh_torch_pool_blocks(11, 0, nullptr, nullptr, 0) == nb);
  CHECK(gh_torch_pool_blocks(12, 0, ptrs, states, 8) == 0);
  for (size_t i = 0; i < nb; i++)
    CHECK(states[i] == ((void*)ptrs[i] == p1 ? GH_POOL_BLOCK_LIVE : GH_POOL_BLOCK_FREED));
  /* Every pool's blocks at once, each with its pool. */
  const size_t all = gh_torch_pool_list(nullptr, nullptr, nullptr, 0);
  CHECK(all >= nb && all == pool_counts().blocks);
  std::vector<uintptr_t> lp(all);
  std::vector<unsigned long long> lid(2 * all);
  std::vector<int> lst(all);
  CHECK(gh_torch_pool_list(lp.data(), lid.data(), lst.data(), all) == all);
  size_t mine = 0;
  for (size_t i = 0; i < all; i++) {
    if (lid[2 * i] != 11 || lid[2 * i + 1] != 0) continue;
    mine++;
    CHECK(lst[i] == block_state((void*)lp[i]));
    CHECK(std::find(ptrs, ptrs + nb, lp[i]) != ptrs + nb);
  }
  CHECK(mine == nb);
  uintptr_t one = 0;
  CHECK(gh_torch_pool_list(&one, nullptr, nullptr, 1) == all && one != 0);  /* cap 1: the count all the same */

  /* Adoption: a replay's output over p2, held by a storage without a deleter. */
  const uintptr_t live_p1 = (uintptr_t)p1, out = (uintptr_t)p2, foreign = (uintptr_t)0x1234;
  CHECK(gh_torch_pool_adopt(11, 0, &foreign, 1) == GH_ERR_FOREIGN);
  CHECK(gh_torch_pool_adopt(12, 0, &out, 1) == GH_ERR_FOREIGN);        /* another pool's */
  CHECK(gh_torch_pool_adopt(11, 0, nullptr, 1) == GH_ERR_INVAL);
  CHECK(block_state(p2) == GH_POOL_BLOCK_FREED);                        /* nothing changed */
  CHECK(gh_torch_pool_adopt(11, 0, &out, 1) == GH_OK);
  CHECK(block_state(p2) == GH_POOL_BLOCK_ADOPTED);
  capture_begin(gs, cap_filter());               /* a new recording: p2 is not given */
  void* p4 = alloc(2 * MiB, CAP);
  CHECK(p4 == w);                                /* (the warm-up's block) */
  gh_torch_free(p4, 2 * MiB, 0, CAP);
  capture_end(gs);
  CHECK(gh_torch_pool_adopt(11, 0, &out, 1) == GH_OK);                 /* again: stays adopted */
  CHECK(block_state(p2) == GH_POOL_BLOCK_ADOPTED);
  CHECK(gh_torch_pool_adopt(11, 0, nullptr, 0) == GH_OK);             /* no longer named: freed */
  CHECK(block_state(p2) == GH_POOL_BLOCK_FREED);
  capture_begin(gs, cap_filter());
  void* p5 = alloc(2 * MiB, CAP);
  CHECK(share ? p5 == p4 : (p5 != p4 && p5 != p3));  /* p4 a temporary: shared, or kept by its graph */
  CHECK(p5 != p2 && p5 != nullptr);
  gh_torch_free(p5, 2 * MiB, 0, CAP);
  capture_end(gs);
  CHECK(gh_torch_pool_unadopt(p2) == GH_ERR_INVAL);                    /* not adopted */
  CHECK(gh_torch_pool_unadopt(p1) == GH_ERR_INVAL);
  /* A block held by a tensor and adopted too (a recording's output the
   * program still holds, replayed over): freed once both let it go. */
  CHECK(gh_torch_pool_adopt(11, 0, &live_p1, 1) == GH_OK);
  CHECK(block_state(p1) == GH_POOL_BLOCK_ADOPTED);
  CHECK(gh_torch_pool_adopt(11, 0, nullptr, 0) == GH_OK);
  CHECK(block_state(p1) == GH_POOL_BLOCK_LIVE);                        /* still the tensor's */
  CHECK(gh_torch_pool_adopt(11, 0, &live_p1, 1) == GH_OK);
  gh_torch_free(p1, 2 * MiB, 0, CAP);
  CHECK(block_state(p1) == GH_POOL_BLOCK_ADOPTED);                     /* the storage still holds it */
  gh_torch_free(p1, 2 * MiB, 0, CAP);                                  /* twice: reported */
  CHECK(std::strstr(gh_last_error_detail(), "freed already") != nullptr);
  CHECK(gh_torch_pool_unadopt(p1) == GH_OK);
  CHECK(block_state(p1) == GH_POOL_BLOCK_FREED);
  CHECK(block_state((void*)foreign) == -1);

  /* An adopted block outlives the pool's release, then goes back. */
  CHECK(gh_torch_pool_adopt(11, 0, &out, 1) == GH_OK);
  for (int i = 0; i < 2; i++) gh_torch_release_pool(0, gs); /* the recordings of p4 and p5 */
  CHECK(pool_counts().blocks == (share ? 3u : 5u)); /* graph 2 still holds the pool: p1-p5 kept (p4 is w;
                                                      shared: p3 is p2, p5 is p4) */
  gh_torch_release_pool(0, gs);                  /* graph 2 goes */
  k = pool_counts();
  std::printf("pool 11 released: %zu blocks (p2 adopted)\n", k.blocks);
  CHECK(k.blocks == 1 && block_state(p2) == GH_POOL_BLOCK_ADOPTED && block_state(p1) == -1);
  CHECK(gh_torch_pool_unadopt(p2) == GH_OK);     /* back to the manager at once, the pool with it */
  k = pool_counts();
  CHECK(block_state(p2) == -1 && k.pools == 0 && k.blocks == 0 && k.retired == 0);
}

/* Temporaries of one capture given to later ones (the default, as
 * PyTorch's pools share them) or kept by their graph
 * (GPUHEAP_POOL_SHARE=0); inputs and outputs stay their graph's either
 * way. */
static void shared_temporaries() {
  const gh_mempool_id gp{31, 0};
  auto warm = [&](bool begin) { warm_up(gp, begin); };
  warm(true);
  void* in = alloc(2 * MiB, CAP);                /* an input copy, made with no capture */
  warm(false);
  capture_begin(gp, cap_filter());               /* graph A */
  void* tmp_a = alloc(2 * MiB, CAP);
  void* out_a = alloc(2 * MiB, CAP);
  gh_torch_free(tmp_a, 2 * MiB, 0, CAP);         /* A's temporary */
  capture_end(gp);
  gh_torch_free(out_a, 2 * MiB, 0, CAP);         /* A's output and input, dropped after it */
  gh_torch_free(in, 2 * MiB, 0, CAP);
  capture_begin(gp, cap_filter());               /* graph B */
  void* b1 = alloc(2 * MiB, CAP);
  void* b2 = alloc(2 * MiB, CAP);
  CHECK(share ? b1 == tmp_a : b1 != tmp_a);
  for (void* b : {b1, b2}) CHECK(b != out_a && b != in && b != nullptr);
  CHECK(b2 != tmp_a);
  gh_torch_free(b1, 2 * MiB, 0, CAP);            /* B's temporary */
  capture_end(gp);                               /* b2: B's output, held */
  warm(true);
  void* w = alloc(2 * MiB, CAP);
  CHECK(share ? w == tmp_a : (w != tmp_a && w != b1));
  CHECK(w != out_a && w != in && w != b2);
  gh_torch_free(w, 2 * MiB, 0, CAP);
  warm(false);
  capture_begin(gp, cap_filter());               /* graph C */
  void* c = alloc(2 * MiB, CAP);
  CHECK(share ? c == tmp_a : c == w);            /* (a block only warm-ups used goes to anything) */
  CHECK(c != out_a && c != in && c != b2);
  gh_torch_free(c, 2 * MiB, 0, CAP);
  capture_end(gp);
  const counts k = pool_counts();
  std::printf("temporaries %s: %zu blocks in the pool\n", share ? "shared" : "kept", k.blocks);
  CHECK(k.blocks == (share ? 4u : 6u));          /* in, tmp_a, out_a, b2; and b1 and w apart */
  gh_torch_free(b2, 2 * MiB, 0, CAP);
  for (int i = 0; i < 5; i++) gh_torch_release_pool(0, gp);  /* two warm-ups, three graphs */
  CHECK(pool_counts().blocks == 0 && pool_counts().retired == 0);
}

/* make_graphed_callables' pattern: one pool, no warm-up in it; a forward
 * capture keeps its saved activation (held at its end) and its output;
 * the backward capture reads the activation and frees it. From that free
 * the block is the backward's temporary (given again in it), then, shared,
 * any later capture's, as PyTorch's pools have it. Where the pool has seen
 * a warm-up (CUDA graph trees), the same free leaves it the forward's
 * graph's: run 9's input copy was freed just so. The output, freed with no
 * capture underway, stays the forward's either way. */
static void dead_in_later_capture(bool warmed) {
  const gh_mempool_id gc{warmed ? 41u : 40u, 0};
  if (warmed) {  /* a warm-up allocating to the pool with no capture */
    warm_up(gc, true);
    void* w = alloc(4 * MiB, CAP);
    gh_torch_free(w, 4 * MiB, 0, CAP);
    warm_up(gc, false);
  }
  capture_begin(gc, cap_filter());              /* the forward */
  void* saved = alloc(2 * MiB, CAP);
  void* out = alloc(2 * MiB, CAP);
  capture_end(gc);
  capture_begin(gc, cap_filter());              /* the backward */
  void* grad = alloc(2 * MiB, CAP);
  gh_torch_free(saved, 2 * MiB, 0, CAP);        /* read, then dead */
  void* tmp = alloc(2 * MiB, CAP);
  const bool freed_shares = share && !warmed;
  CHECK(freed_shares ? tmp == saved : tmp != saved);
  CHECK(tmp != out && tmp != grad && tmp != nullptr);
  gh_torch_free(tmp, 2 * MiB, 0, CAP);
  capture_end(gc);
  gh_torch_free(out, 2 * MiB, 0, CAP);          /* the program drops the output */
  capture_begin(gc, cap_filter());              /* a later capture */
  void* c1 = alloc(2 * MiB, CAP);
  void* c2 = alloc(2 * MiB, CAP);
  for (void* c : {c1, c2}) CHECK(c != out && c != grad && c != nullptr);
  if (freed_shares) CHECK(c1 == saved || c2 == saved);
  if (!share || warmed) CHECK(c1 != saved && c2 != saved);
  if (share && warmed) CHECK(c1 == tmp || c2 == tmp);  /* the backward's own temporary */
  gh_torch_free(c1, 2 * MiB, 0, CAP);
  gh_torch_free(c2, 2 * MiB, 0, CAP);
  capture_end(gc);
  const counts k = pool_counts();
  std::printf("dead in a later capture%s: %zu blocks in the pool\n", warmed ? " (warmed pool)" : "", k.blocks);
  gh_torch_free(grad, 2 * MiB, 0, CAP);
  for (int i = 0; i < (warmed ? 4 : 3); i++) gh_torch_release_pool(0, gc);
  CHECK(pool_counts().blocks == 0 && pool_counts().retired == 0);
}

/* CUDA graph trees' input copies (bench/results/logs-compile/ run 9): the
 * trees copy a recording's inputs into pool blocks made with no capture
 * underway, and the graph reads them at every replay. A forward's input
 * copy, held while its capture runs and freed after (the recording's
 * storage dies; its replays' outputs over it have no deleter), is that
 * graph's: another function's recording must not get it. An input copy
 * freed in the capture that reads it is given again in that capture only. */
static void trees_input_copies() {
  const gh_mempool_id gt{21, 0};
  auto warm = [&](bool begin) { warm_up(gt, begin); };  /* the trees' allocations of input copies: no capture */
  warm(true);
  void* xf = alloc(512 * 1024, CAP);            /* the forward's input copy */
  warm(false);
  capture_begin(gt, cap_filter());              /* the forward */
  void* act = alloc(2 * MiB, CAP);
  capture_end(gt);
  gh_torch_free(xf, 512 * 1024, 0, CAP);        /* the recording's storages die */
  gh_torch_free(act, 2 * MiB, 0, CAP);
  CHECK(block_state(xf) == GH_POOL_BLOCK_FREED);
  warm(true);
  void* xc = alloc(512 * 1024, CAP);            /* the other function's input copy */
  CHECK(xc != xf && xc != nullptr);
  warm(false);
  capture_begin(gt, cap_filter());              /* its recording */
  gh_torch_free(xc, 512 * 1024, 0, CAP);        /* read first, then dead in the graph */
  void* out = alloc(512 * 1024, CAP);
  CHECK(out == xc);                             /* in its own capture: given again */
  CHECK(out != xf);                             /* the forward's input copy: never */
  void* tmp = alloc(2 * MiB, CAP);
  CHECK(tmp != act && tmp != nullptr);
  gh_torch_free(tmp, 2 * MiB, 0, CAP);
  capture_end(gt);
  capture_begin(gt, cap_filter());              /* a third recording gets none of them */
  void* third = alloc(512 * 1024, CAP);
  void* third2 = alloc(2 * MiB, CAP);
  CHECK(third != xf && third != xc && third2 != act);
  CHECK(share ? third2 == tmp : third2 != tmp);  /* the second recording's temporary */
  gh_torch_free(third, 512 * 1024, 0, CAP);
  gh_torch_free(third2, 2 * MiB, 0, CAP);
  capture_end(gt);
  gh_torch_free(out, 512 * 1024, 0, CAP);
  for (int i = 0; i < 5; i++) gh_torch_release_pool(0, gt);  /* two warm-ups, three recordings */
  const counts k = pool_counts();
  CHECK(block_state(xf) == -1 && k.blocks == 0 && k.retired == 0);
}

/* An output a graph kept (made in its capture, held at its end) stays
 * that graph's once the program drops it, whichever way it goes: a free
 * with no capture underway, a checkpoint restore's adoption given up, a
 * free in another pool's capture. CUDA graph trees' replays make storages
 * over such blocks that no allocator sees, and at device visit 38 giving
 * them to later captures, as PyTorch's pools do, made gpu_edges.py's
 * compile_mid compute wrong gradients (bench/results/logs-visit38/). So do
 * the graph's inputs (the trees' input copies). Blocks only warm-ups used
 * go to anything; a capture's temporaries to later captures. */
static void outputs_after_their_graph() {
  const gh_mempool_id go{51, 0}, other{52, 0};
  const size_t H = MiB / 2, M3 = 3 * MiB / 2;   /* sizes no quarter apart */
  auto warm = [&](bool begin) { warm_up(go, begin); };
  warm(true);
  void* in = alloc(H, CAP);                     /* an input copy */
  warm(false);
  capture_begin(go, cap_filter());              /* graph A */
  void* out = alloc(MiB, CAP);
  void* out2 = alloc(M3, CAP);
  capture_end(go);
  gh_torch_free(out, MiB, 0, CAP);              /* dropped after A */
  gh_torch_free(in, H, 0, CAP);
  CHECK(block_state(out) == GH_POOL_BLOCK_FREED && block_state(in) == GH_POOL_BLOCK_FREED);
  warm(true);
  void* w = alloc(MiB, CAP);                    /* a warm-up gets neither */
  void* wi = alloc(H, CAP);
  CHECK(w != out && w != nullptr && wi != in && wi != nullptr);
  gh_torch_free(w, MiB, 0, CAP);
  gh_torch_free(wi, H, 0, CAP);
  warm(false);
  capture_begin(go, cap_filter());              /* graph B gets neither */
  void* b1 = alloc(MiB, CAP);
  void* b2 = alloc(MiB, CAP);
  void* bi = alloc(H, CAP);
  CHECK(b1 == w && b2 != out && b2 != nullptr);  /* (a block only warm-ups used goes to anything) */
  CHECK(bi == wi);
  capture_end(go);                              /* b1, b2, bi: B's outputs */
  gh_torch_free(b1, MiB, 0, CAP);
  gh_torch_free(b2, MiB, 0, CAP);
  gh_torch_free(bi, H, 0, CAP);
  /* A checkpoint restore adopts A's other output and gives it up; the
   * same for B's first. */
  gh_torch_free(out2, M3, 0, CAP);
  CHECK(gh_torch_pool_adopt(go.first, go.second, (const uintptr_t*)&out2, 1) == GH_OK);
  CHECK(block_state(out2) == GH_POOL_BLOCK_ADOPTED);
  capture_begin(go, cap_filter());              /* graph C */
  void* c = alloc(M3, CAP);
  CHECK(c != out2 && c != nullptr);
  gh_torch_free(c, M3, 0, CAP);                 /* C's temporary */
  capture_end(go);
  CHECK(gh_torch_pool_unadopt(out2) == GH_OK);
  CHECK(block_state(out2) == GH_POOL_BLOCK_FREED);
  CHECK(gh_torch_pool_adopt(go.first, go.second, (const uintptr_t*)&b1, 1) == GH_OK);
  CHECK(gh_torch_pool_unadopt(b1) == GH_OK);
  capture_begin(go, cap_filter());              /* graph D */
  void* d1 = alloc(M3, CAP);
  void* d2 = alloc(M3, CAP);
  void* dm1 = alloc(MiB, CAP);
  void* dm2 = alloc(MiB, CAP);
  CHECK(d1 != out2 && d2 != out2);
  CHECK(share ? (d1 == c || d2 == c) : (d1 != c && d2 != c));
  for (void* d : {dm1, dm2}) CHECK(d != b1 && d != b2 && d != out && d != nullptr);
  capture_end(go);                              /* d1, d2, dm1, dm2: D's outputs */
  capture_begin(other, cap_filter());           /* another pool's capture on the stream */
  gh_torch_free(d1, M3, 0, CAP);                /* read by that graph, then freed in it */
  capture_end(other);
  gh_torch_free(d2, M3, 0, CAP);
  gh_torch_free(dm1, MiB, 0, CAP);
  gh_torch_free(dm2, MiB, 0, CAP);
  capture_begin(go, cap_filter());              /* graph E */
  void* e1 = alloc(M3, CAP);
  void* e2 = alloc(M3, CAP);
  for (void* e : {e1, e2}) CHECK(e != d1 && e != d2 && e != out2 && e != nullptr);
  gh_torch_free(e1, M3, 0, CAP);
  gh_torch_free(e2, M3, 0, CAP);
  capture_end(go);
  const counts k = pool_counts();
  std::printf("outputs after their graph (%s): %zu blocks in the pools\n", share ? "shared" : "kept", k.blocks);
  CHECK(k.blocks == (share ? 12u : 13u));       /* with share, D's first block is C's temporary */
  gh_torch_release_pool(0, other);
  for (int i = 0; i < 7; i++) gh_torch_release_pool(0, go);  /* two warm-ups, five graphs */
  CHECK(pool_counts().blocks == 0 && pool_counts().retired == 0);
}

int main() {
  tm = gh_test_sim_tmgr(24 * MiB, 64 * MiB);
  CHECK(tm != nullptr);
  if (!tm) return 1;
  CHECK(gh_tmgr_set_global(tm) == GH_OK);

  /* Without a capture scope the manager does touch a capturing stream: a
   * free's event is recorded on its stream at the next flush. */
  void* x = alloc(4 * MiB, CAP);
  gh_torch_free(x, 4 * MiB, 0, CAP);
  CHECK(_gh_tmgr_sim_capture(tm, CAP) == GH_OK);
  const uint64_t t0 = touches();
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  std::printf("no scope: %llu operations on the capturing stream\n", (unsigned long long)(touches() - t0));
  CHECK(touches() > t0);
  CHECK(_gh_tmgr_sim_capture(tm, nullptr) == GH_OK);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);

  /* Before the capture: tensors over the device budget (some evicted), one
   * of them used on the capture's stream, one freed there just now. */
  std::vector<void*> keep;
  for (int i = 0; i < 8; i++) {
    void* p = alloc(4 * MiB, OTHER);
    fill(p, 4 * MiB, 0x10 + i);
    keep.push_back(p);
  }
  void* on_cap = alloc(4 * MiB, CAP);
  fill(on_cap, 4 * MiB, 0x55);
  void* freed_on_cap = alloc(2 * MiB, CAP);
  gh_torch_free(freed_on_cap, 2 * MiB, 0, CAP);
  CHECK(stats().evictions > 0);
  for (void* p : keep) CHECK(gh_tensor_advise(tm, p, GH_ADVICE_COLD) == GH_OK);
  CHECK(gh_tensor_advise(tm, on_cap, GH_ADVICE_COLD) == GH_OK);

  const gh_mempool_id g1{1, 0};
  const uint64_t ev0 = stats().evictions;
  capture_begin(g1, cap_filter());
  const uint64_t c0 = touches();
  void* a = alloc(6 * MiB, CAP);
  void* b = alloc(6 * MiB, CAP);
  void* c = alloc(512 * 1024, CAP);
  fill(a, 6 * MiB, 0xa1), fill(b, 6 * MiB, 0xb2), fill(c, 512 * 1024, 0xc3);
  gh_torch_free(b, 6 * MiB, 0, CAP);            /* freed in the capture: kept by the pool */
  void* b2 = alloc(5 * MiB + MiB / 2, CAP);     /* the same stream, within a quarter more: b again */
  CHECK(b2 == b);
  gh_torch_record_stream(c, OTHER);             /* used on another stream too */
  gh_torch_free(c, 512 * 1024, 0, CAP);
  void* c2 = alloc(512 * 1024, CAP);            /* not c: it may still be read there */
  CHECK(c2 != c && c2 != nullptr);
  void* small = alloc(MiB, CAP);
  CHECK(small != b && small != c);              /* no block of 6 MiB for 1 MiB (more than a quarter) */
  void* plain = alloc(2 * MiB, OTHER);          /* another stream: the plain path, while the capture goes on */
  fill(plain, 2 * MiB, 0x77);
  gh_torch_free(plain, 2 * MiB, 0, OTHER);
  void* before = alloc(MiB, OTHER);             /* made outside the pool, freed on the capturing stream */
  gh_torch_free(before, MiB, 0, CAP);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);          /* flushes that free: its event not on the capturing stream */
  std::printf("capture: %llu evictions, %llu operations on the capturing stream\n",
              (unsigned long long)(stats().evictions - ev0), (unsigned long long)(touches() - c0));
  CHECK(stats().evictions > ev0);               /* the pool's blocks made room by evicting */
  CHECK(touches() == c0);
  CHECK(tier(a) == GH_TIER_DEVICE && tier(b) == GH_TIER_DEVICE && tier(c2) == GH_TIER_DEVICE);
  CHECK(stats().pinned_tensors == 5);           /* a, b, c, c2, small */
  CHECK(gh_tensor_evict(tm, a) == GH_ERR_PINNED);

  /* Refused: a capture whose pool's filter does not take the stream, one past both budgets. */
  const gh_mempool_id g9{9, 0};
  gh_torch_begin_allocate_to_pool(0, g9, [](gh_stream_t) { return false; });
  std::string m = refused(MiB, OTHER);          /* another stream, not capturing: served */
  CHECK(m.empty());
  gh_torch_end_allocate_to_pool(0, g9);
  m = refused(200 * MiB, CAP);
  std::printf("past both budgets in a capture: %s\n", m.c_str());
  CHECK(m.rfind("gpuheap: out of memory (209715200 bytes on device 0)", 0) == 0);
  CHECK(stats().pinned_tensors == 5);
  capture_end(g1);
  CHECK(touches() == c0);

  counts k = pool_counts();
  std::printf("after the capture: %zu pools, %zu blocks, %zu freed, %zu retired\n", k.pools, k.blocks, k.freed,
              k.retired);
  CHECK(k.pools == 2 && k.blocks == 5 && k.freed == 1 && k.retired == 0); /* g9 holds nothing but stays known */
  gh_torch_release_pool(0, g9);

  /* No filter takes the stream: refused as before. */
  const gh_mempool_id g2{2, 0};
  gh_torch_begin_allocate_to_pool(0, g2, [](gh_stream_t) { return false; });
  CHECK(_gh_tmgr_sim_capture(tm, CAP) == GH_OK);
  m = refused(MiB, CAP);
  std::printf("no pool takes the stream: %s\n", m.c_str());
  CHECK(m.find("capturing a CUDA graph") != std::string::npos);
  capture_end(g2);
  gh_torch_release_pool(0, g2);

  /* The evicted tensors kept their bytes; the pool's too. */
  for (size_t i = 0; i < keep.size(); i++) CHECK(holds(keep[i], 4 * MiB, 0x10 + (int)i));
  CHECK(holds(on_cap, 4 * MiB, 0x55));
  CHECK(holds(a, 6 * MiB, 0xa1));
  CHECK(_gh_tmgr_check(tm) == GH_OK);

  /* The program frees the outputs it dropped; the graph goes. */
  gh_torch_free(b2, 6 * MiB, 0, CAP);
  gh_torch_free(c2, 512 * 1024, 0, CAP);
  gh_torch_free(small, MiB, 0, CAP);
  gh_torch_free(small, MiB, 0, CAP);             /* twice: reported, not freed again */
  CHECK(std::strstr(gh_last_error_detail(), "freed already") != nullptr);
  const size_t live0 = stats().tensors[GH_KIND_ACTIVATIONS];
  gh_torch_release_pool(0, g1);                  /* b, c, c2, small back; a still held */
  k = pool_counts();
  CHECK(k.pools == 1 && k.blocks == 1 && k.freed == 0 && k.retired == 0);
  CHECK(stats().tensors[GH_KIND_ACTIVATIONS] == live0 - 4);
  CHECK(stats().pinned_tensors == 1);
  CHECK(holds(a, 6 * MiB, 0xa1));
  gh_torch_free(a, 6 * MiB, 0, CAP);             /* the last one: back at once, the pool gone */
  k = pool_counts();
  CHECK(k.pools == 0 && k.blocks == 0 && k.retired == 0);
  CHECK(stats().pinned_tensors == 0);

  /* Retired while another capture is underway: kept until it ends. */
  const gh_mempool_id g3{3, 0}, g4{4, 0};
  retire_during_capture(g3, g4, 2 * MiB);
  k = pool_counts();
  CHECK(k.retired == 1 && stats().pinned_tensors == 1);  /* no wait for the device during a capture */
  capture_end(g4);
  CHECK(pool_counts().retired == 1);
  gh_torch_empty_cache();
  k = pool_counts();
  CHECK(k.pools == 1 && k.blocks == 0 && k.retired == 0);  /* g4's, until its release */
  CHECK(stats().pinned_tensors == 0);
  gh_torch_release_pool(0, g4);
  CHECK(pool_counts().pools == 0);

  const size_t pinned0 = stats().pinned_tensors;
  shared_pool_and_adoption();
  trees_input_copies();
  shared_temporaries();
  CHECK(stats().pinned_tensors == pinned0);
  dead_in_later_capture(false);
  dead_in_later_capture(true);
  outputs_after_their_graph();
  CHECK(stats().pinned_tensors == pinned0);

  for (void* p : keep) gh_torch_free(p, 4 * MiB, 0, OTHER);
  gh_torch_free(on_cap, 4 * MiB, 0, CAP);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  CHECK(stats().tensors[GH_KIND_ACTIVATIONS] == 0);
  CHECK(_gh_tmgr_check(tm) == GH_OK);
  CHECK(gh_tmgr_set_global(nullptr) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);

  /* A request the budgets refuse while retired blocks hold memory: they are
   * given back and the request tried again (16 MiB in all, 6 of them a
   * retired block's). */
  tm = gh_test_sim_tmgr(8 * MiB, 8 * MiB);
  CHECK(tm != nullptr);
  if (!tm) return gh_test_done("test_torch_graph");
  CHECK(gh_tmgr_set_global(tm) == GH_OK);
  const gh_mempool_id g5{5, 0}, g6{6, 0};
  retire_during_capture(g5, g6, 6 * MiB);
  capture_end(g6);
  gh_torch_release_pool(0, g6);                   /* its release gives them back: none underway now */
  CHECK(pool_counts().retired == 0);
  retire_during_capture(g5, g6, 6 * MiB);         /* again, and no release after the capture's end */
  capture_end(g6);                                /* an end gives nothing back */
  CHECK(pool_counts().retired == 1 && stats().pinned_tensors == 1);
  void* wide = alloc(14 * MiB, OTHER);           /* 10 MiB free without the retired block */
  CHECK(wide != nullptr);
  CHECK(pool_counts().retired == 0 && stats().pinned_tensors == 0);
  gh_torch_free(wide, 14 * MiB, 0, OTHER);
  gh_torch_release_pool(0, g6);
  CHECK(pool_counts().pools == 0);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  CHECK(_gh_tmgr_check(tm) == GH_OK);

  /* The wait for the device before a give-back fails (a copy failed on
   * the GPU): the blocks stay retired and pinned, none freed; a later
   * give-back whose wait succeeds frees them once. (The failed wait is the
   * manager's sticky failure: last in this test.) */
  const gh_mempool_id g7{7, 0};
  capture_begin(g7, cap_filter());
  void* kept = alloc(2 * MiB, CAP);
  capture_end(g7);
  gh_torch_free(kept, 2 * MiB, 0, CAP);
  CHECK(_gh_tmgr_sim_fail_sync(tm, 1) == GH_OK);
  gh_torch_release_pool(0, g7);
  std::printf("a failed wait before a give-back: %s\n", gh_last_error_detail());
  CHECK(std::strstr(gh_last_error_detail(), "device_sync") != nullptr);
  counts kc = pool_counts();
  CHECK(kc.retired == 1 && kc.pools == 0 && stats().pinned_tensors == 1);
  CHECK(stats().tensors[GH_KIND_ACTIVATIONS] == 1);
  gh_torch_empty_cache();
  CHECK(pool_counts().retired == 0 && stats().pinned_tensors == 0);
  CHECK(stats().tensors[GH_KIND_ACTIVATIONS] == 0);
  CHECK(_gh_tmgr_sticky(tm) == GH_ERR_CORRUPT);
  CHECK(gh_tmgr_set_global(nullptr) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  return gh_test_done("test_torch_graph");
}
