/* gh_model: the executable model of gpuheap's randomized page search.
 *
 * Evaluates the closed forms of proofs/DERIVATION.md and checks them against a
 * Monte Carlo simulation of the page bitmap that probes exactly as the code
 * does (include/gpuheap/run.h gh_page_claim_one, include/gpuheap/warp.cuh
 * gh_warp_pages / gh_warp_claim_pages / gh_warp_window / gh_warp_move_hint).
 *
 * Notation (as in DERIVATION.md): T pages, W = T/32 words, A free pages,
 * p = A/T the free fraction, q = 1 - p the fill, Q = q^32 the probability
 * that a word has no free page, L the probe limit, m <= 32 lanes of a warp.
 *
 * Commands
 *   gh_model table [--pages T] [--seed S]
 *       closed forms against simulation at fills 50, 90, 95, 99, 99.5 %.
 *   gh_model predict --pages T --fill q --requests N [--probe-limit L]
 *                    [--seed S] [--reps R] [--slots S] [--concurrent C]
 *                    [--hints 0|1]
 *       one CSV line for the warp-collective search of N one-page requests
 *       (N/32 warps in sequence, so the fill drifts by N/T over the batch):
 *       the closed form (model) and the mean of R simulated batches (sim).
 *       Warp i uses hint slot i mod S (default 64, as min(SMs, 64) on an
 *       H200). --concurrent C: the warps run in consecutive groups of C
 *       that take each collective step together, all reading before any
 *       claims (default 1: one warp at a time). C = min(N/32, 4224) stands
 *       for the warps an H200 holds at once in the benchmark
 *       (proofs/README.md).
 *       --hints 0: step 0 at a random word instead of the frame hint.
 *   gh_model check [--seed S]
 *       agreement of closed forms and simulation; exit 1 on disagreement.
 *   gh_model asymptotics [--seed S]
 *       random search does not grow with N; a central queue grows as N.
 *
 * C11, libc and libm only.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Hint slots of the modelled heap: the library default on an H200,
 * min(SMs, 64) (host/heap.c). */
#define GH_MODEL_SLOTS 64u

#define LANES 32u
#define WINDOW_WORDS 32u
#define NO_WORD 0xFFFFFFFFu
#define FULL 0xFFFFFFFFu

static void die(const char* msg) {
  fprintf(stderr, "gh_model: %s\n", msg);
  exit(2);
}

static void* xcalloc(size_t n, size_t size) {
  void* p = calloc(n ? n : 1, size);
  if (p == NULL) die("out of memory");
  return p;
}

static uint32_t popc(uint32_t x) { return (uint32_t)__builtin_popcount(x); }

/* The lowest k set bits of x (all of x if it has fewer): gh_lowest_bits. */
static uint32_t lowest_bits(uint32_t x, uint32_t k) {
  uint32_t r = 0;
  while (k-- && x) {
    r |= x & (~x + 1u);
    x &= x - 1u;
  }
  return r;
}

/* ------------------------------------------------------------------------ */
/* xoshiro256**, seeded by splitmix64                                        */

typedef struct {
  uint64_t s[4];
} rng_t;

static uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static rng_t rng_seeded(uint64_t seed) {
  rng_t r;
  for (int i = 0; i < 4; i++) r.s[i] = splitmix64(&seed);
  return r;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng_t* r) {
  uint64_t* s = r->s;
  const uint64_t result = rotl(s[1] * 5u, 7) * 9u;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/* Uniform in [0, n), n >= 1, without bias (Lemire). */
static uint32_t rng_below(rng_t* r, uint32_t n) {
  uint64_t m = (rng_next(r) >> 32) * (uint64_t)n;
  uint32_t lo = (uint32_t)m;
  if (lo < n) {
    const uint32_t t = (0u - n) % n;
    while (lo < t) {
      m = (rng_next(r) >> 32) * (uint64_t)n;
      lo = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}

static double rng_unit(rng_t* r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* ------------------------------------------------------------------------ */
/* Closed forms                                                              */

/* pmf[k] = P(Bin(n, p) = k), cdf[k] = P(Bin(n, p) <= k), k = 0..kmax. */
static void binom(double n, double p, uint32_t kmax, double* pmf, double* cdf) {
  double acc = 0.0;
  if (n <= 0.0 || p <= 0.0) {
    for (uint32_t k = 0; k <= kmax; k++) {
      pmf[k] = k == 0 ? 1.0 : 0.0;
      cdf[k] = 1.0;
    }
    return;
  }
  if (p >= 1.0) {
    for (uint32_t k = 0; k <= kmax; k++) {
      pmf[k] = (double)k == n ? 1.0 : 0.0;
      acc += pmf[k];
      cdf[k] = acc;
    }
    return;
  }
  double lp = n * log1p(-p);
  const double lr = log(p) - log1p(-p);
  for (uint32_t k = 0; k <= kmax; k++) {
    pmf[k] = (double)k <= n ? exp(lp) : 0.0;
    acc += pmf[k];
    cdf[k] = acc < 1.0 ? acc : 1.0;
    if ((double)k < n) lp += log((n - k) / (k + 1.0)) + lr;
  }
}

/* E[max of n i.i.d. geometric variables on {1,2,..} with failure
 * probability f]: sum over x >= 0 of 1 - (1 - f^x)^n, for n = 1..nmax. */
static void geo_max(double f, uint32_t nmax, double* out /* [nmax + 1] */) {
  for (uint32_t n = 0; n <= nmax; n++) out[n] = 0.0;
  if (f >= 1.0) {
    for (uint32_t n = 1; n <= nmax; n++) out[n] = INFINITY;
    return;
  }
  double fx = 1.0; /* f^x */
  for (uint64_t x = 0; x < 100000000ull; x++) {
    const double base = 1.0 - fx;
    double pw = 1.0;
    for (uint32_t n = 1; n <= nmax; n++) {
      pw *= base;
      out[n] += 1.0 - pw;
    }
    if (1.0 - pw < 1e-16) break;
    fx *= f;
  }
}

/* (b) one page per probe: mean 1/p; worst of m lanes searching alone. */
static double page_mean(double p) { return 1.0 / p; }
static double page_worst(double p, uint32_t m) {
  double e[LANES + 1];
  geo_max(1.0 - p, m, e);
  return e[m];
}

/* (c) one word per probe: P(word useless) = Q = q^32 under independent fill,
 * or prod_j (U - j)/(T - j) with exactly U used pages placed uniformly. */
static double word_full_iid(double p) { return pow(1.0 - p, 32.0); }
static double word_full_exact(uint64_t T, uint64_t U) {
  double r = 1.0;
  for (uint32_t j = 0; j < 32; j++) r *= U > j ? (double)(U - j) / (double)(T - j) : 0.0;
  return r;
}
static double word_mean(double Q) { return 1.0 / (1.0 - Q); }
static double word_worst(double Q, uint32_t m) {
  double e[LANES + 1];
  geo_max(Q, m, e);
  return e[m];
}

/* (c') one slot's successive single-lane requests as coded: phase 0 of
 * gh_page_claim_one starts at the frame hint, the word the slot's last page
 * came from, so the slot scans the bitmap in order. Each word is read once
 * for each of its f free pages and once more when it is found full (or is
 * full to begin with): (A + W) / A = 1 + 1/(32 p) reads per page, valid
 * while the next useful word lies within L words (Q^L small). */
static double seq_mean(double p) { return 1.0 + 1.0 / (32.0 * p); }

/* (d)/(e) a warp of m one-page requests. A collective step reads a window
 * of m consecutive words, one per lane (gh_warp_pages: width = popc(mask);
 * 32 words, 1024 pages, for a whole warp). */
typedef struct {
  double mean;  /* probes per lane, averaged over the m lanes */
  double worst; /* probes of the warp's worst lane */
  double sweep; /* P(some lane is left after L collective steps): the warp sweeps */
} warp_pred_t;

#define ALL_RANDOM 0xFFFFFFFFu

/* The fraction of window j (1-based) of a warp still in need that it has
 * not read before, in a heap of W words (W = 0: an unbounded heap, where
 * every window is fresh). Every window
 * the warp read before was emptied by it. Windows 1..R are at random words:
 * a word of window j lies in one of the j - 1 earlier windows with
 * probability about width (j - 1) / W. Windows after R are the collective
 * sweep (R = L): consecutive, so they do not overlap each other, and they
 * overlap the R random windows in a fraction width R / W. R = ALL_RANDOM:
 * every window random (algorithm (d)). */
static double window_fresh(uint32_t j, uint32_t width, uint32_t W, uint32_t R) {
  if (W == 0) return 1.0;
  const double f = 1.0 - (double)width * (j <= R ? j - 1u : R) / W;
  return f > 0.0 ? f : 0.0;
}

/* Pages in the first s windows: 32 width sum_j window_fresh(j). */
static double window_pages(uint32_t s, uint32_t width, uint32_t W, uint32_t R) {
  double n = 0.0;
  for (uint32_t j = 1; j <= s; j++) n += 32.0 * width * window_fresh(j, width, W, R);
  return n;
}

/* L = 0: collective steps at random words without limit (algorithm (d)).
 * L > 0: gpuheap's gh_warp_pages (e): L collective steps at random words
 * (step 0 at the frame hint, taken as a fresh window: DERIVATION.md 7.3),
 * then the collective sweep, consecutive windows from a random word, at
 * most ceil(W / m) of them; lanes left after it get NULL (the model has no
 * pinned pages to steal). Window s shows S_s - S_{s-1} ~ Bin(32 m f_s, p)
 * free pages, independently; lane r (0-based) is served at the first step
 * s with S_s >= r + 1, so E[probes of lane r] = sum_s P(S_s <= r) over the
 * steps the warp can take. W > 0 applies the first-order correction f_s for
 * a heap of W words (window_fresh); W = 0: W >> 32 L. */
static warp_pred_t warp_model(double p, uint32_t m, uint32_t L, uint32_t W) {
  warp_pred_t out = {INFINITY, INFINITY, 1.0};
  if (m == 0 || m > LANES) die("warp_model: lanes must be 1..32");
  if (p <= 0.0) return out;
  const uint32_t R = L == 0 ? ALL_RANDOM : L;
  const uint64_t max_steps = L == 0 || W == 0 ? UINT64_MAX : L + (uint64_t)(W + m - 1u) / m;
  double pmf[LANES], cdf[LANES];
  double coll[LANES] = {0}; /* E[tau_r], tau_r capped at max_steps */
  double n = 0.0;           /* pages in the windows read so far */
  for (uint64_t s = 0; s < max_steps; s++) {
    binom(n, p, m - 1, pmf, cdf);
    for (uint32_t r = 0; r < m; r++) coll[r] += cdf[r];
    if (cdf[m - 1] < 1e-15) break;
    if (s > 100000000u) die("warp_model: no convergence");
    const double f = window_fresh((uint32_t)s + 1u, m, W, R);
    /* (e) ends with the sweep (max_steps); (d) would search forever. */
    if (f <= 0.0 && L == 0) die("warp_model: the heap is too small");
    n += 32.0 * m * f;
  }
  double sum = 0.0;
  for (uint32_t r = 0; r < m; r++) sum += coll[r];
  out.mean = sum / m;
  out.worst = coll[m - 1];
  out.sweep = 0.0;
  if (L) {
    binom(window_pages(L, m, W, R), p, m - 1, pmf, cdf);
    out.sweep = cdf[m - 1];
  }
  return out;
}

/* The batch of N one-page requests as N/32 warps in sequence: warp i sees
 * the free pages the earlier warps left, p_i = (A - 32 i) / T. Mean over all
 * requests, worst lane averaged over warps. */
static warp_pred_t batch_model(uint64_t T, uint64_t A, uint64_t N, uint32_t L) {
  warp_pred_t out = {0.0, 0.0, 0.0};
  uint64_t left = A, done = 0, warps = 0;
  while (done < N) {
    const uint32_t m = N - done < LANES ? (uint32_t)(N - done) : LANES;
    const warp_pred_t w = warp_model((double)left / (double)T, m, L, (uint32_t)(T / 32u));
    out.mean += w.mean * m;
    out.worst += w.worst;
    out.sweep += w.sweep;
    done += m;
    left = left > m ? left - m : 0;
    warps++;
  }
  out.mean /= (double)N;
  out.worst /= (double)warps;
  out.sweep /= (double)warps;
  return out;
}

/* Tail of the collective search (d): P(tau_{m-1} > k) = P(S_k <= m-1), S_k ~
 * Bin(n_k, p) with n_k = window_pages(k) (1024 k for W >> 32 k), and its
 * Chernoff bound e^{-mu} (e mu / a)^a for a = m - 1 < mu = n_k p. */
static double warp_tail_exact(double p, uint32_t m, uint32_t k, uint32_t W) {
  double pmf[LANES], cdf[LANES];
  binom(window_pages(k, m, W, ALL_RANDOM), p, m - 1, pmf, cdf);
  return cdf[m - 1];
}
static double warp_tail_chernoff(double p, uint32_t m, uint32_t k, uint32_t W) {
  const double mu = window_pages(k, m, W, ALL_RANDOM) * p, a = m - 1.0;
  if (mu <= a) return 1.0;
  if (a == 0.0) return exp(-mu);
  const double b = exp(-mu + a * (1.0 + log(mu / a)));
  return b < 1.0 ? b : 1.0;
}

/* ------------------------------------------------------------------------ */
/* The simulated heap: the page bitmap, frame hints, and a log of claims so  */
/* that a batch can be undone (fixed-fill experiments).                      */

typedef struct {
  uint32_t T, W;
  uint32_t* words; /* bit set = page in use, as xpages */
  uint64_t used;
  uint32_t n_slots;
  uint32_t* fhint; /* as xfhints: a word, or NO_WORD */
  uint32_t* log_w;
  uint32_t* log_b;
  size_t log_n, log_cap;
} heap_t;

static heap_t* heap_new(uint32_t T, uint32_t n_slots) {
  if (T < 32u * WINDOW_WORDS || T % 32u) die("pages must be a multiple of 32 and at least 1024");
  heap_t* h = xcalloc(1, sizeof *h);
  h->T = T;
  h->W = T / 32u;
  h->words = xcalloc(h->W, sizeof *h->words);
  h->n_slots = n_slots ? n_slots : 1u;
  h->fhint = xcalloc(h->n_slots, sizeof *h->fhint);
  h->log_cap = 1024;
  h->log_w = xcalloc(h->log_cap, sizeof *h->log_w);
  h->log_b = xcalloc(h->log_cap, sizeof *h->log_b);
  return h;
}

static void heap_free(heap_t* h) {
  free(h->words);
  free(h->fhint);
  free(h->log_w);
  free(h->log_b);
  free(h);
}

static void heap_reset_hints(heap_t* h) {
  for (uint32_t s = 0; s < h->n_slots; s++) h->fhint[s] = NO_WORD;
}

/* Exactly U used pages, placed uniformly at random (every U-subset equally
 * likely): set or clear distinct random pages, whichever is fewer. */
static void heap_fill(heap_t* h, uint64_t U, rng_t* r) {
  const bool few = U <= h->T / 2u;
  memset(h->words, few ? 0x00 : 0xFF, (size_t)h->W * sizeof *h->words);
  const uint64_t todo = few ? U : h->T - U;
  for (uint64_t c = 0; c < todo;) {
    const uint32_t p = rng_below(r, h->T), bit = 1u << (p & 31u);
    uint32_t* w = &h->words[p >> 5];
    if (few ? !(*w & bit) : (*w & bit)) {
      *w ^= bit;
      c++;
    }
  }
  h->used = U;
  h->log_n = 0;
  heap_reset_hints(h);
}

static uint64_t heap_free_pages(const heap_t* h) { return h->T - h->used; }

/* The atomic claim of gh_pages_claim: returns the bits of want it got. */
static uint32_t heap_claim(heap_t* h, uint32_t w, uint32_t want) {
  const uint32_t got = want & ~h->words[w];
  if (got) {
    h->words[w] |= got;
    h->used += popc(got);
    if (h->log_n == h->log_cap) {
      h->log_cap *= 2;
      h->log_w = realloc(h->log_w, h->log_cap * sizeof *h->log_w);
      h->log_b = realloc(h->log_b, h->log_cap * sizeof *h->log_b);
      if (!h->log_w || !h->log_b) die("out of memory");
    }
    h->log_w[h->log_n] = w;
    h->log_b[h->log_n] = got;
    h->log_n++;
  }
  return got;
}

/* gh_page_claim_in_word: a free page of word w, or NO_WORD. The code starts
 * from a random bit; the model takes the lowest, which changes no count
 * (see lane_claim_one). */
static uint32_t heap_claim_lowest(heap_t* h, uint32_t w) {
  const uint32_t v = h->words[w];
  if (v == FULL) return NO_WORD;
  const uint32_t bit = ~v & (v + 1u);
  heap_claim(h, w, bit);
  return (w << 5) + (uint32_t)__builtin_ctz(bit);
}

/* Undo every claim since the last fill or undo (the fill stays fixed). */
static void heap_undo(heap_t* h) {
  for (size_t i = 0; i < h->log_n; i++) {
    h->words[h->log_w[i]] &= ~h->log_b[i];
    h->used -= popc(h->log_b[i]);
  }
  h->log_n = 0;
}

static void heap_forget_log(heap_t* h) { h->log_n = 0; }

static uint32_t next_word(const heap_t* h, uint32_t w) { return w + 1u == h->W ? 0u : w + 1u; }

/* ------------------------------------------------------------------------ */
/* Simulated searches                                                        */

/* (b) probes of uniformly random pages until a free one (not claimed). */
static uint64_t sim_page(const heap_t* h, rng_t* r) {
  for (uint64_t n = 1;; n++) {
    const uint32_t p = rng_below(r, h->T);
    if (!((h->words[p >> 5] >> (p & 31u)) & 1u)) return n;
  }
}

/* (c) probes of uniformly random words until one with a free page. */
static uint64_t sim_word(const heap_t* h, rng_t* r) {
  for (uint64_t n = 1;; n++)
    if (h->words[rng_below(r, h->W)] != FULL) return n;
}

/* A warp of m lanes asking for one page each (gh_warp_pages). Its windows
 * are m words wide, one word per lane (width = popc(mask) in the code). */
typedef struct {
  uint32_t m, served, slot, step, w0, sweep_w, failed;
  uint32_t v[LANES];
  uint32_t probes[LANES];
} warp_t;

static void warp_init(warp_t* wp, uint32_t m, uint32_t slot) {
  memset(wp, 0, sizeof *wp);
  wp->m = m;
  wp->slot = slot;
}

/* The most collective steps a warp takes: L = 0, no limit; otherwise L
 * steps and the sweep's ceil(W / m) (the second sweep, after stealing, does
 * not run: the model has no pinned pages, so nothing is stolen). */
static bool warp_searching(const heap_t* h, const warp_t* wp, uint32_t L) {
  return wp->served < wp->m && (L == 0 || wp->step < L + (h->W + wp->m - 1u) / wp->m);
}

/* Read half of a collective step (gh_warp_window, the load in
 * gh_warp_claim_pages). Steps 0..L-1 (all steps for L = 0) at random words,
 * step 0 at the slot's frame hint when use_hint and the hint is set; steps
 * from L on are the collective sweep: a random word, then the next m words
 * each step, wrapping. Every lane still in need counts one probe. */
static void warp_read(const heap_t* h, warp_t* wp, rng_t* r, uint32_t L, bool use_hint) {
  uint32_t w0;
  if (L == 0 || wp->step < L) {
    w0 = rng_below(r, h->W);
    if (wp->step == 0 && use_hint && h->fhint[wp->slot] < h->W) w0 = h->fhint[wp->slot];
  } else {
    if (wp->step == L) wp->sweep_w = rng_below(r, h->W);
    w0 = wp->sweep_w;
    wp->sweep_w += wp->m;
    if (wp->sweep_w >= h->W) wp->sweep_w -= h->W;
  }
  wp->w0 = w0;
  for (uint32_t l = wp->served; l < wp->m; l++) wp->probes[l]++;
  for (uint32_t k = 0; k < wp->m; k++) {
    uint32_t w = w0 + k;
    if (w >= h->W) w -= h->W;
    wp->v[k] = k < h->W ? h->words[w] : FULL;
  }
}

/* Claim half: gh_warp_claim_pages' prefix sums (words with pages in use
 * first, lowest lanes first), the atomic claims, gh_warp_move_hint, and
 * the hand-out to the lowest lanes still in need. */
static void warp_claim(heap_t* h, warp_t* wp) {
  const uint32_t want = wp->m - wp->served;
  uint32_t part[LANES], empty[LANES], total_part = 0;
  for (uint32_t k = 0; k < wp->m; k++) {
    part[k] = wp->v[k] != 0u ? popc(~wp->v[k]) : 0u;
    empty[k] = wp->v[k] == 0u ? 32u : 0u;
    total_part += part[k];
  }
  uint32_t before_part = 0, before_empty = 0, last = NO_WORD;
  for (uint32_t k = 0; k < wp->m; k++) {
    uint32_t quota = before_part >= want ? 0u : (want - before_part < part[k] ? want - before_part : part[k]);
    if (total_part < want) {
      const uint32_t rest = want - total_part;
      quota += before_empty >= rest ? 0u : (rest - before_empty < empty[k] ? rest - before_empty : empty[k]);
    }
    before_part += part[k];
    before_empty += empty[k];
    if (quota) {
      uint32_t w = wp->w0 + k;
      if (w >= h->W) w -= h->W;
      const uint32_t got = heap_claim(h, w, lowest_bits(~wp->v[k], quota));
      if (got) {
        last = w;
        wp->served += popc(got);
      }
    }
  }
  if (last != NO_WORD) h->fhint[wp->slot] = last;
  wp->step++;
}

/* gh_page_claim_one(sweep = true) for one lane (the CPU build; on the GPU,
 * the new pages of chunk requests): phase 0 reads L consecutive words from
 * the slot's frame hint (skipped while the hint is unset), phase 1 L random
 * words, each taking a word only if it is partly used; then the first
 * entirely free word seen; then the sweep (gh_run_find_claim with n = 1)
 * from a random word. Stealing is not modelled: the model has no pinned
 * pages. Which free bit of a word is claimed does not change any count: the
 * searches see only whether a word is empty, full or partly used, and how
 * many free pages it has. Returns false if the heap had no free page. */
static bool lane_claim_one(heap_t* h, rng_t* r, uint32_t slot, uint32_t L, uint32_t* probes) {
  uint32_t emptyw = NO_WORD;
  const uint32_t hint = h->fhint[slot];
  for (uint32_t phase = 0; phase < 2u; phase++) {
    if (phase == 0u && hint >= h->W) continue;
    uint32_t w = hint;
    for (uint32_t i = 0; i < L; i++) {
      if (phase == 1u) w = rng_below(r, h->W);
      (*probes)++;
      const uint32_t v = h->words[w];
      if (v == 0u && emptyw == NO_WORD) emptyw = w;
      if (v != 0u && v != FULL && heap_claim_lowest(h, w) != NO_WORD) {
        if (w != hint) h->fhint[slot] = w;
        return true;
      }
      if (phase == 0u) w = next_word(h, w);
    }
  }
  uint32_t p = emptyw != NO_WORD ? heap_claim_lowest(h, emptyw) : NO_WORD;
  if (p == NO_WORD) {
    uint32_t w = rng_below(r, h->W);
    for (uint32_t s = 0; s < h->W; s++) {
      (*probes)++;
      if (h->words[w] != FULL) {
        p = heap_claim_lowest(h, w);
        break;
      }
      w = next_word(h, w);
    }
  }
  if (p == NO_WORD) return false;
  h->fhint[slot] = p >> 5;
  return true;
}

/* Warps ws[0..n) together: each collective step, all of them read their
 * windows before any of them claims (n = 1: one warp alone). L = 0: random
 * windows without limit (d); L > 0: gh_warp_pages (e). use_hint = false:
 * step 0 at a random word too (the frame hints still move). Lanes left when
 * the sweep has read every word count as failed (NULL). */
static void warps_run(heap_t* h, warp_t* ws, uint32_t n, rng_t* r, uint32_t L, bool use_hint) {
  for (uint64_t round = 0;; round++) {
    bool any = false;
    for (uint32_t i = 0; i < n; i++) {
      warp_t* wp = &ws[i];
      if (warp_searching(h, wp, L)) {
        if (L == 0 && heap_free_pages(h) == 0) die("unlimited collective search on a full heap");
        warp_read(h, wp, r, L, use_hint);
        any = true;
      }
    }
    if (!any) break;
    for (uint32_t i = 0; i < n; i++)
      if (warp_searching(h, &ws[i], L)) warp_claim(h, &ws[i]);
    if (round > 100000000ull) die("collective search does not end");
  }
  for (uint32_t i = 0; i < n; i++) ws[i].failed = ws[i].m - ws[i].served;
}

typedef struct {
  double sum_lane, sum_worst;
  uint64_t lanes, warps, sweeps, failed;
} batch_stat_t;

static void stat_warp(batch_stat_t* st, const warp_t* wp, uint32_t L) {
  uint32_t worst = 0;
  for (uint32_t l = 0; l < wp->m; l++) {
    st->sum_lane += wp->probes[l];
    if (wp->probes[l] > worst) worst = wp->probes[l];
  }
  st->sum_worst += worst;
  st->lanes += wp->m;
  st->warps++;
  st->sweeps += L && wp->step > L;
  st->failed += wp->failed;
}

/* A batch of N one-page requests as warps of 32 in sequence (groups of
 * `concurrent` warps in lockstep), warp i on slot i mod slots. The heap
 * keeps what the batch claims: the fill drifts by N/T. */
static void sim_batch(heap_t* h, rng_t* r, uint64_t N, uint32_t L, uint32_t concurrent, bool hints, batch_stat_t* st) {
  warp_t* ws = xcalloc(concurrent, sizeof *ws);
  uint64_t done = 0, idx = 0;
  while (done < N) {
    uint32_t n = 0;
    while (n < concurrent && done < N) {
      const uint32_t m = N - done < LANES ? (uint32_t)(N - done) : LANES;
      warp_init(&ws[n++], m, (uint32_t)(idx++ % h->n_slots));
      done += m;
    }
    warps_run(h, ws, n, r, L, hints);
    for (uint32_t i = 0; i < n; i++) stat_warp(st, &ws[i], L);
  }
  free(ws);
}

/* ------------------------------------------------------------------------ */
/* Fixed-fill experiments: every sample starts from the same fill            */

typedef struct {
  double sum, sum2;
  uint64_t n;
} acc_t;

static void acc_add(acc_t* a, double x) {
  a->sum += x;
  a->sum2 += x * x;
  a->n++;
}
static double acc_mean(const acc_t* a) { return a->n ? a->sum / (double)a->n : NAN; }
static double acc_se(const acc_t* a) {
  if (a->n < 2) return NAN;
  const double m = a->sum / (double)a->n;
  const double var = (a->sum2 - (double)a->n * m * m) / (double)(a->n - 1);
  return sqrt(var > 0.0 ? var / (double)a->n : 0.0);
}

#define TAIL_K 9u

typedef struct {
  /* closed forms */
  double b_mean, b_worst, c_mean, c_mean_exact, c_worst, c_seq, c_seq_q_l;
  warp_pred_t d, e;
  /* simulation */
  acc_t sb_mean, sb_worst, sc_mean, sc_worst, sc_seq, sd_mean, sd_worst, se_mean, se_worst;
  uint64_t d_tail[TAIL_K + 1]; /* warps whose worst lane needed more than k steps */
  uint64_t e_sweeps;
} fixed_t;

typedef struct {
  uint32_t refills;
  uint32_t page_lanes, page_warps, word_lanes, word_warps, seq_requests, warps_d, warps_e;
} fixed_cfg_t;

static uint32_t share(uint32_t total, uint32_t parts, uint32_t i) { return total / parts + (i < total % parts); }

static void run_fixed(uint32_t T, double fill, uint32_t L, const fixed_cfg_t* cfg, rng_t* r, fixed_t* out) {
  memset(out, 0, sizeof *out);
  const uint64_t U = (uint64_t)llround(fill * T), A = T - U;
  if (A == 0) die("fill leaves no free page");
  const double p = (double)A / T;
  out->b_mean = page_mean(p);
  out->b_worst = page_worst(p, LANES);
  out->c_mean = word_mean(word_full_iid(p));
  out->c_mean_exact = word_mean(word_full_exact(T, U));
  out->c_worst = word_worst(word_full_iid(p), LANES);
  out->c_seq = seq_mean(p);
  out->c_seq_q_l = pow(word_full_iid(p), L);
  out->d = warp_model(p, LANES, 0, T / 32u);
  out->e = warp_model(p, LANES, L, T / 32u);
  heap_t* h = heap_new(T, GH_MODEL_SLOTS);
  for (uint32_t f = 0; f < cfg->refills; f++) {
    heap_fill(h, U, r);
    for (uint32_t i = 0; i < share(cfg->page_lanes, cfg->refills, f); i++) acc_add(&out->sb_mean, (double)sim_page(h, r));
    for (uint32_t i = 0; i < share(cfg->page_warps, cfg->refills, f); i++) {
      uint64_t worst = 0;
      for (uint32_t l = 0; l < LANES; l++) {
        const uint64_t x = sim_page(h, r);
        if (x > worst) worst = x;
      }
      acc_add(&out->sb_worst, (double)worst);
    }
    for (uint32_t i = 0; i < share(cfg->word_lanes, cfg->refills, f); i++) acc_add(&out->sc_mean, (double)sim_word(h, r));
    for (uint32_t i = 0; i < share(cfg->word_warps, cfg->refills, f); i++) {
      uint64_t worst = 0;
      for (uint32_t l = 0; l < LANES; l++) {
        const uint64_t x = sim_word(h, r);
        if (x > worst) worst = x;
      }
      acc_add(&out->sc_worst, (double)worst);
    }
    /* (c'): runs of single-lane requests on one slot, each claiming its
     * page (a run takes at most A/40 pages, so the fill stays put), after
     * one uncounted request that sets the frame hint. */
    {
      const uint64_t run = A / 40 < 1 ? 1 : (A / 40 > 512 ? 512 : A / 40);
      for (uint64_t done = 0; done < share(cfg->seq_requests, cfg->refills, f); done += run) {
        uint32_t pr = 0;
        heap_reset_hints(h);
        if (!lane_claim_one(h, r, 0, L, &pr)) die("(c'): no free page");
        for (uint64_t k = 0; k < run; k++) {
          pr = 0;
          if (!lane_claim_one(h, r, 0, L, &pr)) die("(c'): no free page");
          acc_add(&out->sc_seq, pr);
        }
        heap_undo(h);
      }
    }
    /* (d): random windows, no limit, each warp's claims undone after it. */
    for (uint32_t i = 0; i < share(cfg->warps_d, cfg->refills, f); i++) {
      warp_t wp;
      warp_init(&wp, LANES, 0);
      warps_run(h, &wp, 1, r, 0, false);
      heap_undo(h);
      uint32_t worst = 0;
      for (uint32_t l = 0; l < LANES; l++) {
        acc_add(&out->sd_mean, wp.probes[l]);
        if (wp.probes[l] > worst) worst = wp.probes[l];
      }
      acc_add(&out->sd_worst, worst);
      for (uint32_t k = 0; k <= TAIL_K; k++) out->d_tail[k] += worst > k;
    }
    /* (e): the code's search: L steps, the frame hint moved by each step
     * that claims, then the collective sweep. Step 0 is at a random word:
     * with claims undone, a hint left by an earlier warp would point at a
     * restored word that is known to be useful (see DERIVATION.md, 9.3). */
    for (uint32_t i = 0; i < share(cfg->warps_e, cfg->refills, f); i++) {
      warp_t wp;
      warp_init(&wp, LANES, 0);
      heap_reset_hints(h);
      warps_run(h, &wp, 1, r, L, false);
      heap_undo(h);
      uint32_t worst = 0;
      for (uint32_t l = 0; l < LANES; l++) {
        acc_add(&out->se_mean, wp.probes[l]);
        if (wp.probes[l] > worst) worst = wp.probes[l];
      }
      acc_add(&out->se_worst, worst);
      out->e_sweeps += wp.step > L;
    }
  }
  heap_free(h);
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */

typedef struct {
  uint64_t pages, requests, seed;
  double fill;
  uint32_t probe_limit, reps, slots, concurrent, hints;
  bool have_pages, have_fill, have_requests;
} opts_t;

static void usage(void) {
  fprintf(stderr,
          "usage: gh_model table [--pages T] [--seed S]\n"
          "       gh_model predict --pages T --fill q --requests N [--probe-limit L] [--seed S]\n"
          "                        [--reps R] [--slots S] [--concurrent C] [--hints 0|1]\n"
          "       gh_model check [--seed S]\n"
          "       gh_model asymptotics [--seed S]\n");
  exit(2);
}

static uint64_t parse_u64(const char* s) {
  char* end = NULL;
  const double d = strtod(s, &end);
  if (end == s || *end || d < 0 || d > 1.8e19) usage();
  return (uint64_t)llround(d);
}

static opts_t parse(int argc, char** argv) {
  opts_t o;
  memset(&o, 0, sizeof o);
  o.pages = 1u << 22;
  o.seed = 0x6768u; /* "gh" */
  o.probe_limit = 8;
  o.reps = 16;
  o.slots = GH_MODEL_SLOTS;
  o.concurrent = 1;
  o.hints = 1;
  for (int i = 2; i < argc; i++) {
    const char* a = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (!strcmp(a, "--pages")) {
      o.pages = parse_u64(v);
      o.have_pages = true;
    } else if (!strcmp(a, "--fill")) {
      char* end = NULL;
      o.fill = strtod(v, &end);
      if (end == v || *end || !(o.fill >= 0.0 && o.fill < 1.0)) die("--fill is a fraction in [0, 1)");
      o.have_fill = true;
    } else if (!strcmp(a, "--requests")) {
      o.requests = parse_u64(v);
      o.have_requests = true;
    } else if (!strcmp(a, "--probe-limit")) {
      o.probe_limit = (uint32_t)parse_u64(v);
    } else if (!strcmp(a, "--seed")) {
      o.seed = parse_u64(v);
    } else if (!strcmp(a, "--reps")) {
      o.reps = (uint32_t)parse_u64(v);
    } else if (!strcmp(a, "--slots")) {
      o.slots = (uint32_t)parse_u64(v);
    } else if (!strcmp(a, "--concurrent")) {
      o.concurrent = (uint32_t)parse_u64(v);
    } else if (!strcmp(a, "--hints")) {
      o.hints = (uint32_t)parse_u64(v);
    } else {
      usage();
    }
  }
  if (o.pages < 1024 || o.pages % 32 || o.pages > (1ull << 31)) die("--pages: a multiple of 32, 1024 .. 2^31");
  if (o.probe_limit == 0) o.probe_limit = 8; /* as host/options.c */
  if (o.reps == 0 || o.slots == 0 || o.concurrent == 0) die("--reps, --slots, --concurrent must be positive");
  return o;
}

static const double k_fills[] = {0.5, 0.9, 0.95, 0.99, 0.995};
#define N_FILLS (sizeof k_fills / sizeof k_fills[0])

static double rel(double sim, double model) { return (sim - model) / model; }

static int cmd_table(const opts_t* o) {
  rng_t r = rng_seeded(o->seed);
  const uint32_t T = (uint32_t)o->pages, L = o->probe_limit;
  const fixed_cfg_t cfg = {16, 200000, 12800, 200000, 12800, 200000, 64000, 64000};
  fixed_t res[N_FILLS];
  for (size_t i = 0; i < N_FILLS; i++) run_fixed(T, k_fills[i], L, &cfg, &r, &res[i]);
  printf("# Closed forms (model) and Monte Carlo (sim), T = %u pages, W = %u words, exact fill placed uniformly,\n",
         T, T / 32u);
  printf("# requests that do not interfere (claims undone after each warp); probe limit L = %u; seed %llu.\n", L,
         (unsigned long long)o->seed);
  printf("# Samples: (b),(c) means %u lanes, worst %u warps; (d),(e) %u warps.\n\n", cfg.page_lanes, cfg.page_warps,
         cfg.warps_d);
  printf("## (b) one page per probe, (c) one word per probe: probes per lane; worst of 32 lanes searching alone\n\n");
  printf("| fill | (b) mean model | sim | (b) worst/32 model | sim | (c) mean model | exact | sim | (c) worst/32 model | sim |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < N_FILLS; i++) {
    const fixed_t* x = &res[i];
    printf("| %.1f%% | %.3f | %.3f | %.2f | %.2f | %.4f | %.4f | %.4f | %.3f | %.3f |\n", 100 * k_fills[i], x->b_mean,
           acc_mean(&x->sb_mean), x->b_worst, acc_mean(&x->sb_worst), x->c_mean, x->c_mean_exact,
           acc_mean(&x->sc_mean), x->c_worst, acc_mean(&x->sc_worst));
  }
  printf("\n## (c') one slot's successive single-lane requests as coded (gh_page_claim_one from the frame hint)\n\n");
  printf("| fill | model 1 + 1/(32p) | sim | random words 1/(1-Q) | Q^L (model valid while small) |\n");
  printf("|---|---|---|---|---|\n");
  for (size_t i = 0; i < N_FILLS; i++) {
    const fixed_t* x = &res[i];
    printf("| %.1f%% | %.4f | %.4f | %.4f | %.3f |\n", 100 * k_fills[i], x->c_seq, acc_mean(&x->sc_seq), x->c_mean,
           x->c_seq_q_l);
  }
  printf("\n## (d) warp of 32 lanes, 32-word windows at random words, no step limit; (e) gpuheap: L collective "
         "steps, then the collective sweep\n\n");
  printf("| fill | free/window | (d) mean model | sim | (d) worst model | sim | (e) mean model | sim | (e) worst model | sim "
         "| (e) P(sweep) model | sim |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < N_FILLS; i++) {
    const fixed_t* x = &res[i];
    const double p = 1.0 - k_fills[i];
    printf("| %.1f%% | %.2f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.2e | %.2e |\n",
           100 * k_fills[i], 1024 * p, x->d.mean, acc_mean(&x->sd_mean), x->d.worst, acc_mean(&x->sd_worst), x->e.mean,
           acc_mean(&x->se_mean), x->e.worst, acc_mean(&x->se_worst), x->e.sweep < 1e-99 ? 0.0 : x->e.sweep,
           (double)x->e_sweeps / (double)x->se_worst.n);
  }
  printf("\n## Tails: P(worst lane of a warp needs more than k collective steps) and a lane probing words alone\n\n");
  printf("| fill | k | exact P(Bin(1024k,p) <= 31) | Chernoff bound | sim (d) | single lane q^(32k) |\n");
  printf("|---|---|---|---|---|---|\n");
  for (size_t i = 2; i < N_FILLS; i++) {
    const fixed_t* x = &res[i];
    const double p = 1.0 - k_fills[i];
    for (uint32_t k = 1; k <= TAIL_K; k++) {
      const double ex = warp_tail_exact(p, LANES, k, T / 32u);
      if (ex < 1e-12 && k > 1) break;
      printf("| %.1f%% | %u | %.3e | %.3e | %.3e | %.3e |\n", 100 * k_fills[i], k, ex, warp_tail_chernoff(p, LANES, k, T / 32u),
             (double)x->d_tail[k] / (double)x->sd_worst.n, pow(k_fills[i], 32.0 * k));
    }
  }
  return 0;
}

static int cmd_predict(const opts_t* o) {
  if (!o->have_fill || !o->have_requests) usage();
  const uint32_t T = (uint32_t)o->pages;
  const uint64_t U = (uint64_t)llround(o->fill * T), A = T - U, N = o->requests;
  if (N == 0) die("--requests must be positive");
  if (N > A) die("more requests than free pages: the batch would run the heap full");
  const warp_pred_t mdl = batch_model(T, A, N, o->probe_limit);
  rng_t r = rng_seeded(o->seed);
  heap_t* h = heap_new(T, o->slots);
  batch_stat_t st;
  memset(&st, 0, sizeof st);
  for (uint32_t i = 0; i < o->reps; i++) {
    heap_fill(h, U, &r);
    sim_batch(h, &r, N, o->probe_limit, o->concurrent, o->hints != 0, &st);
    heap_forget_log(h);
  }
  heap_free(h);
  if (st.failed) fprintf(stderr, "gh_model: %llu requests found no page\n", (unsigned long long)st.failed);
  printf("pages,fill,requests,mean_probes_model,worst_lane_model,mean_probes_sim,worst_lane_sim\n");
  printf("%u,%.6g,%llu,%.4f,%.4f,%.4f,%.4f\n", T, o->fill, (unsigned long long)N, mdl.mean, mdl.worst,
         st.sum_lane / (double)st.lanes, st.sum_worst / (double)st.warps);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* check                                                                     */

static int n_fail = 0, n_pass = 0;

static void expect_rel(const char* what, double model, double sim, double se, double tol) {
  const double e = rel(sim, model);
  const bool ok = isfinite(e) && fabs(e) <= tol;
  char se_text[32] = "";
  if (isfinite(se)) snprintf(se_text, sizeof se_text, " (se %.1e)", se);
  printf("  %-44s model %11.5f  sim %11.5f%-12s  rel %+7.3f%%  tol %.1f%%  %s\n", what, model, sim, se_text, 100 * e,
         100 * tol, ok ? "ok" : "FAIL");
  if (ok)
    n_pass++;
  else
    n_fail++;
}

static void expect(const char* what, bool ok, const char* detail) {
  printf("  %-44s %s  %s\n", what, detail, ok ? "ok" : "FAIL");
  if (ok)
    n_pass++;
  else
    n_fail++;
}

#define TOL_MEAN 0.03

static int cmd_check(const opts_t* o) {
  rng_t r = rng_seeded(o->seed);
  const clock_t t0 = clock();
  const uint32_t Ts[] = {1u << 18, 1u << 22};
  const uint32_t L = 8;
  char name[96], detail[160];
  printf("Closed forms against simulation at fixed fill; tolerance %.0f%% relative on every mean.\n", 100 * TOL_MEAN);
  for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++) {
    const fixed_cfg_t cfg = {t == 0 ? 256u : 12u, 192000, 12800, 192000, 12800, 64000, 48000, 64000};
    for (size_t i = 0; i < N_FILLS; i++) {
      fixed_t x;
      run_fixed(Ts[t], k_fills[i], L, &cfg, &r, &x);
      printf("T = 2^%d, fill %.1f%%\n", t == 0 ? 18 : 22, 100 * k_fills[i]);
      expect_rel("(b) page probes, mean", x.b_mean, acc_mean(&x.sb_mean), acc_se(&x.sb_mean), TOL_MEAN);
      expect_rel("(b) page probes, worst of 32 lanes", x.b_worst, acc_mean(&x.sb_worst), acc_se(&x.sb_worst), TOL_MEAN);
      expect_rel("(c) word probes, mean", x.c_mean, acc_mean(&x.sc_mean), acc_se(&x.sc_mean), TOL_MEAN);
      expect_rel("(c) word probes, worst of 32 lanes", x.c_worst, acc_mean(&x.sc_worst), acc_se(&x.sc_worst), TOL_MEAN);
      if (x.c_seq_q_l <= 0.1)
        expect_rel("(c') one slot's lane as coded, mean", x.c_seq, acc_mean(&x.sc_seq), acc_se(&x.sc_seq), TOL_MEAN);
      expect_rel("(d) collective steps, mean lane", x.d.mean, acc_mean(&x.sd_mean), acc_se(&x.sd_mean), TOL_MEAN);
      expect_rel("(d) collective steps, worst lane", x.d.worst, acc_mean(&x.sd_worst), acc_se(&x.sd_worst), TOL_MEAN);
      expect_rel("(e) gpuheap L=8 + sweep, mean lane", x.e.mean, acc_mean(&x.se_mean), acc_se(&x.se_mean), TOL_MEAN);
      expect_rel("(e) gpuheap L=8 + sweep, worst lane", x.e.worst, acc_mean(&x.se_worst), acc_se(&x.se_worst),
                 TOL_MEAN);
      /* (e) is (d) with the windows after the L-th consecutive: the closed
       * forms differ only by the finite-heap correction of those windows. */
      snprintf(detail, sizeof detail, "mean %.6f vs %.6f, worst %.6f vs %.6f", x.e.mean, x.d.mean, x.e.worst,
               x.d.worst);
      expect("(e) closed form = (d) within 0.1%",
             fabs(rel(x.e.mean, x.d.mean)) <= 1e-3 && fabs(rel(x.e.worst, x.d.worst)) <= 1e-3, detail);
      {
        /* How often (e) reaches the sweep: P(Bin(1024 L, p) <= 31), within 5
         * standard errors (effective samples as for the tails) plus 1e-3. */
        const double n = (double)x.se_worst.n, fr = (double)x.e_sweeps / n;
        const double n_eff = fmin(n, (double)cfg.refills * (Ts[t] / 32u) / WINDOW_WORDS);
        const double se = sqrt(x.e.sweep * (1.0 - x.e.sweep) / n_eff);
        snprintf(detail, sizeof detail, "sim %.3e, model %.3e, tol %.1e", fr, x.e.sweep, 5.0 * se + 1e-3);
        expect("(e) P(sweep)", fabs(fr - x.e.sweep) <= 5.0 * se + 1e-3, detail);
      }
      /* Tails of (d): the sampled frequency within 5 standard errors (plus
       * 1e-3) of the exact binomial tail, which the Chernoff bound bounds. */
      bool ok = true;
      double worst_z = 0.0, worst_ex = 0.0, worst_fr = 0.0;
      uint32_t worst_k = 0;
      for (uint32_t k = 1; k <= TAIL_K; k++) {
        const double ex = warp_tail_exact(1.0 - k_fills[i], LANES, k, Ts[t] / 32u);
        const double ch = warp_tail_chernoff(1.0 - k_fills[i], LANES, k, Ts[t] / 32u);
        /* Windows of one fill overlap: a fill offers about W/32 independent
         * windows, which bounds the effective number of samples. */
        const double n = (double)x.sd_worst.n, fr = (double)x.d_tail[k] / n;
        const double n_eff = fmin(n, (double)cfg.refills * (Ts[t] / 32u) / WINDOW_WORDS);
        const double se = sqrt(ex * (1.0 - ex) / n_eff);
        if (ex > ch * (1.0 + 1e-12)) ok = false;
        if (fabs(fr - ex) > 5.0 * se + 1e-3) ok = false;
        const double z = fabs(fr - ex) / (5.0 * se + 1e-3);
        if (z > worst_z) {
          worst_z = z;
          worst_k = k;
          worst_ex = ex;
          worst_fr = fr;
        }
      }
      snprintf(detail, sizeof detail,
               "k = 1..%u: exact <= Chernoff; |sim - exact| <= 5 se + 1e-3 (tightest: k=%u, %.2e vs %.2e, %.0f%% of tol)",
               TAIL_K, worst_k, worst_fr, worst_ex, 100 * worst_z);
      expect("(d) tail P(steps > k)", ok, detail);
    }
  }
  /* The batch: N one-page requests in sequence (the fill drifts), model with
   * p_i = (A - 32 i)/T against the simulation that keeps its claims. The
   * model assumes the fill stays independent. The batch's claims are not
   * spread like the fill (DERIVATION.md, 9.2), which the sweep tolerates
   * while the batch takes at most 40% of the free pages (N/A <= 0.4):
   * asserted there, printed beyond. */
  printf("Batch of N one-page requests in sequence on T = 2^22, L = 8, %u slots (fill drifts by N/T):\n", GH_MODEL_SLOTS);
  const struct {
    double fill;
    uint64_t N;
    bool asserted;
  } batches[] = {{0.5, 1u << 14, true},   {0.9, 1u << 14, true},   {0.95, 1u << 14, true},
                 {0.99, 1u << 10, true},   {0.99, 1u << 14, true},  {0.995, 1u << 9, true},
                 {0.995, 1u << 12, true},  {0.995, 1u << 14, false}};
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
    const uint32_t T = 1u << 22;
    const uint64_t N = batches[i].N, U = (uint64_t)llround(batches[i].fill * T), A = T - U;
    const warp_pred_t mdl = batch_model(T, A, N, L);
    heap_t* h = heap_new(T, GH_MODEL_SLOTS);
    batch_stat_t st;
    memset(&st, 0, sizeof st);
    /* 2^20 requests in all (32768 warps); a fresh fill every 64 batches,
     * the batch's claims undone in between. */
    const uint32_t reps = (uint32_t)((1u << 20) / N);
    for (uint32_t rep = 0; rep < reps; rep++) {
      if (rep % 64 == 0)
        heap_fill(h, U, &r);
      else {
        heap_undo(h);
        heap_reset_hints(h);
      }
      sim_batch(h, &r, N, L, 1, true, &st);
    }
    heap_free(h);
    const double sm = st.sum_lane / (double)st.lanes, sw = st.sum_worst / (double)st.warps;
    if (batches[i].asserted) {
      snprintf(name, sizeof name, "fill %.1f%% N=%llu (N/A=%.3f): mean lane", 100 * batches[i].fill,
               (unsigned long long)N, (double)N / A);
      expect_rel(name, mdl.mean, sm, NAN, TOL_MEAN);
      snprintf(name, sizeof name, "fill %.1f%% N=%llu (N/A=%.3f): worst lane", 100 * batches[i].fill,
               (unsigned long long)N, (double)N / A);
      expect_rel(name, mdl.worst, sw, NAN, TOL_MEAN);
    } else {
      printf("  not asserted, N/A = %.2f > 0.4: fill %.1f%% N=%llu  mean model %.3f sim %.3f (%+.1f%%)"
             "  worst model %.3f sim %.3f (%+.1f%%)\n",
             (double)N / A, 100 * batches[i].fill, (unsigned long long)N, mdl.mean, sm, 100 * rel(sm, mdl.mean),
             mdl.worst, sw, 100 * rel(sw, mdl.worst));
    }
  }
  printf("%d checks passed, %d failed (%.1f s CPU)\n", n_pass, n_fail, (double)(clock() - t0) / CLOCKS_PER_SEC);
  return n_fail ? 1 : 0;
}

/* ------------------------------------------------------------------------ */
/* asymptotics                                                               */

/* N requests at once on a central queue (one lock, one server): served one
 * at a time in a random order, each service taking Exp(1) time units (one
 * unit = one serialized memory operation); a request's latency is the sum of
 * the services up to and including its own. Returns the mean latency. */
static double sim_queue(rng_t* r, uint64_t N) {
  double t = 0.0, sum = 0.0;
  for (uint64_t i = 0; i < N; i++) {
    t += -log1p(-rng_unit(r));
    sum += t;
  }
  return sum / (double)N;
}

/* Batch of N single-lane requests, each claiming what it finds. */
static double sim_batch_single(heap_t* h, rng_t* r, uint64_t N, bool words) {
  double sum = 0.0;
  for (uint64_t i = 0; i < N; i++) {
    if (words) {
      uint64_t n = 1;
      uint32_t w = rng_below(r, h->W);
      while (h->words[w] == FULL) {
        w = rng_below(r, h->W);
        n++;
      }
      heap_claim_lowest(h, w);
      sum += (double)n;
    } else {
      uint64_t n = 1;
      uint32_t p = rng_below(r, h->T);
      while ((h->words[p >> 5] >> (p & 31u)) & 1u) {
        p = rng_below(r, h->T);
        n++;
      }
      heap_claim(h, p >> 5, 1u << (p & 31u));
      sum += (double)n;
    }
  }
  return sum / (double)N;
}

static int cmd_asymptotics(const opts_t* o) {
  rng_t r = rng_seeded(o->seed);
  const clock_t t0 = clock();
  const uint32_t T = 1u << 22, L = 8;
  const struct {
    double fill;
    uint64_t ns[4];
  } cases[] = {{0.9, {32, 256, 2048, 16384}}, {0.99, {32, 256, 1024, 4096}}};
  printf("Mean probes per request for a batch of N concurrent one-page requests, T = 2^22, against a central queue.\n");
  printf("Random search: growth over N bounded by the fill drift A/(A-N) (3%% slack for sampling);\n");
  printf("queue: mean latency (N+1)/2 within 3%%, growth at least 0.9 (N_max+1)/(N_min+1).\n");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const double fill = cases[c].fill;
    const uint64_t U = (uint64_t)llround(fill * T), A = T - U;
    heap_t* h = heap_new(T, GH_MODEL_SLOTS);
    heap_fill(h, U, &r);
    printf("\nfill %.0f%%, A = %llu free pages\n", 100 * fill, (unsigned long long)A);
    printf("  %8s  %12s %12s %12s %12s  %12s  %12s %12s\n", "N", "page sim", "page drift", "word sim", "word drift",
           "warp sim", "warp drift", "queue sim");
    double first[4] = {0}, last[4] = {0};
    uint64_t n_min = 0, n_max = 0;
    for (size_t ni = 0; ni < 4; ni++) {
      const uint64_t N = cases[c].ns[ni];
      const uint64_t reps = N >= 65536 ? 1 : 65536 / N;
      double s_page = 0, s_word = 0, s_queue = 0, m_page = 0, m_word = 0;
      batch_stat_t st;
      memset(&st, 0, sizeof st);
      for (uint64_t i = 0; i < reps; i++) {
        s_page += sim_batch_single(h, &r, N, false);
        heap_undo(h);
        s_word += sim_batch_single(h, &r, N, true);
        heap_undo(h);
        heap_reset_hints(h);
        sim_batch(h, &r, N, L, 1, true, &st);
        heap_undo(h);
        s_queue += sim_queue(&r, N);
      }
      for (uint64_t i = 0; i < N; i++) {
        const double p = (double)(A - i) / T;
        m_page += page_mean(p);
        m_word += word_mean(word_full_iid(p));
      }
      const double v[4] = {s_page / reps, s_word / reps, st.sum_lane / (double)st.lanes, s_queue / reps};
      const double m_warp = batch_model(T, A, N, L).mean;
      printf("  %8llu  %12.4f %12.4f %12.4f %12.4f  %12.4f  %12.4f %12.2f\n", (unsigned long long)N, v[0], m_page / N,
             v[1], m_word / N, v[2], m_warp, v[3]);
      char name[96];
      snprintf(name, sizeof name, "fill %.0f%% N=%llu page, drift model", 100 * fill, (unsigned long long)N);
      expect_rel(name, m_page / N, v[0], NAN, TOL_MEAN);
      snprintf(name, sizeof name, "fill %.0f%% N=%llu word, drift model", 100 * fill, (unsigned long long)N);
      expect_rel(name, m_word / N, v[1], NAN, TOL_MEAN);
      snprintf(name, sizeof name, "fill %.0f%% N=%llu warp, drift model", 100 * fill, (unsigned long long)N);
      expect_rel(name, m_warp, v[2], NAN, TOL_MEAN);
      snprintf(name, sizeof name, "fill %.0f%% N=%llu queue, (N+1)/2", 100 * fill, (unsigned long long)N);
      expect_rel(name, (N + 1) / 2.0, v[3], NAN, TOL_MEAN);
      char detail[128];
      const double bound = (double)T / (double)(A - N);
      snprintf(detail, sizeof detail, "page %.3f word %.3f warp %.3f <= T/(A-N) = %.3f", v[0], v[1], v[2], bound);
      snprintf(name, sizeof name, "fill %.0f%% N=%llu bound T/(A-N)", 100 * fill, (unsigned long long)N);
      expect(name, v[0] <= bound * (1 + TOL_MEAN) && v[1] <= bound && v[2] <= bound, detail);
      if (!n_min) {
        n_min = N;
        memcpy(first, v, sizeof v);
      }
      n_max = N;
      memcpy(last, v, sizeof v);
    }
    const double drift = (double)A / (double)(A - n_max);
    const char* names[3] = {"page", "word", "warp"};
    for (int k = 0; k < 3; k++) {
      char name[96], detail[128];
      const double g = last[k] / first[k];
      snprintf(name, sizeof name, "fill %.0f%% %s: no growth with N", 100 * fill, names[k]);
      snprintf(detail, sizeof detail, "N %llu -> %llu: x%.4f <= A/(A-N) x 1.03 = %.4f", (unsigned long long)n_min,
               (unsigned long long)n_max, g, drift * 1.03);
      expect(name, g <= drift * 1.03, detail);
    }
    {
      char name[96], detail[128];
      const double g = last[3] / first[3], lin = (double)(n_max + 1) / (double)(n_min + 1);
      snprintf(name, sizeof name, "fill %.0f%% queue: linear growth", 100 * fill);
      snprintf(detail, sizeof detail, "N %llu -> %llu: x%.1f >= 0.9 (N+1)/(N0+1) = %.1f", (unsigned long long)n_min,
               (unsigned long long)n_max, g, 0.9 * lin);
      expect(name, g >= 0.9 * lin, detail);
    }
    heap_free(h);
  }
  printf("%d checks passed, %d failed (%.1f s CPU)\n", n_pass, n_fail, (double)(clock() - t0) / CLOCKS_PER_SEC);
  return n_fail ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc < 2) usage();
  const opts_t o = parse(argc, argv);
  if (!strcmp(argv[1], "table")) return cmd_table(&o);
  if (!strcmp(argv[1], "predict")) return cmd_predict(&o);
  if (!strcmp(argv[1], "check")) return cmd_check(&o);
  if (!strcmp(argv[1], "asymptotics")) return cmd_asymptotics(&o);
  usage();
  return 2;
}
