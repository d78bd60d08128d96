#include "ops/math/mat_mul.h"

#include "core/gradients.h"
#include "core/half.h"
#include "core/session.h"
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

TEST(MatMulTest, TwoByThreeTimesThreeByTwo) {
  Scope s = Scope::NewRootScope();
  Output a = Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  Output b = Const<float>(s, {7, 8, 9, 10, 11, 12}, {3, 2});
  // [1 2 3; 4 5 6] x [7 8; 9 10; 11 12] = [58 64; 139 154]
  Output c = MatMul(s, a, b);
  EXPECT_EQ(c.shape(), TensorShape({2, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, c), {58, 64, 139, 154}, {2, 2}));
}

TEST(MatMulTest, Transposes) {
  Scope s = Scope::NewRootScope();
  Output a = Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  // a^T a = [17 22 27; 22 29 36; 27 36 45];  a a^T = [14 32; 32 77]
  EXPECT_TRUE(TensorNear(RunOne(s, {}, MatMul(s, a, a, true, false)),
                         {17, 22, 27, 22, 29, 36, 27, 36, 45}, {3, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, MatMul(s, a, a, false, true)),
                         {14, 32, 32, 77}, {2, 2}));
  // a^T b^T with b = [1 0; 0 1; 1 1] (3x2): (b a)^T.
  Output b = Const<float>(s, {1, 0, 0, 1, 1, 1}, {3, 2});
  // b a = [1 2 3; 4 5 6; 5 7 9]; transposed: [1 4 5; 2 5 7; 3 6 9]
  EXPECT_TRUE(TensorNear(RunOne(s, {}, MatMul(s, a, b, true, true)),
                         {1, 4, 5, 2, 5, 7, 3, 6, 9}, {3, 3}));
}

TEST(MatMulTest, Float16) {
  Scope s = Scope::NewRootScope();
  Output a =
      Const<half>(s, {half(1.f), half(2.f), half(3.f), half(4.f)}, {2, 2});
  Output c = MatMul(s, a, a);
  EXPECT_EQ(c.dtype(), DType::kFloat16);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, c), {7, 10, 15, 22}, {2, 2}));
}

TEST(MatMulTest, EmptyInnerDimensionGivesZeros) {
  Scope s = Scope::NewRootScope();
  Output c = MatMul(s, Const(s, Tensor(DType::kFloat32, {2, 0})),
                    Const(s, Tensor(DType::kFloat32, {0, 3})));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, c), {0, 0, 0, 0, 0, 0}, {2, 3}));
}

TEST(MatMulTest, InnerDimensionErrorReadsLikeTheSpec) {
  Scope s = Scope::NewRootScope();
  MatMul(s.WithOpName("name"), Const(s, Tensor(DType::kFloat32, {2, 3})),
         Const(s, Tensor(DType::kFloat32, {4, 5})));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "MatMul 'name': inner dimensions differ: [2,3] x [4,5]");
  Scope s2 = Scope::NewRootScope();
  MatMul(s2.WithOpName("t"), Const(s2, Tensor(DType::kFloat32, {2, 3})),
         Const(s2, Tensor(DType::kFloat32, {4, 5})), true, true);
  EXPECT_EQ(s2.status().message(),
            "MatMul 't': inner dimensions differ: [2,3]^T x [4,5]^T");
}

