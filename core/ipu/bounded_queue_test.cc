#include "core/ipu/bounded_queue.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/ipu/spin_wait.h"
#include "core/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

using ::testing::HasSubstr;

// Waits until `n` threads sleep in Push / Pop (counted under the queue's
// mutex just before they wait), so wake-up paths are exercised for sure
// rather than by sleeping and hoping.
template <typename T>
void AwaitSleepingProducers(const BoundedQueue<T>& q, int n = 1) {
  while (q.sleeping_producers() < n) std::this_thread::yield();
}
template <typename T>
void AwaitSleepingConsumers(const BoundedQueue<T>& q, int n = 1) {
  while (q.sleeping_consumers() < n) std::this_thread::yield();
}

// Burns time without sleeping, so one side stays slower than the other.
void Work(int n) {
  volatile int sink = 0;
  for (int i = 0; i < n; ++i) sink = sink + i;
}

TEST(BoundedQueueTest, FifoSingleThreaded) {
  BoundedQueue<int> q(4, "queue 'fifo'");
  EXPECT_EQ(q.capacity(), 4u);
  EXPECT_EQ(q.name(), "queue 'fifo'");
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Push(i).ok());
  EXPECT_EQ(q.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<int> v = q.Pop();
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, i);
  }
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.peak(), 4u);
}

TEST(BoundedQueueTest, WrapsAroundAndTracksPeak) {
  BoundedQueue<int> q(3);
  int next_push = 0, next_pop = 0;
  // Fill levels 1, 2, 3 in turn: head and tail cross the end at every offset.
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + round % 3;
    for (int i = 0; i < n; ++i) ASSERT_TRUE(q.Push(next_push++).ok());
    EXPECT_EQ(q.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<int> v = q.Pop();
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_EQ(*v, next_pop++);
    }
  }
  EXPECT_EQ(q.peak(), 3u);
}

