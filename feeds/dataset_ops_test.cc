// Batch, Repeat, Take, Skip, Shard.
#include <algorithm>
#include <memory>

#include "feeds/dataset.h"
#include "feeds/dataset_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::feeds::testing::Ints;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Elements {i, [i, 10 i]} for i in [0, n).
DatasetPtr Pairs(int64_t n) {
  std::vector<int32_t> a, b;
  for (int32_t i = 0; i < n; ++i) {
    a.push_back(i);
    b.push_back(i);
    b.push_back(10 * i);
  }
  return FromTensorSlices(
      {Tensor::FromVector<int32_t>(a), Tensor::FromVector<int32_t>(b, {n, 2})});
}

TEST(BatchTest, StacksAlongANewDimensionAndKeepsTheRemainder) {
  DatasetPtr ds = Pairs(5)->Batch(2);
  EXPECT_EQ(ds->spec().DebugString(), "(int32[?], int32[?,2])");
  EXPECT_EQ(ds->Cardinality(), 3);
  absl::StatusOr<std::vector<Element>> all = Collect(ds);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0][1].shape(), TensorShape({2, 2}));
  EXPECT_THAT((*all)[1][0].ToVector<int32_t>(), ElementsAre(2, 3));
  EXPECT_THAT((*all)[1][1].ToVector<int32_t>(), ElementsAre(2, 20, 3, 30));
  EXPECT_EQ((*all)[2][1].shape(), TensorShape({1, 2}));
  EXPECT_THAT((*all)[2][1].ToVector<int32_t>(), ElementsAre(4, 40));
}

TEST(BatchTest, DropRemainderGivesAStaticBatchDimension) {
  DatasetPtr ds = Pairs(5)->Batch(2, /*drop_remainder=*/true);
  EXPECT_EQ(ds->spec().DebugString(), "(int32[2], int32[2,2])");
  EXPECT_EQ(ds->Cardinality(), 2);
  EXPECT_THAT(Ints(ds), ElementsAre(0, 1, 2, 3));
  EXPECT_TRUE(Ints(Pairs(1)->Batch(2, true)).empty());
}

TEST(BatchTest, UnequalShapesAreAnErrorNamingThem) {
  DatasetPtr ds = Range(1, 4)
                      ->Map([](Element e) -> absl::StatusOr<Element> {
                        const int64_t n = e[0].scalar<int64_t>();
                        return Element{Tensor(DType::kFloat32, {n})};
                      })
                      ->Batch(3);
  absl::StatusOr<Element> e = ds->MakeIterator()->GetNext();
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(),
              HasSubstr("component 0 of element 1 of the batch is float32[2] "
                        "but element 0's is float32[1]"));
  EXPECT_THAT(Range(0, 3)->Batch(0)->status().message(),
              HasSubstr("Range(0, 3).Batch(0): batch_size must be >= 1"));
}

