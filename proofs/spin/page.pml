/* gpuheap: SPIN model of the page-state protocol.
 *
 * The model follows include/gpuheap/page.h, run.h and core.h as they stand.
 * Every atomic read-modify-write of the code (fetch-add, fetch-sub,
 * fetch-or, fetch-and, compare-and-swap) is one atomic step of the model (a
 * d_step); every plain load or store is a step of its own. What a thread
 * computes from values it already holds is invisible to the others; where
 * convenient it is folded into the step next to it. Ghost variables (owner
 * arrays) record who holds what; they are written only inside the step that
 * hands a chunk or a page over, and never steer the protocol.
 *
 * The room bitmaps (xroom, xroomsum) are hints: a page found through them
 * is checked by the reservation like any other, and no step depends on
 * their bits otherwise. The model leaves their updates out (gh_room_set,
 * gh_room_clear, and the load of xcount gh_page_reserve makes for them) and
 * lets the room search try any page, or none (README.md).
 *
 * Memory model: sequential consistency, i.e. all threads see the steps in
 * one order. The acquire/release orders the code gives its atomics are not
 * checked here; what is checked is that the protocol is correct for every
 * interleaving of its atomic steps.
 *
 * The inline names are the ones the code's comments refer to ("model
 * `reserve`", ...), and each inline's comment names the function it models.
 * Inline parameters carry a prefix of their inline's name: Promela inlines
 * are textual, and a parameter named like the caller's variable would be
 * substituted into itself.
 *
 * Configuration (spin -DNAME=value):
 *   NTHREADS  threads (at most 14); thread t uses hint slot t % NSLOTS
 *   NPAGES    pages of the heap (at most 4)
 *   WORDBITS  pages per page-bitmap word (the code has 32). The default 1
 *             makes a run span two words, so run_claim's give-back runs.
 *   NCLASSES  chunk classes, 1 or 2: class 0 has PP0 chunks per page (2: a
 *             new page has room left and is pinned by a refiller), class 1
 *             has PP1 (1: a request fills a page, and takes a new page
 *             before it asks the hint)
 *   NSLOTS    hint slots per class (at most 8)
 *   NOPS      operations a thread makes before it frees what it holds
 *   MAXREQ    chunks one request asks for, 1 or 2: 1 is a lane (core.h); 2
 *             is a warp group of two lanes (warp.cuh), which makes partial
 *             grants possible
 *   RUNLEN    pages of a run (at most NPAGES)
 *   REFILL_MIN   classes with at least this many chunks a page wait for a
 *                slot's refiller (the heap's refill_min), and their
 *                refillers skip the room source. Default 3: no class waits,
 *                and a refiller may pin a page with room that it found (as
 *                for all but the smallest classes in the code); 2: class 0
 *                waits
 *   REFILL_WAIT  re-reads of a REFILL slot before searching alone (the
 *                code: GH_REFILL_WAIT)
 *   SWEEP_TRIES  reservations the sweep tries on a page that reads as having
 *                room (the code: 4)
 *   OFFLINE   words of the tail that an offliner process takes offline
 *             while the threads run (gh_offline_tail, run.h: a managed
 *             heap's shrink at maintain, one frame a word here), stealing
 *             hint pages of a frame that stays claimed, then brings back
 *             online (a growth); 0 (the default): no offliner
 *
 * Variants and mutations (see README.md):
 *   SLOT_MONITOR                 also check the hint slots' invariant in
 *                                every reachable state (doubles the states)
 *   MUTATION_NONATOMIC_CLOSE     close as a plain load and a plain store
 *   MUTATION_NO_UNDO             a failed reservation keeps its add
 *   MUTATION_UNRESERVE_FIRST     free gives back the count before the bit
 *   MUTATION_INSTALL_KEEPS_PIN   install leaves the replaced page pinned
 *   MUTATION_STEAL_ANY_KIND      steal takes the slot from whatever xstate
 *                                holds, CHUNK or not (the code before the
 *                                fix in README.md, "Findings")
 *   MUTATION_NONATOMIC_OFFLINE   the offliner loads a word, then stores
 *                                all ones in a step of its own
 */

#ifndef NTHREADS
#define NTHREADS 3
#endif
#ifndef NPAGES
#define NPAGES 2
#endif
#ifndef WORDBITS
#define WORDBITS 1
#endif
#ifndef NCLASSES
#define NCLASSES 2
#endif
#ifndef NSLOTS
#define NSLOTS 1
#endif
#ifndef NOPS
#define NOPS 1
#endif
#ifndef MAXREQ
#define MAXREQ 1
#endif
#ifndef RUNLEN
#define RUNLEN 2
#endif
#ifndef REFILL_MIN
#define REFILL_MIN 3
#endif
#ifndef REFILL_WAIT
#define REFILL_WAIT 1
#endif
#ifndef SWEEP_TRIES
#define SWEEP_TRIES 2
#endif
#ifndef OFFLINE
#define OFFLINE 0
#endif
#ifndef PP0
#define PP0 2
#endif
#ifndef PP1
#define PP1 1
#endif

#if NTHREADS > 14 || NPAGES > 4 || NPAGES % WORDBITS != 0 || NCLASSES > 2 || NSLOTS > 8 || \
    MAXREQ > 2 || PP0 > 2 || PP1 > 2 || RUNLEN > NPAGES || OFFLINE >= NPAGES / WORDBITS
#error "page.pml: configuration out of the model's range (see the top of the file)"
#endif

#define NWORDS (NPAGES / WORDBITS)
#define WORDMASK ((1 << WORDBITS) - 1)
#define PPMAX 2                     /* chunk bits per page in the model */
#define NCHUNKS (NPAGES * PPMAX)
#define NHINTS (NCLASSES * NSLOTS)
#define NONE 255                    /* GH_NO_PAGE */
#define REFILL 254                  /* GH_REFILL */
#define REFILL_COLD 253             /* GH_REFILL_COLD: the slot's first page */
#define DROPPED 252                 /* GH_DROPPED: a slot that gave its page up */
#define IS_REFILL(v) ((v) == REFILL || (v) == REFILL_COLD)

#define PER_PAGE(c) ((c) == 0 -> PP0 : PP1)
#define VALID(c) ((1 << PER_PAGE(c)) - 1)

/* xcount: OPEN | PINNED | class | used, laid out as in types.h with
 * narrower fields. used has 4 bits here (22 in the code); the model asserts
 * that no add carries out of it and no subtract borrows from above it. */
#define C_OPEN 128
#define C_PINNED 64
#define C_CLASS_SHIFT 4
#define C_CLASS_MASK 48
#define C_USED_MASK 15
#define USED(x) ((x) & C_USED_MASK)
#define CCLASS(c) ((c) << C_CLASS_SHIFT)

/* xstate: kind in bits 6..7; CHUNK: class in bits 3..5, slot in bits 0..2;
 * HEAD: the run's length in the low bits. As with gh_state_class and
 * gh_state_slot (types.h), the class and slot fields are read from whatever
 * low bits the state holds: a HEAD of length L reads as class 0, slot L
 * (here for L < 8, in the code for L < 2^22). */
#define S_FREE 0
#define S_KIND_SHIFT 6
#define S_KIND_CHUNK 1
#define S_KIND_HEAD 2
#define S_CHUNK(c, s) ((S_KIND_CHUNK << S_KIND_SHIFT) | ((c) << 3) | (s))
#define S_HEAD(len) ((S_KIND_HEAD << S_KIND_SHIFT) | (len))
#define S_KIND(x) ((x) >> S_KIND_SHIFT)
#define S_CLASS(x) (((x) >> 3) & 7)
#define S_SLOT(x) ((x) & 7)

