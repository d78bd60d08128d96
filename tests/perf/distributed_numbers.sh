#!/usr/bin/env bash
# tests/perf/distributed_numbers.sh: the multi-process figures of
# docs/DISTRIBUTED.md, side by side in one run, with the CPU
# model and ISA in use:
#   - the main example, 1 process x 2 replicas vs 2 processes x 1 replica
#     (mpirun), alternating, one epoch each: images/s and test accuracy;
#   - tensor fusion: cross-replica SGD steps on the ConvNet's gradients,
#     fused vs one all-reduce each, in 1 process and under mpirun -np 2;
#   - all-reduce bus bandwidth across 2 processes, ipuflow's fixed-order
#     chain vs MPI_Allreduce, 4 KiB to 64 MiB.
#
#   tests/perf/distributed_numbers.sh           # about 2 minutes on 2 cores
#   ROUNDS=5 tests/perf/distributed_numbers.sh
#
# The machine may be shared: compare the ratios within a run.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}
./bazelw build --noshow_progress //examples:train_fashion_mnist \
  //tests/distributed:fusion_benchmark //core/distributed:allreduce_benchmark >&2
bin=bazel-bin
mpi=(mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none
     --mca btl self,vader --mca btl_vader_single_copy_mechanism none)

echo "## ipuflow across processes, $(date -u +%Y-%m-%d)"
"$bin/tests/distributed/fusion_benchmark" | head -1
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "### The main example, one epoch, alternating ($rounds rounds)"
for ((r = 0; r < rounds; ++r)); do
  one=$("$bin/examples/train_fashion_mnist" --replication-factor 2 2>/dev/null)
  two=$("${mpi[@]}" "$bin/examples/train_fashion_mnist" --replication-factor 1 2>/dev/null)
  for run in "1 process x 2 replicas|$one" "2 processes x 1 replica|$two"; do
    name=${run%%|*}; out=${run#*|}
    ips=$(echo "$out" | sed -n 's/.* s: \([0-9]*\) images\/s;.*/\1/p')
    acc=$(echo "$out" | sed -n 's/^Test accuracy: \([0-9.]*%\) (\([0-9]* of [0-9]*\).*/\1 (\2)/p')
    echo "round $((r + 1)): $name: $ips images/s, test accuracy $acc"
  done
done
echo
echo "### Tensor fusion"
"$bin/tests/distributed/fusion_benchmark" | tail -n +2
"${mpi[@]}" "$bin/tests/distributed/fusion_benchmark" | tail -n +2
echo
echo "### All-reduce across 2 processes"
"${mpi[@]}" "$bin/core/distributed/allreduce_benchmark" | tail -n +2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
