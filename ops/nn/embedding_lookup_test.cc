#include "ops/nn/embedding_lookup.h"

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/gather.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(EmbeddingLookupTest, RowsByIdForEveryFactor) {
  Scope s = Scope::NewRootScope();
  Output table = Const<float>(s, {0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  Output ids = Const<int32_t>(s, {3, 0, 3, 2, 1, 1}, {2, 3});
  for (int64_t k : {1, 2, 4}) {
    Output y = EmbeddingLookup(s, table, ids, k);
    EXPECT_EQ(y.shape(), TensorShape({2, 3, 2}));
    EXPECT_TRUE(TensorNear(RunOne(s, {}, y),
                           {30, 31, 0, 1, 30, 31, 20, 21, 10, 11, 10, 11},
                           {2, 3, 2}, 0, 0))
        << k;
  }
}

// The gradient scatter-adds (repeated ids accumulate), equal for every
// factor to Gather's gradient, and matches finite differences.
TEST(EmbeddingLookupTest, ScatterAddGradient) {
  Scope s = Scope::NewRootScope();
  Output table = Placeholder(s, DType::kFloat32, {6, 3});
  Output ids = Const<int64_t>(s, {5, 0, 5, 5, 2}, {5});
  const Tensor tv = RandomTensor({6, 3}, -1, 1, 1);
  Output dy = Const(s, RandomTensor({5, 3}, -1, 1, 2));
  std::vector<Output> fetches;
  for (int64_t k : {1, 2, 3, 6}) {
    std::vector<Output> g;
    ASSERT_TRUE(
        AddGradients(s, {EmbeddingLookup(s, table, ids, k)}, {table}, {dy}, &g)
            .ok());
    fetches.push_back(g[0]);
  }
  std::vector<Output> ref;
  ASSERT_TRUE(
      AddGradients(s, {Gather(s, table, ids)}, {table}, {dy}, &ref).ok());
  fetches.push_back(ref[0]);
  auto out = RunGraph(s, {{table, tv}}, fetches);
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t i = 0; i + 1 < fetches.size(); ++i) {
    EXPECT_TRUE(TensorNear((*out)[i], out->back(), 1e-6, 1e-6)) << i;
  }
  // Row 5 gets three rows of dy, rows 1, 3, 4 nothing.
  EXPECT_EQ((*out)[0].data<float>()[3], 0.0f);
  auto err =
      MaxGradientError(s, {table}, {tv}, EmbeddingLookup(s, table, ids, 3));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(EmbeddingLookupTest, SecondOrderGradientIsALookup) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {3, 2});
  Output ids = Const<int32_t>(s, {1, 1, 0}, {3});
  Output table = Const(s, RandomTensor({2, 2}, -1, 1, 3));
  auto err = MaxGradientError(s, {dy}, {RandomTensor({3, 2}, -1, 1, 4)},
                              EmbeddingLookupGrad(s, dy, ids, table, 2));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(EmbeddingLookupTest, Float16AndErrors) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return EmbeddingLookup(s, x[0], x[1], 2);
      },
      {RandomTensor({4, 5}, -3, 3, 1),
       Tensor::FromVector<int32_t>({3, 3, 0, 1, 3}, {5})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_EQ(c->forward_error, 0);  // A lookup is exact.
  EXPECT_LT(c->gradient_error, 2e-3);
  Scope s = Scope::NewRootScope();
  EmbeddingLookup(s.WithOpName("emb"), Const(s, RandomTensor({6, 2}, 0, 1, 1)),
                  Const<int32_t>(s, {0}, {1}), 4);
  EXPECT_NE(s.status().message().find(
                "EmbeddingLookup 'emb': serialization_factor 4 must divide "
                "the table's 6 rows"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  Output bad = EmbeddingLookup(s2.WithOpName("emb"),
                               Const(s2, RandomTensor({6, 2}, 0, 1, 1)),
                               Const<int32_t>(s2, {0, 6}, {2}));
  auto out = RunGraph(s2, {}, {bad});
  EXPECT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "EmbeddingLookup 'emb': id 6 at flat position 1 is out of "
                "range [0, 6)"),
            std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace ipuflow::ops
