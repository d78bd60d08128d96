// The fused optimizer updates on float16 variables, slots and gradients:
// each runs the float32 rule (apply_util.h) and rounds what it writes once,
// so after several steps a float16 variable stays within float16 rounding of
// the same update run in float32.
#include <cmath>
#include <functional>

#include "core/half.h"
#include "core/half_rounding.h"
#include "core/session.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/apply_adam.h"
#include "ops/state/apply_gradient_descent.h"
#include "ops/state/apply_lamb.h"
#include "ops/state/apply_momentum.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

// Builds one update of `w` with slots `m`, `v` and gradient `grad`
// (adding what it needs, e.g. a step counter).
using BuildUpdate = std::function<Node*(const Scope&, Output w, Output m,
                                        Output v, Output grad)>;

std::vector<float> ToFloats(const Tensor& t) {
  std::vector<float> out(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    out[i] = t.dtype() == DType::kFloat16
                 ? static_cast<float>(t.data<half>()[i])
                 : t.data<float>()[i];
  }
  return out;
}

Tensor Values(DType dtype, const std::vector<float>& v) {
  Tensor t = Tensor::FromVector<float>(v);
  if (dtype == DType::kFloat32) return t;
  Tensor h(DType::kFloat16, t.shape());
  for (size_t i = 0; i < v.size(); ++i) h.data<half>()[i] = half(v[i]);
  return h;
}

// Runs 5 updates from w = w0, zero slots, with gradients exact in float16;
// returns {w, m, v} as floats.
std::vector<std::vector<float>> Run(DType dtype, const BuildUpdate& build) {
  const std::vector<float> w0 = {1.5f, -0.75f, 0.125f, 3.f};
  const std::vector<std::vector<float>> grads = {{0.5f, -1, 0.25f, 2},
                                                 {0.25f, -0.5f, 1, -2},
                                                 {1, 1, -0.125f, 0.5f},
                                                 {-0.5f, 0.75f, 0.5f, 1},
                                                 {0.125f, -0.25f, 2, -1}};
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const(s, Values(dtype, w0)));
  VariableHandle m =
      Variable(s.WithOpName("m"), Const(s, Values(dtype, {0, 0, 0, 0})));
  VariableHandle v =
      Variable(s.WithOpName("v"), Const(s, Values(dtype, {0, 0, 0, 0})));
  Output grad = Placeholder(s, dtype, {4});
  Node* step = build(s, w.handle, m.handle, v.handle, grad);
  EXPECT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  EXPECT_TRUE(session.Initialize().ok());
  for (const auto& g : grads) {
    absl::Status st =
        session.Run({{grad, Values(dtype, g)}}, {}, {step}, nullptr);
    EXPECT_TRUE(st.ok()) << st;
  }
  std::vector<Tensor> out;
  EXPECT_TRUE(session.Run({}, {w.value, m.value, v.value}, &out).ok());
  return {ToFloats(out[0]), ToFloats(out[1]), ToFloats(out[2])};
}

// float16 results within a few float16 ulps (2^-11 relative each) of
// float32's, over 5 steps.
void ExpectFloat16TracksFloat32(const BuildUpdate& build) {
  const auto f32 = Run(DType::kFloat32, build);
  const auto f16 = Run(DType::kFloat16, build);
  for (int t = 0; t < 3; ++t) {
    for (size_t i = 0; i < f32[t].size(); ++i) {
      EXPECT_NEAR(f16[t][i], f32[t][i],
                  1e-5 + 8 * std::ldexp(std::fabs(f32[t][i]), -11))
          << "tensor " << t << " element " << i;
    }
  }
}

Output Scalar(const Scope& s, float x) { return Const(s, x); }

TEST(ApplyFloat16Test, GradientDescent) {
  ExpectFloat16TracksFloat32(
      [](const Scope& s, Output w, Output, Output, Output g) {
        return ApplyGradientDescent(s, w, Scalar(s, 0.1f), g);
      });
}

TEST(ApplyFloat16Test, NesterovMomentum) {
  ExpectFloat16TracksFloat32(
      [](const Scope& s, Output w, Output m, Output, Output g) {
        return ApplyMomentum(s, w, m, Scalar(s, 0.1f), g, Scalar(s, 0.9f),
                             /*use_nesterov=*/true);
      });
}

Node* AdamLike(bool lamb, float wd, const Scope& s, Output w, Output m,
               Output v, Output g) {
  VariableHandle t = Variable(s.WithOpName("t"), Const(s, 0.f));
  Node* inc = AssignAdd(s, t.handle, Const(s, 1.f));
  Output step = ReadVariable(s.WithControlDependencies({inc}), t.handle);
  if (lamb) {
    return ApplyLamb(s, w, m, v, Scalar(s, 0.01f), g, Scalar(s, 0.9f),
                     Scalar(s, 0.999f), Scalar(s, 1e-3f), step, wd);
  }
  return ApplyAdam(s, w, m, v, Scalar(s, 0.01f), g, Scalar(s, 0.9f),
                   Scalar(s, 0.999f), Scalar(s, 1e-3f), step, wd);
}

TEST(ApplyFloat16Test, Adam) {
  ExpectFloat16TracksFloat32(
      [](const Scope& s, Output w, Output m, Output v, Output g) {
        return AdamLike(false, 0, s, w, m, v, g);
      });
}

TEST(ApplyFloat16Test, AdamW) {
  ExpectFloat16TracksFloat32(
      [](const Scope& s, Output w, Output m, Output v, Output g) {
        return AdamLike(false, 0.1f, s, w, m, v, g);
      });
}

TEST(ApplyFloat16Test, Lamb) {
  ExpectFloat16TracksFloat32(
      [](const Scope& s, Output w, Output m, Output v, Output g) {
        return AdamLike(true, 0.01f, s, w, m, v, g);
      });
}

TEST(ApplyFloat16Test, VariableIsRoundedOnceNotTwice) {
  // w = 1, lr = 1 + 2^-12, grad = 2^-12: delta = 2^-12 + 2^-24 (float32).
  // Below 1 the float16 spacing is 2^-11, so the midpoint between 1 - 2^-11
  // and 1 is 1 - 2^-12. Rounded once, 1 - 2^-12 - 2^-24 is below it:
  // 1 - 2^-11. Had delta been rounded to float16 first (2^-12: the spacing
  // there is 2^-22), the difference would sit on the midpoint and tie to
  // even: 1.
  Scope s = Scope::NewRootScope();
  VariableHandle w =
      Variable(s.WithOpName("w"), Const(s, Values(DType::kFloat16, {1})));
  Node* step = ApplyGradientDescent(
      s, w.handle, Const(s, 1.f + std::ldexp(1.f, -12)),
      Const(s, Values(DType::kFloat16, {std::ldexp(1.f, -12)})));
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(session.Run({}, {}, {step}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {w.value}, &out).ok());
  EXPECT_EQ(ToFloats(out[0])[0], 1.f - std::ldexp(1.f, -11));
}

}  // namespace
}  // namespace ipuflow::ops
