#!/usr/bin/env bash
# Run the SPIN check of the page-state protocol (page.pml).
#
#   run_spin.sh check [SPIN_FLAG...]        exhaustive check; exit 0 iff SPIN
#                                           finds no error and the search is
#                                           complete
#   run_spin.sh mutant NAME [SPIN_FLAG...]  the check of mutation NAME
#                                           (MUTATION_NAME in page.pml); exit
#                                           0 iff SPIN finds an error
#
# SPIN_FLAGs are passed to spin, e.g. -DNTHREADS=2 -DNOPS=2 (see the
# configuration at the top of page.pml).
#
# Exit 77 (ctest's skip code) when spin or a C compiler is missing; 2 when
# the model does not build. Environment: SPIN and CC name the programs;
# PAN_CFLAGS are added to pan's compile flags (e.g. -O2 for long searches),
# PAN_FLAGS to its run flags (e.g. -w28 for a larger hash table);
# GH_SPIN_KEEP=1 keeps the work directory (pan, the trail) for inspection;
# GH_SPIN_MODEL names another model of this directory (grow.pml).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
model=$here/${GH_SPIN_MODEL:-page.pml}

usage() {
  echo "usage: $0 check [SPIN_FLAG...] | mutant NAME [SPIN_FLAG...]" >&2
  exit 2
}

[ $# -ge 1 ] || usage
mode=$1
shift
case $mode in
  check)
    flags=("$@")
    # T_REVERSE tries each process's transitions in reverse order: the
    # search visits the same states as in the default order, and reaches
    # errors such as the one of README.md ("Findings") sooner. -O0: gcc takes longer to optimize
    # pan.c than the optimized pan saves, even for the main configuration.
    pan_cflags="-O0 -DT_REVERSE"
    ;;
  mutant)
    [ $# -ge 1 ] || usage
    name=$(echo "$1" | tr '[:lower:]' '[:upper:]')
    shift
    if ! grep -q "MUTATION_${name}\b" "$model"; then
      echo "run_spin.sh: no mutation MUTATION_${name} in $(basename "$model")" >&2
      exit 2
    fi
    flags=("-DMUTATION_${name}" "$@")
    pan_cflags=-O0 # the error is found at once: the time goes into compiling
    ;;
  *) usage ;;
esac

spin=${SPIN:-spin}
if ! command -v "$spin" >/dev/null 2>&1; then
  echo "run_spin.sh: spin not found (install SPIN, e.g. the Debian package spin); skipped"
  exit 77
fi
cc=${CC:-}
if [ -z "$cc" ]; then
  for c in cc gcc clang; do
    if command -v "$c" >/dev/null 2>&1; then
      cc=$c
      break
    fi
  done
fi
if [ -z "$cc" ] || ! command -v "$cc" >/dev/null 2>&1; then
  echo "run_spin.sh: no C compiler to build SPIN's verifier; skipped"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuheap-spin.XXXXXX") || exit 2
if [ "${GH_SPIN_KEEP:-0}" = 1 ]; then
  echo "run_spin.sh: work directory $work"
else
  trap 'rm -rf "$work"' EXIT
fi
cp "$model" "$work/page.pml"
cd "$work" || exit 2

echo "== $mode${name:+ $name}: spin ${flags[*]:+${flags[*]} }-a page.pml"
start=$(date +%s)
if ! "$spin" "${flags[@]}" -a page.pml >spin.log 2>&1; then
  cat spin.log
  echo "run_spin.sh: spin -a failed"
  exit 2
fi
# SAFETY: assertions and invalid end states (no cycle detection needed);
# COLLAPSE: exhaustive storage, compressed; MEMLIM stops pan cleanly (MB).
# shellcheck disable=SC2086
if ! "$cc" $pan_cflags -DSAFETY -DCOLLAPSE -DMEMLIM=8192 ${PAN_CFLAGS:-} -w -o pan pan.c >cc.log 2>&1; then
  cat cc.log
  echo "run_spin.sh: compiling pan.c failed"
  exit 2
fi
# -m: search depth limit, far above what the models reach.
# shellcheck disable=SC2086
./pan -m1000000 ${PAN_FLAGS:-} >pan.log 2>&1
pan_rc=$?
end=$(date +%s)

grep -E "assertion violated|invalid end state|errors:|states, stored|transitions \(|depth reached|total actual memory|elapsed time|too small|out of memory|max search depth" pan.log
echo "(spin, cc and pan: $((end - start)) s)"

errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.log | tail -n 1)
if [ -z "$errors" ]; then
  tail -n 20 pan.log
  echo "run_spin.sh: pan did not finish (exit $pan_rc)"
  exit 1
fi
incomplete=0
if grep -qE "max search depth too small|out of memory|Search not completed" pan.log && [ "$errors" = 0 ]; then
  incomplete=1
fi

# The counterexample: the steps that touch the heap's metadata, as
# "step thread line: statement" (thread t is the process "thread(t)").
show_trail() {
  [ -f page.pml.trail ] || return
  echo "-- counterexample (steps on shared state; run with GH_SPIN_KEEP=1 and spin -t -p for all):"
  "$spin" "${flags[@]}" -t -p page.pml 2>&1 |
    grep -E "x(pages|state|count|chunks|hints)\[|text of failed assertion" |
    grep -vE "\[assert\(|\[[a-z_]+ = \(.*x(pages|state|count|chunks|hints)\[.*\)\]$" |
    awk '/proc +[0-9]+ \(/ {
           step = $1; sub(/:$/, "", step)
           pid = $3; who = ($4 ~ /init/) ? "init" : "T" (pid - 1)
           match($0, /page\.pml:[0-9]+/); line = substr($0, RSTART + 9, RLENGTH - 9)
           stmt = $0; sub(/^[^[]*\[/, "", stmt); sub(/\][ \t]*$/, "", stmt)
           printf "%5s %-4s line %4s: %s\n", step, who, line, stmt
           next
         }
         { print }'
}

case $mode in
  check)
    if [ "$errors" != 0 ]; then
      show_trail
      echo "FAIL: SPIN found an error in page.pml${flags[*]:+ (${flags[*]})}"
      exit 1
    fi
    if [ "$incomplete" = 1 ]; then
      echo "FAIL: the search was not complete"
      exit 1
    fi
    echo "PASS: no errors, search complete"
    ;;
  mutant)
    if [ "$errors" = 0 ]; then
      echo "FAIL: mutation MUTATION_${name} was not detected"
      exit 1
    fi
    show_trail
    echo "PASS: mutation MUTATION_${name} detected"
    ;;
esac
exit 0