/* Ghost page owners. */
#define G_FREE 0
#define G_CHUNKS 15                 /* a chunk page: claimed for formatting, or formatted */
#define G_RUN(t) ((t) + 1)          /* a page of a run that thread t holds or is claiming */
#define G_OFFLINE 14                /* a page of a word the offliner holds */

/* v := any of lo..hi (at most four values), in one step. */
#define PICK(v, lo, hi)                                                      \
  if                                                                         \
  :: v = (lo)                                                                \
  :: v = ((lo) + 1 <= (hi) -> (lo) + 1 : (lo))                               \
  :: v = ((lo) + 2 <= (hi) -> (lo) + 2 : (lo))                               \
  :: v = ((lo) + 3 <= (hi) -> (lo) + 3 : (lo))                               \
  fi

/* assert(e) under a name: a violation is reported as "assertion violated
 * name". The flag is false again at once, so it adds nothing to the state. */
#define CHECK(name, e) name = (e); assert(name); name = false

/* ---- Shared state: the heap's metadata --------------------------------- */
byte xpages[NWORDS];                /* page bitmap */
byte xstate[NPAGES];
byte xcount[NPAGES];
byte xchunks[NPAGES];               /* one chunk-bitmap word per page */
byte xhints[NHINTS];                /* [class * NSLOTS + slot]: a page, NONE, DROPPED, REFILL or REFILL_COLD */

/* ---- Ghost state -------------------------------------------------------- */
byte chunk_owner[NCHUNKS];          /* [page * PPMAX + bit]: 0, or thread + 1 */
byte page_owner[NPAGES];            /* G_FREE, G_CHUNKS or G_RUN(thread) */
byte slot_refiller[NHINTS];         /* thread + 1 while a slot is REFILL, else 0 */

/* Locals of every process that expands the protocol's inlines (inlines use
 * the variables of the process they are expanded in), and the named
 * assertion flags. */
#define PROTOCOL_LOCALS                                                      \
  byte r_old, r_undo, u_old, u_now, un_old, un_now;                          \
  bool c_won, i_won;                                                         \
  byte t_free, t_want, t_old, t_got, t_i, t_cnt, t_r, rl_old, pr_old, pr_i;  \
  bool t_lost;                                                               \
  byte ft_p, ft_w, ft_mask, ft_free, ft_mine, ft_q, ft_i, th_c, th_st, th_idx; \
  bool ft_ok, th_won;                                                        \
  byte rc_p, rc_w, rc_mask, rc_v, rc_q, rc_i; bool rc_ok;                    \
  byte rf_p; bool rf_won;                                                    \
  byte s_p, s_c, s_st, s_idx, s_freed; bool s_won, s_go;                     \
  byte pc_w, pc_v, pc_bit, pc_old, pc_n, pc_r, pc_round, pn_c, rs_c, rs_k;   \
  bool no_carry, no_borrow, count_was_blank, count_was_pinned,              \
       bits_were_set, page_unused, chunk_was_free, page_has_chunks,          \
       free_bit_left, own_chunk, page_was_free, slot_in_range,               \
       own_run, slot_was_refill, one_refiller

/* ---- page.h ------------------------------------------------------------- */

/* include/gpuheap/page.h: gh_pages_release. One fetch-and of page-bitmap
 * word pr_w. The pages' ghost owners go back to free in the same step: from
 * here on anyone may claim them. */
inline pages_release(pr_w, pr_mask) {
  d_step {
    pr_old = xpages[pr_w];
    CHECK(bits_were_set, (pr_old & (pr_mask)) == (pr_mask));
    xpages[pr_w] = pr_old & ~(pr_mask);
    pr_i = 0;
    do
    :: pr_i < WORDBITS ->
       if
       :: ((pr_mask) >> pr_i) & 1 -> page_owner[(pr_w) * WORDBITS + pr_i] = G_FREE
       :: else -> skip
       fi;
       pr_i++
    :: else -> break
    od;
    pr_i = 0;
    pr_old = 0
  }
}

/* include/gpuheap/page.h: gh_page_try_close. The CAS of xcount from exactly
 * cl_seen (OPEN|class|0) to 0; the one winner (clears the room bit,) stores
 * FREE in xstate and clears the page bit. The winner checks that nobody holds a chunk of the
 * page and that its chunk bitmap is empty (the code's checked builds assert
 * the latter). */
inline close(cl_p, cl_seen) {
#ifndef MUTATION_NONATOMIC_CLOSE
  d_step {
    if
    :: xcount[cl_p] == (cl_seen) ->
       xcount[cl_p] = 0;
       c_won = true;
       CHECK(page_unused, page_owner[cl_p] == G_CHUNKS && chunk_owner[(cl_p) * PPMAX] == 0 &&
                          chunk_owner[(cl_p) * PPMAX + 1] == 0 && xchunks[cl_p] == 0)
    :: else -> c_won = false
    fi
  };
#else
  /* Mutation: a plain load, then (a step later) a plain store of 0. */
  c_won = (xcount[cl_p] == (cl_seen));
  if
  :: c_won ->
     d_step {
       xcount[cl_p] = 0;
       CHECK(page_unused, page_owner[cl_p] == G_CHUNKS && chunk_owner[(cl_p) * PPMAX] == 0 &&
                          chunk_owner[(cl_p) * PPMAX + 1] == 0 && xchunks[cl_p] == 0)
     }
  :: else -> skip
  fi;
#endif
  if
  :: c_won ->
     xstate[cl_p] = S_FREE;
     pages_release((cl_p) / WORDBITS, 1 << ((cl_p) % WORDBITS))
  :: else -> skip
  fi;
  c_won = false
}

/* include/gpuheap/page.h: gh_page_unreserve and gh_page_settle. One
 * fetch-sub of ur_k; whoever brings an open, unpinned page to used 0 tries
 * to close it (and whoever takes it below full sets its room bit). */
inline unreserve(ur_p, ur_k) {
  d_step {
    u_old = xcount[ur_p];
    CHECK(no_borrow, USED(u_old) >= (ur_k));
    xcount[ur_p] = u_old - (ur_k);
    u_now = u_old - (ur_k);
    u_old = 0
  };
  if
  :: (u_now & (C_OPEN | C_PINNED | C_USED_MASK)) == C_OPEN -> close(ur_p, u_now)
  :: else -> skip
  fi;
  u_now = 0
}

/* include/gpuheap/page.h: gh_page_reserve. One fetch-add of rv_n. If the
 * value before shows the page closed, of another class or full, the whole
 * add is undone (it was a transient); a partial grant of rv_k < rv_n gives
 * back the rest. rv_used: used before the add, on success. (A reservation
 * that fills the page then updates its room bit.) */
inline reserve(rv_p, rv_cls, rv_n, rv_k, rv_used) {
  d_step {
    r_old = xcount[rv_p];
    CHECK(no_carry, USED(r_old) + (rv_n) <= C_USED_MASK);
    xcount[rv_p] = r_old + (rv_n);
    if
    :: (r_old & (C_OPEN | C_CLASS_MASK)) != (C_OPEN | CCLASS(rv_cls)) || USED(r_old) >= PER_PAGE(rv_cls) ->
       rv_k = 0;
#ifndef MUTATION_NO_UNDO
       r_undo = (rv_n)
#else
       r_undo = 0                   /* mutation: the failed add stays */
#endif
    :: else ->
       rv_k = ((rv_n) <= PER_PAGE(rv_cls) - USED(r_old) -> (rv_n) : PER_PAGE(rv_cls) - USED(r_old));
       r_undo = (rv_n) - rv_k;
       rv_used = USED(r_old)
    fi;
    r_old = 0
  };
  if
  :: r_undo > 0 -> unreserve(rv_p, r_undo)
  :: else -> skip
  fi;
  r_undo = 0
}