TEST(BoundedQueueTest, CapacityOne) {
  BoundedQueue<int> q(1);
  ASSERT_TRUE(q.TryPush(7).ok());
  absl::Status full = q.TryPush(8);
  EXPECT_TRUE(absl::IsUnavailable(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("full (capacity 1)"));
  EXPECT_EQ(*q.Pop(), 7);
  EXPECT_TRUE(absl::IsUnavailable(q.TryPop().status()));
  ASSERT_TRUE(q.Push(9).ok());
  EXPECT_EQ(*q.TryPop(), 9);
}

TEST(BoundedQueueTest, TryPushLeavesValueOnFullAndMovesOnlyTypes) {
  BoundedQueue<std::unique_ptr<int>> q(1);
  auto a = std::make_unique<int>(1);
  auto b = std::make_unique<int>(2);
  ASSERT_TRUE(q.TryPush(std::move(a)).ok());
  EXPECT_EQ(a, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(q.TryPush(std::move(b))));
  ASSERT_NE(b, nullptr);  // Untouched on Unavailable.
  EXPECT_EQ(*b, 2);
  absl::StatusOr<std::unique_ptr<int>> v = q.Pop();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(**v, 1);
}

TEST(BoundedQueueTest, CloseDrainsThenOutOfRange) {
  BoundedQueue<int> q(4, "infeed 'x'");
  ASSERT_TRUE(q.Push(1).ok());
  ASSERT_TRUE(q.Push(2).ok());
  q.Close();
  q.Close();  // Idempotent.
  absl::Status push = q.Push(3);
  EXPECT_TRUE(absl::IsCancelled(push)) << push;
  EXPECT_THAT(push.message(), HasSubstr("Push on infeed 'x' after Close()"));
  EXPECT_TRUE(absl::IsCancelled(q.TryPush(3)));
  EXPECT_EQ(*q.Pop(), 1);
  EXPECT_EQ(*q.TryPop(), 2);
  for (int i = 0; i < 2; ++i) {  // Stays ended.
    absl::Status pop = q.Pop().status();
    EXPECT_TRUE(absl::IsOutOfRange(pop)) << pop;
    EXPECT_THAT(pop.message(), HasSubstr("infeed 'x' is closed and empty"));
    EXPECT_TRUE(absl::IsOutOfRange(q.TryPop().status()));
  }
}

TEST(BoundedQueueTest, CancelDeliversNothingAndResetOrDestructionFrees) {
  auto payload = std::make_shared<int>(5);
  {
    BoundedQueue<std::shared_ptr<int>> q(4);
    ASSERT_TRUE(q.Push(payload).ok());
    ASSERT_TRUE(q.Push(payload).ok());
    q.Cancel();
    EXPECT_TRUE(absl::IsCancelled(q.Pop().status()));
    EXPECT_TRUE(absl::IsCancelled(q.TryPop().status()));
    EXPECT_TRUE(absl::IsCancelled(q.Push(payload)));
    EXPECT_EQ(payload.use_count(), 3);  // Still inside, not delivered.
    q.Reset();
    EXPECT_EQ(payload.use_count(), 1);
    ASSERT_TRUE(q.Push(payload).ok());
    EXPECT_EQ(payload.use_count(), 2);
  }
  EXPECT_EQ(payload.use_count(), 1);
}

TEST(BoundedQueueTest, CancelReasonAndPrecedence) {
  BoundedQueue<int> q(2, "outfeed 'y'");
  ASSERT_TRUE(q.Push(1).ok());
  q.Close();
  q.Cancel(absl::AbortedError("device lost"));  // Upgrades Close.
  q.Cancel(absl::InternalError("ignored"));     // First reason wins.
  q.Close();                                    // No-op after Cancel.
  absl::Status pop = q.Pop().status();
  EXPECT_TRUE(absl::IsAborted(pop)) << pop;
  EXPECT_EQ(pop.message(), "device lost");
  EXPECT_TRUE(absl::IsAborted(q.Push(2)));

  BoundedQueue<int> other(2, "outfeed 'z'");
  other.Cancel(absl::OkStatus());  // OK is replaced by the default.
  absl::Status push = other.Push(1);
  EXPECT_TRUE(absl::IsCancelled(push)) << push;
  EXPECT_THAT(push.message(), HasSubstr("outfeed 'z' was cancelled"));
}

TEST(BoundedQueueTest, ResetReopensAndClearsPeak) {
  BoundedQueue<int> q(3, "fifo 'act/0/0/0'");
  ASSERT_TRUE(q.Push(1).ok());
  ASSERT_TRUE(q.Push(2).ok());
  q.Cancel(absl::InternalError("stage 1 failed"));
  q.Reset();
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.peak(), 0u);
  ASSERT_TRUE(q.Push(3).ok());
  EXPECT_EQ(*q.Pop(), 3);
  EXPECT_EQ(q.peak(), 1u);
  q.Close();
  q.Reset();
  ASSERT_TRUE(q.Push(4).ok());
  EXPECT_EQ(*q.Pop(), 4);
}

class BoundedQueueTransferTest : public ::testing::TestWithParam<size_t> {};

// One producer thread, one consumer thread: every value exactly once, in
// order.
TEST_P(BoundedQueueTransferTest, MillionIntsInOrder) {
  constexpr int64_t kCount = 1000000;
  BoundedQueue<int64_t> q(GetParam());
  std::thread producer([&] {
    for (int64_t i = 0; i < kCount; ++i) {
      if (!q.Push(i).ok()) return;
    }
    q.Close();
  });
  int64_t expected = 0;
  while (true) {
    absl::StatusOr<int64_t> v = q.Pop();
    if (!v.ok()) {
      EXPECT_TRUE(absl::IsOutOfRange(v.status())) << v.status();
      break;
    }
    if (*v != expected) {
      ADD_FAILURE() << "got " << *v << ", expected " << expected;
      q.Cancel();
      break;
    }
    ++expected;
  }
  producer.join();
  EXPECT_EQ(expected, kCount);
}

// Heap payloads written by the producer and read by the consumer, with each
// side in turn the slow one: TSAN flags a race if the queue does not order
// the payload.
TEST_P(BoundedQueueTransferTest, PayloadVisibleWithSlowConsumerOrProducer) {
  constexpr int kCount = 5000;
  for (bool slow_consumer : {true, false}) {
    BoundedQueue<std::unique_ptr<std::vector<int>>> q(GetParam());
    std::thread producer([&] {
      for (int i = 0; i < kCount; ++i) {
        if (!slow_consumer) Work(500);
        if (!q.Push(std::make_unique<std::vector<int>>(4, i)).ok()) return;
      }
      q.Close();
    });
    int expected = 0;
    while (true) {
      absl::StatusOr<std::unique_ptr<std::vector<int>>> v = q.Pop();
      if (!v.ok()) break;
      if (**v != std::vector<int>(4, expected)) {
        ADD_FAILURE() << "element " << expected << " corrupted";
        q.Cancel();
        break;
      }
      ++expected;
      if (slow_consumer) Work(500);
    }
    producer.join();
    EXPECT_EQ(expected, kCount) << "slow_consumer=" << slow_consumer;
  }
}