TEST(RepeatTest, RepeatsCountTimesOrForever) {
  EXPECT_THAT(Ints(Range(0, 3)->Repeat(2)), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_TRUE(Ints(Range(0, 3)->Repeat(0)).empty());
  EXPECT_THAT(Ints(Range(0, 2)->Repeat(), 5), ElementsAre(0, 1, 0, 1, 0));
  EXPECT_EQ(Range(0, 3)->Repeat(2)->Cardinality(), 6);
  EXPECT_EQ(Range(0, 3)->Repeat()->Cardinality(), kInfiniteCardinality);
  EXPECT_EQ(Range(0, 3)->Repeat(-2)->status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RepeatTest, RepeatingAnEmptyDatasetForeverEnds) {
  DatasetPtr ds = Range(0, 0)->Repeat();
  EXPECT_EQ(ds->Cardinality(), 0);
  EXPECT_TRUE(Ints(ds).empty());
  // Also when the emptiness is only discovered while iterating.
  DatasetPtr nothing =
      FromGenerator(ElementSpec{{DType::kInt64}, {TensorShape()}}, [] {
        return []() -> absl::StatusOr<Element> {
          return absl::OutOfRangeError("empty");
        };
      });
  EXPECT_EQ(nothing->Repeat()->Cardinality(), kUnknownCardinality);
  EXPECT_TRUE(Ints(nothing->Repeat(), 10).empty());
}

TEST(TakeSkipTest, TakeAndSkipCountElements) {
  EXPECT_THAT(Ints(Range(0, 5)->Take(3)), ElementsAre(0, 1, 2));
  EXPECT_THAT(Ints(Range(0, 5)->Take(9)), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(Ints(Range(0, 5)->Take(-1)), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_TRUE(Ints(Range(0, 5)->Take(0)).empty());
  EXPECT_THAT(Ints(Range(0, 5)->Skip(3)), ElementsAre(3, 4));
  EXPECT_TRUE(Ints(Range(0, 5)->Skip(-1)).empty());
  EXPECT_THAT(Ints(Range(0, 5)->Skip(1)->Take(2)), ElementsAre(1, 2));
  EXPECT_THAT(Ints(Range(0, 2)->Repeat()->Take(5)), ElementsAre(0, 1, 0, 1, 0));
  EXPECT_EQ(Range(0, 5)->Take(3)->Cardinality(), 3);
  EXPECT_EQ(Range(0, 5)->Repeat()->Take(3)->Cardinality(), 3);
  EXPECT_EQ(Range(0, 5)->Skip(3)->Cardinality(), 2);
  EXPECT_EQ(Range(0, 5)->Skip(9)->Cardinality(), 0);
  EXPECT_THAT(Range(0, 5)->Repeat()->Skip(-1)->status().message(),
              HasSubstr("never end"));
}

TEST(ShardTest, KeepsEveryNumShardsThElementFromIndex) {
  EXPECT_THAT(Ints(Range(0, 7)->Shard(3, 0)), ElementsAre(0, 3, 6));
  EXPECT_THAT(Ints(Range(0, 7)->Shard(3, 1)), ElementsAre(1, 4));
  EXPECT_THAT(Ints(Range(0, 7)->Shard(3, 2)), ElementsAre(2, 5));
  EXPECT_EQ(Range(0, 7)->Shard(3, 0)->Cardinality(), 3);
  EXPECT_EQ(Range(0, 7)->Shard(3, 2)->Cardinality(), 2);
  EXPECT_THAT(Ints(Range(0, 3)->Shard(1, 0)), ElementsAre(0, 1, 2));
}

TEST(ShardTest, IndexOutOfRangeIsInvalidArgument) {
  DatasetPtr ds = Range(0, 6)->Shard(2, 2);
  EXPECT_EQ(ds->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds->status().message(),
              HasSubstr("Range(0, 6).Shard(2, 2): index 2 is out of range "
                        "[0, 2)"));
  EXPECT_EQ(Range(0, 6)->Shard(2, -1)->status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(0, 6)->Shard(0, 0)->status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardTest, ShardThenRepeatDiffersFromRepeatThenShard) {
  // Each pass of Repeat re-shards the same elements.
  EXPECT_THAT(Ints(Range(0, 6)->Shard(2, 1)->Repeat(2)),
              ElementsAre(1, 3, 5, 1, 3, 5));
  // Sharding the repeated stream 0 1 2 3 4 0 1 2 3 4: positions 1, 3, 5, 7, 9.
  EXPECT_THAT(Ints(Range(0, 5)->Repeat(2)->Shard(2, 1)),
              ElementsAre(1, 3, 0, 2, 4));
  EXPECT_EQ(Range(0, 5)->Repeat(2)->Shard(2, 1)->Cardinality(), 5);
  // Shards of one dataset partition it.
  std::vector<int64_t> all;
  for (int i = 0; i < 3; ++i) {
    for (int64_t v : Ints(Range(0, 10)->Repeat(2)->Shard(3, i))) {
      all.push_back(v);
    }
  }
  std::sort(all.begin(), all.end());
  EXPECT_THAT(all, ElementsAre(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7,
                               8, 8, 9, 9));
}

TEST(ShardTest, InputErrorsKeepTheirPosition) {
  // Element 2 fails; shard 0 gets positions 0, 2, 4 and so sees the error.
  DatasetPtr failing =
      Range(0, 5)->Map([](Element e) -> absl::StatusOr<Element> {
        if (e[0].scalar<int64_t>() == 2)
          return absl::DataLossError("bad record");
        return e;
      });
  std::unique_ptr<Iterator> it = failing->Shard(2, 0)->MakeIterator();
  EXPECT_EQ(testing::Int(*it->GetNext()), 0);
  EXPECT_EQ(it->GetNext().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(testing::Int(*it->GetNext()), 4);
  EXPECT_THAT(Ints(failing->Shard(2, 1)), ElementsAre(1, 3));
  EXPECT_THAT(Ints(failing->Skip(3)), ElementsAre(3, 4));
}

}  // namespace
}  // namespace ipuflow::feeds
