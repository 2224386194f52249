/* gpuheap: the growth-on-demand protocol (include/gpuheap/grow.h, the
 * manager's thread in host/tensor.c: gh_tm_grow_main), for SPIN.
 *
 * NLANES lanes each want one unit of the heap; the heap starts full and the
 * host may grow it by MAXF frames of one unit each. A lane searches (takes
 * a free unit if there is one); when it finds none it asks for growth
 * (gh_grow_ask: reads DONE, then the device word xgrow; an outstanding
 * request is joined, else a compare-and-swap of xgrow elects the lane that
 * posts FRAMES and SEEN, the heap's growth count it read before its search,
 * then WANT), waits until DONE reaches its generation (gh_grow_wait), reads
 * DENIED, and searches again: after a growth for another round, after a
 * denial once more and then gives up (NULL). The host serves WANT != DONE:
 * it checks that FRAMES is this request's; if the heap grew since SEEN it
 * answers at once, else it grows while it can (else writes DENIED); then it
 * writes DONE. Every shared word
 * is written by one statement (the code's atomics; the channel's plain
 * stores and loads are release / acquire, which SPIN's interleavings keep).
 *
 * Checked, in every state and end state:
 *   - the host reads the FRAMES of the request it serves, and at most one
 *     request is outstanding (WANT == DONE + 1 when it serves);
 *   - a lane that reads "grew" was answered by a growth for its generation
 *     or a later one (grown_gen >= gen);
 *   - a lane gets NULL only when the heap is at its most (online == MAXF)
 *     and no free unit was left at its last search;
 *   - no lane runs out of rounds (GH_GROW_ROUNDS is a safety bound only);
 *   - only a full heap grows (room == 0 when the host grows it: each
 *     growth answers a lane that searched the heap as it was after the
 *     latest growth and found it full; with no SEEN, a crowd of lanes that
 *     found it full grows it once each);
 *   - no lane waits forever: no invalid end state (the host stops once all
 *     lanes are done; a lane waiting for a generation nobody posts would
 *     block there).
 * Not modelled: the lanes' timeout (GH_GROW_WAIT_NS) and CLOSED, the
 * host's lock wait (a denial like any other), frees, generations wrapping.
 *
 * Mutations (each must be found; run_spin.sh mutant NAME):
 *   want_first   the elected lane writes WANT before FRAMES
 *   done_first   the host writes DONE before DENIED
 *   wait_stale   a lane waits for the DONE it read, not its generation
 *   no_seen      the host grows for every request, whatever SEEN says
 */

#ifndef NLANES
#define NLANES 3
#endif
#ifndef MAXF
#define MAXF 2
#endif
#define ROUNDS (MAXF + 2)
#ifdef MUTATION_NO_SEEN
#define FRESH true
#else
#define FRESH (seen == grown) /* no growth since the asking lane's search */
#endif

byte online = 0;    /* frames grown */
byte room = 0;      /* free units */
byte xgrow = 0;     /* device word: the latest generation asked for */
byte want = 0;      /* channel: WANT */
byte done = 0;      /* channel: DONE */
byte denied = 0;    /* channel: DENIED */
byte frames = 0;    /* channel: FRAMES, as the generation of the request it belongs to */
byte seen = 0;      /* channel: SEEN */
byte grown = 0;     /* device word xgrown: growths published */
byte grown_gen = 0; /* ghost: the latest generation the host answered with a growth, its own or a later one */
byte finished = 0;

inline search(got) {
  atomic {
    if
    :: room > 0 -> room--; got = true
    :: else -> got = false
    fi
  }
}

proctype lane() {
  byte d, a, gen, s, r = 0;
  bool got, grew, won;
again:
  s = grown;
  search(got);
  if
  :: got -> goto out
  :: else
  fi;
  assert(r < ROUNDS);
  /* gh_grow_ask */
  d = done;
  a = xgrow;
  if
  :: a != d -> gen = a
  :: else ->
    atomic {
      if
      :: xgrow == d -> xgrow = d + 1; gen = d + 1; won = true
      :: else -> gen = xgrow; won = false
      fi
    }
    if
    :: won ->
#ifdef MUTATION_WANT_FIRST
      want = gen;
      frames = gen;
      seen = s
#else
      frames = gen;
      seen = s;
      want = gen
#endif
    :: else
    fi
  fi;
  /* gh_grow_wait */
#ifdef MUTATION_WAIT_STALE
  done >= d;
#else
  done >= gen;
#endif
  grew = denied < gen;
  if
  :: grew -> assert(grown_gen >= gen)
  :: else
  fi;
  r++;
  if
  :: grew -> goto again
  :: else ->
    search(got);
    assert(got || online == MAXF)
  fi;
out:
  finished++
}

active proctype host() {
  byte w;
  do
  :: finished == NLANES -> break
  :: want != done ->
    w = want;
    assert(frames == w);
    assert(w == done + 1);
#ifdef MUTATION_DONE_FIRST
    done = w;
#endif
    if
    :: !FRESH -> grown_gen = w /* grown since the lane's search */
    :: FRESH && online < MAXF ->
      assert(room == 0); /* only a full heap grows */
      atomic { online++; room++; grown++ };
      grown_gen = w
    :: FRESH && online == MAXF -> denied = w
    fi;
#ifndef MUTATION_DONE_FIRST
    done = w
#endif
  od
}

init {
  byte i;
  atomic {
    for (i : 1 .. NLANES) {
      run lane()
    }
  }
}