// The same transfer with the feeds' adaptive spin, each side waiting now
// and then (spins that succeed and spins that end in a sleep).
TEST_P(BoundedQueueTransferTest, InOrderWithAdaptiveSpin) {
  constexpr int64_t kCount = 200000;
  BoundedQueue<int64_t> q(GetParam());
  q.set_adaptive_spin(std::chrono::microseconds(1),
                      std::chrono::microseconds(20));
  std::thread producer([&] {
    for (int64_t i = 0; i < kCount; ++i) {
      if (i % 1000 == 0) Work(20000);  // The consumer waits now and then.
      if (!q.Push(i).ok()) return;
    }
    q.Close();
  });
  int64_t expected = 0;
  while (true) {
    absl::StatusOr<int64_t> v = q.Pop();
    if (!v.ok()) break;
    if (*v != expected) {
      ADD_FAILURE() << "got " << *v << ", expected " << expected;
      q.Cancel();
      break;
    }
    if (expected % 777 == 0) Work(20000);  // The producer waits now and then.
    ++expected;
  }
  producer.join();
  EXPECT_EQ(expected, kCount);
}

INSTANTIATE_TEST_SUITE_P(Capacities, BoundedQueueTransferTest,
                         ::testing::Values(1, 4, 1024));

// P producers and C consumers on one small queue: every element delivered
// exactly once, each producer's elements in its push order, and Close after
// the last producer ends every consumer with OutOfRange.
TEST(BoundedQueueTest, ManyProducersManyConsumersExactlyOnce) {
  constexpr int kProducers = 4, kConsumers = 3, kEach = 20000;
  BoundedQueue<int64_t> q(3);
  std::atomic<int> producers_left{kProducers};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int64_t i = 0; i < kEach; ++i) {
        ASSERT_TRUE(q.Push(int64_t{p} * kEach + i).ok());
      }
      if (producers_left.fetch_sub(1) == 1) q.Close();
    });
  }
  std::vector<std::vector<int64_t>> got(kConsumers);
  std::vector<absl::Status> end(kConsumers);
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      while (true) {
        absl::StatusOr<int64_t> v = q.Pop();
        if (!v.ok()) {
          end[c] = v.status();
          return;
        }
        got[c].push_back(*v);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int> seen(kProducers * kEach, 0);
  for (int c = 0; c < kConsumers; ++c) {
    EXPECT_TRUE(absl::IsOutOfRange(end[c])) << end[c];
    // Per consumer, each producer's elements arrive in increasing order.
    std::vector<int64_t> last(kProducers, -1);
    for (int64_t v : got[c]) {
      ++seen[v];
      const int p = static_cast<int>(v / kEach);
      EXPECT_GT(v, last[p]);
      last[p] = v;
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1),
            static_cast<long>(seen.size()));
}

