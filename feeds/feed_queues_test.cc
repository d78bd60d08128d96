// Infeed and outfeed queues with device loops on the emulated IPU system:
// shapes with and without replicas, ALL/LAST semantics, exactly-once
// delivery to a concurrent consumer, a clean OutOfRange at the end of the
// dataset, and a clean Cancelled when the system is torn down mid-wait.
// Reliability (issue 9): destroying a queue under a blocked caller (run
// under ASan), wake-ups with a reason, a stop ends one run and not the
// streams, statuses instead of aborts, a bounded host-side outfeed list.
#include <atomic>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "core/testing/test_system.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/ipu_iterator.h"
#include "feeds/outfeed_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/sub.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::testing::AwaitTrue;
using ::ipuflow::testing::MakeSystem;

using ::ipuflow::testing::TensorNear;

// A body that outfeeds the infeed element as float and carries nothing.
loops::LoopBody Forward(IPUOutfeedQueue* outfeed) {
  return [outfeed](const Scope& s, const std::vector<Output>& args) {
    outfeed->Enqueue(s, {{"x", ops::Cast(s, args[0], DType::kFloat32)}});
    return std::vector<Output>{};
  };
}

TEST(FeedQueuesTest, PerfTrainingExampleShapes) {
  auto system = MakeSystem(1);
  Tensor x = Tensor::Filled(DType::kFloat32, {800}, 1.5);
  DatasetPtr ds =
      FromTensors({x})
          ->Map(
              [](Element e) -> absl::StatusOr<Element> {
                return Element{e[0], e[0]};
              },
              1,
              ElementSpec{{DType::kFloat32, DType::kFloat32}, {{800}, {800}}})
          ->Repeat();
  auto infeed = IPUInfeedQueue::Create(ds);
  ASSERT_TRUE(infeed.ok()) << infeed.status();
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(
      s, 10,
      [&](const Scope& b, const std::vector<Output>& a) {
        Output d1 = ops::Add(b, a[1], a[2]);
        Output d2 = ops::Sub(b, a[1], a[2]);
        (*outfeed)->Enqueue(b, {{"d1", d1}, {"d2", d2}});
        return std::vector<Output>{ops::Add(b, a[0], ops::Const(b, 1.0f))};
      },
      {ops::Const(s, 0.0f)}, infeed->get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system.get());
  auto counter = strategy.Run(*s.graph(), loop->outputs);
  ASSERT_TRUE(counter.ok()) << counter.status();
  EXPECT_TRUE(TensorNear((*counter)[0], {10}, {}));
  auto result = (*outfeed)->Dequeue();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)["d1"].shape(), TensorShape({10, 800}));
  EXPECT_EQ((*result)["d2"].shape(), TensorShape({10, 800}));
  EXPECT_EQ((*result)["d1"].data<float>()[7999], 3.0f);
  EXPECT_EQ((*result)["d2"].data<float>()[0], 0.0f);
  // Dequeue drains: a second ALL dequeue is empty.
  auto again = (*outfeed)->Dequeue();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)["d1"].shape(), TensorShape({0, 800}));
  // Counted transfers: 10 x 2 x 3200 bytes in, 10 x 2 x 3200 bytes out.
  EXPECT_EQ(system->device(0).counters().host_to_device.load(), 64000);
  EXPECT_EQ(system->device(0).counters().device_to_host.load(), 64000 + 4);
}

TEST(FeedQueuesTest, ReplicasTakeElementsRoundRobin) {
  auto system = MakeSystem(4);
  auto infeed = IPUInfeedQueue::Create(Range(0, 100));
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 5, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  auto all = (*outfeed)->Dequeue();
  ASSERT_TRUE(all.ok());
  const Tensor& x = (*all)["x"];
  ASSERT_EQ(x.shape(), TensorShape({5, 4}));  // [steps, replicas]
  for (int i = 0; i < 20; ++i) EXPECT_EQ(x.data<float>()[i], i);
}

TEST(FeedQueuesTest, LastModeKeepsOnlyTheLatest) {
  auto system = MakeSystem(2);
  auto infeed = IPUInfeedQueue::Create(Range(0, 100));
  auto outfeed = IPUOutfeedQueue::Create(OutfeedMode::kLast);
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 6, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ((*outfeed)->Dequeue().status().code(),
            absl::StatusCode::kFailedPrecondition);
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  absl::StatusOr<OutfeedResult> last = (*outfeed)->Dequeue();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(TensorNear((*last)["x"], {10, 11}, {2}));
}

// Issue 10: output modes on a device loop of 6 iterations on 2 replicas
// (iteration i of replica r outfeeds x = 2i + r). Returns what one run
// left in the outfeed, or the run's error.
absl::StatusOr<OutfeedResult> RunWithMode(OutputMode mode, int runs = 1,
                                          bool train = false,
                                          int64_t* sent_bytes = nullptr) {
  auto system = MakeSystem(2);
  auto infeed = IPUInfeedQueue::Create(Range(0, 100));
  auto outfeed = IPUOutfeedQueue::Create(mode);
  RETURN_IF_ERROR(infeed.status());
  RETURN_IF_ERROR(outfeed.status());
  Scope s = Scope::NewRootScope();
  ops::VariableHandle counter =
      ops::Variable(s.WithOpName("counter"), ops::Const(s, 0.0f));
  auto body = [&](const Scope& b, const std::vector<Output>& args) {
    if (train) ops::AssignAdd(b, counter.handle, ops::Const(b, 1.0f));
    (*outfeed)->Enqueue(b, {{"x", ops::Cast(b, args[0], DType::kFloat32)}});
    return std::vector<Output>{};
  };
  auto loop = loops::Repeat(s, 6, body, {}, infeed->get());
  RETURN_IF_ERROR(loop.status());
  IPUStrategy strategy(system.get());
  RETURN_IF_ERROR(strategy.Initialize(*s.graph()));
  for (int r = 0; r < runs; ++r) {
    RETURN_IF_ERROR(strategy.Run(*s.graph(), {}, {loop->op}).status());
  }
  if (sent_bytes != nullptr) {
    *sent_bytes = system->device(0).counters().device_to_host.load() +
                  system->device(1).counters().device_to_host.load();
  }
  return (*outfeed)->Dequeue();
}