/* include/gpuheap/page.h: gh_page_reserve_cas. A load of xcount, then CAS
 * from the value seen to it plus k = min(n, room), for as long as the page
 * reads open, of the class and not full: a failed attempt leaves no
 * transient. rq_k: the chunks reserved (0: the page was not open for the
 * class, or full); rq_used: used before, on success. */
inline reserve_cas(rq_p, rq_cls, rq_n, rq_k, rq_used) {
  rq_k = 0;
  rs_c = xcount[rq_p];
  do
  :: (rs_c & (C_OPEN | C_CLASS_MASK)) == (C_OPEN | CCLASS(rq_cls)) && USED(rs_c) < PER_PAGE(rq_cls) ->
     d_step {
       rs_k = ((rq_n) <= PER_PAGE(rq_cls) - USED(rs_c) -> (rq_n) : PER_PAGE(rq_cls) - USED(rs_c));
       if
       :: xcount[rq_p] == rs_c -> xcount[rq_p] = rs_c + rs_k; rq_k = rs_k; rq_used = USED(rs_c)
       :: else -> rs_c = xcount[rq_p]
       fi;
       rs_k = 0
     };
     if
     :: rq_k > 0 -> break
     :: else -> skip
     fi
  :: else -> break
  od;
  rs_c = 0
}

/* include/gpuheap/page.h: gh_page_format. A plain store of xstate, then one
 * fetch-add of OPEN | PINNED (if fm_pin) | class | fm_n onto a count that
 * holds nothing but transients of failed reservations. */
inline format(fm_p, fm_cls, fm_slot, fm_n, fm_pin) {
  xstate[fm_p] = S_CHUNK(fm_cls, fm_slot);
  d_step {
    CHECK(count_was_blank, page_owner[fm_p] == G_CHUNKS &&
                           (xcount[fm_p] & (C_OPEN | C_PINNED | C_CLASS_MASK)) == 0);
    CHECK(no_carry, USED(xcount[fm_p]) + (fm_n) <= C_USED_MASK);
    xcount[fm_p] = xcount[fm_p] + C_OPEN + (fm_pin -> C_PINNED : 0) + CCLASS(fm_cls) + (fm_n)
  }
}

/* include/gpuheap/page.h: gh_page_unpin and gh_page_settle. One fetch-sub
 * of PINNED (the code's checked builds assert the page was open and
 * pinned); an empty page is then closed (one with room gets its room bit). */
inline unpin(up_p) {
  d_step {
    un_old = xcount[up_p];
    CHECK(count_was_pinned, (un_old & (C_OPEN | C_PINNED)) == (C_OPEN | C_PINNED));
    xcount[up_p] = un_old - C_PINNED;
    un_now = un_old - C_PINNED;
    un_old = 0
  };
  if
  :: (un_now & (C_OPEN | C_PINNED | C_USED_MASK)) == C_OPEN -> close(up_p, un_now)
  :: else -> skip
  fi;
  un_now = 0
}

/* include/gpuheap/page.h: gh_page_pin. A load of xcount, then CAS from the
 * value seen to the same with PINNED, for as long as the page reads open,
 * of the class, unpinned and not full (then its room bit is cleared).
 * pn_ok: pinned. */
inline pin(pn_p, pn_cls, pn_ok) {
  pn_ok = false;
  pn_c = xcount[pn_p];
  do
  :: (pn_c & (C_OPEN | C_PINNED | C_CLASS_MASK)) == (C_OPEN | CCLASS(pn_cls)) && USED(pn_c) < PER_PAGE(pn_cls) ->
     d_step {
       if
       :: xcount[pn_p] == pn_c -> xcount[pn_p] = pn_c | C_PINNED; pn_ok = true
       :: else -> pn_c = xcount[pn_p]
       fi
     };
     if
     :: pn_ok -> break
     :: else -> skip
     fi
  :: else -> break
  od;
  pn_c = 0
}

/* include/gpuheap/page.h: gh_hint_install. Only the slot's refiller changes
 * a slot from REFILL, so this is a plain store of the pinned page in_new
 * (the code's checked builds assert that the slot reads REFILL); then the
 * refiller drops the pin of the page it took out of the slot, h_old. */
inline install(in_cls, in_slot, in_new) {
  d_step {
    CHECK(slot_was_refill, refiller && IS_REFILL(xhints[(in_cls) * NSLOTS + (in_slot)]) &&
                           slot_refiller[(in_cls) * NSLOTS + (in_slot)] == me + 1);
    xhints[(in_cls) * NSLOTS + (in_slot)] = (in_new);
    slot_refiller[(in_cls) * NSLOTS + (in_slot)] = 0
  };
#ifndef MUTATION_INSTALL_KEEPS_PIN
  if
  :: h_old != NONE -> unpin(h_old)
  :: else -> skip
  fi;
#endif
  refiller = false; h_old = NONE
}

/* include/gpuheap/page.h: gh_hint_abandon. A refiller that installed
 * nothing stores DROPPED in its slot and drops the pin of the page it took
 * out. */
inline abandon(ab_cls, ab_slot) {
  if
  :: refiller ->
     d_step {
       CHECK(slot_was_refill, IS_REFILL(xhints[(ab_cls) * NSLOTS + (ab_slot)]) &&
                              slot_refiller[(ab_cls) * NSLOTS + (ab_slot)] == me + 1);
       xhints[(ab_cls) * NSLOTS + (ab_slot)] = DROPPED;
       slot_refiller[(ab_cls) * NSLOTS + (ab_slot)] = 0
     };
     if
     :: h_old != NONE -> unpin(h_old)
     :: else -> skip
     fi;
     refiller = false; h_old = NONE
  :: else -> skip
  fi
}

/* include/gpuheap/page.h: gh_chunks_take, for a one-word chunk bitmap.
 * Picks tk_left bits that tk_seen shows free (tk_seen all set: wrap, with
 * nothing known) and sets them with one fetch-or, which also tells what
 * the word held; takes what it got, else tries again with what it learned.
 * The first pick takes the lowest bits; a pick after a fetch-or that got
 * nothing starts at any bit, wrapping (t_r, chosen freely: the code's
 * gh_pick_spread starts at the free bit of rank `spread`). Each bit got is
 * handed to this thread in the same step. The reservation guarantees free
 * bits, so after a fetch-or that got nothing the word as learned must
 * still show one (else the code would spin). */