// Request/response over two capacity-1 queues (a host thread feeding an
// infeed and waiting on the outfeed): every element is the last one before
// its sender blocks, so a single lost wake-up deadlocks. Delays vary around
// the spin budget (`work_range` units of varying work between rounds), so
// waiters go to sleep at every point of the protocol.
void PingPong(BoundedQueue<int>& requests, BoundedQueue<int>& replies,
              int work_range) {
  constexpr int kRounds = 10000;
  std::thread device([&] {
    while (true) {
      absl::StatusOr<int> v = requests.Pop();
      if (!v.ok()) return;
      Work((*v * 7919) % work_range);
      if (!replies.Push(*v + 1).ok()) return;
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    Work((i * 104729) % work_range);
    ASSERT_TRUE(requests.Push(i).ok());
    absl::StatusOr<int> r = replies.Pop();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(*r, i + 1);
  }
  requests.Close();
  device.join();
}

TEST(BoundedQueueTest, PingPongLosesNoWakeUp) {
  BoundedQueue<int> requests(1), replies(1);
  PingPong(requests, replies, 8000);
}

// The same with the feeds' adaptive spin (spin_wait.h), which spins up to
// 20 us when the partner answered quickly and signals after unlocking.
TEST(BoundedQueueTest, PingPongLosesNoWakeUpWithAdaptiveSpin) {
  BoundedQueue<int> requests(1), replies(1);
  for (BoundedQueue<int>* q : {&requests, &replies}) {
    q->set_adaptive_spin(std::chrono::microseconds(1),
                         std::chrono::microseconds(20));
  }
  PingPong(requests, replies, 20000);
  for (BoundedQueue<int>* q : {&requests, &replies}) {
    EXPECT_GE(q->pop_spin_budget(), std::chrono::microseconds(1));
    EXPECT_LE(q->pop_spin_budget(), std::chrono::microseconds(20));
  }
}

// A slept wait is answered by the producer's put, and the spin it records
// is bounded by the ceiling whatever the wake-up took.
TEST(BoundedQueueTest, SleepingConsumerIsWokenWithAdaptiveSpin) {
  BoundedQueue<int> q(2);
  q.set_adaptive_spin(std::chrono::microseconds(1),
                      std::chrono::microseconds(20));
  for (int round = 0; round < 20; ++round) {
    std::thread consumer([&] {
      absl::StatusOr<int> v = q.Pop();
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_EQ(*v, round);
    });
    AwaitSleepingConsumers(q);
    ASSERT_TRUE(q.Push(round).ok());
    consumer.join();
    EXPECT_EQ(q.sleeping_consumers(), 0);
    EXPECT_LE(q.pop_spin_budget(), std::chrono::microseconds(20));
  }
}

TEST(AdaptiveSpinTest, FixedWhenFloorIsCeiling) {
  AdaptiveSpin spin(std::chrono::microseconds(5), std::chrono::microseconds(5));
  EXPECT_EQ(spin.budget(), std::chrono::microseconds(5));
  for (int us : {0, 1, 100, 100000}) {
    spin.Record(std::chrono::microseconds(us));
    EXPECT_EQ(spin.budget(), std::chrono::microseconds(5)) << us;
  }
}

// Twice the recent answer time within [floor, ceiling]; the floor when the
// partner is slower than the ceiling; one idle spell forgotten after a few
// quick answers (samples are capped at 4x the ceiling).
TEST(AdaptiveSpinTest, FollowsThePartnersAnswerTime) {
  using std::chrono::microseconds;
  AdaptiveSpin spin(microseconds(2), microseconds(20));
  EXPECT_EQ(spin.budget(), microseconds(2));  // Nothing learnt yet.
  for (int i = 0; i < 40; ++i) spin.Record(microseconds(6));
  EXPECT_GE(spin.budget(), microseconds(11));
  EXPECT_LE(spin.budget(), microseconds(12));
  for (int i = 0; i < 40; ++i) spin.Record(microseconds(50));
  EXPECT_EQ(spin.budget(), microseconds(2));  // Slow partner: sleep soon.
  for (int i = 0; i < 40; ++i) spin.Record(std::chrono::seconds(1));
  EXPECT_EQ(spin.budget(), microseconds(2));
  int quick = 0;
  while (spin.budget() == microseconds(2) && quick < 100) {
    spin.Record(microseconds(3));
    ++quick;
  }
  EXPECT_LE(quick, 8);
  EXPECT_EQ(spin.budget(), microseconds(20));  // Recovering: the ceiling...
  for (int i = 0; i < 40; ++i) spin.Record(microseconds(3));
  // ... then twice 3 us (integer averaging stops within a few ns).
  EXPECT_NEAR(spin.budget().count(), 6000, 10);
  spin.Record(microseconds(-5));  // Clock skew: counted as 0.
  EXPECT_LT(spin.budget(), microseconds(6));
}

TEST(BoundedQueueTest, CloseWakesBlockedConsumerWhichDrains) {
  BoundedQueue<int> q(4);
  std::vector<int> got;
  absl::Status end;
  std::thread consumer([&] {
    while (true) {
      absl::StatusOr<int> v = q.Pop();
      if (!v.ok()) {
        end = v.status();
        return;
      }
      got.push_back(*v);
    }
  });
  AwaitSleepingConsumers(q);
  ASSERT_TRUE(q.Push(1).ok());  // Wakes the consumer.
  ASSERT_TRUE(q.Push(2).ok());
  q.Close();
  consumer.join();
  EXPECT_EQ(got, (std::vector<int>{1, 2}));
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
}

TEST(BoundedQueueTest, CloseWakesEveryBlockedProducerAndConsumer) {
  BoundedQueue<int> full(1), empty(1);
  ASSERT_TRUE(full.Push(0).ok());
  constexpr int kEach = 3;
  std::vector<absl::Status> pushed(kEach), popped(kEach);
  std::vector<std::thread> threads;
  for (int i = 0; i < kEach; ++i) {
    threads.emplace_back([&, i] { pushed[i] = full.Push(1); });
    threads.emplace_back([&, i] { popped[i] = empty.Pop().status(); });
  }
  AwaitSleepingProducers(full, kEach);
  AwaitSleepingConsumers(empty, kEach);
  std::thread closer([&] {
    full.Close();
    empty.Close();
  });
  closer.join();
  for (auto& t : threads) t.join();
  for (int i = 0; i < kEach; ++i) {
    EXPECT_TRUE(absl::IsCancelled(pushed[i])) << pushed[i];
    EXPECT_TRUE(absl::IsOutOfRange(popped[i])) << popped[i];
  }
  EXPECT_EQ(*full.Pop(), 0);  // Pushed before Close: still delivered.
}

TEST(BoundedQueueTest, CancelWakesEveryBlockedThreadWithReason) {
  BoundedQueue<int> full(1), empty(1);
  ASSERT_TRUE(full.Push(0).ok());
  constexpr int kEach = 3;
  std::vector<absl::Status> pushed(kEach), popped(kEach);
  std::vector<std::thread> threads;
  for (int i = 0; i < kEach; ++i) {
    threads.emplace_back([&, i] { pushed[i] = full.Push(1); });
    threads.emplace_back([&, i] { popped[i] = empty.Pop().status(); });
  }
  AwaitSleepingProducers(full, kEach);
  AwaitSleepingConsumers(empty, kEach);
  std::thread canceller([&] {
    full.Cancel(absl::UnavailableError("IPU 0 reset"));
    empty.Cancel(absl::UnavailableError("IPU 0 reset"));
  });
  canceller.join();
  for (auto& t : threads) t.join();
  for (int i = 0; i < kEach; ++i) {
    EXPECT_TRUE(absl::IsUnavailable(pushed[i])) << pushed[i];
    EXPECT_EQ(popped[i].message(), "IPU 0 reset");
  }
  EXPECT_TRUE(absl::IsUnavailable(full.Pop().status()));  // Full but cancelled.
}

// A CancellationManager ends only the calls that passed it: the queue keeps
// its elements and serves other callers.
TEST(BoundedQueueTest, CancellationManagerWakesOnlyItsCallers) {
  BoundedQueue<int> q(1, "infeed 'train' replica 0");
  CancellationManager run;
  absl::Status popped;
  std::thread consumer([&] { popped = q.Pop(&run).status(); });
  AwaitSleepingConsumers(q);
  run.StartCancel(absl::CancelledError("the IPU system was reset"));
  consumer.join();
  EXPECT_TRUE(absl::IsCancelled(popped)) << popped;
  EXPECT_EQ(popped.message(),
            "infeed 'train' replica 0: the IPU system was reset");
  // Later calls with the cancelled manager fail at once, even when they
  // could proceed; the queue itself is unharmed.
  EXPECT_TRUE(absl::IsCancelled(q.Push(1, &run)));
  ASSERT_TRUE(q.Push(1).ok());
  EXPECT_TRUE(absl::IsCancelled(q.Pop(&run).status()));
  EXPECT_EQ(*q.Pop(), 1);

  // A blocked producer, too.
  CancellationManager run2;
  ASSERT_TRUE(q.Push(2).ok());
  absl::Status pushed;
  std::thread producer([&] { pushed = q.Push(3, &run2); });
  AwaitSleepingProducers(q);
  run2.StartCancel(absl::AbortedError("stage 2 failed"));
  producer.join();
  EXPECT_TRUE(absl::IsAborted(pushed)) << pushed;
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(*q.Pop(), 2);
}

// Consumers with their own managers, some cancelled while others keep
// consuming: nothing lost or duplicated, and a cancelled sleeper does not
// swallow the wake-up an element owed another sleeper.
TEST(BoundedQueueTest, CancellingSomeConsumersLosesNoElement) {
  constexpr int kConsumers = 4, kCount = 20000;
  BoundedQueue<int> q(2);
  std::vector<std::unique_ptr<CancellationManager>> cms;
  for (int c = 0; c < kConsumers; ++c) {
    cms.push_back(std::make_unique<CancellationManager>());
  }
  std::vector<std::vector<int>> got(kConsumers);
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&, c] {
      while (true) {
        absl::StatusOr<int> v = q.Pop(cms[c].get());
        if (!v.ok()) return;
        got[c].push_back(*v);
      }
    });
  }
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(q.Push(i).ok());
    // Consumers 0 and 1 stop part-way, possibly while asleep.
    if (i == kCount / 3) cms[0]->StartCancel(absl::CancelledError("c0"));
    if (i == kCount / 2) cms[1]->StartCancel(absl::CancelledError("c1"));
  }
  q.Close();
  for (auto& t : consumers) t.join();
  std::vector<int> seen(kCount, 0);
  for (const auto& g : got) {
    EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
    for (int v : g) ++seen[v];
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kCount);
}

