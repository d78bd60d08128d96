#!/usr/bin/env bash
# mpirun_test.sh BINARY P... [-- ARGS...]: runs BINARY ARGS under
# `mpirun -np P` for each P,
# once with Open MPI's default collective decisions and once with each of
# two forced all-reduce algorithms (ring, and Rabenseifner's reduce-scatter
# + all-gather), which ipuflow's fixed-order collectives must not notice.
# Fails if any run fails. How a job starts: mpirun_env.sh.
set -uo pipefail
binary=$1; shift
counts=()
while (($#)) && [[ $1 != -- ]]; do counts+=("$1"); shift; done
(($#)) && shift  # The --; what follows is the binary's.
source "$TEST_SRCDIR/$TEST_WORKSPACE/core/distributed/mpirun_env.sh"
rc=0
for np in "${counts[@]}"; do
  for algorithm in "" 4 6; do
    forced=${algorithm:+--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm $algorithm}
    echo "=== mpirun -np $np ${forced:-(default collective rules)}"
    # shellcheck disable=SC2086
    if ! "${MPIRUN[@]}" -np "$np" $forced "$binary" "$@"; then
      echo "FAILED: mpirun -np $np $forced"; rc=1
    fi
  done
done
exit $rc
