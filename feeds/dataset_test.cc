// Sources, ElementSpec, error propagation through chains, Collect; sizes
// bounded with an error naming the limit (issue 9).
#include "feeds/dataset.h"

#include <limits>
#include <memory>

#include "feeds/dataset_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::feeds::testing::Ints;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DatasetTest, FromTensorsYieldsOneElementThenStaysAtTheEnd) {
  DatasetPtr ds = FromTensors(
      {Tensor::FromVector<float>({1, 2}), Tensor::Scalar<int32_t>(7)});
  ASSERT_TRUE(ds->ok()) << ds->status();
  EXPECT_EQ(ds->spec().DebugString(), "(float32[2], int32[])");
  EXPECT_EQ(ds->Cardinality(), 1);
  std::unique_ptr<Iterator> it = ds->MakeIterator();
  absl::StatusOr<Element> e = it->GetNext();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->at(0).ToVector<float>(), ElementsAre(1, 2));
  EXPECT_EQ(e->at(1).scalar<int32_t>(), 7);
  EXPECT_EQ(it->GetNext().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(it->GetNext().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(DatasetTest, FromTensorSlicesSlicesDimensionZeroWithoutCopying) {
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor y = Tensor::FromVector<int32_t>({7, 8, 9});
  DatasetPtr ds = FromTensorSlices({x, y});
  ASSERT_TRUE(ds->ok()) << ds->status();
  EXPECT_EQ(ds->spec().DebugString(), "(float32[2], int32[])");
  EXPECT_EQ(ds->Cardinality(), 3);
  absl::StatusOr<std::vector<Element>> all = Collect(ds);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_THAT((*all)[1][0].ToVector<float>(), ElementsAre(3, 4));
  EXPECT_EQ((*all)[1][0].shape(), TensorShape({2}));
  EXPECT_EQ((*all)[2][1].scalar<int32_t>(), 9);
  EXPECT_TRUE((*all)[2][0].SharesBufferWith(x));
}

TEST(DatasetTest, FromTensorSlicesSizeMismatchNamesTheShapes) {
  DatasetPtr ds = FromTensorSlices(
      {Tensor(DType::kFloat32, {3, 2}), Tensor(DType::kInt32, {4})});
  EXPECT_EQ(ds->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds->status().message(), HasSubstr("float32[3,2], int32[4]"));
  // The error survives the chain and comes out of its iterators.
  DatasetPtr chain =
      ds->Map([](Element e) { return e; }, 2)->Batch(2)->Repeat();
  EXPECT_EQ(chain->status(), ds->status());
  EXPECT_EQ(chain->MakeIterator()->GetNext().status(), ds->status());
  EXPECT_EQ(Collect(chain).status(), ds->status());
}

TEST(DatasetTest, SourcesRejectEmptyAndScalarInputs) {
  EXPECT_THAT(FromTensors({})->status().message(),
              HasSubstr("at least one tensor"));
  EXPECT_THAT(FromTensorSlices({Tensor::Scalar<float>(1)})->status().message(),
              HasSubstr("component 0 is a scalar"));
  EXPECT_EQ(FromTensors({Tensor()})->status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DatasetTest, RangeCountsUpAndDown) {
  EXPECT_THAT(Ints(Range(2, 6)), ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(Ints(Range(0, 7, 3)), ElementsAre(0, 3, 6));
  EXPECT_THAT(Ints(Range(5, 0, -2)), ElementsAre(5, 3, 1));
  EXPECT_TRUE(Ints(Range(3, 3)).empty());
  EXPECT_EQ(Range(0, 7, 3)->Cardinality(), 3);
  EXPECT_EQ(Range(5, 0, -2)->Cardinality(), 3);
  EXPECT_EQ(Range(5, 0)->Cardinality(), 0);
  EXPECT_EQ(Range(0, 1, 0)->status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(0, 6)->spec().DebugString(), "(int64[])");
}

TEST(DatasetTest, RangeCountsToTheInt64Bounds) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Range(0, kMax)->Cardinality(), kMax);
  EXPECT_THAT(Ints(Range(kMax - 2, kMax)), ElementsAre(kMax - 2, kMax - 1));
  EXPECT_THAT(Ints(Range(kMin + 1, kMin, -1)), ElementsAre(kMin + 1));
  // A step of 2^62 from INT64_MIN: 4 elements, the last near INT64_MAX.
  const int64_t step = int64_t{1} << 62;
  EXPECT_THAT(Ints(Range(kMin, kMax, step)),
              ElementsAre(kMin, kMin + step, 0, step));
  EXPECT_EQ(Range(kMax, kMin, kMin)->Cardinality(), 2);
  // More elements than an int64 counts.
  EXPECT_EQ(Range(kMin, kMax)->status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(kMax, kMin, -1)->status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DatasetTest, FromGeneratorRestartsEachPassAndChecksTheSpec) {
  auto passes = std::make_shared<int>(0);
  DatasetPtr ds =
      FromGenerator(ElementSpec{{DType::kInt64}, {TensorShape()}}, [passes] {
        ++*passes;
        auto i = std::make_shared<int64_t>(0);
        return [i]() -> absl::StatusOr<Element> {
          if (*i == 3) return absl::OutOfRangeError("done");
          return Element{Tensor::Scalar<int64_t>(10 * (*i)++)};
        };
      });
  ASSERT_TRUE(ds->ok()) << ds->status();
  EXPECT_EQ(ds->Cardinality(), kUnknownCardinality);
  EXPECT_THAT(Ints(ds->Repeat(2)), ElementsAre(0, 10, 20, 0, 10, 20));
  EXPECT_EQ(*passes, 2);

  DatasetPtr bad =
      FromGenerator(ElementSpec{{DType::kInt64}, {TensorShape()}}, [] {
        return []() -> absl::StatusOr<Element> {
          return Element{Tensor::FromVector<int64_t>({1, 2})};
        };
      });
  absl::StatusOr<Element> e = bad->MakeIterator()->GetNext();
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(),
              HasSubstr("element 0 component 0 is int64[2] but the spec says "
                        "int64[]"));
  EXPECT_EQ(FromGenerator(ElementSpec(), nullptr)->status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DatasetTest, ElementSpecCheckAcceptsUnknownDims) {
  ElementSpec spec{{DType::kFloat32}, {TensorShape({kUnknownDim, 2})}};
  EXPECT_EQ(spec.DebugString(), "(float32[?,2])");
  EXPECT_TRUE(spec.Check({Tensor(DType::kFloat32, {5, 2})}, "t", 0).ok());
  EXPECT_THAT(spec.Check({Tensor(DType::kFloat32, {5, 3})}, "t", 4).message(),
              HasSubstr("t: element 4 component 0 is float32[5,3]"));
  EXPECT_THAT(spec.Check({}, "t", 1).message(), HasSubstr("0 components"));
  EXPECT_TRUE(ElementSpec().Check({}, "t", 0).ok());
  EXPECT_EQ(ElementSpec().DebugString(), "(unknown)");
}

TEST(DatasetTest, CollectNeedsALimitForInfiniteDatasets) {
  DatasetPtr forever = Range(0, 2)->Repeat();
  EXPECT_EQ(forever->Cardinality(), kInfiniteCardinality);
  EXPECT_EQ(Collect(forever).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Ints(forever, 5), ElementsAre(0, 1, 0, 1, 0));
}

TEST(DatasetTest, DebugStringShowsTheChain) {
  EXPECT_EQ(Range(0, 6)->Shard(2, 1)->Repeat(2)->Batch(4, true)->DebugString(),
            "Range(0, 6).Shard(2, 1).Repeat(2).Batch(4, drop_remainder)");
}

TEST(DatasetTest, IteratorKeepsItsDatasetAlive) {
  std::unique_ptr<Iterator> it;
  {
    DatasetPtr ds = Range(0, 3)->Map([](Element e) { return e; }, 2);
    it = ds->MakeIterator();
  }
  absl::StatusOr<Element> e = it->GetNext();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(testing::Int(*e), 0);
}

// Batch(1e12) would grow until the process is killed: refused when made,
// naming the limit. The same for shuffle and prefetch buffers, and for a
// size that fits the element count but not the machine's memory.
TEST(DatasetTest, BufferSizesAreBoundedWithAnErrorNamingTheLimit) {
  DatasetPtr batched = Range(0, 10)->Repeat()->Batch(1000000000000);
  EXPECT_EQ(batched->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(batched->status().message()),
              ::testing::AllOf(HasSubstr("Batch(1000000000000)"),
                               HasSubstr("limit of 16777216 elements")));
  EXPECT_EQ(Range(0, 10)->Shuffle(int64_t{1} << 40)->status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(0, 10)->Prefetch(int64_t{1} << 40)->status().code(),
            absl::StatusCode::kInvalidArgument);
  // 2^24 elements of 2^30 floats: 2^56 bytes.
  DatasetPtr huge =
      FromTensors({Tensor::Scalar(1.0f)})
          ->Map([](Element e) -> absl::StatusOr<Element> { return e; }, 1,
                ElementSpec{{DType::kFloat32},
                            {TensorShape({1 << 15, 1 << 15})}});
  DatasetPtr too_big = huge->Batch(int64_t{1} << 24);
  EXPECT_EQ(too_big->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big->status().message()),
              HasSubstr("exceed the machine's physical memory"));
  // Ordinary sizes are untouched.
  absl::StatusOr<std::vector<Element>> ok = Collect(Range(0, 10)->Batch(4));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 3u);
}

// An error inside a Map function comes back in its element's place with
// its code, naming the Map and the element.
TEST(DatasetTest, MapFunctionErrorsNameTheMapAndTheElement) {
  DatasetPtr ds = Range(0, 5)->Map([](Element e) -> absl::StatusOr<Element> {
    if (e[0].scalar<int64_t>() == 2) {
      return absl::InvalidArgumentError(
          "MatMul 'dense/MatMul': inner dimensions differ");
    }
    return e;
  });
  std::unique_ptr<Iterator> it = ds->MakeIterator();
  ASSERT_TRUE(it->GetNext().ok());
  ASSERT_TRUE(it->GetNext().ok());
  absl::StatusOr<Element> bad = it->GetNext();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(bad.status().message()),
      ::testing::AllOf(HasSubstr("Range(0, 5).Map"), HasSubstr("element 2"),
                       HasSubstr("MatMul 'dense/MatMul'")));
  EXPECT_TRUE(it->GetNext().ok());  // The next element is still there.
}

}  // namespace
}  // namespace ipuflow::feeds
