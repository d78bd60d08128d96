#include "feeds/ring_buffer.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {

// Lets tests wait until a thread is really blocked (its waiting flag is set
// under the mutex just before it re-checks and sleeps), so the wake-up paths
// are exercised deterministically rather than by sleeping and hoping.
class RingBufferTestPeer {
 public:
  template <typename T>
  static void AwaitBlockedProducer(const RingBuffer<T>& ring) {
    while (!ring.producer_waiting_.load()) std::this_thread::yield();
  }
  template <typename T>
  static void AwaitBlockedConsumer(const RingBuffer<T>& ring) {
    while (!ring.consumer_waiting_.load()) std::this_thread::yield();
  }
};

namespace {

using ::testing::HasSubstr;

TEST(RingBufferTest, FifoSingleThreaded) {
  RingBuffer<int> ring(4, "ring 'fifo'");
  EXPECT_EQ(ring.capacity(), 4u);
  EXPECT_EQ(ring.name(), "ring 'fifo'");
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.Push(i).ok());
  EXPECT_EQ(ring.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<int> v = ring.Pop();
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, i);
  }
  EXPECT_EQ(ring.size(), 0u);
}

TEST(RingBufferTest, WrapsAround) {
  RingBuffer<int> ring(3);
  int next_push = 0, next_pop = 0;
  // Fill levels 1, 2, 3 in turn, so head and tail cross the end many times
  // at every offset.
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + round % 3;
    for (int i = 0; i < n; ++i) ASSERT_TRUE(ring.Push(next_push++).ok());
    EXPECT_EQ(ring.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<int> v = ring.Pop();
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_EQ(*v, next_pop++);
    }
  }
}

