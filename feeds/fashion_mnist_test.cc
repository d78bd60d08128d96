#include "feeds/fashion_mnist.h"

#include <cstdlib>
#include <set>

#include "core/tensor_eigen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::testing::HasSubstr;

// The real test split from the dataset-fashion-mnist package.
TEST(FashionMnistTest, LoadsTheTestSplit) {
  absl::StatusOr<FashionMnistData> data = LoadFashionMnist(Split::kTest);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->images.dtype(), DType::kFloat32);
  EXPECT_EQ(data->images.shape(), TensorShape({10000, 28, 28, 1}));
  EXPECT_EQ(data->labels.dtype(), DType::kInt32);
  EXPECT_EQ(data->labels.shape(), TensorShape({10000}));

  const auto pixels = data->images.flat<float>();
  EXPECT_EQ(pixels.minCoeff(), 0.0f);
  EXPECT_EQ(pixels.maxCoeff(), 1.0f);
  const double mean = pixels.mean();
  EXPECT_GT(mean, 0.2);  // Fashion-MNIST's mean pixel is about 0.286.
  EXPECT_LT(mean, 0.4);

  std::vector<int> per_class(kFashionMnistClasses, 0);
  for (int32_t l : data->labels.span<int32_t>()) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, kFashionMnistClasses);
    ++per_class[l];
  }
  for (int c = 0; c < kFashionMnistClasses; ++c) {
    EXPECT_EQ(per_class[c], 1000) << kFashionMnistClassNames[c];
  }
}

TEST(FashionMnistTest, LimitAndNormalise) {
  FashionMnistOptions opts;
  opts.limit = 100;
  absl::StatusOr<FashionMnistData> plain =
      LoadFashionMnist(Split::kTrain, opts);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->images.shape(), TensorShape({100, 28, 28, 1}));
  EXPECT_EQ(plain->labels.shape(), TensorShape({100}));

  opts.normalize = true;
  absl::StatusOr<FashionMnistData> norm = LoadFashionMnist(Split::kTrain, opts);
  ASSERT_TRUE(norm.ok()) << norm.status();
  // (x - 0.5) / 0.5 maps [0, 1] to [-1, 1].
  const auto x = plain->images.flat<float>();
  const auto y = norm->images.flat<float>();
  EXPECT_TRUE(y.isApprox(x * 2.0f - 1.0f));
  EXPECT_EQ(y.minCoeff(), -1.0f);
  EXPECT_EQ(y.maxCoeff(), 1.0f);
  EXPECT_EQ(norm->labels.ToVector<int32_t>(),
            plain->labels.ToVector<int32_t>());
}

TEST(FashionMnistTest, AsADataset) {
  FashionMnistOptions opts;
  opts.limit = 10;
  DatasetPtr ds = FashionMnist(Split::kTest, opts);
  ASSERT_TRUE(ds->ok()) << ds->status();
  EXPECT_EQ(ds->Cardinality(), 10);
  EXPECT_EQ(ds->spec().DebugString(), "(float32[28,28,1], int32[])");
  absl::StatusOr<std::vector<Element>> all = Collect(ds->Batch(4));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0][0].shape(), TensorShape({4, 28, 28, 1}));
  EXPECT_EQ((*all)[2][1].shape(), TensorShape({2}));
}

TEST(FashionMnistTest, ErrorsNameTheFile) {
  FashionMnistOptions opts;
  opts.dir = std::string(std::getenv("TEST_TMPDIR")) + "/nowhere";
  DatasetPtr ds = FashionMnist(Split::kTrain, opts);
  EXPECT_EQ(ds->status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds->status().message(),
              HasSubstr("nowhere/train-images-idx3-ubyte.gz"));
  opts = FashionMnistOptions();
  opts.normalize = true;
  opts.stddev = 0;
  EXPECT_EQ(LoadFashionMnist(Split::kTest, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  opts = FashionMnistOptions();
  opts.limit = -5;
  EXPECT_EQ(LoadFashionMnist(Split::kTest, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::feeds