inline take(tk_p, tk_cls, tk_left, tk_seen) {
  t_lost = false;
  do
  :: atomic {
       t_r = 0;
       if
       :: t_lost ->
          do
          :: t_r < PPMAX - 1 -> t_r++
          :: break
          od
       :: else -> skip
       fi
     };
     d_step {
       t_free = ~(tk_seen) & VALID(tk_cls);
       if
       :: t_free == 0 -> tk_seen = 0; t_free = VALID(tk_cls)
       :: else -> skip
       fi;
       t_want = 0; t_cnt = 0; t_i = 0;
       do
       :: t_i < PPMAX && t_cnt < (tk_left) ->
          if
          :: (t_free >> ((t_i + t_r) % PPMAX)) & 1 -> t_want = t_want | (1 << ((t_i + t_r) % PPMAX)); t_cnt++
          :: else -> skip
          fi;
          t_i++
       :: else -> break
       od;
       /* the fetch-or */
       t_old = xchunks[tk_p];
       xchunks[tk_p] = t_old | t_want;
       t_got = t_want & ~t_old;
       tk_seen = t_old | t_want;
       /* ghost: hand over what was got */
       t_i = 0;
       do
       :: t_i < PPMAX ->
          if
          :: (t_got >> t_i) & 1 ->
             CHECK(chunk_was_free, chunk_owner[(tk_p) * PPMAX + t_i] == 0);
             CHECK(page_has_chunks, page_owner[tk_p] == G_CHUNKS && xstate[tk_p] >> S_KIND_SHIFT == S_KIND_CHUNK &&
                                    S_CLASS(xstate[tk_p]) == (tk_cls) &&
                                    (xcount[tk_p] & (C_OPEN | C_CLASS_MASK)) == (C_OPEN | CCLASS(tk_cls)));
             chunk_owner[(tk_p) * PPMAX + t_i] = me + 1;
             mine = mine | (1 << ((tk_p) * PPMAX + t_i));
             tk_left--
          :: else -> skip
          fi;
          t_i++
       :: else -> break
       od;
       if
       :: t_got == 0 -> CHECK(free_bit_left, (~(tk_seen) & VALID(tk_cls)) != 0); t_lost = true
       :: else -> skip
       fi;
       t_i = 0; t_cnt = 0; t_free = 0; t_old = 0; t_want = 0; t_r = 0
     };
     if
     :: t_got != 0 -> break
     :: else -> skip
     fi
  od;
  t_got = 0; t_lost = false
}

/* include/gpuheap/page.h: gh_chunks_release of chunk rl_b of page rl_p (the
 * mask 1 << rl_b). One fetch-and; rl_got: the bits that were set. The ghost
 * owner lets go in the same step. */
inline release(rl_p, rl_b, rl_got) {
  d_step {
    rl_old = xchunks[rl_p];
    xchunks[rl_p] = rl_old & ~(1 << (rl_b));
    rl_got = rl_old & (1 << (rl_b));
    CHECK(own_chunk, rl_got == 0 || chunk_owner[(rl_p) * PPMAX + (rl_b)] == me + 1);
    chunk_owner[(rl_p) * PPMAX + (rl_b)] = 0;
    mine = mine & ~(1 << ((rl_p) * PPMAX + (rl_b)));
    rl_old = 0
  }
}

/* ---- run.h -------------------------------------------------------------- */

/* include/gpuheap/run.h: gh_run_claim. Pages [rc_s, rc_s + RUNLEN) word by
 * word in ascending order: a load of the word, then CAS of exactly the
 * run's bits of it for as long as they read free; if a word's bits are
 * taken, the words already claimed are given back. The pages are this
 * thread's (ghost) from the CAS that sets their bits. */
inline run_claim(rc_s, rc_res) {
  rc_p = (rc_s);
  rc_res = true;
  do
  :: rc_p < (rc_s) + RUNLEN ->
     /* the bits of word rc_w in the run: pages [rc_p, rc_q) */
     d_step {
       rc_w = rc_p / WORDBITS;
       rc_mask = 0;
       rc_q = rc_p;
       do
       :: rc_q < (rc_s) + RUNLEN && rc_q / WORDBITS == rc_w -> rc_mask = rc_mask | (1 << (rc_q % WORDBITS)); rc_q++
       :: else -> break
       od
     };
     rc_v = xpages[rc_w];
     rc_ok = false;
     do
     :: (rc_v & rc_mask) == 0 ->
        d_step {
          if
          :: xpages[rc_w] == rc_v ->
             xpages[rc_w] = rc_v | rc_mask;
             rc_ok = true;
             rc_i = rc_p;
             do
             :: rc_i < rc_q -> CHECK(page_was_free, page_owner[rc_i] == G_FREE); page_owner[rc_i] = G_RUN(me); rc_i++
             :: else -> break
             od;
             rc_i = 0
          :: else -> rc_v = xpages[rc_w]
          fi
        };
        if
        :: rc_ok -> break
        :: else -> skip
        fi
     :: else -> break
     od;
     if
     :: !rc_ok ->
        /* give back the words already claimed: pages [rc_s, rc_p) */
        rc_q = (rc_s);
        do
        :: rc_q < rc_p ->
           d_step {
             rc_w = rc_q / WORDBITS;
             rc_mask = 0;
             do
             :: rc_q < rc_p && rc_q / WORDBITS == rc_w -> rc_mask = rc_mask | (1 << (rc_q % WORDBITS)); rc_q++
             :: else -> break
             od
           };
           pages_release(rc_w, rc_mask)
        :: else -> break
        od;
        rc_res = false;
        break
     :: else -> rc_p = rc_q
     fi
  :: else -> break
  od;
  rc_p = 0; rc_w = 0; rc_mask = 0; rc_v = 0; rc_q = 0; rc_ok = false
}

/* include/gpuheap/run.h: gh_run_free. CAS of the head's xstate from
 * rf_head, the HEAD it was read as, to FREE; the winner clears the run's
 * page bits word by word. */
inline run_free(rf_s, rf_head) {
  d_step {
    if
    :: xstate[rf_s] == (rf_head) -> xstate[rf_s] = S_FREE; rf_won = true
    :: else -> rf_won = false
    fi;
    CHECK(own_run, rf_won)          /* only its owner frees a run, once */
  };
  rf_p = (rf_s);
  do
  :: rf_p < (rf_s) + RUNLEN ->
     d_step {
       rc_w = rf_p / WORDBITS;
       rc_mask = 0;
       do
       :: rf_p < (rf_s) + RUNLEN && rf_p / WORDBITS == rc_w ->
          CHECK(own_run, page_owner[rf_p] == G_RUN(me));
          rc_mask = rc_mask | (1 << (rf_p % WORDBITS));
          rf_p++
       :: else -> break
       od
     };
     pages_release(rc_w, rc_mask)
  :: else -> break
  od;
  rf_p = 0; rc_w = 0; rc_mask = 0; rf_won = false
}

/* include/gpuheap/run.h: gh_steal_pinned_in, over pages [st_lo, st_hi)
 * (gh_steal_pinned: all of them). For each page: a load of xcount;
 * if it reads OPEN|PINNED|0, a load of xstate, which is skipped unless it
 * is a CHUNK state, whose class and slot fields name the hint slot; CAS of
 * that slot from the page to DROPPED; the winner unpins the page, which closes
 * it if it is still empty. The model checks that the slot's address lies
 * inside the hint array (MUTATION_STEAL_ANY_KIND: without the kind check,
 * it does not). */
inline steal_in(st_lo, st_hi, st_freed) {
  st_freed = 0;
  s_p = st_lo;
  do
  :: s_p < (st_hi) ->
     s_c = xcount[s_p];
     if
     :: (s_c & (C_OPEN | C_PINNED | C_USED_MASK)) == (C_OPEN | C_PINNED) ->
        d_step {
          s_st = xstate[s_p];
#ifdef MUTATION_STEAL_ANY_KIND
          s_go = true;
#else
          s_go = (S_KIND(s_st) == S_KIND_CHUNK);
#endif
          s_idx = S_CLASS(s_st) * NSLOTS + S_SLOT(s_st)
        };
        if
        :: s_go ->
           CHECK(slot_in_range, s_idx < NHINTS);
           d_step {
             if
             :: xhints[s_idx] == s_p -> xhints[s_idx] = DROPPED; s_won = true
             :: else -> s_won = false
             fi
           };
           if
           :: s_won -> unpin(s_p); st_freed++
           :: else -> skip
           fi
        :: else -> skip
        fi
     :: else -> skip
     fi;
     s_p++
  :: else -> break
  od;
  s_p = 0; s_c = 0; s_st = 0; s_idx = 0; s_won = false; s_go = false
}

inline steal(st_all_freed) { steal_in(0, NPAGES, st_all_freed) }

