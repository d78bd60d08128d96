#!/usr/bin/env bash
# tests/perf/libtorch_peer.sh: ipuflow's two Fashion-MNIST trainers against
# the same model, data and settings in libtorch (issue 12's peer), side by
# side in one run, rounds alternating:
#   - the main example (pipelined, 4 IPUs, micro-batch 40, gradient
#     accumulation 10) vs libtorch, micro-batch 40, accumulation 10;
#   - the device-loop trainer (one IPU, batch 40, an update every step) vs
#     libtorch, batch 40, accumulation 1.
# libtorch runs with 1 and with 2 threads each round and keeps its faster
# run (on a busy 2-core machine its 2-thread team can be the slower one).
# Prints images/s medians, their ratios and the test accuracies, with the
# CPU model and ISA.
#
#   tests/perf/libtorch_peer.sh           # 3 rounds, ~5 minutes on 2 cores
#   ROUNDS=5 tests/perf/libtorch_peer.sh
#
# libtorch is not an ipuflow dependency: this needs Debian's libtorch-dev
# and an optimised BLAS behind it (apt-get install libtorch-dev
# libopenblas0-openmp); tests/perf/libtorch/ is compiled here with g++,
# outside Bazel. Debian's libtorch is built with BLAS_INFO=generic: its
# Linear layers call whatever libblas.so.3 the alternatives system points
# at, and with the reference BLAS the peer runs 3x slower than with
# OpenBLAS, an unfair comparison this script refuses to make.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}

if ! dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "libtorch_peer.sh: needs Debian's libtorch-dev: apt-get install -y libtorch-dev" >&2
  exit 1
fi
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
if [[ $blas != *openblas* ]]; then
  echo "libtorch_peer.sh: libblas.so.3 is $blas, not OpenBLAS: apt-get install -y libopenblas0-openmp" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -std=c++17 -O2 -I/usr/include/torch/csrc/api/include \
  tests/perf/libtorch/convnet_fashion_mnist.cc -o "$out/libtorch_convnet" \
  -ltorch -ltorch_cpu -lc10 -lz
./bazelw build --noshow_progress //examples:train_fashion_mnist //examples:train_fashion_mnist_loop >&2
bin=bazel-bin/examples

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# The faster of libtorch's 1- and 2-thread runs: "images/s accuracy".
torch_run() {  # ACCUMULATION
  local best=0 acc=0 line ips
  for t in 1 2; do
    line=$("$out/libtorch_convnet" --accumulation="$1" --threads="$t")
    ips=$(sed -n 's/.*: \([0-9]*\) images\/s;.*/\1/p' <<<"$line")
    if ((ips > best)); then best=$ips; acc=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line"); fi
  done
  echo "$best $acc"
}

echo "## ipuflow vs libtorch $(dpkg-query -W -f='${Version}' libtorch-dev), $(date -u +%Y-%m-%d)"
echo "libtorch's BLAS: $blas"
echo "machine: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1) ($(nproc) logical CPUs); ISA: $(grep -o -w -E 'avx512f|avx2|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
main=(); loop=(); tmain=(); tloop=()
for ((r = 0; r < rounds; ++r)); do
  l=$("$bin/train_fashion_mnist" 2>/dev/null)
  main+=("$(sed -n 's/.* s: \([0-9]*\) images\/s;.*/\1/p' <<<"$l") $(sed -n 's/^Test accuracy: \([0-9.]*\)%.*/\1/p' <<<"$l")")
  tmain+=("$(torch_run 10)")
  l=$("$bin/train_fashion_mnist_loop" 2>/dev/null)
  loop+=("$(sed -n 's/.*(\([0-9]*\) images\/s).*/\1/p' <<<"$l") $(sed -n 's/.*[Tt]est accuracy[: ]*\([0-9.]*\)%.*/\1/p' <<<"$l" | head -1)")
  tloop+=("$(torch_run 1)")
done
row() {  # NAME OURS_ARRAY_NAME THEIRS_ARRAY_NAME
  local -n a=$2 b=$3
  local ours theirs
  ours=$(printf '%s\n' "${a[@]}" | awk '{ print $1 }' | median)
  theirs=$(printf '%s\n' "${b[@]}" | awk '{ print $1 }' | median)
  awk -v n="$1" -v x="$ours" -v y="$theirs" \
      -v ax="$(printf '%s\n' "${a[@]}" | awk '{ print $2 }' | median)" \
      -v ay="$(printf '%s\n' "${b[@]}" | awk '{ print $2 }' | median)" 'BEGIN {
    printf "| %s | %.0f images/s, test %.2f%% | libtorch: %.0f images/s, test %.2f%% | %.2fx |\n", n, x, ax, y, ay, x / y }'
}
echo "| trainer (medians of $rounds alternating rounds) | ipuflow | peer, same run | ratio |"
echo "|---|---|---|---|"
row "main example (pipelined, batch 40, GA 10, AdamW)" main tmain
row "device-loop trainer (batch 40, AdamW every step)" loop tloop