TEST(OutputModeTest, AllEveryNFinalAndSumOnADeviceLoop) {
  int64_t all_bytes = 0, every_bytes = 0;
  auto all = RunWithMode(OutputMode::All(), 1, false, &all_bytes);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)["x"].shape(), TensorShape({6, 2}));
  EXPECT_EQ(all_bytes, 6 * 2 * 4);
  // Every 3rd iteration: 2 and 5; only those cross to the host.
  auto every = RunWithMode(OutputMode::EveryN(3), 1, false, &every_bytes);
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_TRUE(TensorNear((*every)["x"], {4, 5, 10, 11}, {2, 2}));
  EXPECT_EQ(every_bytes, 2 * 2 * 4);
  // Sent once per replica when the run ends, and counted then.
  int64_t final_bytes = 0;
  auto final = RunWithMode(OutputMode::Final(), 1, false, &final_bytes);
  ASSERT_TRUE(final.ok()) << final.status();
  EXPECT_TRUE(TensorNear((*final)["x"], {10, 11}, {1, 2}));
  EXPECT_EQ(final_bytes, 2 * 4);
  // Per replica, over the iterations: sum of 2i + r for i < 6.
  auto sum = RunWithMode(OutputMode::Sum());
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_TRUE(TensorNear((*sum)["x"], {30, 36}, {1, 2}));
}

TEST(OutputModeTest, FinalAndSumArePerRun) {
  auto final = RunWithMode(OutputMode::Final(), 2);
  ASSERT_TRUE(final.ok()) << final.status();
  EXPECT_TRUE(TensorNear((*final)["x"], {10, 11, 22, 23}, {2, 2}));
  auto sum = RunWithMode(OutputMode::Sum(), 2);
  ASSERT_TRUE(sum.ok()) << sum.status();
  // Second run: elements 12..23, i.e. 2i + r for i in 6..11.
  EXPECT_TRUE(TensorNear((*sum)["x"], {30, 36, 102, 108}, {2, 2}));
}

TEST(OutputModeTest, EveryNMustDivideTheDeviceIterations) {
  auto four = RunWithMode(OutputMode::EveryN(4));
  EXPECT_EQ(four.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(four.status().message()),
      ::testing::HasSubstr("(EveryN(4)): the run made 6 device iteration(s): "
                           "Return period must be a factor of the "
                           "number of batches per step"));
  auto eight = RunWithMode(OutputMode::EveryN(8));
  EXPECT_THAT(std::string(eight.status().message()),
              ::testing::HasSubstr("Return period must be <= to the number of "
                                   "batches per step"));
  auto zero = IPUOutfeedQueue::Create(OutputMode::EveryN(0));
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()),
              ::testing::HasSubstr("EveryN anchor must have "
                                   "output_return_period set to valid "
                                   "positive integer"));
}

TEST(OutputModeTest, DefaultIsFinalForTrainingAndAllForInference) {
  auto inference = RunWithMode(OutputMode::Default());
  ASSERT_TRUE(inference.ok()) << inference.status();
  EXPECT_EQ((*inference)["x"].shape(), TensorShape({6, 2}));
  auto training = RunWithMode(OutputMode::Default(), 1, /*train=*/true);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_TRUE(TensorNear((*training)["x"], {10, 11}, {1, 2}));
}

TEST(FeedQueuesTest, ConcurrentConsumerSeesEveryStepOnceInOrder) {
  auto system = MakeSystem(1);
  constexpr int kSteps = 3000;
  auto infeed = IPUInfeedQueue::Create(Range(0, kSteps), 2);
  auto outfeed = IPUOutfeedQueue::Create(OutfeedMode::kAll, 1);
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop =
      loops::Repeat(s, kSteps, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  std::vector<float> seen;
  std::thread monitor([&] {
    while (static_cast<int>(seen.size()) < kSteps) {
      auto step = (*outfeed)->Next();
      if (!step.ok()) return;
      seen.push_back((*step)["x"].scalar<float>());
    }
  });
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  monitor.join();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) ASSERT_EQ(seen[i], i);
}

