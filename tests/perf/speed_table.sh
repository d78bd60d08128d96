#!/usr/bin/env bash
# tests/perf/speed_table.sh: prints docs/BENCHMARKS.md's speed table, every
# row measured side by side in this one run, with the CPU model, the ISA in
# use and the thread counts. tests/perf/benchmarks.sh puts its output in
# docs/BENCHMARKS.md; a reader who runs it gets the same kind of numbers on
# their machine.
#
#   tests/perf/speed_table.sh            # about 3 minutes on 2 cores
#   ROUNDS=5 tests/perf/speed_table.sh   # more rounds, steadier medians
#   IPUFLOW_MAX_ISA=avx2 tests/perf/speed_table.sh  # as on an AVX2-only CPU
#
# The ISA in use is the run-time dispatch's choice (core/cpu_isa.h): the
# "machine:" line ends with "kernels: avx512|avx2 (...)", the "oneDNN" line
# gives oneDNN's; IPUFLOW_MAX_ISA=avx2 caps both, for every binary below.
#
# Ratios are what to compare: the machine may be shared, so absolute times
# move between runs, while rows alternate their two sides within a round.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}

targets=(//ops/math:mat_mul_benchmark
         //examples:onednn_reference_benchmark
         //examples:train_fashion_mnist //feeds:feed_benchmark
         //ops/control:loop_benchmark)
./bazelw build --noshow_progress "${targets[@]}" >&2
bin=bazel-bin

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Google Benchmark CSV: name,iterations,real_time,cpu_time,time_unit,...
bench_csv() {  # BINARY FILTER: CSV rows, repetitions interleaved at random.
  "$bin/$1" --benchmark_filter="$2" --benchmark_format=csv \
    --benchmark_repetitions="$rounds" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=false 2>/dev/null | grep '^"'
}
# Median real time (in the benchmark's unit) of the rows whose name is $1.
real_median() { awk -F, -v n="\"$1\"" '$1 == n { print $3 }' | median; }

"$bin/examples/onednn_reference_benchmark" --rounds=1 --steps=1 2>/dev/null |
  grep -E '^(machine|oneDNN)' || true
echo "ISA override: IPUFLOW_MAX_ISA=${IPUFLOW_MAX_ISA:-unset} (avx2 caps ipuflow's kernels and oneDNN)"
echo "threads: 2 per emulated IPU unless a row says otherwise (the default pool: the caller + 1 worker)"
echo
echo "| measure | ipuflow | reference, same run | ratio |"
echo "|---|---|---|---|"

# SGEMM: ipuflow's MatMul through a Session (default pool) vs oneDNN's sgemm
# on its own OpenMP threads, 1 or 2, whichever is faster in this run.
mm=$(OMP_WAIT_POLICY=passive bench_csv ops/math/mat_mul_benchmark \
  'BM_SessionMatMul/(256|512|1024)/intra_op_threads:0|BM_OnednnOwnThreadsMatMul/(256|512|1024)/threads:')
for n in 256 512 1024; do
  ours=$(echo "$mm" | real_median "BM_SessionMatMul/$n/intra_op_threads:0/real_time")
  one=$(echo "$mm" | real_median "BM_OnednnOwnThreadsMatMul/$n/threads:1/real_time")
  two=$(echo "$mm" | real_median "BM_OnednnOwnThreadsMatMul/$n/threads:2/real_time")
  awk -v n="$n" -v a="$ours" -v b1="$one" -v b2="$two" 'BEGIN {
    b = b1 < b2 ? b1 : b2; t = b1 < b2 ? 1 : 2;
    f = 2 * n * n * n / 1e6;   # MFLOP; times are in ms, so f / ms = GFLOP/s.
    printf "| SGEMM %d (MatMul, default pool) | %.0f GFLOP/s | oneDNN sgemm, %d OpenMP thread(s): %.0f GFLOP/s | %.2f |\n", n, f / a, t, f / b, b / a }'
done

