#!/usr/bin/env bash
# mpi_example_test.sh BINARY: the main example under
# `mpirun -np 2 ... --replication-factor 1` (examples/README.md, "Several
# processes"): 2 processes x 1 replica train as 2 global replicas (the
# default accumulation halves to 5, the combined batch stays 400), one
# progress bar and one summary are printed (process 0), the test accuracy
# counts both processes' images, and the run exits 0.
set -uo pipefail
binary=$1
source "$TEST_SRCDIR/$TEST_WORKSPACE/core/distributed/mpirun_env.sh"
out=$(mktemp "${TEST_TMPDIR:-/tmp}/example.XXXXXX")
"${MPIRUN[@]}" -np 2 "$binary" --replication-factor 1 --train-limit 8000 \
  --test-limit 1600 >"$out" 2>&1
rc=$?
cat "$out"
fail() { echo "FAILED: $*"; exit 1; }
((rc == 0)) || fail "mpirun exited $rc"
count() { grep -c -- "$1" "$out"; }
(($(count "x 1 replica(s) x 2 processes") == 1)) || fail "one training summary"
(($(count "gradient accumulation 5 x") == 1)) || fail "accumulation 10 / 2"
(($(count "combined batch 400") == 1)) || fail "combined batch 400"
(($(count "200/200") == 1)) || fail "one finished progress bar (process 0's)"
(($(count "^Trained 200 micro-batches (20 weight updates)") == 1)) ||
  fail "one 'Trained' line: 200 micro-batches of both processes"
# Each process tests its 800 of the 1600 images (100 micro-batches of 8 in
# one call of 100 per replica); the line counts them all.
line=$(grep "^Test accuracy" "$out")
[[ $(grep -c "^Test accuracy" "$out") == 1 ]] || fail "one test accuracy line"
[[ $line =~ of\ 1600\ images ]] || fail "test images of both processes: $line"
pct=${line#Test accuracy: }
pct=${pct%%.*}
((pct >= 50)) || fail "accuracy $pct% after 20 weight updates (one process with 2 replicas: 66%)"
echo "PASSED"