// PopBatch takes what is ready, oldest first, up to its limit, appending
// to what the caller holds; blocks like Pop while empty; ends like Pop.
TEST(BoundedQueueTest, PopBatchTakesReadyElementsInOrder) {
  BoundedQueue<int> q(4, "queue 'batch'");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Push(i).ok());
  std::vector<int> out = {-1};
  ASSERT_TRUE(q.PopBatch(&out, 2).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(-1, 0, 1));
  ASSERT_TRUE(q.PopBatch(&out, 0).ok());  // 0 counts as 1.
  EXPECT_THAT(out, ::testing::ElementsAre(-1, 0, 1, 2));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(absl::IsUnavailable(q.TryPop().status()));
  // TryPopBatch: Unavailable (no message) when empty, else what is ready.
  EXPECT_TRUE(absl::IsUnavailable(q.TryPopBatch(&out, 4)));
  EXPECT_EQ(out.size(), 4u);
  ASSERT_TRUE(q.Push(10).ok());
  ASSERT_TRUE(q.Push(11).ok());
  out.clear();
  ASSERT_TRUE(q.TryPopBatch(&out, 1).ok());
  ASSERT_TRUE(q.TryPopBatch(&out, 4).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(10, 11));
  // Wraps around the ring's end.
  for (int i = 3; i < 7; ++i) ASSERT_TRUE(q.Push(i).ok());
  out.clear();
  ASSERT_TRUE(q.PopBatch(&out, 100).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(3, 4, 5, 6));
  // A blocked PopBatch is woken by a Push and takes it.
  std::vector<int> woken;
  absl::Status s;
  std::thread consumer([&] { s = q.PopBatch(&woken, 4); });
  AwaitSleepingConsumers(q);
  ASSERT_TRUE(q.Push(7).ok());
  consumer.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(woken, ::testing::ElementsAre(7));
  // Close: the rest, then OutOfRange with *out unchanged.
  ASSERT_TRUE(q.Push(8).ok());
  q.Close();
  out.clear();
  ASSERT_TRUE(q.PopBatch(&out, 4).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(8));
  EXPECT_TRUE(absl::IsOutOfRange(q.PopBatch(&out, 4)));
  EXPECT_TRUE(absl::IsOutOfRange(q.TryPopBatch(&out, 4)));
  EXPECT_THAT(out, ::testing::ElementsAre(8));
  // Cancel: nothing delivered, the reason.
  q.Reset();
  ASSERT_TRUE(q.Push(9).ok());
  q.Cancel(absl::AbortedError("stage 1 failed"));
  EXPECT_TRUE(absl::IsAborted(q.PopBatch(&out, 4)));
  EXPECT_TRUE(absl::IsAborted(q.TryPopBatch(&out, 4)));
  EXPECT_THAT(out, ::testing::ElementsAre(8));
}

