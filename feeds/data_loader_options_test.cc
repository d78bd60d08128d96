// DataLoaderOptions in the one validation style (core/option_checks.h,
// issue 22): each field through 0, -1, its largest value and a product that
// overflows is InvalidArgument naming the field and the value, before the
// dataset is read or any memory is reserved. 2^40 buffer slots aborted with
// bad_alloc (Sync mode too), 2^61 divided by zero.
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "feeds/data_loader.h"
#include "feeds/dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Case {
  std::function<void(DataLoaderOptions&)> set;
  std::string expected;
};

TEST(DataLoaderOptionsTest, EveryFieldsWholeRange) {
  const std::vector<Case> cases = {
      {[](DataLoaderOptions& o) { o.batch_size = 0; },
       "batch_size must be >= 1, got 0"},
      {[](DataLoaderOptions& o) { o.batch_size = -1; },
       "batch_size must be >= 1, got -1"},
      {[](DataLoaderOptions& o) { o.batch_size = kMax; },
       "exceeds 2^40 samples per step"},
      {[](DataLoaderOptions& o) { o.device_iterations = -1; },
       "device_iterations must be >= 1, got -1"},
      {[](DataLoaderOptions& o) {
         o.device_iterations = int64_t{1} << 30;
         o.gradient_accumulation = int64_t{1} << 30;
       },
       "exceeds 2^40 samples per step"},
      {[](DataLoaderOptions& o) { o.gradient_accumulation = 0; },
       "gradient_accumulation must be >= 1, got 0"},
      {[](DataLoaderOptions& o) { o.replicas = 0; },
       "replicas must be >= 1, got 0"},
      {[](DataLoaderOptions& o) { o.replicas = kMax; },
       "replicas is 9223372036854775807; it must be between 1 and 1024"},
      {[](DataLoaderOptions& o) { o.input_group_size = kMax; },
       "input_group_size is 9223372036854775807; it must be between 1 and "
       "1024"},
      {[](DataLoaderOptions& o) { o.process_count = kMax; },
       "process_count is 9223372036854775807; it must be between 1 and 65536"},
      {[](DataLoaderOptions& o) { o.process_index = -1; },
       "process_index(-1) must be in [0, process_count(1))"},
      {[](DataLoaderOptions& o) { o.buffer_size = 0; },
       "buffer_size must be >= 1, got 0"},
      {[](DataLoaderOptions& o) { o.buffer_size = int64_t{1} << 40; },
       "buffer_size is 1099511627776; it must be between 1 and 1024"},
      {[](DataLoaderOptions& o) {
         o.buffer_size = int64_t{1} << 61;
         o.mode = DataLoaderMode::kAsync;
       },
       "buffer_size is 2305843009213693952; it must be between 1 and 1024"},
      {[](DataLoaderOptions& o) {
         o.mode = DataLoaderMode::kAsyncRebatched;
         o.batch_size = 4096;
         o.rebatched_worker_size = 1;
         o.buffer_size = 1024;
       },
       "buffer_size x worker batches per combined batch = 1024 x 4096 = "
       "4194304; the limit is 1048576 ring slots"},
      {[](DataLoaderOptions& o) { o.mode = static_cast<DataLoaderMode>(7); },
       "mode is 7, not a DataLoaderMode (0 Sync, 1 Async, 2 AsyncRebatched)"},
      {[](DataLoaderOptions& o) { o.mode = static_cast<DataLoaderMode>(-1); },
       "mode is -1, not a DataLoaderMode"},
      {[](DataLoaderOptions& o) {
         o.input_group_type = static_cast<ReplicaGroupType>(9);
       },
       "input_group_type is 9, not a ReplicaGroupType"},
      {[](DataLoaderOptions& o) {
         o.mode = DataLoaderMode::kAsync;
         o.num_workers = 0;
       },
       "needs num_workers >= 1, got 0"},
      {[](DataLoaderOptions& o) { o.num_workers = kMax; },
       "num_workers is 9223372036854775807; it must be between 1 and 256"},
      {[](DataLoaderOptions& o) { o.rebatched_worker_size = -1; },
       "rebatched_worker_size must be >= 1, or 0"},
  };
  for (const Case& c : cases) {
    DataLoaderOptions o;
    c.set(o);
    auto loader = DataLoader::Create(Range(0, 100), o);
    ASSERT_FALSE(loader.ok()) << c.expected;
    EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(loader.status().message()), HasSubstr(c.expected));
  }
  // The largest accepted buffer still works.
  DataLoaderOptions o;
  o.buffer_size = 1024;
  EXPECT_TRUE(DataLoader::Create(Range(0, 100), o).ok());
}

// Issue 22: an unbounded Repeat of a dataset of unknown cardinality was
// counted by reading it (~1 GB/s into memory until the OOM killer). It is
// refused without reading a single element; Take(n) makes it finite.
TEST(DataLoaderOptionsTest, RepeatForeverOfUnknownCardinalityIsRefusedUnread) {
  auto reads = std::make_shared<std::atomic<int64_t>>(0);
  DatasetPtr unknown =
      FromGenerator(ElementSpec{{DType::kInt64}, {TensorShape()}}, [reads] {
        return [reads, i = int64_t{0}]() mutable -> absl::StatusOr<Element> {
          reads->fetch_add(1);
          if (i == 10) return absl::OutOfRangeError("end");
          return Element{Tensor::Scalar<int64_t>(i++)};
        };
      });
  ASSERT_EQ(unknown->Repeat()->Cardinality(), kUnknownCardinality);
  auto loader = DataLoader::Create(
      unknown->Repeat()->Map(
          [](Element e) -> absl::StatusOr<Element> { return e; }, 1,
          unknown->spec()),
      DataLoaderOptions());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loader.status().message()),
              HasSubstr("repeats forever"));
  EXPECT_EQ(reads->load(), 0);
  // Cut by a Take it is finite (and counted).
  auto taken =
      DataLoader::Create(unknown->Repeat()->Take(25), DataLoaderOptions());
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ((*taken)->len(), 25);
}

}  // namespace
}  // namespace ipuflow::feeds
