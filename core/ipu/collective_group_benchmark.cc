// CollectiveGroup on R replica threads: one iteration is one all-reduce of
// each of the tensors of the replication benchmark's MLP gradients (784x512,
// 512, 512x10, 10 floats: 1.6 MB), on every replica, as CrossReplicaOptimizer
// does each step; `work_us` of arithmetic per replica between iterations
// stands for the step's compute (arrivals are then as skewed as the
// scheduler makes them, not lock-stepped by the previous barrier).
//
//   bazel run //core/ipu:collective_group_benchmark
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/ipu/collective_group.h"

namespace ipuflow {
namespace {

void Work(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  volatile double x = 1.0;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 64; ++i) x = std::sqrt(x + 1.0);
  }
}

void BM_AllReduceMlpGradients(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  const auto work = std::chrono::microseconds(state.range(1));
  const std::vector<std::vector<int64_t>> shapes = {
      {784, 512}, {512}, {512, 10}, {10}};
  CollectiveGroup group(replicas);
  // Replica r > 0 runs on its own thread for as many iterations as the
  // benchmark loop (replica 0) runs; they stop when told.
  std::atomic<int64_t> iterations{-1};
  auto step = [&](int r, std::vector<Tensor>& in, std::vector<Tensor>& out) {
    Work(work);
    for (size_t k = 0; k < in.size(); ++k) {
      absl::Status s = group.AllReduce(r, "g" + std::to_string(k), in[k],
                                       out[k], CollectiveGroup::ReduceOp::kSum);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };
  auto tensors = [&] {
    std::vector<Tensor> t;
    for (const auto& s : shapes) {
      t.push_back(Tensor::Filled(DType::kFloat32, TensorShape(s), 1.0));
    }
    return t;
  };
  std::vector<std::thread> others;
  for (int r = 1; r < replicas; ++r) {
    others.emplace_back([&, r] {
      std::vector<Tensor> in = tensors(), out = tensors();
      for (int64_t i = 0;; ++i) {
        while (iterations.load() < 0) std::this_thread::yield();
        if (i >= iterations.load()) break;
        if (!step(r, in, out).ok()) break;
      }
    });
  }
  std::vector<Tensor> in = tensors(), out = tensors();
  // The loop's count is known only at its end: the other replicas follow
  // replica 0 barrier by barrier, and the Cancel below releases them from
  // the step replica 0 never starts.
  iterations.store(INT64_MAX);
  int64_t n = 0;
  for (auto _ : state) {
    if (!step(0, in, out).ok()) state.SkipWithError("all-reduce failed");
    ++n;
  }
  iterations.store(n);
  // The others may be waiting in iteration n: release them.
  group.Cancel(absl::CancelledError("benchmark done"));
  for (auto& t : others) t.join();
  state.counters["us/step"] = benchmark::Counter(
      static_cast<double>(state.iterations()) / 1e6,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AllReduceMlpGradients)
    ->ArgNames({"replicas", "work_us"})
    ->Args({2, 0})
    ->Args({2, 300})
    ->UseRealTime();

}  // namespace
}  // namespace ipuflow
