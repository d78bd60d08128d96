// Push/Pop throughput of BoundedQueue between two threads: a producer thread
// pushes as fast as it can while the benchmark thread pops. One iteration is
// one element handed over. Payloads: an int64, a 3200-byte struct moved by
// value (about one 28x28 float image), and a shared_ptr to such a struct (the
// pointer crosses, the bytes stay put).
//
//   bazel run -c opt //core/ipu:bounded_queue_benchmark
#include <array>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/ipu/bounded_queue.h"

namespace ipuflow {
namespace {

struct Payload {
  std::array<uint8_t, 3200> bytes;
};

// make(i) builds the i-th element in the producer thread.
template <typename T, typename MakeFn>
void RunTransfer(benchmark::State& state, MakeFn make, int64_t bytes_each) {
  BoundedQueue<T> ring(static_cast<size_t>(state.range(0)));
  std::thread producer([&] {
    for (int64_t i = 0;; ++i) {
      if (!ring.Push(make(i)).ok()) return;
    }
  });
  for (auto _ : state) {
    absl::StatusOr<T> v = ring.Pop();
    benchmark::DoNotOptimize(v);
  }
  ring.Cancel();
  producer.join();
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * bytes_each);
}

void BM_Int64(benchmark::State& state) {
  RunTransfer<int64_t>(
      state, [](int64_t i) { return i; }, sizeof(int64_t));
}

void BM_Payload3200ByValue(benchmark::State& state) {
  Payload p;
  p.bytes.fill(1);
  RunTransfer<Payload>(
      state,
      [&p](int64_t i) {
        p.bytes[0] = static_cast<uint8_t>(i);
        return p;
      },
      sizeof(Payload));
}

void BM_Payload3200SharedPtr(benchmark::State& state) {
  // A pool larger than any capacity below, so the producer never touches a
  // buffer the consumer still holds.
  std::vector<std::shared_ptr<const Payload>> pool(2048);
  for (auto& p : pool) p = std::make_shared<const Payload>();
  RunTransfer<std::shared_ptr<const Payload>>(
      state, [&pool](int64_t i) { return pool[i % pool.size()]; },
      sizeof(Payload));
}

BENCHMARK(BM_Int64)->Arg(4)->Arg(1024)->UseRealTime();
BENCHMARK(BM_Payload3200ByValue)->Arg(4)->Arg(1024)->UseRealTime();
BENCHMARK(BM_Payload3200SharedPtr)->Arg(4)->Arg(1024)->UseRealTime();

}  // namespace
}  // namespace ipuflow
