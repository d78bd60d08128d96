#!/usr/bin/env bash
# mpi_interrupt_test.sh BINARY: Ctrl-C to `mpirun` stops every process of a
# run that is inside its cross-replica collectives: mpirun exits non-zero
# and no process of the job is left behind (docs/DISTRIBUTED.md, "Faults").
# BINARY (mpi_train_forever) trains until it is stopped and creates
# READY_DIR/ready.<index> after its first step. The waits below are hang
# guards only: the verdict is whether the processes end, never how fast.
set -uo pipefail
set -m  # Job control: a background job would otherwise ignore SIGINT.
binary=$1
ready=$(mktemp -d "${TEST_TMPDIR:-/tmp}/interrupt.XXXXXX")
log="$ready/mpirun.log"
source "$TEST_SRCDIR/$TEST_WORKSPACE/core/distributed/mpirun_env.sh"

"${MPIRUN[@]}" -np 2 "$binary" "$ready" >"$log" 2>&1 &
pid=$!
fail() { echo "FAILED: $*"; cat "$log"; kill -KILL "$pid" 2>/dev/null; pkill -KILL -f "$binary $ready"; exit 1; }
alive() { kill -0 "$pid" 2>/dev/null; }

for ((i = 0; i < 3000; i++)); do  # Up to 300 s for both first steps.
  [[ -e $ready/ready.0 && -e $ready/ready.1 ]] && break
  alive || fail "mpirun ended before both processes trained a step"
  sleep 0.1
done
[[ -e $ready/ready.0 && -e $ready/ready.1 ]] || fail "no first step in 300 s"
pgrep -f "$binary $ready" >/dev/null || fail "no training process found"

kill -INT "$pid"
for ((i = 0; i < 1200; i++)); do
  alive || break
  sleep 0.1
done
alive && fail "mpirun still runs 120 s after SIGINT"
wait "$pid"
rc=$?
((rc != 0)) || fail "mpirun exited 0 after SIGINT"
for ((i = 0; i < 100; i++)); do  # Its children may be reaped just after.
  pgrep -f "$binary $ready" >/dev/null || break
  sleep 0.1
done
if pgrep -f "$binary $ready" >/dev/null; then
  fail "processes left after mpirun ended: $(pgrep -af "$binary $ready")"
fi
echo "PASSED: mpirun exited $rc after SIGINT; no process of the job is left"
cat "$log"
