# Sourced by the tests that start a job under mpirun (core/distributed,
# tests/distributed): sets MPIRUN, an array holding mpirun and the flags
# every test job needs, and prepares the environment for it.
#
#   source "$TEST_SRCDIR/$TEST_WORKSPACE/core/distributed/mpirun_env.sh"
#   "${MPIRUN[@]}" -np 2 "$binary" ARGS...
#
# --oversubscribe: CI has 2 cores and P = 3 runs too. --allow-run-as-root:
# CI runs as root. Shared memory between the processes (vader), without
# the single-copy mechanism, which containers often forbid (ptrace). The
# sanitizers' options reach every process (-x).
#
# Under ASan: Open MPI keeps allocations until exit in components built
# without frame pointers, so LeakSanitizer sees one-frame stacks it cannot
# attribute or suppress. Leaks stay checked by the single-process tests;
# ASan's other checks and UBSan apply here as well.
[[ -n "${ASAN_OPTIONS:-}" ]] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
# Each process may be a whole gtest binary: they must not all write Bazel's
# XML report and premature-exit marker (Bazel writes the test's own).
unset XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE GTEST_OUTPUT
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none
  --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
  if [[ -n "${!v:-}" ]]; then MPIRUN+=(-x "$v"); fi
done
