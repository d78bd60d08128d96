#include "ops/math/serialized_mat_mul.h"

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/batch_mat_mul.h"
#include "ops/math/mat_mul.h"
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

TEST(SerializedMatMulTest, ByHand) {
  Scope s = Scope::NewRootScope();
  Output a = Const<float>(s, {1, 2, 3, 4}, {2, 2});
  Output b = Const<float>(s, {5, 6, 7, 8}, {2, 2});
  for (const char* dim : {"a_columns", "a_rows_b_columns", "b_rows"}) {
    EXPECT_TRUE(TensorNear(
        RunOne(s, {},
               SerializedMatMul(s, a, b, {.factor = 2, .dimension = dim})),
        {19, 22, 43, 50}, {2, 2}))
        << dim;
  }
}

// Every split, factor and transpose equals MatMul / BatchMatMul, forward
// and gradient; gradients also against finite differences.
TEST(SerializedMatMulTest, EqualsMatMulForEverySplitAndTranspose) {
  for (const char* dim : {"a_columns", "a_rows_b_columns", "b_rows"}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      Scope s = Scope::NewRootScope();
      // op(a) [2, 4, 6], op(b) [2, 6, 8]: every dimension divisible by 2.
      const TensorShape as = ta ? TensorShape{2, 6, 4} : TensorShape{2, 4, 6};
      const TensorShape bs = tb ? TensorShape{2, 8, 6} : TensorShape{2, 6, 8};
      Output a = Placeholder(s, DType::kFloat32, as);
      Output b = Placeholder(s, DType::kFloat32, bs);
      const Tensor av = RandomTensor(as, -1, 1, 1);
      const Tensor bv = RandomTensor(bs, -1, 1, 2);
      Output ser = SerializedMatMul(s, a, b,
                                    {.factor = 2,
                                     .dimension = dim,
                                     .transpose_a = ta,
                                     .transpose_b = tb});
      Output ref = BatchMatMul(s, a, b, ta, tb);
      std::vector<Output> g1, g2;
      ASSERT_TRUE(AddGradients(s, {ser}, {a, b}, {}, &g1).ok());
      ASSERT_TRUE(AddGradients(s, {ref}, {a, b}, {}, &g2).ok());
      auto out = RunGraph(s, {{a, av}, {b, bv}},
                          {ser, ref, g1[0], g2[0], g1[1], g2[1]});
      ASSERT_TRUE(out.ok()) << out.status();
      for (int i = 0; i < 6; i += 2) {
        EXPECT_TRUE(TensorNear((*out)[i], (*out)[i + 1], 1e-5, 1e-5))
            << dim << " ta " << ta << " tb " << tb << " output " << i;
      }
      auto err = MaxGradientError(s, {a, b}, {av, bv}, ser);
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-3);
    }
  }
}

TEST(SerializedMatMulTest, Float16AndErrors) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return SerializedMatMul(s, x[0], x[1],
                                {.factor = 3, .dimension = "a_rows_b_columns"});
      },
      {RandomTensor({4, 6}, -1, 1, 1), RandomTensor({6, 5}, -1, 1, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
  Scope s = Scope::NewRootScope();
  SerializedMatMul(s.WithOpName("sm"), Const(s, RandomTensor({4, 6}, 0, 1, 1)),
                   Const(s, RandomTensor({6, 5}, 0, 1, 1)),
                   {.factor = 4, .dimension = "b_rows"});
  EXPECT_NE(s.status().message().find(
                "SerializedMatMul 'sm': serialization_factor 4 must be >= 1 "
                "and divide the b_rows dimension 5"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  SerializedMatMul(s2, Const(s2, RandomTensor({4, 6}, 0, 1, 1)),
                   Const(s2, RandomTensor({6, 5}, 0, 1, 1)),
                   {.factor = 1, .dimension = "rows"});
  EXPECT_NE(s2.status().message().find(
                "serialization_dimension must be \"a_columns\""),
            std::string::npos)
      << s2.status();
}

}  // namespace
}  // namespace ipuflow::ops
