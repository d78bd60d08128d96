// ReduceMin, ReduceProd, ArgMin, ReduceLogSumExp, ReduceVariance, ReduceStd,
// Norm, ReduceAny, ReduceAll: hand-checked values, errors, finite-difference
// gradients, float16 against float32.
#include <cmath>
#include <limits>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/arg_min.h"
#include "ops/math/norm.h"
#include "ops/math/reduce_all.h"
#include "ops/math/reduce_any.h"
#include "ops/math/reduce_log_sum_exp.h"
#include "ops/math/reduce_min.h"
#include "ops/math/reduce_prod.h"
#include "ops/math/reduce_variance.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void ExpectGradient(const std::function<Output(const Scope&, Output)>& f,
                    const Tensor& v, double tol = 1e-3) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, v.shape());
  auto err = MaxGradientError(s, {x}, {v}, f(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, tol);
}

void ExpectHalfMatches(const std::function<Output(const Scope&, Output)>& f,
                       const Tensor& v, bool gradients = true) {
  auto c = CompareHalfToFloat(
      [&](const Scope& s, const std::vector<Output>& x) { return f(s, x[0]); },
      {v}, gradients);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 4e-3);
}

std::string ReductionErrorOf(const Scope& s) {
  return std::string(s.status().message());
}

TEST(ReduceMinTest, ValuesNanAndEmpty) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 5, 3, -4, -2, -6}, {2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMin(s, x)), {-6}, {}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMin(s, x, {1})), {1, -6}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMin(s, x, {0}, true)),
                         {-4, -2, -6}, {1, 3}));
  Output n = Const<float>(s, {1, kNaN, 3, 4}, {2, 2});
  Tensor cols = RunOne(s, {}, ReduceMin(s, n, {0}));
  EXPECT_EQ(cols.data<float>()[0], 1.f);
  EXPECT_TRUE(std::isnan(cols.data<float>()[1]));
  Output e = ReduceMin(s.WithOpName("m"),
                       Const(s, Tensor(DType::kFloat32, {2, 0})), {1});
  auto out = RunGraph(s, {}, {e});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "ReduceMin 'm': the minimum over zero elements is undefined"),
            std::string::npos)
      << out.status();
}

TEST(ReduceMinTest, GradientAndTies) {
  ExpectGradient([](const Scope& s, Output x) { return ReduceMin(s, x, {1}); },
                 RandomTensor({3, 4}, -1, 1, 2));
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3});
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {ReduceMin(s, x)}, {x}, {}, &g).ok());
  auto v = RunGraph(s, {{x, Tensor::FromVector<float>({2, 1, 1}, {3})}}, g);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(TensorNear((*v)[0], {0, 0.5, 0.5}, {3}));
}

TEST(ReduceProdTest, ValuesAndEmpty) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, -4, 0.5, 2}, {2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceProd(s, x)), {-24}, {}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceProd(s, x, {1})), {6, -4}, {2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, ReduceProd(s, x, {0})), {-4, 1, 6}, {3}));
  Output e = Const(s, Tensor(DType::kFloat32, {0, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceProd(s, e, {0})), {1, 1}, {2}));
}

TEST(ReduceProdTest, IntegersAreRefused) {
  Scope s = Scope::NewRootScope();
  ReduceProd(s.WithOpName("p"), Const<int32_t>(s, {1, 2}, {2}));
  EXPECT_NE(ReductionErrorOf(s).find("ReduceProd 'p'"), std::string::npos)
      << ReductionErrorOf(s);
  EXPECT_NE(ReductionErrorOf(s).find("must be float32 or float16, got int32"),
            std::string::npos)
      << ReductionErrorOf(s);
}

TEST(ReduceProdTest, GradientWithAndWithoutZeros) {
  ExpectGradient([](const Scope& s, Output x) { return ReduceProd(s, x, {1}); },
                 RandomTensor({3, 4}, 0.5, 1.5, 3));
  // Rows with no zero, one zero, two zeros: d/dx_i = prod of the others.
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 3});
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {ReduceProd(s, x, {1})}, {x}, {}, &g).ok())
      << s.status();
  auto v = RunGraph(
      s, {{x, Tensor::FromVector<float>({2, 3, 4, 2, 0, 5, 0, 3, 0}, {3, 3})}},
      g);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(TensorNear((*v)[0], {12, 8, 6, 0, 10, 0, 0, 0, 0}, {3, 3}));
}

