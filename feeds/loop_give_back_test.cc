// A device loop gives back the infeed elements of an iteration that did not
// complete (issue 22): after a cancel between an iteration's InfeedDequeue
// and its end, the next run continues the stream exactly, as a pipeline's
// does. The stress test cancels 200 runs at random points; its verdict
// (every element once, in order) does not depend on timing: the points are
// states (n steps read, the device blocked in its push), never durations.
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/test_system.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/control/loops.h"
#include "ops/math/cast.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::testing::AwaitTrue;
using ::ipuflow::testing::MakeSystem;

// A loop of `n` iterations: dequeue x, outfeed x as float (the outfeed is
// the iteration's last kernel). The outfeed holds one step on the host and
// one in the ring, so an unread device blocks in its push holding x.
struct Fixture {
  explicit Fixture(int replicas, int64_t n) : system(MakeSystem(replicas)) {
    infeed = std::move(IPUInfeedQueue::Create(Range(0, 1 << 30), 2)).value();
    outfeed = std::move(IPUOutfeedQueue::Create(OutputMode::All(),
                                                OutfeedMode::kAll, 1, 1))
                  .value();
    Scope s = Scope::NewRootScope();
    IPUOutfeedQueue* out = outfeed.get();
    auto loop = loops::Repeat(
        s, n,
        [out](const Scope& b, const std::vector<Output>& args) {
          out->Enqueue(b, {{"x", ops::Cast(b, args[0], DType::kFloat32)}});
          return std::vector<Output>{};
        },
        {}, infeed.get());
    IPU_CHECK_OK(loop.status());
    graph = s.graph_ptr();
    strategy = std::make_unique<IPUStrategy>(system.get());
    exe = std::move(strategy->Compile(*graph, {}, {loop->op})).value();
  }
  std::unique_ptr<IPUSystem> system;
  std::unique_ptr<IPUInfeedQueue> infeed;
  std::unique_ptr<IPUOutfeedQueue> outfeed;
  std::shared_ptr<Graph> graph;
  std::unique_ptr<IPUStrategy> strategy;
  Executable* exe = nullptr;
};

// Appends each replica's value of `step` to `seen[replica]`.
void Record(const OutfeedElement& step, int replicas,
            std::vector<std::vector<int64_t>>* seen) {
  const Tensor& x = step["x"];
  for (int r = 0; r < replicas; ++r) {
    (*seen)[r].push_back(static_cast<int64_t>(x.data<float>()[r]));
  }
}

// Replica r must have seen r, r + R, r + 2R, ... with nothing missing or
// repeated.
void ExpectExactStream(const std::vector<std::vector<int64_t>>& seen) {
  const int replicas = static_cast<int>(seen.size());
  for (int r = 0; r < replicas; ++r) {
    for (size_t i = 0; i < seen[r].size(); ++i) {
      ASSERT_EQ(seen[r][i], r + static_cast<int64_t>(i) * replicas)
          << "replica " << r << " step " << i;
    }
  }
}

TEST(LoopGiveBackTest, ACancelAfterTheDequeueGivesTheElementBack) {
  Fixture f(1, 10);
  absl::Status st;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    std::vector<std::vector<Tensor>> results;
    st = f.exe->Execute({{}}, &results);
    done = true;
  });
  // Elements 0 and 1 fill the host list and the ring; element 2 is taken
  // and its push waits.
  AwaitTrue([&] { return f.outfeed->waiting_pushes() == 1 || done; });
  f.exe->Cancel(absl::CancelledError("test cancel"));
  runner.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  // Steps 0 and 1 were pushed; the next run starts with element 2: 12
  // steps in all, 0..11.
  std::vector<std::vector<int64_t>> seen(1);
  std::thread reader([&] {
    while (seen[0].size() < 12) {
      absl::StatusOr<OutfeedElement> step = f.outfeed->Next();
      if (step.ok()) Record(*step, 1, &seen);  // Else the first run's stop.
    }
  });
  std::vector<std::vector<Tensor>> results;
  ASSERT_TRUE(f.exe->Execute({{}}, &results).ok());
  reader.join();
  ExpectExactStream(seen);
  EXPECT_EQ(seen[0].size(), 12u);
}

// 200 runs, each cancelled at a random state: after k steps were read
// (0..4), either at once or when every replica's device is blocked in its
// push holding a taken element. Every replica's stream must continue
// exactly; the figures say how many cancels found an element in flight.
void CancelStress(int replicas) {
  constexpr int kRounds = 200;
  Fixture f(replicas, 1000);
  std::mt19937 rng(22);
  std::vector<std::vector<int64_t>> seen(replicas);
  int in_flight_cancels = 0, cancelled_runs = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int read_first = static_cast<int>(rng() % 5);
    const bool wait_for_push = rng() % 4 != 0;
    absl::Status st;
    std::atomic<bool> done{false};
    std::thread runner([&] {
      std::vector<std::vector<Tensor>> results;
      st = f.exe->Execute({{}}, &results);
      done.store(true);
    });
    for (int i = 0; i < read_first; ++i) {
      absl::StatusOr<OutfeedElement> step = f.outfeed->Next();
      if (!step.ok()) {
        --i;  // A stopped run's status from the round before.
        continue;
      }
      Record(*step, replicas, &seen);
    }
    if (wait_for_push) {
      AwaitTrue([&] {
        return f.outfeed->waiting_pushes() == replicas || done.load();
      });
      ++in_flight_cancels;
    }
    // A cancel before the run began is a no-op: repeat it until the run
    // (which cannot end by itself: nobody reads its outfeed) returns.
    while (!done.load()) {
      f.exe->Cancel(absl::CancelledError(absl::StrCat("stress round ", round)));
      std::this_thread::yield();
    }
    runner.join();
    cancelled_runs += absl::IsCancelled(st);
    ASSERT_TRUE(st.ok() || absl::IsCancelled(st)) << st;
    for (const OutfeedElement& step : f.outfeed->TakeAvailable()) {
      Record(step, replicas, &seen);
    }
  }
  ExpectExactStream(seen);
  std::cout << "replicas " << replicas << ": " << kRounds << " runs, "
            << cancelled_runs << " cancelled, " << in_flight_cancels
            << " with an element in flight on every replica; " << seen[0].size()
            << " steps, none lost or repeated\n";
  EXPECT_GT(seen[0].size(), 0u);
}

TEST(LoopGiveBackTest, TwoHundredRandomCancelsLoseAndRepeatNothing) {
  CancelStress(1);
}

TEST(LoopGiveBackTest, TwoHundredRandomCancelsOnTwoReplicas) {
  CancelStress(2);
}

}  // namespace
}  // namespace ipuflow::feeds
