#include "ops/nn/scaled_dot_product_attention.h"

#include <cmath>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/batch_mat_mul.h"
#include "ops/math/mul.h"
#include "ops/nn/softmax.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

// softmax(scale q k^T + mask) v from BatchMatMul, Mul, Add and Softmax;
// the causal mask adds -1e30 above the diagonal.
Output Composite(const Scope& s, Output q, Output k, Output v, bool causal,
                 float scale, int64_t sq, int64_t t) {
  Output scores = Mul(s, BatchMatMul(s, q, k, false, true), Const(s, scale));
  if (causal) {
    std::vector<float> mask(sq * t, 0.0f);
    for (int64_t i = 0; i < sq; ++i) {
      for (int64_t j = i + 1; j < t; ++j) mask[i * t + j] = -1e30f;
    }
    scores = Add(s, scores, Const<float>(s, mask, {sq, t}));
  }
  return BatchMatMul(s, Softmax(s, scores), v);
}

TEST(ScaledDotProductAttentionTest, EqualsTheCompositeForwardAndBackward) {
  for (bool causal : {false, true}) {
    Scope s = Scope::NewRootScope();
    // [batch 2, heads 3, S 5, D 4], T 6, E 3.
    Output q = Placeholder(s, DType::kFloat32, {2, 3, 5, 4});
    Output k = Placeholder(s, DType::kFloat32, {2, 3, 6, 4});
    Output v = Placeholder(s, DType::kFloat32, {2, 3, 6, 3});
    const std::vector<Tensor> values = {RandomTensor({2, 3, 5, 4}, -2, 2, 1),
                                        RandomTensor({2, 3, 6, 4}, -2, 2, 2),
                                        RandomTensor({2, 3, 6, 3}, -2, 2, 3)};
    auto fused = ScaledDotProductAttention(s, q, k, v, {.causal = causal});
    Output ref = Composite(s, q, k, v, causal, 0.5f, 5, 6);
    const Tensor r = RandomTensor({2, 3, 5, 3}, -1, 1, 4);
    std::vector<Output> g1, g2;
    ASSERT_TRUE(
        AddGradients(s, {fused.output}, {q, k, v}, {Const(s, r)}, &g1).ok());
    ASSERT_TRUE(AddGradients(s, {ref}, {q, k, v}, {Const(s, r)}, &g2).ok());
    auto out = RunGraph(s, {{q, values[0]}, {k, values[1]}, {v, values[2]}},
                        {fused.output, ref, g1[0], g2[0], g1[1], g2[1], g1[2],
                         g2[2], fused.probs});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int i = 0; i < 8; i += 2) {
      EXPECT_TRUE(TensorNear((*out)[i], (*out)[i + 1], 1e-5, 1e-5))
          << "causal " << causal << " output " << i;
    }
    if (causal) {
      // Query 0 attends key 0 only; masked probabilities are exactly 0.
      const float* p = (*out)[8].data<float>();
      EXPECT_EQ(p[0], 1.0f);
      for (int j = 1; j < 6; ++j) EXPECT_EQ(p[j], 0.0f);
    }
    auto err = MaxGradientError(s, {q, k, v}, values, fused.output);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 2e-3);
  }
}

TEST(ScaledDotProductAttentionTest, ExplicitScaleFloat16AndErrors) {
  Scope s = Scope::NewRootScope();
  const Tensor qv = RandomTensor({4, 2}, -1, 1, 1);
  const Tensor kv = RandomTensor({3, 2}, -1, 1, 2);
  const Tensor vv = RandomTensor({3, 5}, -1, 1, 3);
  auto fused = ScaledDotProductAttention(s, Const(s, qv), Const(s, kv),
                                         Const(s, vv), {.scale = 2.0f});
  Output ref =
      Composite(s, Const(s, qv), Const(s, kv), Const(s, vv), false, 2.0f, 4, 3);
  auto out = RunGraph(s, {}, {fused.output, ref});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], (*out)[1], 1e-5, 1e-5));
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return ScaledDotProductAttention(s, x[0], x[1], x[2], {.causal = true})
            .output;
      },
      {RandomTensor({2, 4, 8}, -1, 1, 1), RandomTensor({2, 4, 8}, -1, 1, 2),
       RandomTensor({2, 4, 8}, -1, 1, 3)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 4e-3);
  Scope b = Scope::NewRootScope();
  ScaledDotProductAttention(b.WithOpName("att"),
                            Const(b, RandomTensor({4, 2}, 0, 1, 1)),
                            Const(b, RandomTensor({3, 3}, 0, 1, 1)),
                            Const(b, RandomTensor({3, 5}, 0, 1, 1)));
  EXPECT_NE(b.status().message().find(
                "ScaledDotProductAttention 'att': query [4,2], key [3,3] and "
                "value [3,5] must be [..., S, D], [..., T, D] and [..., T, E]"),
            std::string::npos)
      << b.status();
}

}  // namespace
}  // namespace ipuflow::ops