/* include/gpuheap/run.h: gh_page_take_held. A load of xcount; if it reads
 * OPEN|PINNED|0, a load of xstate, which must be a CHUNK state naming the
 * hint slot; CAS of that slot from the page to DROPPED (the winner has the
 * pin); then CAS of xcount from the value read to 0, which closes the page
 * with its bit still set: the page goes from its slot to the run (ghost)
 * in that step, never free between; a store of FREE to xstate follows. A
 * close that fails (a reservation came in through the slot as read
 * before) unpins the page, which lives on. th_ok: taken.
 * MUTATION_TAKE_HELD_STORE: the close is a plain store of 0. */
inline take_held(th_p, th_ok) {
  th_ok = false;
  th_c = xcount[th_p];
  if
  :: (th_c & (C_OPEN | C_PINNED | C_USED_MASK)) == (C_OPEN | C_PINNED) ->
     th_st = xstate[th_p];
     if
     :: S_KIND(th_st) == S_KIND_CHUNK ->
        th_idx = S_CLASS(th_st) * NSLOTS + S_SLOT(th_st);
        CHECK(slot_in_range, th_idx < NHINTS);
        d_step {
          if
          :: xhints[th_idx] == th_p -> xhints[th_idx] = DROPPED; th_won = true
          :: else -> th_won = false
          fi
        };
        if
        :: th_won ->
           d_step {
#ifdef MUTATION_TAKE_HELD_STORE
             if
             :: true ->
#else
             if
             :: xcount[th_p] == th_c ->
#endif
                xcount[th_p] = 0;
                CHECK(page_unused, page_owner[th_p] == G_CHUNKS && chunk_owner[(th_p) * PPMAX] == 0 &&
                                   chunk_owner[(th_p) * PPMAX + 1] == 0 && xchunks[th_p] == 0);
                page_owner[th_p] = G_RUN(me);
                th_ok = true
             :: else -> skip
             fi
           };
           if
           :: th_ok -> xstate[th_p] = S_FREE
           :: else -> unpin(th_p)
           fi
        :: else -> skip
        fi
     :: else -> skip
     fi
  :: else -> skip
  fi;
  th_c = 0; th_st = 0; th_idx = 0; th_won = false
}

/* include/gpuheap/run.h: gh_run_take of the run at ft_s (its look
 * first, which changes nothing, left out: any start may be tried). Word by
 * word in ascending order: a load of the word; one fetch-or of the run's
 * bits that read free (the pages got are this thread's, ghost); then each
 * page of the run's bits that read set, by take_held. A free page lost to
 * another claim or a held page not taken gives back the bits got in this
 * word and every bit of the words before (all the run's), and the result
 * is false. */
inline run_take(ft_s, ft_res) {
  ft_res = true;
  ft_p = (ft_s);
  do
  :: ft_p < (ft_s) + RUNLEN ->
     d_step {
       ft_w = ft_p / WORDBITS;
       ft_mask = 0;
       ft_q = ft_p;
       do
       :: ft_q < (ft_s) + RUNLEN && ft_q / WORDBITS == ft_w -> ft_mask = ft_mask | (1 << (ft_q % WORDBITS)); ft_q++
       :: else -> break
       od
     };
     ft_free = ft_mask & ~xpages[ft_w];
     d_step {
       ft_mine = ft_free & ~xpages[ft_w];
       xpages[ft_w] = xpages[ft_w] | ft_free;
       ft_i = 0;
       do
       :: ft_i < WORDBITS ->
          if
          :: (ft_mine >> ft_i) & 1 ->
             CHECK(page_was_free, page_owner[ft_w * WORDBITS + ft_i] == G_FREE);
             page_owner[ft_w * WORDBITS + ft_i] = G_RUN(me)
          :: else -> skip
          fi;
          ft_i++
       :: else -> break
       od;
       ft_i = 0;
       ft_ok = (ft_mine == ft_free)
     };
     do
     :: ft_ok && ft_i < WORDBITS ->
        if
        :: ((ft_mask & ~ft_free) >> ft_i) & 1 ->
           take_held(ft_w * WORDBITS + ft_i, ft_ok);
           if
           :: ft_ok -> ft_mine = ft_mine | (1 << ft_i)
           :: else -> skip
           fi
        :: else -> skip
        fi;
        ft_i++
     :: else -> break
     od;
     ft_i = 0;
     if
     :: !ft_ok ->
        if
        :: ft_mine != 0 -> pages_release(ft_w, ft_mine)
        :: else -> skip
        fi;
        ft_q = (ft_s);
        do
        :: ft_q < ft_p ->
           d_step {
             ft_w = ft_q / WORDBITS;
             ft_mask = 0;
             do
             :: ft_q < ft_p && ft_q / WORDBITS == ft_w -> ft_mask = ft_mask | (1 << (ft_q % WORDBITS)); ft_q++
             :: else -> break
             od
           };
           pages_release(ft_w, ft_mask)
        :: else -> break
        od;
        ft_res = false;
        break
     :: else -> ft_p = ft_q
     fi
  :: else -> break
  od;
  ft_p = 0; ft_w = 0; ft_mask = 0; ft_free = 0; ft_mine = 0; ft_q = 0; ft_ok = false
}

/* include/gpuheap/run.h: gh_page_claim_in_word. Claims the first page of
 * word cw_w that cw_v shows free from some bit on (the code: from a random
 * bit, wrapping), by fetch-or of its bit; learns the word from the fetch-or
 * and tries again until it gets one or the word reads full. The page is a
 * chunk page (ghost) from the fetch-or that got it. */
inline claim_in_word(cw_w, cw_v, cw_p) {
  cw_p = NONE;
  PICK(pc_r, 0, WORDBITS - 1);
  do
  :: (cw_v & WORDMASK) != WORDMASK ->
     d_step {
       pc_n = pc_r;
       do
       :: (cw_v >> pc_n) & 1 -> pc_n = (pc_n + 1) % WORDBITS
       :: else -> break
       od;
       pc_bit = 1 << pc_n;
       /* the fetch-or */
       pc_old = xpages[cw_w];
       xpages[cw_w] = pc_old | pc_bit;
       if
       :: !(pc_old & pc_bit) ->
          cw_p = (cw_w) * WORDBITS + pc_n;
          CHECK(page_was_free, page_owner[cw_p] == G_FREE);
          page_owner[cw_p] = G_CHUNKS
       :: else -> cw_v = pc_old | pc_bit
       fi;
       pc_bit = 0; pc_old = 0; pc_n = 0
     };
     if
     :: cw_p != NONE -> break
     :: else -> skip
     fi
  :: else -> break
  od;
  pc_r = 0
}

/* include/gpuheap/run.h: gh_page_claim_one. The search order (the slot's
 * frame hint, random words, the preference for words already in use) is
 * abstracted: the probes read some word and claim in it. With pc_sweep,
 * every word is then tried in turn (the code's gh_run_find_claim for one
 * page, a load and a CAS of one bit: the same as claim_in_word's load and
 * fetch-or), and, if empty pinned pages could be stolen, every word again. */
inline page_claim(pc_sweep, pc_p) {
  PICK(pc_w, 0, NWORDS - 1);
  pc_v = xpages[pc_w];
  claim_in_word(pc_w, pc_v, pc_p);
  if
  :: pc_p == NONE && (pc_sweep) ->
     pc_round = 0;
     do
     :: pc_p == NONE && pc_round < 2 ->
        pc_w = 0;
        do
        :: pc_p == NONE && pc_w < NWORDS ->
           pc_v = xpages[pc_w];
           claim_in_word(pc_w, pc_v, pc_p);
           pc_w++
        :: else -> break
        od;
        if
        :: pc_p == NONE && pc_round == 0 ->
           steal(s_freed);
           pc_round = (s_freed == 0 -> 2 : 1); /* nothing stolen: give up */
           s_freed = 0
        :: else -> pc_round = 2
        fi
     :: else -> break
     od
  :: else -> skip
  fi;
  pc_w = 0; pc_v = 0; pc_round = 0
}

