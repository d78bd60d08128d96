// Map: values, order under parallelism, errors in order, shutdown.
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
using ::testing::HasSubstr;

using Clock = std::chrono::steady_clock;

Element Scalar(int64_t v) { return {Tensor::Scalar<int64_t>(v)}; }

// x -> x * x, after a delay that varies with x (0-4 ms), counting how many
// calls run at once.
struct SlowSquare {
  std::shared_ptr<std::atomic<int>> running =
      std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> peak =
      std::make_shared<std::atomic<int>>(0);
  absl::StatusOr<Element> operator()(Element e) const {
    const int64_t x = Int(e);
    const int now = ++*running;
    int p = peak->load();
    while (now > p && !peak->compare_exchange_weak(p, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds((x * 7) % 5));
    --*running;
    return Scalar(x * x);
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
  SlowSquare fn;
  DatasetPtr ds = Range(0, 40)->Map(fn, /*num_parallel_calls=*/4);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 40; ++i) expected.push_back(i * i);
  EXPECT_EQ(Ints(ds), expected);
  EXPECT_GT(fn.peak->load(), 1);  // Really ran in parallel...
  EXPECT_LE(fn.peak->load(), 4);  // ...on at most 4 threads.
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
    EXPECT_THAT(seen,
                ElementsAre("0", "1", "2", "bad 3", "4", "5", "bad 6", "7"))
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
  // 200 elements of 20 ms on 2 threads would take 2 s.
  auto slow = [](Element e) -> absl::StatusOr<Element> {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return e;
  };
  std::unique_ptr<Iterator> it = Range(0, 200)->Map(slow, 2)->MakeIterator();
  EXPECT_EQ(Int(*it->GetNext()), 0);
  const Clock::time_point start = Clock::now();
  it.reset();  // Waits for the calls in flight only.
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
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