// Issue 12's round trip: the infeed's host thread (the generator) reads
// each element back from the outfeed before it gives the next, so one
// element is in flight and every hand-over waits on the other side (spins,
// then sleeps: a lost wake-up deadlocks). Every element comes back once, in
// order, over two runs of the loop.
TEST(FeedQueuesTest, RoundTripOnTheInfeedsHostThreadLosesNothing) {
  auto system = MakeSystem(1);
  constexpr int kTrips = 500;  // Per run.
  auto outfeed = IPUOutfeedQueue::Create(OutfeedMode::kAll, 1);
  ASSERT_TRUE(outfeed.ok());
  IPUOutfeedQueue* out = outfeed->get();
  std::atomic<int> returned{0};
  std::atomic<int> wrong{0};
  DatasetPtr echo = FromGenerator(
      ElementSpec{{DType::kFloat32}, {TensorShape()}},
      [out, &returned, &wrong] {
        return [out, &returned, &wrong,
                sent = 0]() mutable -> absl::StatusOr<Element> {
          if (sent > 0) {
            absl::StatusOr<OutfeedElement> back = out->Next();
            if (!back.ok()) return back.status();  // Closed at the end.
            if ((*back)["x"].scalar<float>() != sent - 1) ++wrong;
            ++returned;
          }
          return Element{Tensor::Scalar<float>(static_cast<float>(sent++))};
        };
      });
  auto infeed = IPUInfeedQueue::Create(echo, 1);
  ASSERT_TRUE(infeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, kTrips, Forward(out), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  for (int run = 0; run < 2; ++run) {
    absl::Status st = strategy.Run(*s.graph(), {}, {loop->op}).status();
    ASSERT_TRUE(st.ok()) << st;
  }
  // The generator reads back the last element and gives one more (it waits
  // in the ring), then waits in Next; Close ends that wait (before the
  // infeed's destructor joins its thread).
  AwaitTrue([&] { return returned.load() == 2 * kTrips; });
  (*outfeed)->Close();
  (*infeed).reset();
  EXPECT_EQ(returned.load(), 2 * kTrips);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(out->Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(FeedQueuesTest, DatasetEndIsACleanOutOfRangeAndNothingIsSkipped) {
  auto system = MakeSystem(1);
  auto infeed = IPUInfeedQueue::Create(Range(0, 5));
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 10, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), {}, {loop->op}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  EXPECT_NE(st.message().find("the dataset ended after 5 element(s)"),
            std::string::npos)
      << st;
  std::vector<float> got;
  for (const OutfeedElement& step : **outfeed)
    got.push_back(step["x"].scalar<float>());
  EXPECT_EQ(got, (std::vector<float>{0, 1, 2, 3, 4}));
}

TEST(FeedQueuesTest, SystemResetWakesABlockedDeviceWithCancelled) {
  auto system = MakeSystem(1);
  Notification release;
  DatasetPtr slow = Range(0, 10)->Map(
      [&](Element e) -> absl::StatusOr<Element> {
        if (e[0].scalar<int64_t>() == 2) release.WaitForNotification();
        return e;
      },
      1, ElementSpec{{DType::kInt64}, {TensorShape()}});
  auto infeed = IPUInfeedQueue::Create(slow, 1);
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 10, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  absl::Status st;
  std::thread runner(
      [&] { st = strategy.Run(*s.graph(), {}, {loop->op}).status(); });
  // Wait until the device has consumed the two elements before the stall.
  for (int i = 0; i < 2;) {
    auto step = (*outfeed)->Next();
    ASSERT_TRUE(step.ok());
    ++i;
  }
  system->cancellation()->StartCancel(absl::CancelledError("test reset"));
  runner.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  release.Notify();  // Lets the host thread finish; the destructors join it.
}

// The queues reach programs only through the graph they were built into:
// once a queue is destroyed, a program using it fails cleanly, naming the
// queue and the node.
TEST(FeedQueuesTest, RunAfterTheQueueIsDestroyedIsAFailedPrecondition) {
  auto system = MakeSystem(1);
  auto infeed = IPUInfeedQueue::Create(Range(0, 10));
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 2, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  const std::string infeed_id = (*infeed)->id();
  infeed.value().reset();
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), {}, {loop->op}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(
      std::string(st.message()),
      ::testing::AllOf(::testing::HasSubstr("InfeedDequeue '"),
                       ::testing::HasSubstr("infeed '" + infeed_id + "'"),
                       ::testing::HasSubstr("was destroyed")));

  // The same for an outfeed (its body has no infeed).
  auto outfeed2 = IPUOutfeedQueue::Create();
  ASSERT_TRUE(outfeed2.ok());
  Scope s2 = Scope::NewRootScope();
  auto loop2 =
      loops::Repeat(s2, 2, [&](const Scope& b, const std::vector<Output>&) {
        (*outfeed2)->Enqueue(b, {ops::Const(b, 1.0f)});
        return std::vector<Output>{};
      });
  ASSERT_TRUE(loop2.ok()) << loop2.status();
  const std::string outfeed_id = (*outfeed2)->id();
  outfeed2.value().reset();
  st = strategy.Run(*s2.graph(), {}, {loop2->op}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(
      std::string(st.message()),
      ::testing::AllOf(::testing::HasSubstr("OutfeedEnqueue '"),
                       ::testing::HasSubstr("outfeed '" + outfeed_id + "'")));
}

// The dequeue kernel keeps its channel weakly from the first run on: a queue
// destroyed between two runs of the same compiled loop is still reported by
// the kernel, and nothing keeps it alive.
TEST(FeedQueuesTest, QueueDestroyedBetweenRunsIsAFailedPrecondition) {
  auto system = MakeSystem(1);
  auto infeed = IPUInfeedQueue::Create(Range(0, 10));
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 2, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  auto first = (*outfeed)->Dequeue();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(TensorNear((*first)["x"], {0, 1}, {2}));
  const std::string infeed_id = (*infeed)->id();
  infeed.value().reset();
  absl::Status st = strategy.Run(*s.graph(), {}, {loop->op}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(
      std::string(st.message()),
      ::testing::AllOf(::testing::HasSubstr("InfeedDequeue '"),
                       ::testing::HasSubstr("infeed '" + infeed_id + "'"),
                       ::testing::HasSubstr("was destroyed")));
}

// The same for the outfeed: its kernel keeps the channel weakly after the
// first run, and a run after the queue's destruction is reported, not run.
TEST(FeedQueuesTest, OutfeedDestroyedBetweenRunsIsAFailedPrecondition) {
  auto system = MakeSystem(1);
  auto infeed = IPUInfeedQueue::Create(Range(0, 10));
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 2, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  auto first = (*outfeed)->Dequeue();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(TensorNear((*first)["x"], {0, 1}, {2}));
  outfeed.value().reset();
  absl::Status st = strategy.Run(*s.graph(), {}, {loop->op}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("was destroyed"));
}

// Compiling a program that dequeues starts the infeed's host thread, from
// the compiling (host) thread, with the replica count: the dataset is read
// before anything runs on a device. (Were it started lazily by the device,
// this test would wait forever.)
TEST(FeedQueuesTest, CompilingStartsTheInfeedHostThread) {
  auto system = MakeSystem(2);
  Notification first_element_read;
  DatasetPtr ds = Range(0, 10)->Map(
      [&](Element e) -> absl::StatusOr<Element> {
        if (!first_element_read.HasBeenNotified()) first_element_read.Notify();
        return e;
      },
      1, ElementSpec{{DType::kInt64}, {TensorShape()}});
  auto infeed = IPUInfeedQueue::Create(ds, 1);
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 3, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Compile(*s.graph(), {}, {loop->op}).ok());
  first_element_read.WaitForNotification();
  // Started for the program's 2 replicas: feeding 1 is refused.
  absl::Status other = (*infeed)->Start(1);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition) << other;
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  auto all = (*outfeed)->Dequeue();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["x"].shape(), TensorShape({3, 2}));
}