TEST(MatMulTest, RankAndDTypeErrors) {
  Scope s = Scope::NewRootScope();
  MatMul(s.WithOpName("r"), Const<float>(s, {1, 2}, {2}),
         Const<float>(s, {1, 2}, {2, 1}));
  EXPECT_NE(s.status().message().find(
                "MatMul 'r': input 'a' must have rank 2, got shape [2]"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  MatMul(s2.WithOpName("i"), Const<int32_t>(s2, {1}, {1, 1}),
         Const<int32_t>(s2, {1}, {1, 1}));
  EXPECT_NE(s2.status().message().find(
                "MatMul 'i': input 'a' must be float32 or float16, got int32"),
            std::string::npos)
      << s2.status();
}

TEST(MatMulTest, UnknownDimsPropagateAndAreCheckedAtRunTime) {
  Scope s = Scope::NewRootScope();
  Output a = Placeholder(s, DType::kFloat32, {-1, -1});
  Output b = Placeholder(s, DType::kFloat32, {3, 4});
  Output c = MatMul(s.WithOpName("mm"), a, b);
  EXPECT_EQ(c.shape().DebugString(), "[?,4]");
  absl::StatusOr<std::vector<Tensor>> out =
      RunGraph(s,
               {{a, Tensor::Filled(DType::kFloat32, {2, 5}, 1)},
                {b, Tensor::Filled(DType::kFloat32, {3, 4}, 1)}},
               {c});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(
                "MatMul 'mm': inner dimensions differ: [2,5] x [3,4]"),
            std::string::npos)
      << out.status();
}

// c = op(a) op(b) by the textbook triple loop, in double.
Tensor NaiveMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  Tensor c(DType::kFloat32, {m, n});
  const float *pa = a.data<float>(), *pb = b.data<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t l = 0; l < k; ++l) {
        sum += static_cast<double>(ta ? pa[l * m + i] : pa[i * k + l]) *
               (tb ? pb[j * k + l] : pb[l * n + j]);
      }
      c.data<float>()[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

TEST(MatMulTest, LargeProductMatchesNaiveLoopForAllTransposes) {
  // 64x80 by 80x48 on 4 intra-op threads: the output is split into row
  // blocks, so a blocking bug shows up as wrong rows.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Scope s = Scope::NewRootScope();
      Tensor av = RandomTensor(ta ? TensorShape{80, 64} : TensorShape{64, 80},
                               -1, 1, 11);
      Tensor bv = RandomTensor(tb ? TensorShape{48, 80} : TensorShape{80, 48},
                               -1, 1, 12);
      Output c = MatMul(s, Const(s, av), Const(s, bv), ta, tb);
      SessionOptions options;
      options.intra_op_threads = 4;
      Session session(s.graph(), options);
      std::vector<Tensor> out;
      ASSERT_TRUE(session.Run({}, {c}, &out).ok());
      EXPECT_TRUE(TensorNear(out[0], NaiveMatMul(av, bv, ta, tb), 1e-4, 1e-4))
          << "transpose_a=" << ta << " transpose_b=" << tb;
    }
  }
}

TEST(MatMulTest, GradientForAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Scope s = Scope::NewRootScope();
      const TensorShape as = ta ? TensorShape{4, 3} : TensorShape{3, 4};
      const TensorShape bs = tb ? TensorShape{2, 4} : TensorShape{4, 2};
      Output a = Placeholder(s, DType::kFloat32, as);
      Output b = Placeholder(s, DType::kFloat32, bs);
      auto err = MaxGradientError(
          s, {a, b}, {RandomTensor(as, -1, 1, 1), RandomTensor(bs, -1, 1, 2)},
          MatMul(s, a, b, ta, tb));
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-3) << "transpose_a=" << ta << " transpose_b=" << tb;
    }
  }
}

TEST(MatMulTest, Float16KernelAndGradientsMatchFloat32ForAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // k = 80 over 4 intra-op threads' worth of rows.
      const TensorShape as = ta ? TensorShape{80, 24} : TensorShape{24, 80};
      const TensorShape bs = tb ? TensorShape{12, 80} : TensorShape{80, 12};
      absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
          [&](const Scope& s, const std::vector<Output>& x) {
            return MatMul(s, x[0], x[1], ta, tb);
          },
          {RandomTensor(as, -1, 1, 1), RandomTensor(bs, -1, 1, 2)});
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(c->dtype, DType::kFloat16);
      EXPECT_LT(c->forward_error, 2e-3) << ta << tb;
      EXPECT_LT(c->gradient_error, 2e-3) << ta << tb;
    }
  }
}

