#!/usr/bin/env bash
# mpirun_test.sh BINARY P... [-- ARGS...]: runs BINARY ARGS under
# `mpirun -np P` for each P,
# once with Open MPI's default collective decisions and once with each of
# two forced all-reduce algorithms (ring, and Rabenseifner's reduce-scatter
# + all-gather), which ipuflow's fixed-order collectives must not notice.
# Fails if any run fails.
#
# --oversubscribe: CI has 2 cores and P = 3 runs too. --allow-run-as-root:
# CI runs as root. Shared memory between the processes (vader), without
# the single-copy mechanism, which containers often forbid (ptrace).
set -uo pipefail
binary=$1; shift
counts=()
while (($#)) && [[ $1 != -- ]]; do counts+=("$1"); shift; done
(($#)) && shift  # The --; what follows is the binary's.
# Under ASan: Open MPI keeps allocations until exit in components built
# without frame pointers, so LeakSanitizer sees one-frame stacks it cannot
# attribute or suppress. Leaks stay checked by the
# single-process tests; ASan's other checks and UBSan apply here as well.
[[ -n "${ASAN_OPTIONS:-}" ]] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
exported=()
for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
  [[ -n "${!v:-}" ]] && exported+=(-x "$v")
done
# Each process is a whole gtest binary: they must not all write Bazel's
# XML report and premature-exit marker (Bazel writes the test's own).
unset XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE GTEST_OUTPUT
rc=0
for np in "${counts[@]}"; do
  for algorithm in "" 4 6; do
    forced=${algorithm:+--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm $algorithm}
    echo "=== mpirun -np $np ${forced:-(default collective rules)}"
    # shellcheck disable=SC2086
    if ! mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none \
        --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
        "${exported[@]}" $forced \
        "$binary" "$@"; then
      echo "FAILED: mpirun -np $np $forced"; rc=1
    fi
  done
done
exit $rc
