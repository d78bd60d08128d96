#!/usr/bin/env bash
# tests/perf/cold_build.sh [TARGET]: how long a newcomer waits for TARGET
# (default: the main example) to build from nothing: a fresh Bazel output
# base and no disk cache, as on a clean clone. Prints the machine (CPU model,
# cores, ISA), the wall time and tests/perf/build_profile.py's account of
# where the time went (slowest actions, by package). Run it on an otherwise
# idle machine: the seconds stretch with the load, the ranking holds.
#
#   tests/perf/cold_build.sh                        # //examples:train_fashion_mnist
#   tests/perf/cold_build.sh //pipelining:pipeline
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:-//examples:train_fashion_mnist}
work=$(mktemp -d "${TMPDIR:-/tmp}/ipuflow-cold.XXXXXX")
trap './bazelw --output_base="$work/base" shutdown >/dev/null 2>&1; rm -rf "$work"' EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
isa=$(grep -m1 -o -w 'avx512f' /proc/cpuinfo || echo "no avx512f")
echo "Machine: $cpu, $(nproc) logical CPUs, $isa; commit $(git rev-parse --short HEAD)"
# The Debian packages, outside the clock (bootstrap Bazel has no version
# and says so with a non-zero status).
./bazelw version >/dev/null 2>&1 || true
start=$(date +%s)
./bazelw --output_base="$work/base" build --disk_cache= --symlink_prefix=/ \
  --profile="$work/profile.gz" "$target"
echo "Cold build of $target: $(($(date +%s) - start)) s"
python3 tests/perf/build_profile.py "$work/profile.gz" --top 10