TEST(FeedQueuesTest, ConsumerBlockedInNextIsWokenByClose) {
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(outfeed.ok());
  absl::Status st;
  std::thread consumer([&] { st = (*outfeed)->Next().status(); });
  AwaitTrue([&] { return (*outfeed)->waiting_readers() == 1; });
  (*outfeed)->Close();
  consumer.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
}

TEST(FeedQueuesTest, SimplifiedIteratorAndRangeFor) {
  auto system = MakeSystem(1);
  // Elements [i, i]: the sum of the first 10 is 2 * (0 + ... + 9) = 90.
  auto it = IPUIterator::Create(Range(0, 10)->Map(
      [](Element e) -> absl::StatusOr<Element> {
        const float v = static_cast<float>(e[0].scalar<int64_t>());
        return Element{Tensor::FromVector<float>({v, v})};
      },
      1, ElementSpec{{DType::kFloat32}, {TensorShape({2})}}));
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(it.ok() && outfeed.ok()) << it.status();
  Scope s = Scope::NewRootScope();
  auto loop =
      loops::Repeat(s, 10, [&](const Scope& b, const std::vector<Output>&) {
        std::vector<Output> x = (*it)->Next(b);
        (*outfeed)->Enqueue(b, {ops::ReduceSum(b, x[0])});
        return std::vector<Output>{};
      });
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  std::vector<float> sums;
  for (const OutfeedElement& e : **outfeed)
    sums.push_back(e.tensors[0].scalar<float>());
  EXPECT_EQ(sums.size(), 10u);
  EXPECT_EQ(std::accumulate(sums.begin(), sums.end(), 0.0f), 90.0f);
}

TEST(FeedQueuesTest, ValidationErrors) {
  auto ragged = IPUInfeedQueue::Create(Range(0, 10)->Batch(3));
  EXPECT_EQ(ragged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ragged.status().message().find("set drop_remainder = true"),
            std::string::npos)
      << ragged.status();
  EXPECT_FALSE(IPUInfeedQueue::Create(Range(0, 10), 0).ok());
  EXPECT_FALSE(IPUInfeedQueue::Create(Range(0, 10), 256).ok());
  EXPECT_TRUE(IPUInfeedQueue::Create(Range(0, 10)->Batch(3, true), 255).ok());
  EXPECT_FALSE(IPUOutfeedQueue::Create(OutfeedMode::kAll, 0).ok());

  auto outfeed = IPUOutfeedQueue::Create();
  Scope s = Scope::NewRootScope();
  (*outfeed)->Enqueue(s, {ops::Const(s, 1.0f)});
  EXPECT_TRUE(s.ok());
  (*outfeed)->Enqueue(s, {ops::Const(s, 2.0f)});
  EXPECT_NE(s.status().message().find("can only be enqueued once"),
            std::string::npos)
      << s.status();
}

// ------------------------------------------------------------ issue 9

// int64 scalars 0, 1, 2, ...; element `gate_at` waits for `gate` (the host
// thread stalls there, like a slow input pipeline).
DatasetPtr Gated(int64_t n, int64_t gate_at, Notification* gate) {
  return Range(0, n)->Map(
      [gate_at, gate](Element e) -> absl::StatusOr<Element> {
        if (e[0].scalar<int64_t>() == gate_at) gate->WaitForNotification();
        return e;
      },
      1, ElementSpec{{DType::kInt64}, {TensorShape()}});
}

std::vector<float> Values(const std::vector<OutfeedElement>& steps) {
  std::vector<float> out;
  for (const OutfeedElement& e : steps)
    out.push_back(e.tensors[0].scalar<float>());
  return out;
}

// A pipeline's feeder calls Dequeue on the queue itself (not through a
// graph). Destroying the queue meanwhile wakes it with Cancelled and waits
// for it to leave: no use-after-free (ASan).
TEST(FeedQueuesTest, DestroyingTheInfeedUnderABlockedDequeueIsSafe) {
  for (int round = 0; round < 20; ++round) {
    // Two replicas, depth 1: the host thread fills replica 0's ring and
    // blocks there, so replica 1's second Dequeue waits on an empty ring.
    auto infeed = IPUInfeedQueue::Create(Range(0, 1000), 1);
    ASSERT_TRUE(infeed.ok());
    IPUInfeedQueue* q = infeed->get();
    ASSERT_TRUE(q->Start(2).ok());
    absl::StatusOr<Element> first, second;
    std::atomic<bool> first_done{false};
    std::thread feeder([&] {
      first = q->Dequeue(1, 2, nullptr);
      first_done.store(true);
      second = q->Dequeue(1, 2, nullptr);
    });
    // The first Dequeue may wait too: destroy once the second waits.
    AwaitTrue([&] { return first_done.load() && q->waiting_dequeues() == 1; });
    infeed->reset();
    feeder.join();
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ((*first)[0].scalar<int64_t>(), 1);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kCancelled);
    EXPECT_THAT(std::string(second.status().message()),
                ::testing::HasSubstr("was destroyed"));
  }
}