# The tutorial ConvNet's AdamW step and forward pass vs a oneDNN-only
# program of the same step (examples/onednn_reference_step.h): one harness,
# //examples:onednn_reference_benchmark, alternating ipuflow (fused and
# unfused) and oneDNN on 1 and 2 OpenMP threads in rounds within one
# process (it sets OMP_WAIT_POLICY=passive itself: libgomp's spinning
# workers otherwise take a core from the ipuflow round that follows).
cv=$("$bin/examples/onednn_reference_benchmark" --rounds=$((5 * rounds)) --steps=20 2>/dev/null)
for what in step forward; do
  case $what in
    step) line=$(echo "$cv" | grep '^training step (AdamW), wall'); name="ConvNet AdamW training step, batch 40" ;;
    forward) line=$(echo "$cv" | grep '^forward (loss), wall'); name="ConvNet forward, batch 40" ;;
  esac
  # Columns after the label: ipuflow, unfused, oneDNN 1T, oneDNN 2T, ratios.
  echo "$line" | sed 's/^[^0-9]*//' | awk -v name="$name" '{
    a = $1; u = $2; b1 = $3; b2 = $4; b = b1 < b2 ? b1 : b2; t = b1 < b2 ? 1 : 2;
    printf "| %s (default pool; unfused %.2f ms) | %.2f ms | oneDNN-only program, %d OpenMP thread(s): %.2f ms | %.2fx the time |\n", name, u, a, t, b, a / b }'
done

# The main example, float32 and float16 alternating, one epoch each.
fp32=(); fp16=()
for ((r = 0; r < rounds; ++r)); do
  for p in fp32 fp16; do
    ips=$("$bin/examples/train_fashion_mnist" --precision "$p" 2>/dev/null |
          sed -n 's/.* s: \([0-9]*\) images\/s;.*/\1/p')
    if [[ $p == fp32 ]]; then fp32+=("$ips"); else fp16+=("$ips"); fi
  done
done
a=$(printf '%s\n' "${fp32[@]}" | median); b=$(printf '%s\n' "${fp16[@]}" | median)
awk -v a="$a" -v b="$b" 'BEGIN {
  printf "| main example (pipelined, 4 IPUs), --precision fp16 | %.0f images/s | --precision fp32: %.0f images/s | %.2f |\n", b, a, b / a }'

# Device loop vs host calls; feeds.
lp=$(bench_csv ops/control/loop_benchmark 'BM_DeviceRepeat|BM_HostCalls')
awk -v a="$(echo "$lp" | real_median BM_DeviceRepeat/real_time)" \
    -v b="$(echo "$lp" | real_median BM_HostCalls/real_time)" 'BEGIN {
  printf "| Repeat(1000) device loop | %.2f us/iteration | 1000 host Session::Run calls: %.2f us/call | %.2f |\n", a, b, b / a }'
fd=$("$bin/feeds/feed_benchmark" --benchmark_filter='BM_Infeed/32|BM_OutfeedNext/32|BM_RoundTrip' \
      --benchmark_repetitions="$rounds" --benchmark_enable_random_interleaving=true 2>/dev/null)
echo "$fd" | awk '
  /^BM_Infeed\/32\/real_time /     { match($0, /ns\/elem=[0-9.]+[a-z]*/); print "infeed", substr($0, RSTART + 8, RLENGTH - 8) }
  /^BM_OutfeedNext\/32\/real_time / { match($0, /ns\/elem=[0-9.]+[a-z]*/); print "outfeed", substr($0, RSTART + 8, RLENGTH - 8) }
  /^BM_RoundTrip\/real_time /      { match($0, /us\/trip=[0-9.]+[a-z]*/); print "trip", substr($0, RSTART + 8, RLENGTH - 8) }' |
  awk '{ v = $2; if (v ~ /us$/) v = v * 1000; else if (v ~ /ns$/) v = v + 0; else if (v ~ /m$/) v = v * 1e6; else if (v ~ /s$/) v = v * 1e9; else v = v + 0;
         if ($1 == "trip") v = $2 + 0; print $1, v }' > /tmp/speed_table_feeds.$$
for k in infeed outfeed trip; do
  m=$(awk -v k="$k" '$1 == k { print $2 }' /tmp/speed_table_feeds.$$ | median)
  case $k in
    infeed)  printf '| infeed -> device, 3200-byte elements, depth 32 | %.2f us/element | issue 12 target: 0.5 us | |\n' "$(awk -v m="$m" 'BEGIN { print m / 1000 }')" ;;
    outfeed) printf '| outfeed -> host thread (Next), depth 32 | %.2f us/element | issue 12 target: 2 us | |\n' "$(awk -v m="$m" 'BEGIN { print m / 1000 }')" ;;
    trip)    printf '| round trip host -> infeed -> device -> outfeed -> host | %.1f us | issue 12 target: 20 us | |\n' "$m" ;;
  esac
done
rm -f /tmp/speed_table_feeds.$$
