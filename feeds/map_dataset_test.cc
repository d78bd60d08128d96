// Map: values, order under parallelism, errors in order, shutdown.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
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
using ::testing::EndsWith;
using ::testing::HasSubstr;

Element Scalar(int64_t v) { return {Tensor::Scalar<int64_t>(v)}; }

// x -> x * x, counting how many calls run at once. The calls for the
// first `barrier` elements wait until that many calls are inside at once:
// parallelism proven by a count, whatever the host's load (a sequential Map
// would never pass it: the test would time out).
struct BarrierSquare {
  struct State {
    Mutex mu;
    CondVar cv;
    int running ABSL_GUARDED_BY(mu) = 0;
    int peak ABSL_GUARDED_BY(mu) = 0;
    bool released ABSL_GUARDED_BY(mu) = false;
  };
  int barrier = 0;
  std::shared_ptr<State> st = std::make_shared<State>();

  absl::StatusOr<Element> operator()(Element e) const {
    const int64_t x = Int(e);
    {
      MutexLock l(&st->mu);
      st->peak = std::max(st->peak, ++st->running);
      if (st->running >= barrier) st->released = true;
      st->cv.SignalAll();
      if (x < barrier) {
        st->cv.Await(&st->mu, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return st->released;
        });
      }
    }
    // Elements 0-3 leave the barrier together and finish in any order.
    MutexLock l(&st->mu);
    --st->running;
    return Scalar(x * x);
  }
  int peak() const {
    MutexLock l(&st->mu);
    return st->peak;
  }
};

TEST(MapTest, AppliesTheFunctionInTheCaller) {
  DatasetPtr ds = Range(0, 4)->Map([](Element e) -> absl::StatusOr<Element> {
    return Scalar(2 * Int(e) + 1);
  });
  EXPECT_THAT(Ints(ds), ElementsAre(1, 3, 5, 7));
  EXPECT_EQ(ds->Cardinality(), 4);
  EXPECT_FALSE(ds->spec().known());  // No output spec declared.
  EXPECT_EQ(ds->DebugString(), "Range(0, 4).Map()");
}

TEST(MapTest, ParallelCallsKeepTheInputOrder) {
  BarrierSquare fn;
  fn.barrier = 4;  // Elements 0-3 each wait for 4 calls at once.
  DatasetPtr ds = Range(0, 40)->Map(fn, /*num_parallel_calls=*/4);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 40; ++i) expected.push_back(i * i);
  EXPECT_EQ(Ints(ds), expected);
  EXPECT_EQ(fn.peak(), 4);        // Ran 4 at once, never more.
  EXPECT_EQ(Ints(ds), expected);  // A second pass, a new worker pool.
}

TEST(MapTest, ErrorsComeBackInTheirElementsPlace) {
  auto fn = [](Element e) -> absl::StatusOr<Element> {
    const int64_t x = Int(e);
    std::this_thread::sleep_for(std::chrono::milliseconds((5 - x % 5)));
    if (x == 3 || x == 6) return absl::DataLossError(absl::StrCat("bad ", x));
    return Scalar(x);
  };
  for (int parallel : {1, 4}) {
    std::unique_ptr<Iterator> it =
        Range(0, 8)->Map(fn, parallel)->MakeIterator();
    std::vector<std::string> seen;
    for (absl::StatusOr<Element> e = it->GetNext();
         e.status().code() != absl::StatusCode::kOutOfRange;
         e = it->GetNext()) {
      seen.push_back(e.ok() ? absl::StrCat(Int(*e))
                            : std::string(e.status().message()));
    }
    // The message may name the Map and the element before fn's own text.
    EXPECT_THAT(seen, ElementsAre("0", "1", "2", EndsWith("bad 3"), "4", "5",
                                  EndsWith("bad 6"), "7"))
        << "num_parallel_calls=" << parallel;
  }
}