// A device loop blocked in InfeedDequeue while its IPUInfeedQueue is
// destroyed: the run ends with Cancelled naming the node and the queue.
TEST(FeedQueuesTest, DestroyingTheInfeedUnderARunningLoopIsSafe) {
  auto system = MakeSystem(1);
  Notification gate;
  auto infeed = IPUInfeedQueue::Create(Gated(100, 3, &gate), 1);
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  IPUInfeedQueue* q = infeed->get();
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 10, Forward(outfeed->get()), {}, q);
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  absl::Status st;
  std::thread runner(
      [&] { st = strategy.Run(*s.graph(), {}, {loop->op}).status(); });
  // Three steps out first: a dequeue may also wait while the host thread is
  // still filling the ring, before any step ran.
  std::vector<OutfeedElement> before;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<OutfeedElement> e = (*outfeed)->Next();
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) break;
    before.push_back(*std::move(e));
  }
  AwaitTrue([&] { return q->waiting_dequeues() == 1; });
  // The destructor joins the host thread, stalled in the dataset until the
  // gate opens: destroy on another thread, open the gate once the run ended.
  std::thread destroyer([&] { infeed->reset(); });
  runner.join();
  gate.Notify();
  destroyer.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  EXPECT_THAT(std::string(st.message()),
              ::testing::AllOf(::testing::HasSubstr("InfeedDequeue '"),
                               ::testing::HasSubstr("was destroyed")));
  EXPECT_EQ(Values(before), (std::vector<float>{0, 1, 2}));
  EXPECT_TRUE((*outfeed)->TakeAvailable().empty());
}

// A monitor blocked in Next, and a producer blocked on a full ring, while
// the IPUOutfeedQueue is destroyed: both return Cancelled on live memory.
TEST(FeedQueuesTest, DestroyingTheOutfeedUnderBlockedCallersIsSafe) {
  for (int round = 0; round < 20; ++round) {
    // A monitor waiting in Next before anything was pushed.
    auto outfeed = IPUOutfeedQueue::Create();
    ASSERT_TRUE(outfeed.ok());
    IPUOutfeedQueue* q = outfeed->get();
    absl::Status monitor_status;
    std::thread monitor([&] { monitor_status = q->Next().status(); });
    AwaitTrue([&] { return q->waiting_readers() == 1; });
    outfeed->reset();
    monitor.join();
    EXPECT_EQ(monitor_status.code(), absl::StatusCode::kCancelled)
        << monitor_status;
    EXPECT_THAT(std::string(monitor_status.message()),
                ::testing::HasSubstr("was destroyed"));

    // A producer (a pipeline's last stage pushes on the queue itself)
    // waiting on a full ring: the host list (1 step) and the ring (1) are
    // full, nobody reads.
    auto outfeed2 =
        IPUOutfeedQueue::Create(OutfeedMode::kAll, 1, /*max_host_bytes=*/4);
    ASSERT_TRUE(outfeed2.ok());
    IPUOutfeedQueue* q2 = outfeed2->get();
    Scope s = Scope::NewRootScope();
    ASSERT_NE(q2->Enqueue(s, {ops::Const(s, 1.0f)}), nullptr);
    absl::Status producer_status;
    std::thread producer([&] {
      do {
        producer_status = q2->Push(0, 1, {Tensor::Scalar(1.0f)}, nullptr);
      } while (producer_status.ok());
    });
    AwaitTrue(
        [&] { return q2->waiting_pushes() == 1 && q2->host_bytes() == 4; });
    outfeed2->reset();
    producer.join();
    EXPECT_EQ(producer_status.code(), absl::StatusCode::kCancelled)
        << producer_status;
    EXPECT_THAT(std::string(producer_status.message()),
                ::testing::HasSubstr("was destroyed"));
  }
}

// A kernel error in the loop body (here: a dataset error, which reaches
// the device in place of its element) ends that run, not the streams: the
// monitor gets the steps before it, then the error naming the node, and the
// next run continues both queues with nothing lost or repeated.
TEST(FeedQueuesTest, AKernelErrorEndsOneRunNotTheQueues) {
  auto system = MakeSystem(1);
  DatasetPtr ds = Range(0, 100)->Map(
      [](Element e) -> absl::StatusOr<Element> {
        if (e[0].scalar<int64_t>() == 3)
          return absl::DataLossError("bad record 3");
        return e;
      },
      1, ElementSpec{{DType::kInt64}, {TensorShape()}});
  auto infeed = IPUInfeedQueue::Create(ds);
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 5, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  std::vector<float> seen;
  absl::Status stop;
  std::thread monitor([&] {
    for (;;) {
      absl::StatusOr<OutfeedElement> step = (*outfeed)->Next();
      if (!step.ok()) {
        stop = step.status();
        return;
      }
      seen.push_back((*step)["x"].scalar<float>());
    }
  });
  absl::Status st = strategy.Run(*s.graph(), {}, {loop->op}).status();
  monitor.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()),
              ::testing::AllOf(::testing::HasSubstr("InfeedDequeue '"),
                               ::testing::HasSubstr("bad record 3")));
  EXPECT_EQ(seen, (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(stop.code(), absl::StatusCode::kDataLoss) << stop;
  EXPECT_THAT(std::string(stop.message()),
              ::testing::AllOf(::testing::HasSubstr("stopped"),
                               ::testing::HasSubstr("bad record 3")));
  // The next run continues both streams.
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  EXPECT_EQ(Values((*outfeed)->TakeAvailable()),
            (std::vector<float>{4, 5, 6, 7, 8}));
}

// Cancelling and reconfiguring the system while a monitor waits: the
// monitor is woken with the reason, and after Configure the same queues
// continue their streams (the cancelled device took no element).
TEST(FeedQueuesTest, ReconfigureWakesTheMonitorAndTheStreamsContinue) {
  auto system = MakeSystem(1);
  Notification gate;
  auto infeed = IPUInfeedQueue::Create(Gated(100, 3, &gate), 1);
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 7, Forward(outfeed->get()), {}, infeed->get());
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system.get());
  absl::Status st;
  std::thread runner(
      [&] { st = strategy.Run(*s.graph(), {}, {loop->op}).status(); });
  std::vector<float> seen;
  std::atomic<int> seen_count{0};
  absl::Status stop;
  std::thread monitor([&] {
    for (;;) {
      absl::StatusOr<OutfeedElement> step = (*outfeed)->Next();
      if (!step.ok()) {
        stop = step.status();
        return;
      }
      seen.push_back((*step)["x"].scalar<float>());
      seen_count.fetch_add(1);
    }
  });
  // The loop waits for the gated 4th element only once the 3 before it
  // went through (an earlier wait is the infeed's host thread running
  // behind, which a reconfigure would rightly cut short).
  AwaitTrue([&] {
    return seen_count.load() == 3 && (*infeed)->waiting_dequeues() == 1;
  });
  IPUConfig config;
  config.set_auto_select_ipus(1);
  ASSERT_TRUE(system->Configure(config).ok());
  runner.join();
  monitor.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  EXPECT_EQ(seen, (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(stop.code(), absl::StatusCode::kCancelled) << stop;
  EXPECT_THAT(std::string(stop.message()),
              ::testing::AllOf(::testing::HasSubstr("stopped"),
                               ::testing::HasSubstr("reconfigured")));
  gate.Notify();
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  EXPECT_EQ(Values((*outfeed)->TakeAvailable()),
            (std::vector<float>{3, 4, 5, 6, 7, 8, 9}));
}

TEST(FeedQueuesTest, MismatchedPushesAreStatusesNamingTheFeed) {
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(outfeed.ok());
  IPUOutfeedQueue* q = outfeed->get();
  Scope s = Scope::NewRootScope();
  ASSERT_NE(q->Enqueue(s, {{"loss", ops::Const(s, 1.0f)}}), nullptr);
  const std::string feed = "IPUOutfeedQueue '" + q->id() + "'";
  absl::Status arity =
      q->Push(0, 1, {Tensor::Scalar(1.0f), Tensor::Scalar(2.0f)}, nullptr);
  EXPECT_EQ(arity.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(arity.message()),
              ::testing::AllOf(
                  ::testing::HasSubstr(feed),
                  ::testing::HasSubstr("carries 1 tensor(s) ('loss'); got 2")));
  absl::Status dtype = q->Push(0, 1, {Tensor::Scalar(int64_t{1})}, nullptr);
  EXPECT_EQ(dtype.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dtype.message()),
              ::testing::AllOf(::testing::HasSubstr(feed),
                               ::testing::HasSubstr("'loss'")));
  absl::Status shape =
      q->Push(0, 1, {Tensor::Filled(DType::kFloat32, {2}, 1.0)}, nullptr);
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
  // Nothing bad got in: a good push still works.
  ASSERT_TRUE(q->Push(0, 1, {Tensor::Scalar(3.0f)}, nullptr).ok());
  EXPECT_EQ(Values(q->TakeAvailable()), (std::vector<float>{3}));
  // Use after Close is a status.
  q->Close();
  absl::Status closed = q->Push(0, 1, {Tensor::Scalar(3.0f)}, nullptr);
  EXPECT_EQ(closed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(closed.message()), ::testing::HasSubstr("is closed"));
  EXPECT_EQ(q->Next().status().code(), absl::StatusCode::kOutOfRange);
}

