// All-reduce across processes: ipuflow's fixed-order chain (MpiLink through
// a CollectiveGroup with one local replica) side by side with a bare
// MPI_Allreduce of the same float32 sum, alternating, in one run:
//
//   mpirun -np 2 --allow-run-as-root --oversubscribe
//     bazel-bin/core/distributed/allreduce_benchmark
//
// Bus bandwidth as NCCL's tests define it: bytes x 2 (P - 1) / P / time.
// Medians of the repetitions. Process 0 prints the machine and the table.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/distributed/mpi_link.h"
#include "core/ipu/collective_group.h"
#include "core/machine_info.h"

namespace ipuflow::distributed {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  auto link = MpiLink::World();
  if (!link.ok()) {
    std::fprintf(stderr, "%s\n", link.status().ToString().c_str());
    return 1;
  }
  const int P = (*link)->process_count(), me = (*link)->process_index();
  if (me == 0) {
    std::printf(
        "%s\n%d processes; ipuflow chain (fixed order) vs "
        "MPI_Allreduce, float32 sum, medians\n",
        MachineDescription().c_str(), P);
    std::printf("%10s %14s %14s %8s\n", "bytes", "ipuflow GB/s", "MPI GB/s",
                "ratio");
  }
  CollectiveGroup group(1, *link, /*program_tag=*/1);
  for (int64_t bytes = 4 << 10; bytes <= (64 << 20); bytes *= 4) {
    const int64_t n = bytes / 4;
    Tensor in(DType::kFloat32, TensorShape({n}));
    Tensor out(DType::kFloat32, TensorShape({n}));
    for (int64_t j = 0; j < n; ++j) in.data<float>()[j] = 0.001f * (j % 997);
    std::vector<float> mpi_out(n);
    const int reps = bytes <= (1 << 20) ? 50 : 8;
    std::vector<double> ours, theirs;
    for (int r = 0; r < reps + 1; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      absl::Status s =
          group.AllReduce(0, "bench", in, out, CollectiveGroup::ReduceOp::kSum);
      auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      auto t2 = std::chrono::steady_clock::now();
      MPI_Allreduce(in.data<float>(), mpi_out.data(), static_cast<int>(n),
                    MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      auto t3 = std::chrono::steady_clock::now();
      if (r == 0) continue;  // Warm-up.
      ours.push_back(std::chrono::duration<double>(t1 - t0).count());
      theirs.push_back(std::chrono::duration<double>(t3 - t2).count());
    }
    const double factor = 2.0 * (P - 1) / P * static_cast<double>(bytes) / 1e9;
    const double a = factor / Median(ours), b = factor / Median(theirs);
    if (me == 0) {
      std::printf("%10lld %14.2f %14.2f %7.2fx\n",
                  static_cast<long long>(bytes), a, b, a / b);
    }
  }
  return 0;
}

}  // namespace
}  // namespace ipuflow::distributed

int main() { return ipuflow::distributed::Main(); }