/* ---- core.h: what a thread does ----------------------------------------- */

/* Locals of a thread's operations: the request (cls, n; need: chunks still
 * wanted), the source being asked (src), the grant (k chunks on page gp,
 * reserved when used was ub), what the thread knows of its hint slot
 * (h_seen; refiller: it moved the slot to REFILL and owns the pin of h_old),
 * the chunks it holds (mine: bit page * PPMAX + b for chunk b of page), the
 * chunk or run being freed, and the run it holds (run_s). */
#define THREAD_LOCALS                                                        \
  byte slot, nops, cls, n, need, src, k, ub, h_seen, h_old = NONE, p, gp,    \
       mine, left, seen, ci, st, got, run_s = NONE, hg_i, gn_src, cp_i,      \
       cp_t, now;                                                            \
  bool refiller, do_pin, ok, hg_won, located, not_double_free

/* The sources of gh_grant_next, in order (core.h: GH_SRC_*). */
#define SRC_HINT 0
#define SRC_ROOM 1
#define SRC_NEW 2
#define SRC_CLASS 3
#define SRC_SWEEP 4
#define SRC_CLASS_ALL 5
#define SRC_AGAIN 6                 /* after a pause: the bitmap sweep once more */
#define SRC_AGAIN_ALL 7             /* and the class sweep once more */
#define SRC_DONE 8

/* include/gpuheap/core.h: gh_grant_from_new_page. Format the claimed page
 * with a reservation of k = min(n, per_page); if chunks are left over and
 * the thread is its slot's refiller, pin the page and install it. (Others
 * would mark it in the room bitmap; see README.md on room bitmaps.) */
inline new_page(np_p, np_cls, np_n) {
  k = ((np_n) < PER_PAGE(np_cls) -> (np_n) : PER_PAGE(np_cls));
  do_pin = (k < PER_PAGE(np_cls) && refiller);
  format(np_p, np_cls, slot, k, do_pin);
  gp = np_p;
  ub = 0;
  if
  :: do_pin -> install(np_cls, slot, np_p)
  :: else -> skip
  fi;
  do_pin = false
}

/* include/gpuheap/core.h: gh_grant_from_hint. Load the slot. REFILL: look
 * again (classes with at least REFILL_MIN chunks a page, while fewer than
 * REFILL_WAIT looks were made; the code: GH_REFILL_WAIT) or give up;
 * REFILL_COLD (the slot's first page): look again whatever the class. A
 * page: reserve on it; all of hg_n: done. Else (no page, or it could not
 * give all) CAS the slot from what was seen to REFILL (REFILL_COLD from
 * NONE): the winner is the refiller and owns the pin of the page it took
 * out, if any; a loser with chunks returns them, one without looks again. */
inline hint_grant(hg_cls, hg_n) {
  hg_i = 0;
  k = 0;
  do
  :: h_seen = xhints[(hg_cls) * NSLOTS + slot];
     if
     :: IS_REFILL(h_seen) ->
        if
        :: (PER_PAGE(hg_cls) < REFILL_MIN && h_seen == REFILL) || hg_i >= REFILL_WAIT -> break
        :: else -> skip             /* back off and look again */
        fi
     :: else ->
        if
        :: h_seen < DROPPED ->
           reserve(h_seen, hg_cls, hg_n, k, ub);
           gp = (k > 0 -> h_seen : gp)
        :: else -> skip
        fi;
        if
        :: k == (hg_n) -> break
        :: else -> skip
        fi;
        d_step {
          if
          :: xhints[(hg_cls) * NSLOTS + slot] == h_seen ->
             xhints[(hg_cls) * NSLOTS + slot] = (h_seen == NONE -> REFILL_COLD : REFILL);
             CHECK(one_refiller, slot_refiller[(hg_cls) * NSLOTS + slot] == 0);
             slot_refiller[(hg_cls) * NSLOTS + slot] = me + 1;
             hg_won = true
          :: else -> hg_won = false
          fi
        };
        if
        :: hg_won -> refiller = true; h_old = (h_seen < DROPPED -> h_seen : NONE); break
        :: else -> skip
        fi;
        if
        :: k > 0 -> break
        :: else -> skip
        fi
     fi;
     hg_i++
  od;
  hg_i = 0; hg_won = false; h_seen = 0
}

/* include/gpuheap/core.h: gh_grant_from_room and gh_grant_from_room_word.
 * The room bitmaps are hints that no decision of the protocol depends on
 * (every candidate is checked by the reservation), so the search is
 * abstracted to: no candidate, or a reservation on any page. A refiller
 * that got chunks on a page with more room pins it, stores the slot's
 * CHUNK(class, slot) in its xstate and installs it. */
inline room_grant(rm_cls, rm_n) {
  if
  :: skip                           /* no room bit found */
  :: PICK(p, 0, NPAGES - 1);
     reserve(p, rm_cls, rm_n, k, ub);
     if
     :: k > 0 ->
        gp = p;
        if
        :: refiller && ub + k < PER_PAGE(rm_cls) ->
           pin(p, rm_cls, ok);
           if
           :: ok ->
              xstate[p] = S_CHUNK(rm_cls, slot);
              install(rm_cls, slot, p)
           :: else -> skip
           fi;
           ok = false
        :: else -> skip
        fi
     :: else -> skip
     fi
  fi;
  p = 0
}

/* include/gpuheap/core.h: gh_grant_from_class_page. Not sweeping: a probe
 * of some page (the code's probe_limit random probes, bounded to one);
 * sweeping: every page in turn from some page. A probe loads xcount and,
 * where it reads open, of the class and not full, reserves by CAS
 * (reserve_cas, which loads the word again); in the sweep it loads again
 * after a failed reservation and tries again while the page reads as having
 * room, up to SWEEP_TRIES times (the code: 4). */
inline class_page(cp_cls, cp_n, cp_sweep) {
  PICK(p, 0, NPAGES - 1);
  cp_i = 0;
  do
  :: k == 0 && cp_i < (cp_sweep -> NPAGES : 1) ->
     now = xcount[p];
     cp_t = 0;
     do
     :: k == 0 && cp_t < (cp_sweep -> SWEEP_TRIES : 1) &&
        (now & (C_OPEN | C_CLASS_MASK)) == (C_OPEN | CCLASS(cp_cls)) && USED(now) < PER_PAGE(cp_cls) ->
        reserve_cas(p, cp_cls, cp_n, k, ub);
        cp_t++;
        if
        :: k > 0 -> gp = p
        :: else -> now = xcount[p]
        fi
     :: else -> break
     od;
     p = (p + 1) % NPAGES;
     cp_i++
  :: else -> break
  od;
  now = 0; p = 0; cp_i = 0; cp_t = 0
}

/* include/gpuheap/core.h: gh_grant_next. Ask the sources in order from
 * src, staying with one while it gives, up to gn_stop; k: the grant (0:
 * none). The hint is asked once. After the sweeps, after a pause, both
 * sweeps once more. A refiller that reaches the end without installing
 * anything abandons its slot. */
