#!/usr/bin/env bash
# mpi_fault_test.sh BINARY FAULT[,FAULT...] P...: for each FAULT and each P,
# runs `mpirun -np P BINARY --gtest_filter=... --fault=FAULT` (BINARY is
# mpi_fault_check) and checks that the job ends the way FAULT must end it
# (docs/DISTRIBUTED.md, "Faults"): mpirun's exit status, what the processes
# printed, and that no process of the job is left.
#
# Every failure of one process ends the whole job: the fault cases turn off
# the timers that are not theirs (stall or start timeout of an hour), so
# only the fault's own path can end the job. `timeout` is a hang guard
# against an infinite wait, generous for a loaded 2-core machine under
# ASan; never a verdict on speed. The seconds each run took are printed.
set -uo pipefail
binary=$1
IFS=, read -r -a faults <<<"$2"
shift 2
counts=("$@")
limit=120
source "$TEST_SRCDIR/$TEST_WORKSPACE/core/distributed/mpirun_env.sh"
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/mpi_fault.XXXXXX")
hour=3600
rc=0

for fault in "${faults[@]}"; do
  for np in "${counts[@]}"; do
    run="$work/$fault.$np"
    mkdir -p "$run"
    # What the run passes, whether mpirun must fail, what the log must
    # hold, whether every process writes a verdict (gtest's result) to
    # $run/verdict.<rank> (tests whose every process checks something).
    env=() want_fail=1 want=() verdicts=0
    args=(--gtest_filter=*FaultEndsTheJob "--fault=$fault"
      "--stall_seconds=$hour" "--start_seconds=$hour")
    case $fault in
      none) want_fail=0 ;;
      sleep)  # Last process sleeps in training: the others' stall timer.
        args+=(--stall_seconds=2)
        want=("DEADLINE_EXCEEDED" "ends the MPI job") ;;
      kill) want=("signal 9") ;;
      error) want=("exits with status 3" "ends the MPI job") ;;
      refuse)  # The last process is told OMPI_COMM_WORLD_RANK=0.
        want=("the launcher's environment says" "ends the MPI job") ;;
      refuse_poprun)  # Offsets that fit process 0 only.
        env=(-x "POPDIST_NUM_TOTAL_REPLICAS=$np" -x POPDIST_NUM_LOCAL_REPLICAS=1
          -x POPDIST_REPLICA_INDEX_OFFSET=0)
        want=("PopRun environment disagrees" "ends the MPI job") ;;
      refuse_then_sleep)  # The refuser never exits: the others' timer.
        args+=(--start_seconds=3)
        want=("not every process joined" "ends the MPI job") ;;
      sleep_before_start)  # The last process never starts MPI.
        args+=(--start_seconds=3)
        want=("MPI_Init_thread has not returned") ;;
      notice)
        args=(--gtest_filter=*FailureIsToldToTheOthers) verdicts=1 ;;
      stall)
        args=(--gtest_filter=*StallIsReported --stall_seconds=1) verdicts=1 ;;
      size_mismatch)
        args=(--gtest_filter=*DisagreeingOnSizeIsAnError) verdicts=1 ;;
      *) echo "unknown fault $fault"; exit 2 ;;
    esac
    ((verdicts)) && args+=("--verdict_dir=$run")
    start=$(date +%s%N)
    # --job_tag: finds the job's processes afterwards.
    timeout -k 10 "$limit" "${MPIRUN[@]}" -np "$np" "${env[@]}" \
      "$binary" "${args[@]}" "--job_tag=$run" >"$run/log" 2>&1
    status=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    seconds="$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    problems=()
    # 124: timeout stopped it; past the limit, timeout's KILL did (137, as
    # a killed peer's job, hence the clock).
    if ((status == 124 || ms >= limit * 1000)); then
      problems+=("mpirun still ran after ${limit} s (an infinite wait)")
    elif ((want_fail && status == 0)); then
      problems+=("mpirun exited 0, the job should have failed")
    elif ((!want_fail && status != 0)); then
      problems+=("mpirun exited $status")
    fi
    for text in "${want[@]}"; do
      grep -qF -- "$text" "$run/log" || problems+=("no \"$text\" in the log")
    done
    if ((verdicts)); then
      for ((p = 0; p < np; p++)); do
        v=$(cat "$run/verdict.$p" 2>/dev/null || echo missing)
        [[ $v == 0 ]] || problems+=("process $p's verdict: $v")
      done
    fi
    for ((i = 0; i < 100; i++)); do  # Children may be reaped just after.
      pgrep -f -- "--job_tag=$run" >/dev/null || break
      sleep 0.1
    done
    if pgrep -f -- "--job_tag=$run" >/dev/null; then
      problems+=("processes left: $(pgrep -af -- "--job_tag=$run")")
      pkill -KILL -f -- "--job_tag=$run"
    fi
    if ((${#problems[@]})); then
      echo "FAILED: fault $fault, np $np: ${problems[*]}"
      cat "$run/log"
      rc=1
    else
      echo "ok: fault $fault, np $np: mpirun exited $status after $seconds s"
    fi
  done
done
exit $rc