TEST(ArgMinTest, ValuesTiesNanAndErrors) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {3, 1, 1, 2, 7, -5}, {2, 3});
  Tensor rows = RunOne(s, {}, ArgMin(s, x, 1));
  EXPECT_EQ(rows.data<int64_t>()[0], 1);  // The first of the tie.
  EXPECT_EQ(rows.data<int64_t>()[1], 2);
  Tensor cols = RunOne(s, {}, ArgMin(s, x, 0, DType::kInt32));
  EXPECT_EQ(cols.data<int32_t>()[0], 1);
  EXPECT_EQ(cols.data<int32_t>()[1], 0);
  EXPECT_EQ(cols.data<int32_t>()[2], 1);
  Tensor nan = RunOne(s, {}, ArgMin(s, Const<float>(s, {1, kNaN, -3}, {3}), 0));
  EXPECT_EQ(nan.data<int64_t>()[0], 1);
  ArgMin(s.WithOpName("a"), Const<float>(s, {1}, {}), 0);
  EXPECT_NE(ReductionErrorOf(s).find("ArgMin 'a'"), std::string::npos)
      << ReductionErrorOf(s);
  EXPECT_NE(ReductionErrorOf(s).find("is a scalar; ArgMin needs rank >= 1"),
            std::string::npos)
      << ReductionErrorOf(s);
}

TEST(ReduceLogSumExpTest, StableValuesAndEdges) {
  Scope s = Scope::NewRootScope();
  // log(e^1 + e^2 + e^3) = 3.40760596; shifted by 1000 it must not overflow.
  Output x = Const<float>(s, {1, 2, 3, 1001, 1002, 1003}, {2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceLogSumExp(s, x, {1})),
                         {3.40760596f, 1003.40760596f}, {2}, 0, 1e-6));
  Output edges =
      Const<float>(s, {-kInf, -kInf, kInf, 1, kNaN, 1, -kInf, 0}, {4, 2});
  Tensor e = RunOne(s, {}, ReduceLogSumExp(s, edges, {1}));
  EXPECT_EQ(e.data<float>()[0], -kInf);
  EXPECT_EQ(e.data<float>()[1], kInf);
  EXPECT_TRUE(std::isnan(e.data<float>()[2]));
  EXPECT_EQ(e.data<float>()[3], 0.f);
  Tensor empty = RunOne(
      s, {},
      ReduceLogSumExp(s, Const(s, Tensor(DType::kFloat32, {2, 0})), {1}));
  EXPECT_EQ(empty.data<float>()[0], -kInf);
}

TEST(ReduceLogSumExpTest, GradientAndHalf) {
  for (bool keep : {false, true}) {
    ExpectGradient(
        [keep](const Scope& s, Output x) {
          return ReduceLogSumExp(s, x, {0, 2}, keep);
        },
        RandomTensor({3, 2, 4}, -2, 2, 4));
  }
  ExpectHalfMatches(
      [](const Scope& s, Output x) { return ReduceLogSumExp(s, x, {-1}); },
      RandomTensor({4, 9}, -3, 3, 5));
}

TEST(ReduceVarianceTest, ValuesAndCorrection) {
  Scope s = Scope::NewRootScope();
  // Row 0: mean 2.5, squares 2.25 + 0.25 + 0.25 + 2.25 = 5.
  Output x = Const<float>(s, {1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, ReduceVariance(s, x, {1})), {1.25, 0}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceVariance(s, x, {1}, true, 1)),
                         {5 / 3.f, 0}, {2, 1}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceStd(s, x, {1})),
                         {std::sqrt(1.25f), 0}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceStd(s, x, {0}, false, 1)),
                         {std::sqrt(0.5f), 0, std::sqrt(0.5f), std::sqrt(2.f)},
                         {4}));
  // A large offset: the two-pass variance keeps its digits.
  Output big = Const<float>(s, {1e4 + 1, 1e4 + 2, 1e4 + 3}, {3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceVariance(s, big)), {2 / 3.f}, {},
                         0, 1e-6));
  ReduceVariance(s.WithOpName("v"), x, {1}, false, -1);
  EXPECT_NE(ReductionErrorOf(s).find("ReduceVariance 'v'"), std::string::npos);
  EXPECT_NE(ReductionErrorOf(s).find("correction is -1; expected >= 0"),
            std::string::npos)
      << ReductionErrorOf(s);
}

TEST(ReduceVarianceTest, Gradients) {
  const Tensor v = RandomTensor({3, 5}, -1, 1, 6);
  for (int64_t c : {0, 1}) {
    ExpectGradient(
        [c](const Scope& s, Output x) {
          return ReduceVariance(s, x, {1}, false, c);
        },
        v);
    ExpectGradient(
        [c](const Scope& s, Output x) { return ReduceStd(s, x, {0}, true, c); },
        v);
  }
  // Unknown batch: the count comes from the graph.
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 5});
  auto err = MaxGradientError(s, {x}, {v}, ReduceStd(s, x, {0}, false, 1));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
  ExpectHalfMatches(
      [](const Scope& s, Output x) { return ReduceStd(s, x, {-1}); },
      RandomTensor({4, 9}, -3, 3, 7));
}