inline grant_next(gn_cls, gn_n, gn_stop) {
  k = 0;
  do
  :: src < (gn_stop) ->
     gn_src = src;
     if
     :: gn_src == SRC_HINT ->
        /* whole pages for requests that fill them */
        p = NONE;
        if
        :: (gn_n) >= PER_PAGE(gn_cls) -> page_claim(false, p)
        :: else -> skip
        fi;
        if
        :: p != NONE -> new_page(p, gn_cls, gn_n); p = 0; break
        :: else -> hint_grant(gn_cls, gn_n)
        fi
     :: gn_src == SRC_ROOM ->
        if
        :: !(refiller && PER_PAGE(gn_cls) >= REFILL_MIN) -> room_grant(gn_cls, gn_n)
        :: else -> skip
        fi
     :: gn_src == SRC_NEW || gn_src == SRC_SWEEP || gn_src == SRC_AGAIN ->
        /* (SRC_AGAIN first pauses, which is only time.) NEW and AGAIN first
         * search the room bitmaps in full when the heap looks nearly full
         * (gh_pages_scarce: loads of the page bitmap that steer nothing but
         * this choice, so the model lets either happen). */
        if
        :: gn_src != SRC_SWEEP && !(refiller && PER_PAGE(gn_cls) >= REFILL_MIN) -> room_grant(gn_cls, gn_n)
        :: true -> skip
        fi;
        if
        :: k == 0 ->
           page_claim(gn_src != SRC_NEW, p);
           if
           :: p != NONE -> new_page(p, gn_cls, gn_n)
           :: else -> skip
           fi
        :: else -> skip
        fi;
        p = 0
     :: gn_src == SRC_CLASS || gn_src == SRC_CLASS_ALL || gn_src == SRC_AGAIN_ALL ->
        class_page(gn_cls, gn_n, gn_src != SRC_CLASS)
     fi;
     src = (gn_src == SRC_HINT || k == 0 -> gn_src + 1 : gn_src);
     if
     :: src == SRC_DONE -> abandon(gn_cls, slot)
     :: else -> skip
     fi;
     if
     :: k > 0 -> break
     :: else -> skip
     fi
  :: else -> break
  od;
  gn_src = 0
}

/* Take the k chunks of the grant on page gp (gh_chunks_take until the grant
 * is used up, as gh_warp_distribute does for a group). */
inline take_grant(tg_cls) {
  left = k;
  seen = (1 << ub) - 1;             /* gh_chunks_seen(used_before) */
  do
  :: left > 0 -> take(gp, tg_cls, left, seen)
  :: else -> break
  od;
  left = 0; seen = 0
}

/* A request for mc_n chunks of class mc_cls. One chunk: include/gpuheap/
 * core.h: gh_lane_malloc (gh_grant_next through all the sources; a
 * refiller that was served before it installed anything abandons its slot;
 * then the chunk is taken). Two: include/gpuheap/warp.cuh: gh_warp_malloc
 * for a group of two lanes (the leader asks the sources before CLASS for
 * the whole group while they give, taking each grant's chunks, then
 * abandons its slot if it still refills it; each lane still unserved
 * searches alone from CLASS on). The leader's inline look at the hint page
 * (for groups smaller than a page) is gh_grant_next's first source. */
inline malloc_chunk(mc_cls, mc_n) {
  src = SRC_HINT;
  need = (mc_n);
  if
  :: mc_n == 1 ->
     grant_next(mc_cls, 1, SRC_DONE);
     abandon(mc_cls, slot);
     if
     :: k > 0 -> take_grant(mc_cls)
     :: else -> skip                /* NULL: no room */
     fi
  :: else ->
     do
     :: grant_next(mc_cls, need, SRC_CLASS);
        if
        :: k > 0 -> take_grant(mc_cls); need = need - k
        :: else -> skip
        fi;
        if
        :: k == 0 || need == 0 -> break
        :: else -> skip
        fi
     od;
     abandon(mc_cls, slot);
     do
     :: need > 0 ->
        src = SRC_CLASS;
        grant_next(mc_cls, 1, SRC_DONE);
        if
        :: k > 0 -> take_grant(mc_cls)
        :: else -> skip
        fi;
        need--
     :: else -> break
     od
  fi;
  k = 0; ub = 0; gp = 0; need = 0; src = 0
}

/* include/gpuheap/core.h: gh_lane_free of the chunk fc_ci (page fc_ci /
 * PPMAX, bit fc_ci % PPMAX): gh_locate's load of xstate, then
 * gh_chunks_release and gh_page_unreserve. */
inline free_chunk(fc_ci) {
  p = (fc_ci) / PPMAX;
  st = xstate[p];
  CHECK(located, S_KIND(st) == S_KIND_CHUNK && (fc_ci) % PPMAX < PER_PAGE(S_CLASS(st)));
#ifndef MUTATION_UNRESERVE_FIRST
  release(p, (fc_ci) % PPMAX, got);
  CHECK(not_double_free, got != 0);
  unreserve(p, 1);
#else
  unreserve(p, 1);                  /* mutation: the count before the bit */
  release(p, (fc_ci) % PPMAX, got);
#endif
  p = 0; st = 0; got = 0
}

/* include/gpuheap/core.h: gh_lane_malloc of a run: gh_run_alloc (the
 * search, abstracted to any start it may propose; gh_run_claim; then
 * gh_run_take at any start, as every run does since device visit 23;
 * after gh_steal_pinned, gh_run_claim once more), then gh_run_mark (a
 * store of HEAD). */
inline malloc_run() {
  PICK(p, 0, NPAGES - RUNLEN);
  run_claim(p, ok);
  if
  :: !ok ->
     PICK(p, 0, NPAGES - RUNLEN);
     run_take(p, ok)
  :: else -> skip
  fi;
  if
  :: !ok ->
     steal(s_freed);
     if
     :: s_freed > 0 ->
        PICK(p, 0, NPAGES - RUNLEN);
        run_claim(p, ok)
     :: else -> skip
     fi;
     s_freed = 0
  :: else -> skip
  fi;
  if
  :: ok -> xstate[p] = S_HEAD(RUNLEN); run_s = p
  :: else -> skip
  fi;
  p = 0; ok = false
}

/* include/gpuheap/core.h: gh_lane_free of a run: gh_locate's load of the
 * head's xstate, then gh_run_free. */
inline free_run() {
  st = xstate[run_s];
  CHECK(located, st == S_HEAD(RUNLEN));
  run_free(run_s, st);
  run_s = NONE; st = 0
}

/* fo_ci := the first chunk this thread holds (NCHUNKS: none), from the
 * thread's own record of its chunks. */
inline first_owned(fo_ci) {
  d_step {
    fo_ci = 0;
    do
    :: fo_ci < NCHUNKS && !((mine >> fo_ci) & 1) -> fo_ci++
    :: else -> break
    od
  }
}

/* A thread: NOPS operations, each any of: allocate chunks of a class, free
 * a chunk it holds, allocate a run, free its run, steal; then it frees all
 * it holds. */
proctype thread(byte me) {
  PROTOCOL_LOCALS;
  THREAD_LOCALS;
  slot = me % NSLOTS;
  do
  :: nops < NOPS ->
     nops++;
     first_owned(ci);
     if
     :: PICK(cls, 0, NCLASSES - 1);
        PICK(n, 1, MAXREQ);
        malloc_chunk(cls, n);
        cls = 0; n = 0
     :: ci < NCHUNKS -> free_chunk(ci)
     :: run_s == NONE -> malloc_run()
     :: run_s != NONE -> free_run()
     :: steal(s_freed); s_freed = 0
     fi;
     ci = 0
  :: else -> break
  od;
  do
  :: first_owned(ci);
     if
     :: ci < NCHUNKS -> free_chunk(ci)
     :: else -> break
     fi
  od;
  if
  :: run_s != NONE -> free_run()
  :: else -> skip
  fi;
  ci = 0
}