// An unknown batch dimension: steps of different shapes cannot be stacked.
// Dequeue says so and keeps them; TakeAvailable returns them one by one.
TEST(FeedQueuesTest, StepsOfDifferentShapesAreAStatusNotAnAbort) {
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(outfeed.ok());
  IPUOutfeedQueue* q = outfeed->get();
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, TensorShape({-1}));
  ASSERT_NE(q->Enqueue(s, {{"x", x}}), nullptr);
  ASSERT_TRUE(
      q->Push(0, 1, {Tensor::Filled(DType::kFloat32, {2}, 1.0)}, nullptr).ok());
  ASSERT_TRUE(
      q->Push(0, 1, {Tensor::Filled(DType::kFloat32, {3}, 2.0)}, nullptr).ok());
  absl::StatusOr<OutfeedResult> all = q->Dequeue();
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(all.status().message()),
              ::testing::AllOf(
                  ::testing::HasSubstr(q->id()), ::testing::HasSubstr("'x'"),
                  ::testing::HasSubstr("[2]"), ::testing::HasSubstr("[3]")));
  std::vector<OutfeedElement> steps = q->TakeAvailable();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0]["x"].shape(), TensorShape({2}));
  EXPECT_EQ(steps[1]["x"].shape(), TensorShape({3}));
}

TEST(FeedQueuesTest, ResultLookupsAreStatuses) {
  OutfeedResult r;
  r.names = {"loss", "acc"};
  r.tensors = {Tensor::Scalar(1.0f), Tensor::Scalar(2.0f)};
  ASSERT_TRUE(r.at("acc").ok());
  EXPECT_EQ(r.at("acc")->scalar<float>(), 2.0f);
  EXPECT_EQ(r.at(size_t{0})->scalar<float>(), 1.0f);
  absl::StatusOr<Tensor> bad = r.at("los");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::AllOf(::testing::HasSubstr("'los'"),
                               ::testing::HasSubstr("'loss', 'acc'")));
  EXPECT_EQ(r.at(size_t{2}).status().code(), absl::StatusCode::kNotFound);
  // The convenient accessor never aborts: an unknown name is an invalid tensor.
  EXPECT_FALSE(r["los"].valid());
  EXPECT_TRUE(r["loss"].valid());
}

