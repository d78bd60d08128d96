#include "ops/math/reduce_sum.h"

#include <cmath>

#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
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

// Brute-force sum of x over `axes` (non-negative), with kept dims.
Tensor ReferenceSum(const Tensor& x, const std::vector<int>& axes) {
  TensorShape out_shape = x.shape();
  for (int a : axes) out_shape.set_dim(a, 1);
  Tensor out = Tensor::Filled(DType::kFloat32, out_shape, 0);
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    int64_t rem = i, o = 0, stride = 1;
    for (int d = x.rank() - 1; d >= 0; --d) {
      const int64_t c = rem % x.dim(d);
      rem /= x.dim(d);
      o += (out_shape.dim(d) == 1 ? 0 : c) * stride;
      stride *= out_shape.dim(d);
    }
    out.data<float>()[o] += x.data<float>()[i];
  }
  return out;
}

TEST(ReduceSumTest, AllRowsAndColumns) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceSum(s, x)), {21}, {}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceSum(s, x, {1})), {6, 15}, {2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, ReduceSum(s, x, {-1}, true)), {6, 15}, {2, 1}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, ReduceSum(s, x, {0}, true)), {5, 7, 9}, {1, 3}));
}

TEST(ReduceSumTest, IntegersAndHalf) {
  Scope s = Scope::NewRootScope();
  Output xi = Const<int32_t>(s, {1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceSum(s, xi, {0})), {4, 6}, {2}));
  // 4096 halves of 1: a float16 accumulator would stop at 2048.
  std::vector<half> ones(4096, half(1.f));
  Output xh = Const<half>(s, ones, {4096});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceSum(s, xh)), {4096}, {}));
}

TEST(ReduceSumTest, NonAdjacentAxesMatchBruteForce) {
  Scope s = Scope::NewRootScope();
  Tensor v = RandomTensor({2, 3, 4, 5}, -1, 1, 3);
  Output x = Const(s, v);
  for (const std::vector<int>& axes : std::vector<std::vector<int>>{
           {1, 3}, {0, 2}, {0, 3}, {1, 2}, {0, 1, 3}}) {
    std::vector<int64_t> a(axes.begin(), axes.end());
    Tensor got = RunOne(s, {}, ReduceSum(s, x, a, true));
    EXPECT_TRUE(TensorNear(got, ReferenceSum(v, axes), 1e-5, 1e-5))
        << "axes " << a[0] << "," << a[1];
  }
}

TEST(ReduceSumTest, LongInnerBlocksInParallel) {
  // inner = 2500 spans three 1024-wide blocks; outer = 3.
  Scope s = Scope::NewRootScope();
  Tensor v = RandomTensor({3, 7, 2500}, -1, 1, 4);
  Tensor got = RunOne(s, {}, ReduceSum(s, Const(s, v), {1}, true));
  EXPECT_TRUE(TensorNear(got, ReferenceSum(v, {1}), 1e-5, 1e-5));
}

// Issue 21: 4e6 rows summed one after another lost 3.2e-5; pairwise they
// stay within 10x of a float64 sum rounded once (whose error is at most
// 2^-24 relative), over a non-last axis and over the last one.
TEST(ReduceSumTest, LongSumsWithinTenTimesFloat64RoundedOnce) {
  constexpr int64_t kRows = 4000000, kCols = 3;
  Tensor x = RandomTensor({kRows, kCols}, 0, 1, /*seed=*/21);
  std::vector<double> exact(kCols, 0.0);
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    exact[i % kCols] += x.data<float>()[i];
  }
  const double bound = 10 * std::ldexp(1.0, -24);
  {
    Scope s = Scope::NewRootScope();
    Tensor y = RunOne(s, {}, ReduceSum(s, Const(s, x), {0}));
    ASSERT_TRUE(y.valid());
    for (int64_t c = 0; c < kCols; ++c) {
      EXPECT_LE(std::fabs(y.data<float>()[c] - exact[c]) / exact[c], bound)
          << "column " << c << ": " << y.data<float>()[c] << " vs " << exact[c];
    }
  }
  {
    Tensor row = RandomTensor({kRows}, 0, 1, /*seed=*/22);
    double e = 0;
    for (int64_t i = 0; i < kRows; ++i) e += row.data<float>()[i];
    Scope s = Scope::NewRootScope();
    Tensor y = RunOne(s, {}, ReduceSum(s, Const(s, row), {0}));
    ASSERT_TRUE(y.valid());
    EXPECT_LE(std::fabs(y.data<float>()[0] - e) / e, bound)
        << y.data<float>()[0] << " vs " << e;
  }
}

TEST(ReduceSumTest, SizeOneAndEmptyAxes) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3}, {1, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceSum(s, x, {0})), {1, 2, 3}, {3}));
  Output empty = Const(s, Tensor(DType::kFloat32, {2, 0}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceSum(s, empty, {1})), {0, 0}, {2}));
}

TEST(ReduceSumTest, UnknownDimsPropagate) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 3, 4});
  EXPECT_EQ(ReduceSum(s, x, {1}).shape().DebugString(), "[?,4]");
  EXPECT_EQ(ReduceSum(s, x, {0}, true).shape().DebugString(), "[1,3,4]");
  EXPECT_EQ(ReduceSum(s, x).shape().DebugString(), "[]");
}

TEST(ReduceSumTest, OutOfRangeAxisNamesAxisAndRank) {
  Scope s = Scope::NewRootScope();
  ReduceSum(s.WithOpName("r"), Const<float>(s, {1, 2}, {1, 2}), {2});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ReduceSum 'r': axis 2 is out of range for rank 2"),
            std::string::npos)
      << s.status();
  EXPECT_NE(s.status().message().find("[1,2]"), std::string::npos);
}

TEST(ReduceSumTest, RepeatedAxisNamesAxisAndRank) {
  Scope s = Scope::NewRootScope();
  ReduceSum(s.WithOpName("r"), Const<float>(s, {1, 2}, {1, 2}), {1, -1});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ReduceSum 'r': axes [1,-1] name axis 1 twice (rank 2)"),
            std::string::npos)
      << s.status();
}

TEST(ReduceSumTest, BoolIsRejected) {
  Scope s = Scope::NewRootScope();
  ReduceSum(s.WithOpName("r"), Const<bool>(s, {true}, {1}));
  EXPECT_NE(s.status().message().find(
                "ReduceSum 'r': input 'x' is bool; expected a numeric type"),
            std::string::npos)
      << s.status();
}

TEST(ReduceSumTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3, 4});
  Tensor v = RandomTensor({2, 3, 4}, -1, 1, 1);
  for (bool keep : {false, true}) {
    auto err = MaxGradientError(s, {x}, {v}, ReduceSum(s, x, {0, 2}, keep));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
}

TEST(ReduceSumTest, GradientWithUnknownBatch) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 3});
  auto err = MaxGradientError(s, {x}, {RandomTensor({5, 3}, -1, 1, 2)},
                              ReduceSum(s, x, {0}));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(ReduceSumTest, Float16MatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return ReduceSum(s, x[0], {1});
      },
      {RandomTensor({5, 300}, -1, 1, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
