#include "ops/state/apply_adam.h"

#include <cmath>

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

// Runs ApplyAdam from w = [1, 2], m = v = 0 with lr 0.1, beta1 0.9, beta2
// 0.999, epsilon 1e-8: step 1 with grad [0.5, -1], step 2 with [1, 1].
// Returns {w, m, v} after each step.
std::vector<Tensor> TwoSteps(float weight_decay) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  VariableHandle m = Variable(s.WithOpName("m"), Const<float>(s, {0, 0}, {2}));
  VariableHandle v = Variable(s.WithOpName("v"), Const<float>(s, {0, 0}, {2}));
  Output grad = Placeholder(s, DType::kFloat32, {2});
  Output t = Placeholder(s, DType::kFloat32, {});
  Node* step = ApplyAdam(s, w.handle, m.handle, v.handle, Const(s, 0.1f), grad,
                         Const(s, 0.9f), Const(s, 0.999f), Const(s, 1e-8f), t,
                         weight_decay);
  EXPECT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  EXPECT_TRUE(session.Initialize().ok());
  const std::vector<std::vector<float>> grads = {{0.5f, -1}, {1, 1}};
  std::vector<Tensor> results, out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(session
                    .Run({{grad, Tensor::FromVector<float>(grads[i])},
                          {t, Tensor::Scalar<float>(i + 1)}},
                         {}, {step}, nullptr)
                    .ok());
    EXPECT_TRUE(session.Run({}, {w.value, m.value, v.value}, &out).ok());
    results.insert(results.end(), out.begin(), out.end());
  }
  return results;
}

TEST(ApplyAdamTest, TwoSteps) {
  // Step 1: m = 0.1 g = [0.05, -0.1];  v = 0.001 g^2 = [0.00025, 0.001];
  //   m_hat = m / 0.1 = [0.5, -1];  sqrt(v_hat) = sqrt(v / 0.001) = [0.5, 1];
  //   w -= 0.1 * [0.5/0.5, -1/1] -> [0.9, 2.1].
  // Step 2: m = 0.9 m + 0.1 [1, 1] = [0.145, 0.01];
  //   v = 0.999 v + 0.001 [1, 1] = [0.00124975, 0.001999];
  //   m_hat = m / 0.19 = [0.7631579, 0.0526316];
  //   sqrt(v_hat) = sqrt(v / 0.001999) = [0.7906880, 1];
  //   w -= 0.1 * [0.9651820, 0.0526316] -> [0.8034818, 2.0947368].
  std::vector<Tensor> r = TwoSteps(0);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_TRUE(TensorNear(r[0], {0.9f, 2.1f}, {2}));
  EXPECT_TRUE(TensorNear(r[1], {0.05f, -0.1f}, {2}));
  // 1 - beta2 is 1 - 0.999f = 0.00099998713 in float32 (beta2 is a float32
  // tensor), so v is 1.3e-5 off in relative terms.
  EXPECT_TRUE(TensorNear(r[2], {0.00025f, 0.001f}, {2}, 0, 2e-5));
  EXPECT_TRUE(TensorNear(r[3], {0.8034818f, 2.0947368f}, {2}));
  EXPECT_TRUE(TensorNear(r[4], {0.145f, 0.01f}, {2}));
  EXPECT_TRUE(TensorNear(r[5], {0.00124975f, 0.001999f}, {2}, 0, 2e-5));
}

TEST(ApplyAdamTest, DecoupledWeightDecayMatchesTorchAdamW) {
  // torch.optim.AdamW: w *= 1 - lr * wd, then the Adam step above.
  // Step 1: w = [1, 2] * 0.99 - [0.1, -0.1] = [0.89, 2.08].
  // Step 2: w = [0.89, 2.08] * 0.99 - [0.0965182, 0.0052632]
  //           = [0.7845818, 2.0539368].
  std::vector<Tensor> r = TwoSteps(0.1f);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_TRUE(TensorNear(r[0], {0.89f, 2.08f}, {2}));
  EXPECT_TRUE(TensorNear(r[3], {0.7845818f, 2.0539368f}, {2}));
  // The moments do not see the decay.
  EXPECT_TRUE(TensorNear(r[4], {0.145f, 0.01f}, {2}));
}