// The host-side list is bounded: with a 1-step bound and a ring of 1, a
// producer with no reader completes exactly 2 pushes and waits on the third
// (back-pressure); each read lets exactly one more in, and the host never
// holds more than the bound.
TEST(FeedQueuesTest, TheHostSideListIsBoundedWithBackPressure) {
  auto outfeed =
      IPUOutfeedQueue::Create(OutfeedMode::kAll, 1, /*max_host_bytes=*/4);
  ASSERT_TRUE(outfeed.ok());
  IPUOutfeedQueue* q = outfeed->get();
  Scope s = Scope::NewRootScope();
  ASSERT_NE(q->Enqueue(s, {ops::Const(s, 1.0f)}), nullptr);
  std::atomic<int> pushed{0};
  constexpr int kSteps = 200;
  std::thread producer([&] {
    for (int i = 0; i < kSteps; ++i) {
      ASSERT_TRUE(
          q->Push(0, 1, {Tensor::Scalar(static_cast<float>(i))}, nullptr).ok());
      pushed.fetch_add(1);
    }
  });
  // Settled: the third push waits (the second may wait a moment too, until
  // the host thread takes the first step from the ring).
  AwaitTrue([&] {
    return (pushed.load() == 2 && q->waiting_pushes() == 1 &&
            q->host_bytes() == 4) ||
           pushed.load() == kSteps;
  });
  EXPECT_EQ(pushed.load(), 2);  // One held on the host, one in the ring.
  EXPECT_EQ(q->host_bytes(), 4);
  std::vector<float> seen;
  for (int i = 0; i < kSteps; ++i) {
    absl::StatusOr<OutfeedElement> step = q->Next();
    ASSERT_TRUE(step.ok()) << step.status();
    seen.push_back(step->tensors[0].scalar<float>());
  }
  producer.join();
  for (int i = 0; i < kSteps; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_EQ(q->peak_host_bytes(), 4);
  EXPECT_FALSE(IPUOutfeedQueue::Create(OutfeedMode::kAll, 1, 0).ok());
}

// ---- The device side takes ready elements in batches (a local cache per
// replica, InfeedChannel): these fail if batching loses, repeats or
// reorders an element, or delivers one it should not.

// Burns time without sleeping: a slow device lets the ring fill, so later
// Dequeues are served from a batch.
void Work(int n) {
  volatile int sink = 0;
  for (int i = 0; i < n; ++i) sink = sink + i;
}

int64_t ValueOf(const absl::StatusOr<Element>& e) {
  return (*e)[0].scalar<int64_t>();
}

// Two replicas dequeue on threads of their own, each slow now and then (so
// batches of every size occur, the last one partial): replica r gets
// exactly r, r + 2, r + 4, ... in order, then a clean OutOfRange.
TEST(InfeedBatchTest, EveryElementOnceInOrderAndAPartialLastBatch) {
  constexpr int kElements = 2003;  // Not a multiple of the depth.
  for (int depth : {1, 4, 7}) {
    auto infeed = IPUInfeedQueue::Create(Range(0, kElements), depth);
    ASSERT_TRUE(infeed.ok());
    IPUInfeedQueue* q = infeed->get();
    ASSERT_TRUE(q->Start(2).ok());
    std::vector<int64_t> got[2];
    absl::Status end[2];
    std::vector<std::thread> devices;
    for (int r = 0; r < 2; ++r) {
      devices.emplace_back([&, r] {
        for (int i = 0;; ++i) {
          absl::StatusOr<Element> e = q->Dequeue(r, 2, nullptr);
          if (!e.ok()) {
            end[r] = e.status();
            return;
          }
          got[r].push_back(ValueOf(e));
          if (i % 50 < 10) Work(2000);
        }
      });
    }
    for (auto& t : devices) t.join();
    for (int r = 0; r < 2; ++r) {
      std::vector<int64_t> want;
      for (int64_t v = r; v < kElements; v += 2) want.push_back(v);
      EXPECT_EQ(got[r], want) << "depth " << depth << " replica " << r;
      EXPECT_EQ(end[r].code(), absl::StatusCode::kOutOfRange) << end[r];
      EXPECT_THAT(std::string(end[r].message()),
                  ::testing::HasSubstr(
                      absl::StrCat("its element ", want.size() + 1, ")")));
    }
    EXPECT_EQ(q->elements_produced(), kElements);
  }
}

// A cancelled run takes no element, even with elements already taken from
// the ring into the replica's cache; the next run continues in order. A
// give-back goes before the cached elements.
TEST(InfeedBatchTest, CancelledRunAndGiveBackKeepTheOrder) {
  for (int round = 0; round < 20; ++round) {
    auto infeed = IPUInfeedQueue::Create(Range(0, 40), 8);
    ASSERT_TRUE(infeed.ok());
    IPUInfeedQueue* q = infeed->get();
    ASSERT_TRUE(q->Start(1).ok());
    std::vector<int64_t> got;
    auto take = [&](CancellationManager* cm) -> absl::Status {
      absl::StatusOr<Element> e = q->Dequeue(0, 1, cm);
      if (e.ok()) got.push_back(ValueOf(e));
      return e.status();
    };
    // Let the ring fill on some rounds, so the first take is a full batch.
    if (round % 2 == 0) AwaitTrue([&] { return q->elements_produced() >= 9; });
    ASSERT_TRUE(take(nullptr).ok());
    ASSERT_TRUE(take(nullptr).ok());
    CancellationManager stopped;
    stopped.StartCancel(absl::AbortedError("stage 2 failed"));
    absl::Status s = take(&stopped);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr("stage 2 failed"));
    ASSERT_TRUE(take(nullptr).ok());  // 2
    // A pipeline gives back what it took and did not process.
    std::vector<Element> back;
    back.push_back(Element{Tensor::Scalar<int64_t>(1)});
    back.push_back(Element{Tensor::Scalar<int64_t>(2)});
    ASSERT_TRUE(q->GiveBack(0, 1, std::move(back)).ok());
    while (take(nullptr).ok()) {
    }
    std::vector<int64_t> want = {0, 1, 2, 1, 2};
    for (int64_t v = 3; v < 40; ++v) want.push_back(v);
    EXPECT_EQ(got, want) << "round " << round;
  }
}

// Issue 30: an element given back that does not match the spec is refused
// there, naming the element, the dtype and shape given and those expected;
// the stream is unchanged.
TEST(InfeedBatchTest, GiveBackOfAWrongElementNamesDTypesAndShapes) {
  auto infeed = IPUInfeedQueue::Create(Range(0, 10), 4);
  ASSERT_TRUE(infeed.ok());
  IPUInfeedQueue* q = infeed->get();
  ASSERT_TRUE(q->Start(1).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q->Dequeue(0, 1, nullptr).ok());
  struct Bad {
    Tensor value;
    const char* message;
  };
  const Bad bad[] = {
      {Tensor::Scalar<float>(1),
       "component 0 is float32[] but the spec says "
       "int64[]"},
      {Tensor::Scalar<int32_t>(1),
       "component 0 is int32[] but the spec says int64[]"},
      {Tensor::FromVector<int64_t>({1, 2}, {2}),
       "component 0 is int64[2] but the spec says int64[]"},
  };
  for (const Bad& b : bad) {
    std::vector<Element> back;
    back.push_back(Element{Tensor::Scalar<int64_t>(1)});
    back.push_back(Element{b.value});
    const absl::Status st = q->GiveBack(0, 1, std::move(back));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()),
                ::testing::HasSubstr("GiveBack to replica 0: element 1 "))
        << st;
    EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(b.message))
        << st;
  }
  // Nothing was given back: the stream continues at 3.
  EXPECT_EQ(ValueOf(q->Dequeue(0, 1, nullptr)), 3);
}