// A CancellationManager ends a blocked PopBatch without taking anything,
// and a cancelled one fails at once even when elements are ready.
TEST(BoundedQueueTest, PopBatchCancelledTakesNothing) {
  BoundedQueue<int> q(4, "infeed 'train' replica 0");
  CancellationManager run;
  std::vector<int> out;
  absl::Status s;
  std::thread consumer([&] { s = q.PopBatch(&out, 4, &run); });
  AwaitSleepingConsumers(q);
  run.StartCancel(absl::CancelledError("the IPU system was reset"));
  consumer.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_EQ(s.message(), "infeed 'train' replica 0: the IPU system was reset");
  ASSERT_TRUE(q.Push(1).ok());
  EXPECT_TRUE(absl::IsCancelled(q.PopBatch(&out, 4, &run)));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(q.size(), 1u);
  ASSERT_TRUE(q.PopBatch(&out, 4).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(1));
}

// One producer, one batch-taking consumer, each side in turn the slower:
// every payload once, in order, visible (TSAN checks the ordering), and a
// producer that slept on a full ring is woken by a batch take.
TEST_P(BoundedQueueTransferTest, PopBatchInOrderWithSlowConsumerOrProducer) {
  constexpr int kCount = 20000;
  for (bool slow_consumer : {true, false}) {
    BoundedQueue<std::unique_ptr<int>> q(GetParam());
    q.set_adaptive_spin(std::chrono::microseconds(1),
                        std::chrono::microseconds(20));
    std::thread producer([&] {
      for (int i = 0; i < kCount; ++i) {
        if (!slow_consumer && i % 64 == 0) Work(20000);
        if (!q.Push(std::make_unique<int>(i)).ok()) return;
      }
      q.Close();
    });
    int expected = 0;
    std::vector<std::unique_ptr<int>> batch;
    while (true) {
      batch.clear();
      absl::Status s = q.PopBatch(&batch, GetParam());
      if (!s.ok()) {
        EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
        break;
      }
      ASSERT_FALSE(batch.empty());
      ASSERT_LE(batch.size(), GetParam());
      for (const auto& v : batch) {
        if (*v != expected) {
          ADD_FAILURE() << "got " << *v << ", expected " << expected;
          q.Cancel();
          break;
        }
        ++expected;
        if (slow_consumer && expected % 64 == 0) Work(20000);
      }
    }
    producer.join();
    EXPECT_EQ(expected, kCount) << "slow_consumer=" << slow_consumer;
  }
}

