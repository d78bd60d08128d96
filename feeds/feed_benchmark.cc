// Feed throughput and latency on one emulated IPU, for float32[800] elements
// (3200 bytes, about one 28x28 image), set against this machine's memcpy:
//
//   BM_RepeatNoInfeed        the device loop alone (counter += 1): the floor.
//   BM_Infeed/depth          IPUInfeedQueue -> InfeedDequeue in Repeat(n); the
//                            body only counts (prefetch_depth 3 and 32).
//   BM_InfeedReduceSum/depth the body also sums the element (device reads it).
//   BM_InfeedCopied/depth    the host thread copies every element first (a
//                            Map), as a real host->device transfer would.
//   BM_Memcpy3200/buffers    3200-byte memcpys cycling over 1 or 1000 buffers.
//   BM_Memcpy64MiB           one 64 MiB memcpy.
//   BM_OutfeedNext           Repeat(n) enqueues x; a host thread takes Next().
//   BM_OutfeedDequeue        the same, one Dequeue() (stacked) after the run.
//   BM_RoundTrip             host -> infeed -> device -> outfeed -> host, one
//                            element in flight, one host thread (the
//                            infeed's generator reads each element back
//                            before it gives the next): us/trip.
//   BM_RoundTripOtherThread  the same, started and read by another host
//                            thread, which hands each element to the
//                            generator (one more hop): us/trip.
//
//   bazel run //feeds:feed_benchmark -- --benchmark_min_time=1
//
// The report's header names the CPU and its vector ISA ("machine: ...").
//
// Every feed crosses 2-3 threads (the infeed's host thread, the IPU's, the
// reader; the outfeed has no thread of its own): when other processes load
// the machine, or under `taskset -c 0`, they share cores and small rings get
// several times slower (a waiting side spins 5-20 us, adaptively, yielding
// every ~1 us, then sleeps: the spin pays only while the other side runs).
// On a shared machine, run it in a session of its own with a raised
// autogroup weight, or every compile (an autogroup each) takes a share:
//   setsid bash -c 'echo -15 > /proc/self/autogroup; exec nice -n -15 "$@"' \
//     _ bazel-bin/feeds/feed_benchmark
//
// Elements share their buffer with the dataset's tensor (zero-copy), so the
// infeed's "GB/s" counts bytes made available to the device, not bytes moved;
// x_memcpy divides it by BM_Memcpy3200/1000's bandwidth, measured once.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/ipu/ipu_strategy.h"
#include "core/ipu/spin_wait.h"
#include "core/machine_info.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/reduce_sum.h"