// The in-place float32 path over sizes that do not fill whole packets or
// split evenly over threads, three AdamW steps, against the update written
// as a scalar loop in float32 (the old path's arithmetic, element by
// element).
TEST(ApplyAdamTest, InPlaceMatchesScalarLoopOnOddSizes) {
  const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.05f;
  for (int64_t n : {1, 7, 9, 1001, 70001}) {
    SCOPED_TRACE(n);
    Tensor w0 = ::ipuflow::testing::RandomTensor({n}, -1, 1, 1);
    Scope s = Scope::NewRootScope();
    VariableHandle w = Variable(s.WithOpName("w"), Const(s, w0));
    VariableHandle m = Variable(
        s.WithOpName("m"), Const(s, Tensor::Filled(DType::kFloat32, {n}, 0)));
    VariableHandle v = Variable(
        s.WithOpName("v"), Const(s, Tensor::Filled(DType::kFloat32, {n}, 0)));
    Output grad = Placeholder(s, DType::kFloat32, {n});
    Output t = Placeholder(s, DType::kFloat32, {});
    Node* step = ApplyAdam(s, w.handle, m.handle, v.handle, Const(s, lr), grad,
                           Const(s, b1), Const(s, b2), Const(s, eps), t, wd);
    ASSERT_TRUE(s.ok()) << s.status();
    SessionOptions options;
    options.intra_op_threads = 2;
    Session session(s.graph(), options);
    ASSERT_TRUE(session.Initialize().ok());
    std::vector<float> rw(w0.data<float>(), w0.data<float>() + n), rm(n, 0),
        rv(n, 0);
    for (int i = 1; i <= 3; ++i) {
      const Tensor g = ::ipuflow::testing::RandomTensor({n}, -1, 1, 10 + i);
      ASSERT_TRUE(session
                      .Run({{grad, g}, {t, Tensor::Scalar<float>(i)}}, {},
                           {step}, nullptr)
                      .ok());
      const double bc1 = 1 - std::pow(double{b1}, double(i));
      const float step_size = static_cast<float>(lr / bc1);
      const float sqrt_bc2 =
          static_cast<float>(std::sqrt(1 - std::pow(double{b2}, double(i))));
      for (int64_t j = 0; j < n; ++j) {
        const float gj = g.data<float>()[j];
        rm[j] = b1 * rm[j] + (1 - b1) * gj;
        rv[j] = b2 * rv[j] + (1 - b2) * gj * gj;
        const float delta =
            lr * wd * rw[j] +
            step_size * rm[j] / (std::sqrt(rv[j]) / sqrt_bc2 + eps);
        rw[j] -= delta;
      }
    }
    std::vector<Tensor> out;
    ASSERT_TRUE(session.Run({}, {w.value, m.value, v.value}, &out).ok());
    EXPECT_TRUE(TensorNear(out[0], rw, {n}, 1e-6, 1e-5));
    EXPECT_TRUE(TensorNear(out[1], rm, {n}, 1e-7, 1e-5));
    EXPECT_TRUE(TensorNear(out[2], rv, {n}, 1e-9, 1e-5));
  }
}

TEST(ApplyAdamTest, StepZeroIsAnError) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1}, {1}));
  VariableHandle m = Variable(s.WithOpName("m"), Const<float>(s, {0}, {1}));
  VariableHandle v = Variable(s.WithOpName("v"), Const<float>(s, {0}, {1}));
  Node* step =
      ApplyAdam(s.WithOpName("adam"), w.handle, m.handle, v.handle,
                Const(s, 0.1f), Const<float>(s, {1}, {1}), Const(s, 0.9f),
                Const(s, 0.999f), Const(s, 1e-8f), Const(s, 0.f));
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  absl::Status st = session.Run({}, {}, {step}, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ApplyAdam 'adam'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("step 0 >= 1"), std::string::npos) << st;
}

TEST(ApplyAdamTest, NegativeWeightDecayIsAnError) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1}, {1}));
  ApplyAdam(s.WithOpName("adam"), w.handle, w.handle, w.handle, Const(s, 0.1f),
            Const<float>(s, {1}, {1}), Const(s, 0.9f), Const(s, 0.999f),
            Const(s, 1e-8f), Const(s, 1.f), -1);
  EXPECT_NE(s.status().message().find("ApplyAdam 'adam': weight_decay must be "
                                      ">= 0, got -1"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
