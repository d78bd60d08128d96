#!/usr/bin/env bash
# tests/fuzz/run_fuzzers.sh SECONDS [TARGET...]: builds every libFuzzer target
# (--config=fuzz, the same build as --config=sanitize: clang 14, ASan +
# UBSan) in its own Bazel output base, runs each for SECONDS over a scratch
# copy of its seed corpus, and prints per target the executions and crashes.
# Exits non-zero if any target crashed or ran no input (a crash's reproducer
# is left in the work folder printed; add it to the seed corpus once fixed).
# TARGET: a name from the table below (default: all).
#
# Environment: IPUFLOW_FUZZ_OUTPUT_BASE (default /tmp/bazel_fuzz),
# IPUFLOW_FUZZ_WORK (default /tmp/ipuflow_fuzz), IPUFLOW_FUZZ_JOBS (parallel
# fuzzer processes per target, default 1), IPUFLOW_FUZZ_PARALLEL (targets
# fuzzed at once, default one per core).
set -uo pipefail

seconds=${1:?usage: run_fuzzers.sh SECONDS [TARGET...]}
shift
cd "$(dirname "$0")/../.."

# name  label  seed corpus
TABLE="
graph_def              //core:graph_def_fuzzer                    core/testdata/fuzz/graph_def
graph_def_text         //core:graph_def_text_fuzzer               core/testdata/fuzz/graph_def_text
ipu_config             //core/ipu:ipu_config_fuzzer               core/ipu/testdata/fuzz/ipu_config
idx_reader             //feeds:idx_reader_fuzzer                  feeds/testdata/fuzz/idx
dataset_benchmark_json //feeds:dataset_benchmark_json_fuzzer      feeds/testdata/fuzz/dataset_benchmark_json
options                //tests/fuzz:options_fuzzer                tests/fuzz/testdata/options
checkpoint             //core/checkpoint:checkpoint_fuzzer        core/checkpoint/testdata/fuzz/checkpoint
checkpoint_restore     //core/checkpoint:checkpoint_restore_fuzzer core/checkpoint/testdata/fuzz/checkpoint_restore
schedule_csv           //pipelining:schedule_csv_fuzzer          pipelining/testdata/fuzz/schedule_csv
"

output_base=${IPUFLOW_FUZZ_OUTPUT_BASE:-/tmp/bazel_fuzz}
work=${IPUFLOW_FUZZ_WORK:-/tmp/ipuflow_fuzz}
jobs=${IPUFLOW_FUZZ_JOBS:-1}
wanted=("$@")

selected=()
while read -r name label corpus; do
  [[ -z "$name" ]] && continue
  if ((${#wanted[@]})) && [[ ! " ${wanted[*]} " =~ " $name " ]]; then continue; fi
  selected+=("$name $label $corpus")
done <<< "$TABLE"

labels=()
for row in "${selected[@]}"; do labels+=("$(echo "$row" | cut -d' ' -f2)"); done
./bazelw --output_base="$output_base" build --config=fuzz "${labels[@]}" || exit 2
bin=$(./bazelw --output_base="$output_base" info --config=fuzz bazel-bin 2>/dev/null)

# One target per core at a time: each still fuzzes for SECONDS on a core of
# its own, and the stage takes half as long on CI's two cores.
parallel=${IPUFLOW_FUZZ_PARALLEL:-$(nproc)}
[[ "$parallel" =~ ^[1-9][0-9]*$ ]] || { echo "IPUFLOW_FUZZ_PARALLEL must be a positive integer, not '$parallel'" >&2; exit 2; }

fuzz_one() {  # fuzz_one NAME LABEL CORPUS: leaves "rc execs crashes" in its folder.
  local name=$1 label=$2 corpus=$3
  local pkg=${label#//}; pkg=${pkg%%:*}
  local target=${label##*:} dir="$work/$name"
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$corpus"/* "$dir/corpus/"
  local log="$dir/fuzz.log"
  # -rss_limit_mb: parsers bound what they allocate; 2 GiB catches leaks
  # and unbounded growth. -timeout: one input may not take 10 s.
  (cd "$dir" && "$bin/$pkg/$target" -max_total_time="$seconds" \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -jobs="$jobs" -workers="$jobs" \
      -artifact_prefix="$dir/artifacts/" corpus > "$log" 2>&1)
  local rc=$?
  [[ "$jobs" -gt 1 ]] && cat "$dir"/fuzz-*.log >> "$log" 2>/dev/null
  local execs crashes
  execs=$(grep -h 'stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}')
  crashes=$(find "$dir/artifacts" -type f | wc -l)
  echo "$rc $execs $crashes" > "$dir/result"
}

running=0
for row in "${selected[@]}"; do
  read -r name label corpus <<< "$row"
  rm -f "$work/$name/result"
  fuzz_one "$name" "$label" "$corpus" &
  running=$((running + 1))
  if ((running >= parallel)); then wait -n; running=$((running - 1)); fi
done
wait

status=0
printf '%-24s %14s %8s\n' target executions crashes
for row in "${selected[@]}"; do
  read -r name label corpus <<< "$row"
  dir="$work/$name"
  rc=1 execs=0 crashes=0
  [[ -f "$dir/result" ]] && read -r rc execs crashes < "$dir/result"
  printf '%-24s %14s %8s\n' "$name" "$execs" "$crashes"
  if [[ $rc -ne 0 || $crashes -ne 0 || $execs -eq 0 ]]; then
    echo "  $name: exit $rc; log $dir/fuzz.log; reproducers in $dir/artifacts" >&2
    status=1
  fi
done
exit $status