// A dataset error reaches the device in place of its element, in order,
// in the middle of a batch; the stream continues after it.
TEST(InfeedBatchTest, ADatasetErrorMidBatchKeepsItsPlace) {
  DatasetPtr faulty = Range(0, 20)->Map(
      [](Element e) -> absl::StatusOr<Element> {
        if (e[0].scalar<int64_t>() == 7)
          return absl::DataLossError("bad record 7");
        return e;
      },
      1, ElementSpec{{DType::kInt64}, {TensorShape()}});
  auto infeed = IPUInfeedQueue::Create(faulty, 16);
  ASSERT_TRUE(infeed.ok());
  IPUInfeedQueue* q = infeed->get();
  ASSERT_TRUE(q->Start(1).ok());
  AwaitTrue([&] { return q->elements_produced() == 17; });  // A full ring.
  std::vector<int64_t> got;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<Element> e = q->Dequeue(0, 1, nullptr);
    if (i == 7) {
      EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss) << e.status();
      continue;
    }
    ASSERT_TRUE(e.ok()) << i << ": " << e.status();
    got.push_back(ValueOf(e));
  }
  std::vector<int64_t> want(20);
  std::iota(want.begin(), want.end(), 0);
  want.erase(want.begin() + 7);
  EXPECT_EQ(got, want);
  EXPECT_EQ(q->Dequeue(0, 1, nullptr).status().code(),
            absl::StatusCode::kOutOfRange);
}

// An error in another thread (a run's CancellationManager) wakes a device
// waiting on an empty ring; with the same cancelled manager, a device with
// elements cached is refused too, and the next run gets them in order.
TEST(InfeedBatchTest, AnErrorInAnotherThreadTakesNoElement) {
  Notification gate;
  auto infeed = IPUInfeedQueue::Create(Gated(100, 6, &gate), 8);
  ASSERT_TRUE(infeed.ok());
  IPUInfeedQueue* q = infeed->get();
  ASSERT_TRUE(q->Start(1).ok());
  AwaitTrue([&] { return q->elements_produced() == 6; });  // 0..5 ready.
  for (int64_t v = 0; v < 6; ++v) {
    absl::StatusOr<Element> e = q->Dequeue(0, 1, nullptr);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(ValueOf(e), v);
  }
  CancellationManager run;
  absl::StatusOr<Element> waited;
  std::thread device([&] { waited = q->Dequeue(0, 1, &run); });
  AwaitTrue([&] { return q->waiting_dequeues() == 1; });
  run.StartCancel(absl::AbortedError("stage 1 failed"));
  device.join();
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kAborted)
      << waited.status();
  gate.Notify();
  // Element 6 and more arrive; take one (the rest may sit in the cache),
  // then destroy the queue under a running loop of Dequeues.
  absl::StatusOr<Element> six = q->Dequeue(0, 1, nullptr);
  ASSERT_TRUE(six.ok()) << six.status();
  EXPECT_EQ(ValueOf(six), 6);
  AwaitTrue([&] { return q->elements_produced() >= 10; });
  absl::StatusOr<Element> seven = q->Dequeue(0, 1, nullptr);  // 8, 9 cached?
  ASSERT_TRUE(seven.ok()) << seven.status();
  EXPECT_EQ(ValueOf(seven), 7);
  EXPECT_EQ(q->Dequeue(0, 1, &run).status().code(), absl::StatusCode::kAborted);
  absl::StatusOr<Element> eight = q->Dequeue(0, 1, nullptr);
  ASSERT_TRUE(eight.ok()) << eight.status();
  EXPECT_EQ(ValueOf(eight), 8);
}

// Destroying the infeed under a running loop, with elements in its ring and
// in the device's cache: the run ends (Cancelled, or FailedPrecondition if
// it was between dequeues) without a hang, and the elements it delivered
// are a gap-free prefix of the dataset.
TEST(InfeedBatchTest, DestroyedUnderARunningLoopWithElementsInFlight) {
  for (int round = 0; round < 5; ++round) {
    auto system = MakeSystem(1);
    auto infeed = IPUInfeedQueue::Create(Range(0, 1000000), 16);
    auto outfeed = IPUOutfeedQueue::Create(OutfeedMode::kAll, 4);
    ASSERT_TRUE(infeed.ok() && outfeed.ok());
    IPUOutfeedQueue* out = outfeed->get();
    Scope s = Scope::NewRootScope();
    auto loop = loops::Repeat(s, 100000, Forward(out), {}, infeed->get());
    ASSERT_TRUE(loop.ok());
    IPUStrategy strategy(system.get());
    std::atomic<int> seen{0};
    std::vector<float> values;  // The monitor's until it is joined.
    std::thread monitor([&] {
      for (;;) {
        absl::StatusOr<OutfeedElement> e = out->Next();
        if (!e.ok()) return;
        values.push_back(e->tensors[0].scalar<float>());
        seen.fetch_add(1);
      }
    });
    absl::Status st;
    std::thread runner(
        [&] { st = strategy.Run(*s.graph(), {}, {loop->op}).status(); });
    AwaitTrue([&] { return seen.load() >= 50 * (round + 1); });
    infeed->reset();
    runner.join();
    out->Close();
    monitor.join();
    EXPECT_TRUE(absl::IsCancelled(st) || absl::IsFailedPrecondition(st)) << st;
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(values[i], static_cast<float>(i)) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace ipuflow::feeds