TEST(MapTest, OutOfRangeFromTheFunctionDoesNotEndTheDataset) {
  DatasetPtr ds = Range(0, 2)->Map([](Element) -> absl::StatusOr<Element> {
    return absl::OutOfRangeError("file truncated");
  });
  absl::StatusOr<Element> e = ds->MakeIterator()->GetNext();
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("file truncated"));
}

TEST(MapTest, DeclaredOutputSpecIsCheckedPerElement) {
  ElementSpec spec{{DType::kFloat32}, {TensorShape({2})}};
  DatasetPtr ds = Range(1, 4)->Map(
      [](Element e) -> absl::StatusOr<Element> {
        return Element{Tensor(DType::kFloat32, {Int(e)})};
      },
      2, spec);
  EXPECT_EQ(ds->spec().DebugString(), "(float32[2])");
  std::unique_ptr<Iterator> it = ds->MakeIterator();
  absl::StatusOr<Element> e = it->GetNext();
  EXPECT_THAT(e.status().message(),
              HasSubstr("element 0 component 0 is float32[1] but the spec "
                        "says float32[2]"));
  EXPECT_TRUE(it->GetNext().ok());
  EXPECT_EQ(Range(0, 1)->Map(nullptr)->status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(0, 1)->Map([](Element e) { return e; }, 0)->status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MapTest, DestroyingAnIteratorWithWorkersBlockedOnAFullBufferReturns) {
  // An infinite input: the workers fill their slots and wait for room.
  DatasetPtr ds = Range(0, 3)->Repeat()->Map([](Element e) { return e; }, 4);
  std::unique_ptr<Iterator> it = ds->MakeIterator();
  EXPECT_EQ(Int(*it->GetNext()), 0);
  std::this_thread::sleep_for(
      std::chrono::milliseconds(10));  // Let them block.
  it.reset();                          // Must not hang.
  // Take() drops its input iterator mid-stream the same way.
  EXPECT_THAT(Ints(ds->Take(4)), ElementsAre(0, 1, 2, 0));
}

TEST(MapTest, DestructionDoesNotWaitForTheRestOfTheWork) {
  // Counted, not timed: with 2 workers and 2 x 2 slots, at most 1 + 4 calls
  // can start after one GetNext; a destructor that drained the input would
  // make all 200. The 2 workers are inside calls when it starts.
  auto started = std::make_shared<std::atomic<int>>(0);
  auto inside = std::make_shared<std::atomic<int>>(0);
  auto release = std::make_shared<Notification>();
  auto fn = [started, inside, release](Element e) -> absl::StatusOr<Element> {
    ++*started;
    if (Int(e) > 0) {
      ++*inside;
      release->WaitForNotification();
    }
    return e;
  };
  std::unique_ptr<Iterator> it = Range(0, 200)->Map(fn, 2)->MakeIterator();
  EXPECT_EQ(Int(*it->GetNext()), 0);
  while (inside->load() < 2) std::this_thread::yield();
  std::thread releaser([release] { release->Notify(); });
  it.reset();  // Waits for the calls in flight only.
  releaser.join();
  EXPECT_GE(started->load(), 3);
  EXPECT_LE(started->load(), 5);
}

TEST(MapTest, DestructionWhileTheInputIsBlocked) {
  // The puller waits inside the input's GetNext; the others wait for it.
  Notification release;
  DatasetPtr ds =
      FromGenerator(ElementSpec{{DType::kInt64}, {TensorShape()}}, [&release] {
        return [&release]() -> absl::StatusOr<Element> {
          release.WaitForNotification();
          return Scalar(1);
        };
      });
  std::unique_ptr<Iterator> it =
      ds->Map([](Element e) { return e; }, 3)->MakeIterator();
  std::thread unblock([&release] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.Notify();
  });
  it.reset();  // Returns once the blocked input call does.
  unblock.join();
}

}  // namespace
}  // namespace ipuflow::feeds
