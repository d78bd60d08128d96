#!/usr/bin/env bash
# tests/perf/benchmarks.sh: measures this machine and rewrites its ISA's
# section of docs/BENCHMARKS.md (the other ISA's section stays as its own
# run left it). Every figure in the section comes from this one run, with
# the commit, the date, the CPU model and the ISA the kernels chose.
#
#   tests/perf/benchmarks.sh                        # about 10 minutes on 2 cores
#   IPUFLOW_MAX_ISA=avx2 tests/perf/benchmarks.sh   # an AVX-512 CPU as AVX2
#   ROUNDS=5 tests/perf/benchmarks.sh               # steadier medians
#   BENCHMARKS_OUT=/tmp/b.md tests/perf/benchmarks.sh  # another file
#
# The ISA (core/cpu_isa.h) decides the main example's last digits: float
# sums are taken in another order by the AVX-512 kernels. Ratios within a
# run are what to compare: the machine may be shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${BENCHMARKS_OUT:-docs/BENCHMARKS.md}
rounds=${ROUNDS:-3}

targets=(//examples:train_fashion_mnist //examples:onednn_reference_benchmark
         //pipelining:pipeline_benchmark //tests:replication_benchmark
         //feeds:data_loader_benchmark)
./bazelw build --noshow_progress "${targets[@]}" >&2
bin=bazel-bin

# The ISA in use: the main example prints "Machine: ...; kernels: avx2 (...)".
example=$("$bin/examples/train_fashion_mnist" 2>/dev/null)
machine=$(echo "$example" | sed -n 's/^Machine: //p')
isa=$(echo "$machine" | sed -n 's/.*kernels: \([a-z0-9]*\).*/\1/p')
[[ "$isa" == avx2 || "$isa" == avx512 ]] || { echo "unknown kernel ISA in '$machine'" >&2; exit 1; }
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs/BENCHMARKS.md' || echo "+uncommitted")

section=$(mktemp)
{
  echo "<!-- BEGIN $isa -->"
  echo "## Kernels: $isa"
  echo
  echo "Commit $commit, $(date -u +%Y-%m-%d), \`tests/perf/benchmarks.sh\`"
  echo "(ROUNDS=$rounds) on: $machine; IPUFLOW_MAX_ISA=${IPUFLOW_MAX_ISA:-unset}."
  echo
  echo "### The main example, seed 0"
  echo
  echo "\`./bazelw run //examples:train_fashion_mnist\` (the same loss and"
  echo "accuracies on every run with these kernels; the images/s vary):"
  echo
  echo '```'
  echo "$example" | grep -v '^Machine: '
  echo '```'
  echo
  echo "### Side by side"
  echo
  echo "Each row's two sides in the same run, rounds alternating."
  echo
  ROUNDS=$rounds tests/perf/speed_table.sh 2>/dev/null | sed 's/^\(machine:\|oneDNN \|ISA override:\|threads:\)/- \1/'
  echo
  echo "### Pipelines, replicas, the DataLoader"
  echo
  echo "\`pipeline_benchmark\` (bubble measured on virtual clocks vs the"
  echo "planner and the textbook), \`replication_benchmark -- --rounds=$rounds\`"
  echo "(1 vs 2 replicas, alternating), \`data_loader_benchmark -- --rounds=$rounds\`"
  echo "(modes vs Sync, interleaved):"
  echo
  echo '```'
  "$bin/pipelining/pipeline_benchmark" 2>/dev/null
  "$bin/tests/replication_benchmark" --rounds="$rounds" 2>/dev/null
  "$bin/feeds/data_loader_benchmark" --rounds="$rounds" --epochs=1 2>/dev/null
  echo '```'
  echo "<!-- END $isa -->"
} > "$section"

# Splice: replace this ISA's block, keep the other's, in a fixed order.
[[ -f "$out" ]] || printf '# Benchmarks\n' > "$out"
python3 - "$out" "$section" "$isa" <<'EOF'
import re, sys
path, section_path, isa = sys.argv[1:]
doc = open(path).read()
new = open(section_path).read().rstrip("\n")
blocks = {m.group(1): m.group(0) for m in
          re.finditer(r"(?s)<!-- BEGIN (\w+) -->.*?<!-- END \1 -->", doc)}
blocks[isa] = new
head = re.split(r"<!-- BEGIN \w+ -->", doc)[0].rstrip("\n")
body = "\n\n".join(blocks[k] for k in ("avx2", "avx512") if k in blocks)
open(path, "w").write(head + "\n\n" + body + "\n")
EOF
rm -f "$section"
echo "wrote the $isa section of $out" >&2