namespace ipuflow::feeds {
namespace {

constexpr int kElementFloats = 800;
constexpr int64_t kElementBytes = kElementFloats * sizeof(float);
constexpr int64_t kLoopIterations = 10000;  // Per Run: launch cost amortised.
constexpr int kWorkingSetBuffers = 1000;

using Clock = std::chrono::steady_clock;

std::unique_ptr<IPUSystem> MakeSystem() {
  IPUConfig config;
  config.set_auto_select_ipus(1);
  return std::move(IPUSystem::Create(config)).value();
}

Tensor Element800() {
  return Tensor::Filled(DType::kFloat32, {kElementFloats}, 1.0);
}

template <typename T>
T OrDie(absl::StatusOr<T> v) {
  if (!v.ok()) {
    fprintf(stderr, "feed_benchmark: %s\n", v.status().ToString().c_str());
    std::abort();
  }
  return *std::move(v);
}

// 3200-byte copies from src[i] to dst[i], i cycling over `buffers` pairs.
double CopyLoop(int64_t copies, int buffers, std::vector<char>& src,
                std::vector<char>& dst) {
  for (int64_t i = 0; i < copies; ++i) {
    const int64_t off = (i % buffers) * kElementBytes;
    std::memcpy(dst.data() + off, src.data() + off, kElementBytes);
    benchmark::ClobberMemory();
  }
  return static_cast<double>(copies) * kElementBytes;
}

// Bytes/s of BM_Memcpy3200/1000, measured once (~0.3 s), for x_memcpy.
double MemcpyBytesPerSecond() {
  static const double bw = [] {
    std::vector<char> src(kWorkingSetBuffers * kElementBytes, 1);
    std::vector<char> dst(src.size(), 0);
    CopyLoop(kWorkingSetBuffers * 10, kWorkingSetBuffers, src, dst);  // Warm.
    double best = 0;
    for (int round = 0; round < 3; ++round) {
      const auto start = Clock::now();
      const double bytes = CopyLoop(200000, kWorkingSetBuffers, src, dst);
      const double s =
          std::chrono::duration<double>(Clock::now() - start).count();
      best = std::max(best, bytes / s);
    }
    return best;
  }();
  return bw;
}

// elements/s, GB/s and (optionally) GB/s as a fraction of memcpy's.
void ReportElements(benchmark::State& state, int64_t elements, double seconds,
                    bool vs_memcpy) {
  state.SetItemsProcessed(elements);
  state.counters["elem/s"] = benchmark::Counter(static_cast<double>(elements),
                                                benchmark::Counter::kIsRate);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(elements) * kElementBytes / 1e9,
                         benchmark::Counter::kIsRate);
  state.counters["ns/elem"] = benchmark::Counter(
      static_cast<double>(elements),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (vs_memcpy && seconds > 0) {
    state.counters["x_memcpy"] =
        elements * kElementBytes / seconds / MemcpyBytesPerSecond();
  }
}

// ------------------------------------------------------------------ infeed

enum class Body { kCount, kReduceSum };

// Runs Repeat(kLoopIterations) over `dataset` until the state is done.
void RunInfeed(benchmark::State& state, DatasetPtr dataset, Body body,
               bool with_infeed = true) {
  MemcpyBytesPerSecond();  // Outside the timed region.
  auto system = MakeSystem();
  std::unique_ptr<IPUInfeedQueue> infeed;
  if (with_infeed) {
    infeed = OrDie(
        IPUInfeedQueue::Create(dataset, static_cast<int>(state.range(0))));
  }
  Scope s = Scope::NewRootScope();
  loops::Loop loop = OrDie(loops::Repeat(
      s, kLoopIterations,
      [body](const Scope& b, const std::vector<Output>& a) {
        Output one = ops::Const(b, 1.0f);
        if (body == Body::kReduceSum) one = ops::ReduceSum(b, a[1]);
        return std::vector<Output>{ops::Add(b, a[0], one)};
      },
      {ops::Const(s, 0.0f)}, infeed.get()));
  IPUStrategy strategy(system.get());
  OrDie(strategy.Run(*s.graph(), loop.outputs));  // Compile; fill the queue.
  const auto start = Clock::now();
  for (auto _ : state) {
    auto out = strategy.Run(*s.graph(), loop.outputs);
    if (!out.ok()) state.SkipWithError(out.status().ToString().c_str());
    benchmark::DoNotOptimize(out);
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  ReportElements(state, state.iterations() * kLoopIterations, seconds,
                 with_infeed);
}

DatasetPtr Repeated() { return FromTensors({Element800()})->Repeat(); }

void BM_RepeatNoInfeed(benchmark::State& state) {
  RunInfeed(state, nullptr, Body::kCount, /*with_infeed=*/false);
}
BENCHMARK(BM_RepeatNoInfeed)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Infeed(benchmark::State& state) {
  RunInfeed(state, Repeated(), Body::kCount);
}
BENCHMARK(BM_Infeed)
    ->Arg(3)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_InfeedReduceSum(benchmark::State& state) {
  RunInfeed(state, Repeated(), Body::kReduceSum);
}
BENCHMARK(BM_InfeedReduceSum)
    ->Arg(3)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_InfeedCopied(benchmark::State& state) {
  DatasetPtr copied = Repeated()->Map(
      [](Element e) -> absl::StatusOr<Element> { return Element{e[0].Copy()}; },
      1, ElementSpec{{DType::kFloat32}, {{kElementFloats}}});
  RunInfeed(state, copied, Body::kCount);
}
BENCHMARK(BM_InfeedCopied)
    ->Arg(3)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ------------------------------------------------------------------ memcpy

void BM_Memcpy3200(benchmark::State& state) {
  const int buffers = static_cast<int>(state.range(0));
  std::vector<char> src(buffers * kElementBytes, 1);
  std::vector<char> dst(src.size(), 0);
  constexpr int64_t kCopies = 1000;
  for (auto _ : state) CopyLoop(kCopies, buffers, src, dst);
  ReportElements(state, state.iterations() * kCopies, 0, false);
}
BENCHMARK(BM_Memcpy3200)->Arg(1)->Arg(kWorkingSetBuffers)->UseRealTime();

void BM_Memcpy64MiB(benchmark::State& state) {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<char> src(kBytes, 1);
  std::vector<char> dst(kBytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(kBytes) / 1e9 * state.iterations(),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Memcpy64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();

// ----------------------------------------------------------------- outfeed

// A loop that enqueues the loop-invariant x every iteration; no carries.
loops::Loop OutfeedLoop(Scope& s, IPUOutfeedQueue* outfeed, int64_t n) {
  Output x = ops::Const(s, Element800());
  return OrDie(loops::Repeat(
      s, n, [outfeed, x](const Scope& b, const std::vector<Output>&) {
        outfeed->Enqueue(b, {x});
        return std::vector<Output>{};
      }));
}

// Counts steps taken with Next() until the queue is closed. Wakes a waiter
// only when its target is reached, not once per step.
class NextConsumer {
 public:
  explicit NextConsumer(IPUOutfeedQueue* outfeed)
      : thread_([this, outfeed] {
          while (outfeed->Next().ok()) {
            if (taken_.fetch_add(1) + 1 >= target_.load()) {
              MutexLock l(&mu_);
              cv_.SignalAll();
            }
          }
        }) {}
  ~NextConsumer() { thread_.join(); }
  void AwaitTaken(int64_t n) {
    target_.store(n);
    MutexLock l(&mu_);
    cv_.Await(&mu_, [&] { return taken_.load() >= n; });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::atomic<int64_t> taken_{0};
  std::atomic<int64_t> target_{INT64_MAX};
  std::thread thread_;
};

void BM_OutfeedNext(benchmark::State& state) {
  MemcpyBytesPerSecond();
  auto system = MakeSystem();
  auto outfeed = OrDie(IPUOutfeedQueue::Create(
      OutfeedMode::kAll, static_cast<int>(state.range(0))));
  Scope s = Scope::NewRootScope();
  loops::Loop loop = OutfeedLoop(s, outfeed.get(), kLoopIterations);
  IPUStrategy strategy(system.get());
  int64_t runs = 0;
  {
    NextConsumer consumer(outfeed.get());
    OrDie(strategy.Run(*s.graph(), {}, {loop.op}));  // Compile.
    consumer.AwaitTaken(kLoopIterations * ++runs);
    const auto start = Clock::now();
    for (auto _ : state) {
      auto out = strategy.Run(*s.graph(), {}, {loop.op});
      if (!out.ok()) state.SkipWithError(out.status().ToString().c_str());
      consumer.AwaitTaken(kLoopIterations *
                          ++runs);  // Every step reached the host.
    }
    const double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    ReportElements(state, state.iterations() * kLoopIterations, seconds, true);
    outfeed->Close();
  }
}
BENCHMARK(BM_OutfeedNext)
    ->Arg(3)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_OutfeedDequeue(benchmark::State& state) {
  MemcpyBytesPerSecond();
  auto system = MakeSystem();
  auto outfeed = OrDie(IPUOutfeedQueue::Create(
      OutfeedMode::kAll, static_cast<int>(state.range(0))));
  Scope s = Scope::NewRootScope();
  loops::Loop loop = OutfeedLoop(s, outfeed.get(), kLoopIterations);
  IPUStrategy strategy(system.get());
  OrDie(strategy.Run(*s.graph(), {}, {loop.op}));
  OrDie(outfeed->Dequeue());
  const auto start = Clock::now();
  for (auto _ : state) {
    auto out = strategy.Run(*s.graph(), {}, {loop.op});
    if (!out.ok()) state.SkipWithError(out.status().ToString().c_str());
    OutfeedResult all = OrDie(outfeed->Dequeue());  // [kLoopIterations, 800]
    benchmark::DoNotOptimize(all);
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  ReportElements(state, state.iterations() * kLoopIterations, seconds, true);
}
BENCHMARK(BM_OutfeedDequeue)
    ->Arg(3)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// -------------------------------------------------------------- round trip

constexpr int kTripsPerIteration = 1000;  // Trips per benchmark iteration.

// A device loop that sends every infeed element back through the outfeed
// (a trivial computation: the identity), Repeat(1000) per run, run again and
// again on a thread of its own until `stop`; the host side is the caller's.
class EchoDevice {
 public:
  explicit EchoDevice(DatasetPtr elements)
      : system_(MakeSystem()),
        infeed_(OrDie(IPUInfeedQueue::Create(std::move(elements), 1))),
        outfeed_(OrDie(IPUOutfeedQueue::Create(OutfeedMode::kAll, 1))),
        strategy_(system_.get()) {
    loop_ = OrDie(loops::Repeat(
        scope_, kTripsPerIteration,
        [this](const Scope& b, const std::vector<Output>& a) {
          outfeed_->Enqueue(b, {a[0]});
          return std::vector<Output>{};
        },
        {}, infeed_.get()));
    OrDie(strategy_.Compile(*scope_.graph(), {}, {loop_.op}));  // Untimed.
    thread_ = std::thread([this] {
      while (!stop_.load() &&
             strategy_.Run(*scope_.graph(), {}, {loop_.op}).ok()) {
      }
    });
  }
  IPUOutfeedQueue* outfeed() { return outfeed_.get(); }
  // REQUIRES: the elements' source lets the current run finish (the
  // device needs up to kTripsPerIteration more elements).
  void Stop() {
    stop_ = true;
    NextConsumer drain(outfeed_.get());
    thread_.join();
    outfeed_->Close();
  }

 private:
  std::unique_ptr<IPUSystem> system_;
  std::unique_ptr<IPUInfeedQueue> infeed_;
  std::unique_ptr<IPUOutfeedQueue> outfeed_;
  Scope scope_ = Scope::NewRootScope();
  loops::Loop loop_;
  IPUStrategy strategy_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void ReportTrips(benchmark::State& state) {
  state.counters["us/trip"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kTripsPerIteration / 1e6,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The round trip of issue 12: one host thread enqueues an element, the
// device loop dequeues it, computes (the identity) and enqueues it to the
// outfeed, and the same host thread reads it back (Next) before it
// enqueues the next one. The host thread is the infeed's own: the dataset's
// generator reads the previous element back before it returns the next, so
// exactly one element is ever in flight. One benchmark iteration is
// kTripsPerIteration trips; the benchmark's thread waits for them (one
// wake-up per 1000 trips, not per trip).
void BM_RoundTrip(benchmark::State& state) {
  Mutex mu;
  CondVar cv;
  int64_t allowed = 0;   // Trips the benchmark's thread asked for.
  int64_t returned = 0;  // Elements read back by the generator.
  bool open = false;     // Stopping: no more limits.
  IPUOutfeedQueue* outfeed = nullptr;
  const Tensor x = Element800();
  DatasetPtr echoed =
      FromGenerator(ElementSpec{{DType::kFloat32}, {{kElementFloats}}}, [&, x] {
        return [&, x, sent = int64_t{0}]() mutable -> absl::StatusOr<Element> {
          bool stopping;
          {
            MutexLock l(&mu);
            stopping = open;
          }
          // The previous element must come back first (when stopping, the
          // last one did, and the drain reads the rest).
          if (sent > 0 && !stopping) {
            absl::StatusOr<OutfeedElement> back = outfeed->Next();
            if (!back.ok()) return back.status();
            MutexLock l(&mu);
            if (++returned == allowed) cv.SignalAll();
          }
          {
            MutexLock l(&mu);
            cv.Await(&mu, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return open || sent < allowed;
            });
          }
          ++sent;
          return Element{x};
        };
      });
  EchoDevice device(echoed);
  outfeed = device.outfeed();
  for (auto _ : state) {
    MutexLock l(&mu);
    allowed += kTripsPerIteration;
    cv.SignalAll();
    cv.Await(&mu, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return returned == allowed;
    });
  }
  {
    MutexLock l(&mu);
    open = true;
    cv.SignalAll();
  }
  device.Stop();
  ReportTrips(state);
}
BENCHMARK(BM_RoundTrip)->Unit(benchmark::kMillisecond)->UseRealTime();

// Hands out one element per Release(); unbounded once Open(). A waiting
// Take spins briefly (as the feeds do) before it sleeps.
class Gate {
 public:
  void Release() {
    released_.fetch_add(1);
    MutexLock l(&mu_);
    if (sleeping_) cv_.Signal();
  }
  void Open() {
    released_.store(INT64_MAX / 2);
    MutexLock l(&mu_);
    cv_.SignalAll();
  }
  void Take() {
    auto ready = [this] { return released_.load() > taken_; };
    if (!SpinUntil(ready, std::chrono::microseconds(20), 4,
                   std::chrono::microseconds(1))) {
      MutexLock l(&mu_);
      sleeping_ = true;
      cv_.Await(&mu_, ready);
      sleeping_ = false;
    }
    ++taken_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::atomic<int64_t> released_{0};
  int64_t taken_ = 0;  // The infeed's host thread only.
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;
};

// The same trip started from another host thread (the benchmark's): it
// releases one element to the infeed's generator (a hand-over between two
// host threads, which the ipuflow path does not include) and waits for it
// with Next. One iteration = one trip.
void BM_RoundTripOtherThread(benchmark::State& state) {
  Gate gate;
  const Tensor x = Element800();
  DatasetPtr gated = FromGenerator(
      ElementSpec{{DType::kFloat32}, {{kElementFloats}}}, [&gate, x] {
        return [&gate, x]() -> absl::StatusOr<Element> {
          gate.Take();
          return Element{x};
        };
      });
  EchoDevice device(gated);
  for (auto _ : state) {
    gate.Release();
    auto step = device.outfeed()->Next();
    if (!step.ok()) state.SkipWithError(step.status().ToString().c_str());
  }
  gate.Open();  // Let the current run finish unthrottled.
  device.Stop();
  state.counters["us/trip"] = benchmark::Counter(
      static_cast<double>(state.iterations()) / 1e6,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RoundTripOtherThread)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

const bool kContext = [] {
  benchmark::AddCustomContext("machine", MachineDescription());
  return true;
}();

}  // namespace
}  // namespace ipuflow::feeds
