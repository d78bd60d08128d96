// Prefetch: values and errors pass through, the producer runs ahead by at
// most buffer_size, and destruction never hangs.
#include <chrono>
#include <memory>
#include <thread>

#include "core/mutex.h"
#include "feeds/dataset.h"
#include "feeds/dataset_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::feeds::testing::Int;
using ::ipuflow::feeds::testing::Ints;
using ::testing::ElementsAre;

const ElementSpec kInt64Scalar{{DType::kInt64}, {TensorShape()}};

// Counts the elements a generator has produced; tests wait on the count.
struct Counter {
  Mutex mu;
  CondVar cv;
  int64_t count ABSL_GUARDED_BY(mu) = 0;

  int64_t Next() {
    MutexLock l(&mu);
    cv.SignalAll();
    return count++;
  }
  // No time limit: a loaded machine may take long, and a producer that
  // never gets there is a hang the test runner's timeout reports.
  bool WaitFor(int64_t n) {
    MutexLock l(&mu);
    cv.Await(&mu, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return count >= n; });
    return true;
  }
  int64_t Get() {
    MutexLock l(&mu);
    return count;
  }
};

DatasetPtr Counting(Counter* counter) {
  return FromGenerator(kInt64Scalar, [counter] {
    return [counter]() -> absl::StatusOr<Element> {
      return Element{Tensor::Scalar<int64_t>(counter->Next())};
    };
  });
}

TEST(PrefetchTest, PassesElementsAndErrorsThroughInOrder) {
  EXPECT_THAT(Ints(Range(0, 10)->Prefetch(3)),
              ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  DatasetPtr ds = Range(0, 3)
                      ->Map([](Element e) -> absl::StatusOr<Element> {
                        if (Int(e) == 1) return absl::DataLossError("bad");
                        return e;
                      })
                      ->Prefetch(2);
  std::unique_ptr<Iterator> it = ds->MakeIterator();
  EXPECT_EQ(Int(*it->GetNext()), 0);
  EXPECT_EQ(it->GetNext().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Int(*it->GetNext()), 2);
  EXPECT_EQ(it->GetNext().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(it->GetNext().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ds->Cardinality(), 3);
  EXPECT_EQ(ds->DebugString(), "Range(0, 3).Map().Prefetch(2)");
}

TEST(PrefetchTest, RunsAheadByAtMostTheBufferSize) {
  Counter counter;
  std::unique_ptr<Iterator> it =
      Counting(&counter)->Prefetch(3)->MakeIterator();
  // Without any GetNext, the producer fills the buffer...
  ASSERT_TRUE(counter.WaitFor(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(counter.Get(), 3);  // ...and stops there.
  EXPECT_EQ(Int(*it->GetNext()), 0);
  ASSERT_TRUE(counter.WaitFor(4));  // One taken, one more produced.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(counter.Get(), 4);
  it.reset();  // The producer is blocked on the full buffer: must not hang.
}

TEST(PrefetchTest, GetNextWaitsForTheProducer) {
  Notification release;
  DatasetPtr ds = FromGenerator(kInt64Scalar, [&release] {
    return [&release]() -> absl::StatusOr<Element> {
      release.WaitForNotification();
      return Element{Tensor::Scalar<int64_t>(5)};
    };
  });
  std::unique_ptr<Iterator> it = ds->Prefetch(1)->MakeIterator();
  std::thread unblock([&release] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.Notify();
  });
  EXPECT_EQ(Int(*it->GetNext()), 5);  // Blocks until the notification.
  unblock.join();
}

TEST(PrefetchTest, DestructionWhileTheProducerIsInsideTheInput) {
  Notification release;
  DatasetPtr ds = FromGenerator(kInt64Scalar, [&release] {
    return [&release]() -> absl::StatusOr<Element> {
      release.WaitForNotification();
      return Element{Tensor::Scalar<int64_t>(1)};
    };
  });
  std::unique_ptr<Iterator> it = ds->Prefetch(2)->MakeIterator();
  std::thread unblock([&release] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.Notify();
  });
  it.reset();  // Returns once the input call does.
  unblock.join();
}

TEST(PrefetchTest, ImmediateDestructionAndPipelineTeardown) {
  for (int i = 0; i < 20; ++i) Range(0, 100)->Prefetch(2)->MakeIterator();
  // Infinite parallel pipeline, cut by Take: Take drops the Prefetch
  // iterator (producer blocked in a Map GetNext or on a full buffer), which
  // drops the Map iterator (workers blocked on a full buffer).
  DatasetPtr ds = Range(0, 5)
                      ->Repeat()
                      ->Map([](Element e) { return e; }, 3)
                      ->Batch(2)
                      ->Prefetch(4)
                      ->Take(3);
  EXPECT_THAT(Ints(ds), ElementsAre(0, 1, 2, 3, 4, 0));
}

TEST(PrefetchTest, ZeroBufferIsInvalid) {
  EXPECT_EQ(Range(0, 1)->Prefetch(0)->status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::feeds