#if OFFLINE > 0
#ifndef OFRAME
#define OFRAME 1                    /* words a frame (the code: words_per_frame) */
#endif
#if OFFLINE % OFRAME != 0
#error "page.pml: OFFLINE must be a multiple of OFRAME"
#endif

/* The offliner takes word ot_w (its CAS from 0 to all ones has won): each
 * of its pages must be free in every respect, with no owner, xstate FREE,
 * no chunk bits, and a count neither open nor pinned (a reservation through
 * a stale hint may add a transient there, which it undoes). */
inline offline_take(ot_w) {
  o_q = (ot_w) * WORDBITS;
  do
  :: o_q < ((ot_w) + 1) * WORDBITS ->
     CHECK(offline_unused, page_owner[o_q] == G_FREE && xstate[o_q] == S_FREE && xchunks[o_q] == 0 &&
                           (xcount[o_q] & (C_OPEN | C_PINNED)) == 0);
     page_owner[o_q] = G_OFFLINE;
     o_q++
  :: else -> break
  od;
  o_q = 0
}

/* A store of 0 to a word the offliner holds (all ones): gh_offline_tail's
 * give-back, and _gh_heap_online's publication (heap.c, cpu_heap.c). */
inline offline_give(og_w) {
  d_step {
    CHECK(offline_held, xpages[og_w] == WORDMASK);
    xpages[og_w] = 0;
    o_q = (og_w) * WORDBITS;
    do
    :: o_q < ((og_w) + 1) * WORDBITS -> page_owner[o_q] = G_FREE; o_q++
    :: else -> break
    od;
    o_q = 0
  }
}

/* include/gpuheap/run.h: gh_offline_tail over the last OFFLINE words, OFRAME
 * words a frame, while the threads run (on the GPU the host's
 * offline_tail_kernel runs beside the kernels that allocate); then the words
 * taken offline are brought back online, as a later growth does. */
proctype offliner() {
  PROTOCOL_LOCALS;
  byte o_end = NWORDS, o_first, o_w, o_u, o_q, o_freed;
  bool o_ok, o_retried, offline_unused, offline_held;
  do
  :: o_end >= NWORDS - OFFLINE + OFRAME ->
     o_first = o_end - OFRAME;
     o_w = o_first;
     do
     :: o_w < o_end ->
#ifndef MUTATION_NONATOMIC_OFFLINE
        d_step {                    /* the CAS from 0 to all ones */
          if
          :: xpages[o_w] == 0 -> xpages[o_w] = WORDMASK; o_ok = true; offline_take(o_w)
          :: else -> o_ok = false
          fi
        };
#else
        o_ok = (xpages[o_w] == 0);  /* mutation: a load, then a store */
        if
        :: o_ok -> d_step { xpages[o_w] = WORDMASK; offline_take(o_w) }
        :: else -> skip
        fi;
#endif
        if
        :: o_ok -> o_w++
        :: else -> break
        fi
     :: else -> break
     od;
     if
     :: o_w < o_end ->
        o_u = o_first;
        do
        :: o_u < o_w -> offline_give(o_u); o_u++
        :: else -> break
        od;
        /* once a frame: its hint slots' empty pages taken back, and again */
        if
        :: !o_retried ->
           steal_in(o_first * WORDBITS, o_end * WORDBITS, o_freed);
           if
           :: o_freed > 0 -> o_retried = true; o_freed = 0
           :: else -> break
           fi
        :: else -> break
        fi
     :: else -> o_end = o_first; o_retried = false
     fi
  :: else -> break
  od;
  o_w = o_end;
  do
  :: o_w < NWORDS -> offline_give(o_w); o_w++
  :: else -> break
  od
}
#endif

/* Page q is free: bit clear, xstate FREE, xcount 0, no chunk bits. */
#define PAGE_FREE(q) ((xpages[(q) / WORDBITS] & (1 << ((q) % WORDBITS))) == 0 && xstate[q] == S_FREE && \
                      xcount[q] == 0 && xchunks[q] == 0 && page_owner[q] == G_FREE)

/* Page q is held by its hint slot alone: open, pinned, used 0, in the slot. */
#define PAGE_PINNED_EMPTY(q) ((xpages[(q) / WORDBITS] & (1 << ((q) % WORDBITS))) != 0 &&           \
                              S_KIND(xstate[q]) == S_KIND_CHUNK &&                                  \
                              xcount[q] == (C_OPEN | C_PINNED | CCLASS(S_CLASS(xstate[q]))) &&      \
                              xchunks[q] == 0 && page_owner[q] == G_CHUNKS &&                       \
                              xhints[S_CLASS(xstate[q]) * NSLOTS + S_SLOT(xstate[q])] == (q))

#ifdef SLOT_MONITOR
/* The invariant of the hint slots that install and steal rely on: a slot
 * holds a page only while the page is open, pinned, and formatted for that
 * slot's class and slot; a slot reads REFILL exactly while one thread is its
 * refiller. The monitor checks it once, at a point of each run that SPIN
 * chooses in every possible way, so in every reachable state. */
proctype monitor() {
  byte i, q; bool slot_holds_pinned, refill_has_refiller;
  d_step {
    i = 0;
    do
    :: i < NHINTS ->
       q = xhints[i];
       CHECK(refill_has_refiller, IS_REFILL(q) == (slot_refiller[i] != 0));
       if
       :: q < DROPPED ->
          CHECK(slot_holds_pinned, (xcount[q] & (C_OPEN | C_PINNED)) == (C_OPEN | C_PINNED) &&
                                   xstate[q] == S_CHUNK(i / NSLOTS, i % NSLOTS) && page_owner[q] == G_CHUNKS)
       :: else -> skip
       fi;
       i++
    :: else -> break
    od;
    i = 0; q = 0
  }
}
#endif

/* Starts the threads; once all are done (and so have freed all they held)
 * checks that the heap is settled, steals the pages that hint slots still
 * hold, and checks that the heap is empty again. */
init {
  PROTOCOL_LOCALS;
  byte q, me = NTHREADS;            /* for the inlines' ghost code */
  bool nothing_held, page_settled, heap_empty;
  d_step {
    q = 0;
    do
    :: q < NHINTS -> xhints[q] = NONE; q++
    :: else -> break
    od;
    q = 0
  };
  atomic {
    do
    :: q < NTHREADS -> run thread(q); q++
    :: else -> break
    od;
#ifdef SLOT_MONITOR
    run monitor();
#endif
#if OFFLINE > 0
    run offliner();
#endif
    q = 0
  };
  _nr_pr == 1;                      /* the threads have ended */
  d_step {
    q = 0;
    do
    :: q < NCHUNKS -> CHECK(nothing_held, chunk_owner[q] == 0); q++
    :: else -> break
    od;
    /* No lost free: each page is free, or held by its hint slot alone; no
     * slot is left in REFILL. */
    q = 0;
    do
    :: q < NPAGES -> CHECK(page_settled, PAGE_FREE(q) || PAGE_PINNED_EMPTY(q)); q++
    :: else -> break
    od;
    q = 0;
    do
    :: q < NHINTS -> CHECK(page_settled, !IS_REFILL(xhints[q])); q++
    :: else -> break
    od;
    q = 0
  };
  steal(s_freed);
  d_step {
    q = 0;
    do
    :: q < NPAGES -> CHECK(heap_empty, PAGE_FREE(q)); q++
    :: else -> break
    od;
    q = 0;
    do
    :: q < NHINTS -> CHECK(heap_empty, xhints[q] == NONE || xhints[q] == DROPPED); q++
    :: else -> break
    od;
    q = 0
  }
}