TEST(NormTest, Values) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {3, -4, 0, 0, 1, -2, 2, 0}, {2, 4});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Norm(s, x, {1})), {5, 3}, {2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, Norm(s, x, {1}, false, 1)), {7, 5}, {2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, Norm(s, x, {1}, false, kInf)), {4, 2}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Norm(s, x, {1}, false, 3)),
                         {std::cbrt(91.f), std::cbrt(17.f)}, {2}, 0, 1e-6));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Norm(s, x)), {std::sqrt(34.f)}, {}));
  // Scaled: 3e30 and 4e30 square to overflow; 3e-30, 4e-30 to underflow.
  Output far = Const<float>(s, {3e30f, 4e30f, 3e-30f, 4e-30f}, {2, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Norm(s, far, {1})), {5e30f, 5e-30f}, {2},
                         0, 1e-6));
  Output edges = Const<float>(s, {kInf, 1, kNaN, kInf, 0, 0}, {3, 2});
  Tensor e = RunOne(s, {}, Norm(s, edges, {1}));
  EXPECT_EQ(e.data<float>()[0], kInf);
  EXPECT_TRUE(std::isnan(e.data<float>()[1]));
  EXPECT_EQ(e.data<float>()[2], 0.f);
  Norm(s.WithOpName("n"), x, {1}, false, 0);
  EXPECT_NE(ReductionErrorOf(s).find("Norm 'n'"), std::string::npos);
  EXPECT_NE(ReductionErrorOf(s).find("ord is 0; expected > 0"),
            std::string::npos)
      << ReductionErrorOf(s);
}

TEST(NormTest, Gradients) {
  const Tensor v = RandomTensor({3, 5}, -1, 1, 8);
  for (float ord : {1.f, 2.f, 3.f, 1.5f, kInf}) {
    ExpectGradient(
        [ord](const Scope& s, Output x) { return Norm(s, x, {1}, true, ord); },
        v);
  }
  // At zero the 2-norm's gradient is 0 (not NaN).
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2});
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {Norm(s, x)}, {x}, {}, &g).ok());
  auto out = RunGraph(s, {{x, Tensor::FromVector<float>({0, 0}, {2})}}, g);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {0, 0}, {2}));
  ExpectHalfMatches([](const Scope& s, Output x) { return Norm(s, x, {-1}); },
                    RandomTensor({4, 9}, -3, 3, 9));
}

TEST(ReduceAnyAllTest, Values) {
  Scope s = Scope::NewRootScope();
  Tensor b(DType::kBool, {2, 3});
  const bool v[] = {true, false, true, false, false, false};
  for (int i = 0; i < 6; ++i) b.data<bool>()[i] = v[i];
  Output x = Const(s, b);
  Tensor any = RunOne(s, {}, ReduceAny(s, x, {1}));
  EXPECT_TRUE(any.data<bool>()[0]);
  EXPECT_FALSE(any.data<bool>()[1]);
  Tensor all = RunOne(s, {}, ReduceAll(s, x, {0}, true));
  EXPECT_EQ(all.shape(), TensorShape({1, 3}));
  EXPECT_FALSE(all.data<bool>()[0]);
  EXPECT_FALSE(all.data<bool>()[1]);
  EXPECT_FALSE(all.data<bool>()[2]);
  Tensor all_t =
      RunOne(s, {}, ReduceAll(s, Const(s, Tensor(DType::kBool, {0}))));
  EXPECT_TRUE(all_t.data<bool>()[0]);
  Tensor any_f =
      RunOne(s, {}, ReduceAny(s, Const(s, Tensor(DType::kBool, {0}))));
  EXPECT_FALSE(any_f.data<bool>()[0]);
  ReduceAny(s.WithOpName("a"), Const<float>(s, {1}, {1}));
  EXPECT_NE(ReductionErrorOf(s).find("ReduceAny 'a'"), std::string::npos);
  EXPECT_NE(ReductionErrorOf(s).find("must be bool, got float32"),
            std::string::npos)
      << ReductionErrorOf(s);
}

TEST(MoreReductionsTest, HalfMinProdMatchFloat) {
  ExpectHalfMatches(
      [](const Scope& s, Output x) { return ReduceProd(s, x, {1}); },
      RandomTensor({3, 5}, 0.5, 1.5, 10));
  ExpectHalfMatches(
      [](const Scope& s, Output x) { return ReduceVariance(s, x, {0}); },
      RandomTensor({6, 3}, -2, 2, 11));
}

}  // namespace
}  // namespace ipuflow::ops
