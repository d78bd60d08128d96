// Infeed and outfeed queues with device loops on the emulated IPU system:
// shapes with and without replicas, ALL/LAST semantics, exactly-once
// delivery to a concurrent consumer, a clean OutOfRange at the end of the
// dataset, and a clean Cancelled when the system is torn down mid-wait.
#include <atomic>
#include <numeric>
#include <thread>

#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
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

namespace ipuflow::feeds {
namespace {

using ::ipuflow::testing::TensorNear;

std::unique_ptr<IPUSystem> MakeSystem(int ipus) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  return std::move(IPUSystem::Create(config)).value();
}

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
  DatasetPtr ds = FromTensors({x})
                      ->Map([](Element e) -> absl::StatusOr<Element> {
                              return Element{e[0], e[0]};
                            }, 1, ElementSpec{{DType::kFloat32, DType::kFloat32}, {{800}, {800}}})
                      ->Repeat();
  auto infeed = IPUInfeedQueue::Create(ds);
  ASSERT_TRUE(infeed.ok()) << infeed.status();
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 10, [&](const Scope& b, const std::vector<Output>& a) {
    Output d1 = ops::Add(b, a[1], a[2]);
    Output d2 = ops::Sub(b, a[1], a[2]);
    (*outfeed)->Enqueue(b, {{"d1", d1}, {"d2", d2}});
    return std::vector<Output>{ops::Add(b, a[0], ops::Const(b, 1.0f))};
  }, {ops::Const(s, 0.0f)}, infeed->get());
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

TEST(FeedQueuesTest, ConcurrentConsumerSeesEveryStepOnceInOrder) {
  auto system = MakeSystem(1);
  constexpr int kSteps = 3000;
  auto infeed = IPUInfeedQueue::Create(Range(0, kSteps), 2);
  auto outfeed = IPUOutfeedQueue::Create(OutfeedMode::kAll, 1);
  ASSERT_TRUE(infeed.ok() && outfeed.ok());
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, kSteps, Forward(outfeed->get()), {}, infeed->get());
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
            std::string::npos) << st;
  std::vector<float> got;
  for (const OutfeedElement& step : **outfeed) got.push_back(step["x"].scalar<float>());
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
  std::thread runner([&] { st = strategy.Run(*s.graph(), {}, {loop->op}).status(); });
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
  EXPECT_THAT(std::string(st.message()),
              ::testing::AllOf(::testing::HasSubstr("InfeedDequeue '"),
                               ::testing::HasSubstr("infeed '" + infeed_id + "'"),
                               ::testing::HasSubstr("was destroyed")));

  // The same for an outfeed (its body has no infeed).
  auto outfeed2 = IPUOutfeedQueue::Create();
  ASSERT_TRUE(outfeed2.ok());
  Scope s2 = Scope::NewRootScope();
  auto loop2 = loops::Repeat(s2, 2, [&](const Scope& b, const std::vector<Output>&) {
    (*outfeed2)->Enqueue(b, {ops::Const(b, 1.0f)});
    return std::vector<Output>{};
  });
  ASSERT_TRUE(loop2.ok()) << loop2.status();
  const std::string outfeed_id = (*outfeed2)->id();
  outfeed2.value().reset();
  st = strategy.Run(*s2.graph(), {}, {loop2->op}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()),
              ::testing::AllOf(::testing::HasSubstr("OutfeedEnqueue '"),
                               ::testing::HasSubstr("outfeed '" + outfeed_id + "'")));
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
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (*outfeed)->Close();
  consumer.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
}

TEST(FeedQueuesTest, SimplifiedIteratorAndRangeFor) {
  auto system = MakeSystem(1);
  // Elements [i, i]: the sum of the first 10 is 2 * (0 + ... + 9) = 90.
  auto it = IPUIterator::Create(
      Range(0, 10)->Map([](Element e) -> absl::StatusOr<Element> {
        const float v = static_cast<float>(e[0].scalar<int64_t>());
        return Element{Tensor::FromVector<float>({v, v})};
      }, 1, ElementSpec{{DType::kFloat32}, {TensorShape({2})}}));
  auto outfeed = IPUOutfeedQueue::Create();
  ASSERT_TRUE(it.ok() && outfeed.ok()) << it.status();
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(s, 10, [&](const Scope& b, const std::vector<Output>&) {
    std::vector<Output> x = (*it)->Next(b);
    (*outfeed)->Enqueue(b, {ops::ReduceSum(b, x[0])});
    return std::vector<Output>{};
  });
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  std::vector<float> sums;
  for (const OutfeedElement& e : **outfeed) sums.push_back(e.tensors[0].scalar<float>());
  EXPECT_EQ(sums.size(), 10u);
  EXPECT_EQ(std::accumulate(sums.begin(), sums.end(), 0.0f), 90.0f);
}

TEST(FeedQueuesTest, ValidationErrors) {
  auto ragged = IPUInfeedQueue::Create(Range(0, 10)->Batch(3));
  EXPECT_EQ(ragged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ragged.status().message().find("set drop_remainder = true"),
            std::string::npos) << ragged.status();
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
            std::string::npos) << s.status();
}

}  // namespace
}  // namespace ipuflow::feeds
