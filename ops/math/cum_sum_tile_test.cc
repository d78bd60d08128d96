// CumSum and Tile: hand-checked values, errors, finite-difference gradients,
// float16 against float32.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/gradients.h"
#include "core/graph_def.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/cum_sum.h"
#include "ops/math/tile.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

std::string ErrorOf(const Scope& s) {
  return std::string(s.status().message());
}

TEST(CumSumTest, ModesAsTensorFlow) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4}, {4});
  // tf.math.cumsum([1, 2, 3, 4], exclusive, reverse).
  EXPECT_TRUE(TensorNear(RunOne(s, {}, CumSum(s, x, 0)), {1, 3, 6, 10}, {4}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, CumSum(s, x, 0, true)), {0, 1, 3, 6}, {4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, CumSum(s, x, 0, false, true)),
                         {10, 9, 7, 4}, {4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, CumSum(s, x, -1, true, true)),
                         {9, 7, 4, 0}, {4}));
  Output m = Const<int32_t>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor rows = RunOne(s, {}, CumSum(s, m, 0));
  const int32_t want[] = {1, 2, 3, 5, 7, 9};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rows.data<int32_t>()[i], want[i]);
  // Integers wrap (two's complement), no undefined overflow.
  Output big = Const<int32_t>(s, {2147483647, 1}, {2});
  EXPECT_EQ(RunOne(s, {}, CumSum(s, big, 0)).data<int32_t>()[1],
            -2147483647 - 1);
}

TEST(CumSumTest, LongAxisKeepsFloat32Accuracy) {
  // 1e6 values of 0.1f: a float32 running sum drifts by ~1e-3 relative;
  // float64 accumulation rounds each output once.
  const int64_t n = 1000000;
  Scope s = Scope::NewRootScope();
  Output x =
      Const(s, Tensor::FromVector<float>(std::vector<float>(n, 0.1f), {n}));
  Tensor y = RunOne(s, {}, CumSum(s, x, 0));
  const double exact = static_cast<double>(0.1f) * n;
  EXPECT_EQ(y.data<float>()[n - 1], static_cast<float>(exact));
}

// Issue 30: axis 0 of a scalar passed NormalizeAxis and the kernel read
// dim(0) of an empty shape (SIGILL with Debian's hardened Abseil, a heap
// overflow without). Refused when built, for every dtype, and on import.
TEST(CumSumTest, ScalarInputIsRefused) {
  for (DType dtype : {DType::kFloat32, DType::kInt32, DType::kFloat16}) {
    for (int64_t axis : {0, -1}) {
      Scope s = Scope::NewRootScope();
      CumSum(s.WithOpName("c"), Const(s, 2.0, dtype), axis);
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
          << s.status();
      EXPECT_NE(ErrorOf(s).find("CumSum 'c'"), std::string::npos) << ErrorOf(s);
      EXPECT_NE(ErrorOf(s).find(
                    absl::StrCat("axis ", axis, " is out of range for rank 0")),
                std::string::npos)
          << ErrorOf(s);
    }
  }
  // A GraphDef whose constant is a scalar (edited from a [1] one).
  Scope s = Scope::NewRootScope();
  CumSum(s.WithOpName("c"), Const<float>(s.WithOpName("x"), {1.5f}, {1}), 0);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<GraphDef> def = ToGraphDef(*s.graph());
  ASSERT_TRUE(def.ok()) << def.status();
  for (NodeDef& node : *def->mutable_node()) {
    if (node.name() == "x") {
      (*node.mutable_attr())["value"]
          .mutable_tensor()
          ->mutable_shape()
          ->clear_dim();
    }
  }
  Graph imported;
  const absl::Status st = ImportGraphDef(*def, &imported);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("CumSum 'c'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("axis 0 is out of range for rank 0"),
            std::string::npos)
      << st;
}

TEST(CumSumTest, ErrorsGradientAndHalf) {
  Scope s = Scope::NewRootScope();
  CumSum(s.WithOpName("c"), Const<float>(s, {1, 2}, {2}), 1);
  EXPECT_NE(ErrorOf(s).find("CumSum 'c'"), std::string::npos);
  EXPECT_NE(ErrorOf(s).find("axis 1"), std::string::npos) << ErrorOf(s);
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      Scope g = Scope::NewRootScope();
      Output x = Placeholder(g, DType::kFloat32, {3, 4, 2});
      auto err = MaxGradientError(g, {x}, {RandomTensor({3, 4, 2}, -1, 1, 4)},
                                  CumSum(g, x, 1, exclusive, reverse));
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-3);
    }
  }
  auto c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return CumSum(s, x[0], -1, false, true);
      },
      {RandomTensor({3, 40}, -1, 1, 5)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(TileTest, ValuesAndErrors) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Tile(s, x, {1, 2})),
                         {1, 2, 1, 2, 3, 4, 3, 4}, {2, 4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Tile(s, x, {2, 1})),
                         {1, 2, 3, 4, 1, 2, 3, 4}, {4, 2}));
  EXPECT_EQ(RunOne(s, {}, Tile(s, x, {0, 3})).shape(), TensorShape({0, 6}));
  Tile(s.WithOpName("t"), x, {2});
  EXPECT_NE(ErrorOf(s).find("Tile 't'"), std::string::npos);
  EXPECT_NE(ErrorOf(s).find("multiples [2] has 1 values"), std::string::npos)
      << ErrorOf(s);
  Scope s2 = Scope::NewRootScope();
  Tile(s2, Const<float>(s2, {1, 2}, {2}), {-1});
  EXPECT_NE(ErrorOf(s2).find("negative value"), std::string::npos);
  Scope s3 = Scope::NewRootScope();
  Tile(s3, Const<float>(s3, {1, 2}, {2}), {int64_t{1} << 62});
  EXPECT_FALSE(s3.ok());
  Scope s4 = Scope::NewRootScope();
  Tile(s4, Const<float>(s4, {1, 2, 3, 4}, {2, 2}),
       {int64_t{1} << 30, int64_t{1} << 30});
  EXPECT_FALSE(s4.ok());
}

TEST(TileTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  auto err = MaxGradientError(s, {x}, {RandomTensor({2, 3}, -1, 1, 6)},
                              Tile(s, x, {3, 2}));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