// Many short-lived queues, each ended while traffic flows: by the producer
// (Close), by a third thread (Close), or by a third thread (Cancel). Checks
// that nothing hangs, nothing is duplicated or reordered, and that Close
// loses no acknowledged element. The stress target builds this file with
// IPUFLOW_BOUNDED_QUEUE_STRESS and runs only this test.
TEST(BoundedQueueTest, ManyOpenCloseCycles) {
#ifdef IPUFLOW_BOUNDED_QUEUE_STRESS
  constexpr int kCycles = 6000;
#else
  constexpr int kCycles = 300;
#endif
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    BoundedQueue<int> q(1 + cycle % 5);
    const int mode = cycle % 3;
    const int n = (cycle * 37) % 200;
    int pushed_ok = 0;
    std::thread producer([&] {
      for (int i = 0; i < n || mode != 0; ++i) {
        if (!q.Push(i).ok()) return;
        ++pushed_ok;
      }
      q.Close();
    });
    // In modes 1 and 2 the producer never stops by itself; a third thread
    // ends the queue once the consumer has seen n elements.
    Notification seen_n;
    std::thread ender;
    if (mode != 0) {
      ender = std::thread([&] {
        seen_n.WaitForNotification();
        if (mode == 1) q.Close();
        if (mode == 2) q.Cancel();
      });
    }
    int popped = 0;
    absl::Status end;
    while (true) {
      if (popped == n) seen_n.Notify();
      absl::StatusOr<int> v = q.Pop();
      if (!v.ok()) {
        end = v.status();
        break;
      }
      if (*v != popped) {
        ADD_FAILURE() << "cycle " << cycle << ": got " << *v << ", expected "
                      << popped;
        q.Cancel();
        seen_n.Notify();
        break;
      }
      ++popped;
    }
    producer.join();
    if (ender.joinable()) ender.join();
    if (mode == 2) {
      EXPECT_TRUE(absl::IsCancelled(end)) << end << " cycle " << cycle;
      EXPECT_LE(popped, pushed_ok) << "cycle " << cycle;
    } else {
      EXPECT_TRUE(absl::IsOutOfRange(end)) << end << " cycle " << cycle;
      EXPECT_EQ(popped, pushed_ok) << "cycle " << cycle;
    }
  }
}

}  // namespace
}  // namespace ipuflow