TEST(MatMulTest, MixedDTypesAreAnError) {
  Scope s = Scope::NewRootScope();
  MatMul(s.WithOpName("mixed"), Placeholder(s, DType::kFloat16, {2, 3}),
         Placeholder(s, DType::kFloat32, {3, 4}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "MatMul 'mixed': input 'a' is float16 but input 'b' is "
                "float32"),
            std::string::npos)
      << s.status();
}

TEST(MatMulTest, BadPartialsTypeIsAnError) {
  Scope s = Scope::NewRootScope();
  MatMul(s.WithOpName("p"), Placeholder(s, DType::kFloat16, {2, 3}),
         Placeholder(s, DType::kFloat16, {3, 4}), {.partials_type = "double"});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "MatMul 'p': partials_type must be \"half\" or \"float\", "
                "got \"double\""),
            std::string::npos)
      << s.status();
}

// [1, k] ones x [k, 1] column: the sum of the column, by the chosen partials.
Tensor SumByMatMul(const std::vector<float>& column, const std::string& p,
                   DType dtype) {
  Scope s = Scope::NewRootScope();
  const int64_t k = static_cast<int64_t>(column.size());
  Tensor col = Tensor::FromVector<float>(column, {k, 1});
  Tensor ones = Tensor::Filled(DType::kFloat32, {1, k}, 1.0);
  if (dtype == DType::kFloat16) {
    col = testing::ToHalf(col);
    ones = testing::ToHalf(ones);
  }
  return RunOne(s, {},
                MatMul(s, Const(s, ones), Const(s, col), {.partials_type = p}));
}

TEST(MatMulTest, HalfPartialsRoundTheRunningSumAfterEachBlockOf16) {
  // 2048 then 64 x 1/16. float partials: 2052, exact in float16. half
  // partials, by hand (float16 spacing is 2 at 2048): block 1 = 2048 +
  // 15/16 -> 2048; blocks 2-4 = 2048 + 16/16 = 2049, a tie -> 2048 (even);
  // block 5 (one term) = 2048.0625 -> 2048.
  std::vector<float> column(65, 0.0625f);
  column[0] = 2048;
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    EXPECT_TRUE(testing::TensorNear(
        testing::ToFloat(SumByMatMul(column, "float", dtype)), {2052}, {1, 1},
        0, 0));
    EXPECT_TRUE(testing::TensorNear(
        testing::ToFloat(SumByMatMul(column, "half", dtype)), {2048}, {1, 1}, 0,
        0));
  }
}

TEST(MatMulTest, HalfPartialsLoseSmallAddendsOfALongSum) {
  // 8192 x float16(0.1) = 818.99...: float partials round once (819);
  // half partials add 1.6 per block to a sum whose float16 spacing is 0.5
  // above 512, so every block rounds to +1.5 there: the sum comes out low.
  std::vector<float> column(8192, 0.1f);
  const double exact = 8192 * static_cast<double>(half(0.1f));
  const float with_float =
      testing::ToFloat(SumByMatMul(column, "float", DType::kFloat16))
          .data<float>()[0];
  const float with_half =
      testing::ToFloat(SumByMatMul(column, "half", DType::kFloat16))
          .data<float>()[0];
  EXPECT_NEAR(with_float, exact, 0.5);
  EXPECT_LT(with_half, exact - 20);
}

TEST(MatMulTest, GradientsInheritPartialsType) {
  Scope s = Scope::NewRootScope();
  Output a = Placeholder(s, DType::kFloat16, {2, 3});
  Output b = Placeholder(s, DType::kFloat16, {3, 4});
  Output c = MatMul(s, a, b, {.transpose_b = false, .partials_type = "half"});
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {c}, {a, b}, {}, &grads).ok());
  for (const Output& g : grads) {
    ASSERT_EQ(g.node->op(), "MatMul");
    EXPECT_EQ(g.node->attr<std::string>("partials_type"), "half");
    EXPECT_EQ(g.dtype(), DType::kFloat16);
  }
}

}  // namespace
}  // namespace ipuflow::ops