TEST(RingBufferTest, CapacityOne) {
  RingBuffer<int> ring(1);
  ASSERT_TRUE(ring.TryPush(7).ok());
  absl::Status full = ring.TryPush(8);
  EXPECT_TRUE(absl::IsUnavailable(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("full (capacity 1)"));
  EXPECT_EQ(*ring.Pop(), 7);
  EXPECT_TRUE(absl::IsUnavailable(ring.TryPop().status()));
  ASSERT_TRUE(ring.Push(9).ok());
  EXPECT_EQ(*ring.TryPop(), 9);
}

TEST(RingBufferTest, TryPushLeavesValueOnFullAndMovesOnlyTypes) {
  RingBuffer<std::unique_ptr<int>> ring(1);
  auto a = std::make_unique<int>(1);
  auto b = std::make_unique<int>(2);
  ASSERT_TRUE(ring.TryPush(std::move(a)).ok());
  EXPECT_EQ(a, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(ring.TryPush(std::move(b))));
  ASSERT_NE(b, nullptr);  // Untouched on Unavailable.
  EXPECT_EQ(*b, 2);
  absl::StatusOr<std::unique_ptr<int>> v = ring.Pop();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(**v, 1);
}

TEST(RingBufferTest, CloseDrainsThenOutOfRange) {
  RingBuffer<int> ring(4, "infeed 'x'");
  ASSERT_TRUE(ring.Push(1).ok());
  ASSERT_TRUE(ring.Push(2).ok());
  ring.Close();
  ring.Close();  // Idempotent.
  absl::Status push = ring.Push(3);
  EXPECT_TRUE(absl::IsCancelled(push)) << push;
  EXPECT_THAT(push.message(), HasSubstr("Push on infeed 'x' after Close()"));
  EXPECT_TRUE(absl::IsCancelled(ring.TryPush(3)));
  EXPECT_EQ(*ring.Pop(), 1);
  EXPECT_EQ(*ring.TryPop(), 2);
  for (int i = 0; i < 2; ++i) {  // Stays ended.
    absl::Status pop = ring.Pop().status();
    EXPECT_TRUE(absl::IsOutOfRange(pop)) << pop;
    EXPECT_THAT(pop.message(), HasSubstr("infeed 'x' is closed and empty"));
    EXPECT_TRUE(absl::IsOutOfRange(ring.TryPop().status()));
  }
}

TEST(RingBufferTest, CancelDeliversNothingAndDestroysWithRing) {
  auto payload = std::make_shared<int>(5);
  {
    RingBuffer<std::shared_ptr<int>> ring(4);
    ASSERT_TRUE(ring.Push(payload).ok());
    ASSERT_TRUE(ring.Push(payload).ok());
    ring.Cancel();
    EXPECT_TRUE(absl::IsCancelled(ring.Pop().status()));
    EXPECT_TRUE(absl::IsCancelled(ring.TryPop().status()));
    EXPECT_TRUE(absl::IsCancelled(ring.Push(payload)));
    EXPECT_EQ(payload.use_count(), 3);  // Still inside, not delivered.
  }
  EXPECT_EQ(payload.use_count(), 1);
}

TEST(RingBufferTest, CancelReasonAndPrecedence) {
  RingBuffer<int> ring(2, "outfeed 'y'");
  ASSERT_TRUE(ring.Push(1).ok());
  ring.Close();
  ring.Cancel(absl::AbortedError("device lost"));  // Upgrades Close.
  ring.Cancel(absl::InternalError("ignored"));     // First reason wins.
  ring.Close();                                    // No-op after Cancel.
  absl::Status pop = ring.Pop().status();
  EXPECT_TRUE(absl::IsAborted(pop)) << pop;
  EXPECT_EQ(pop.message(), "device lost");
  EXPECT_TRUE(absl::IsAborted(ring.Push(2)));

  RingBuffer<int> other(2, "outfeed 'z'");
  other.Cancel(absl::OkStatus());  // OK is replaced by the default.
  absl::Status push = other.Push(1);
  EXPECT_TRUE(absl::IsCancelled(push)) << push;
  EXPECT_THAT(push.message(), HasSubstr("outfeed 'z' was cancelled"));
}

class RingBufferTransferTest : public ::testing::TestWithParam<size_t> {};

// One producer thread, one consumer thread: every value exactly once, in
// order.
TEST_P(RingBufferTransferTest, MillionIntsInOrder) {
  constexpr int64_t kCount = 1000000;
  RingBuffer<int64_t> ring(GetParam());
  std::thread producer([&] {
    for (int64_t i = 0; i < kCount; ++i) {
      if (!ring.Push(i).ok()) return;
    }
    ring.Close();
  });
  int64_t expected = 0, sum = 0;
  while (true) {
    absl::StatusOr<int64_t> v = ring.Pop();
    if (!v.ok()) {
      EXPECT_TRUE(absl::IsOutOfRange(v.status())) << v.status();
      break;
    }
    if (*v != expected) {
      ADD_FAILURE() << "got " << *v << ", expected " << expected;
      ring.Cancel();
      break;
    }
    ++expected;
    sum += *v;
  }
  producer.join();
  EXPECT_EQ(expected, kCount);
  EXPECT_EQ(sum, kCount * (kCount - 1) / 2);
}

INSTANTIATE_TEST_SUITE_P(Capacities, RingBufferTransferTest,
                         ::testing::Values(4, 1024));

// Burns time without sleeping, so one side stays slower than the other.
void Work(int n) {
  volatile int sink = 0;
  for (int i = 0; i < n; ++i) sink = sink + i;
}

// Heap payloads written by the producer and read by the consumer. With a slow
// consumer the ring stays full and the consumer never sleeps (no mutex edge
// producer -> consumer), so only the ring's own release/acquire orders the
// payload: TSAN flags a race if it is missing. A slow producer covers the
// other direction (the consumer waking from an empty ring).
TEST_P(RingBufferTransferTest, PayloadVisibleWithSlowConsumerOrProducer) {
  constexpr int kCount = 5000;
  for (bool slow_consumer : {true, false}) {
    RingBuffer<std::unique_ptr<std::vector<int>>> ring(GetParam());
    std::thread producer([&] {
      for (int i = 0; i < kCount; ++i) {
        if (!slow_consumer) Work(500);
        auto payload = std::make_unique<std::vector<int>>(4, i);
        if (!ring.Push(std::move(payload)).ok()) return;
      }
      ring.Close();
    });
    int expected = 0;
    while (true) {
      absl::StatusOr<std::unique_ptr<std::vector<int>>> v = ring.Pop();
      if (!v.ok()) break;
      if (**v != std::vector<int>(4, expected)) {
        ADD_FAILURE() << "element " << expected << " corrupted";
        ring.Cancel();
        break;
      }
      ++expected;
      if (slow_consumer) Work(500);
    }
    producer.join();
    EXPECT_EQ(expected, kCount) << "slow_consumer=" << slow_consumer;
  }
}

// Request/response over two capacity-1 rings (a host thread feeding an
// infeed and waiting on the outfeed): every element is the last one before
// its sender blocks, so a single lost wake-up deadlocks. The reply delays
// vary around the spin budget, so waiters go to sleep at every point of the
// protocol.
TEST(RingBufferTest, PingPongLosesNoWakeUp) {
  constexpr int kRounds = 10000;
  RingBuffer<int> requests(1), replies(1);
  std::thread device([&] {
    while (true) {
      absl::StatusOr<int> v = requests.Pop();
      if (!v.ok()) return;
      Work((*v * 7919) % 8000);
      if (!replies.Push(*v + 1).ok()) return;
    }
  });
  int ok_rounds = 0;
  for (int i = 0; i < kRounds; ++i) {
    Work((i * 104729) % 8000);
    ASSERT_TRUE(requests.Push(i).ok());
    absl::StatusOr<int> r = replies.Pop();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(*r, i + 1);
    ++ok_rounds;
  }
  requests.Close();
  device.join();
  EXPECT_EQ(ok_rounds, kRounds);
}

TEST(RingBufferTest, CloseWakesBlockedConsumerWhichDrains) {
  RingBuffer<int> ring(4);
  std::vector<int> got;
  absl::Status end;
  std::thread consumer([&] {
    while (true) {
      absl::StatusOr<int> v = ring.Pop();
      if (!v.ok()) {
        end = v.status();
        return;
      }
      got.push_back(*v);
    }
  });
  RingBufferTestPeer::AwaitBlockedConsumer(ring);
  ASSERT_TRUE(ring.Push(1).ok());  // Wakes the consumer.
  ASSERT_TRUE(ring.Push(2).ok());
  ring.Close();  // From the producer side, maybe while the consumer sleeps.
  consumer.join();
  EXPECT_EQ(got, (std::vector<int>{1, 2}));
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
}

TEST(RingBufferTest, CloseFromThirdThreadWakesBlockedConsumer) {
  RingBuffer<int> ring(2);
  absl::Status end;
  std::thread consumer([&] { end = ring.Pop().status(); });
  RingBufferTestPeer::AwaitBlockedConsumer(ring);
  std::thread closer([&] { ring.Close(); });
  closer.join();
  consumer.join();
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
}

TEST(RingBufferTest, CloseFromThirdThreadWakesBlockedProducer) {
  RingBuffer<int> ring(1);
  ASSERT_TRUE(ring.Push(0).ok());
  absl::Status pushed;
  std::thread producer([&] { pushed = ring.Push(1); });
  RingBufferTestPeer::AwaitBlockedProducer(ring);
  std::thread closer([&] { ring.Close(); });
  closer.join();
  producer.join();
  EXPECT_TRUE(absl::IsCancelled(pushed)) << pushed;
  EXPECT_EQ(*ring.Pop(), 0);  // Elements pushed before Close are delivered.
  EXPECT_TRUE(absl::IsOutOfRange(ring.Pop().status()));
}

TEST(RingBufferTest, CancelWakesBlockedProducerPromptly) {
  RingBuffer<int> ring(2);
  ASSERT_TRUE(ring.Push(0).ok());
  ASSERT_TRUE(ring.Push(1).ok());
  absl::Status pushed;
  std::chrono::steady_clock::time_point returned;
  std::thread producer([&] {
    pushed = ring.Push(2);
    returned = std::chrono::steady_clock::now();
  });
  RingBufferTestPeer::AwaitBlockedProducer(ring);
  const auto cancelled = std::chrono::steady_clock::now();
  std::thread canceller([&] { ring.Cancel(); });
  canceller.join();
  producer.join();
  EXPECT_TRUE(absl::IsCancelled(pushed)) << pushed;
  // Generous: a loaded 2-core machine under TSAN; a lost wake-up would hang.
  EXPECT_LT(returned - cancelled, std::chrono::seconds(5));
  EXPECT_TRUE(absl::IsCancelled(ring.Pop().status()));  // Full but cancelled.
}

TEST(RingBufferTest, CancelWakesBlockedConsumerWithReason) {
  RingBuffer<int> ring(2);
  absl::Status end;
  std::thread consumer([&] { end = ring.Pop().status(); });
  RingBufferTestPeer::AwaitBlockedConsumer(ring);
  std::thread canceller(
      [&] { ring.Cancel(absl::UnavailableError("IPU 0 reset")); });
  canceller.join();
  consumer.join();
  EXPECT_TRUE(absl::IsUnavailable(end)) << end;
  EXPECT_EQ(end.message(), "IPU 0 reset");
}

// Both ends blocked at once (each on a different ring, as a host thread
// feeding an infeed while a device thread waits on the outfeed): one third
// thread ending both wakes both.
TEST(RingBufferTest, ThirdThreadWakesProducerAndConsumerOfTwoRings) {
  RingBuffer<int> infeed(1), outfeed(1);
  ASSERT_TRUE(infeed.Push(0).ok());
  absl::Status pushed, popped;
  std::thread host([&] { pushed = infeed.Push(1); });
  std::thread device([&] { popped = outfeed.Pop().status(); });
  RingBufferTestPeer::AwaitBlockedProducer(infeed);
  RingBufferTestPeer::AwaitBlockedConsumer(outfeed);
  std::thread stopper([&] {
    infeed.Cancel();
    outfeed.Close();
  });
  stopper.join();
  host.join();
  device.join();
  EXPECT_TRUE(absl::IsCancelled(pushed)) << pushed;
  EXPECT_TRUE(absl::IsOutOfRange(popped)) << popped;
}

// Many short-lived rings, each ended while traffic flows: by the producer
// (Close), by a third thread (Close), or by a third thread (Cancel). Checks
// that nothing hangs, nothing is duplicated or reordered, and that Close
// loses no acknowledged element. The stress target (tagged "stress") builds
// this file with IPUFLOW_RING_BUFFER_STRESS and runs only this test.
TEST(RingBufferTest, ManyOpenCloseCycles) {
#ifdef IPUFLOW_RING_BUFFER_STRESS
  constexpr int kCycles = 6000;
#else
  constexpr int kCycles = 300;
#endif
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    RingBuffer<int> ring(1 + cycle % 5);
    const int mode = cycle % 3;
    const int n = (cycle * 37) % 200;
    int pushed_ok = 0;
    std::thread producer([&] {
      for (int i = 0; i < n || mode != 0; ++i) {
        if (!ring.Push(i).ok()) return;
        ++pushed_ok;
      }
      ring.Close();
    });
    // In modes 1 and 2 the producer never stops by itself; a third thread
    // ends the ring once the consumer has seen n elements.
    Notification seen_n;
    std::thread ender;
    if (mode != 0) {
      ender = std::thread([&] {
        seen_n.WaitForNotification();
        if (mode == 1) ring.Close();
        if (mode == 2) ring.Cancel();
      });
    }
    int popped = 0;
    absl::Status end;
    while (true) {
      if (popped == n) seen_n.Notify();
      absl::StatusOr<int> v = ring.Pop();
      if (!v.ok()) {
        end = v.status();
        break;
      }
      if (*v != popped) {
        ADD_FAILURE() << "cycle " << cycle << ": got " << *v << ", expected "
                      << popped;
        ring.Cancel();
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
}  // namespace ipuflow::feeds
