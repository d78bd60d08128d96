#include "ops/state/apply_lamb.h"

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

// One ApplyLamb step from w0 with m = v = 0, lr 0.1, beta1 0.9, beta2 0.999,
// epsilon 1e-6, step 1 and grad [0.5, -1].
Tensor OneStep(const std::vector<float>& w0, float weight_decay) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, w0, {2}));
  VariableHandle m = Variable(s.WithOpName("m"), Const<float>(s, {0, 0}, {2}));
  VariableHandle v = Variable(s.WithOpName("v"), Const<float>(s, {0, 0}, {2}));
  Node* step =
      ApplyLamb(s, w.handle, m.handle, v.handle, Const(s, 0.1f),
                Const<float>(s, {0.5f, -1}, {2}), Const(s, 0.9f),
                Const(s, 0.999f), Const(s, 1e-6f), Const(s, 1.f), weight_decay);
  EXPECT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  EXPECT_TRUE(session.Initialize().ok());
  EXPECT_TRUE(session.Run({}, {}, {step}, nullptr).ok());
  std::vector<Tensor> out;
  EXPECT_TRUE(session.Run({}, {w.value}, &out).ok());
  return out.empty() ? Tensor() : out[0];
}

TEST(ApplyLambTest, TrustRatioScalesTheAdamDirection) {
  // r = m_hat / (sqrt(v_hat) + eps) = [1, -1] (to 2e-6); ||w|| = 5,
  // ||r|| = sqrt(2): w -= 0.1 * 5 / sqrt(2) * [1, -1] = [2.6464466, 4.3535534].
  EXPECT_TRUE(TensorNear(OneStep({3, 4}, 0), {2.6464468f, 4.3535536f}, {2}));
}

TEST(ApplyLambTest, WeightDecayIsInsideTheTrustRatio) {
  // r = [1, -1] + 0.1 * [3, 4] = [1.3, -0.6];  ||r|| = sqrt(2.05);
  // w -= 0.1 * 5 / sqrt(2.05) * [1.3, -0.6] = [2.5460203, 4.2095291].
  EXPECT_TRUE(TensorNear(OneStep({3, 4}, 0.1f), {2.5460203f, 4.2095291f}, {2}));
}

TEST(ApplyLambTest, ZeroVariableUsesTrustOne) {
  // ||w|| = 0: trust 1, w = -0.1 * r.
  EXPECT_TRUE(TensorNear(OneStep({0, 0}, 0), {-0.1f, 0.1f}, {2}));
}

TEST(ApplyLambTest, GradOfTheWrongShapeIsAnError) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  ApplyLamb(s.WithOpName("lamb"), w.handle, w.handle, w.handle, Const(s, 0.1f),
            Const<float>(s, {1}, {1}), Const(s, 0.9f), Const(s, 0.999f),
            Const(s, 1e-6f), Const(s, 1.f));
  EXPECT_NE(s.status().message().find("ApplyLamb 'lamb': input 'grad' is "
                                      "float32[1] but variable 'w' is "
                                      "float32[2]"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
