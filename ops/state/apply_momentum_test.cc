#include "ops/state/apply_momentum.h"

#include "absl/strings/str_cat.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

// Two steps from w = [1, 2], accum = 0 with lr 0.1, momentum 0.9 and the
// constant gradient [1, -2]; returns {w, accum} after each step.
std::vector<Tensor> TwoSteps(bool nesterov) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  VariableHandle a =
      Variable(s.WithOpName("accum"), Const<float>(s, {0, 0}, {2}));
  Node* step =
      ApplyMomentum(s, w.handle, a.handle, Const(s, 0.1f),
                    Const<float>(s, {1, -2}, {2}), Const(s, 0.9f), nesterov);
  EXPECT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  EXPECT_TRUE(session.Initialize().ok());
  std::vector<Tensor> results, out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(session.Run({}, {}, {step}, nullptr).ok());
    EXPECT_TRUE(session.Run({}, {w.value, a.value}, &out).ok());
    results.insert(results.end(), out.begin(), out.end());
  }
  return results;
}

TEST(ApplyMomentumTest, Plain) {
  // 1: accum = [1, -2];  w -= 0.1 * accum -> [0.9, 2.2]
  // 2: accum = 0.9 * [1, -2] + [1, -2] = [1.9, -3.8];  w -> [0.71, 2.58]
  std::vector<Tensor> r = TwoSteps(false);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_TRUE(TensorNear(r[0], {0.9f, 2.2f}, {2}));
  EXPECT_TRUE(TensorNear(r[1], {1, -2}, {2}));
  EXPECT_TRUE(TensorNear(r[2], {0.71f, 2.58f}, {2}));
  EXPECT_TRUE(TensorNear(r[3], {1.9f, -3.8f}, {2}));
}

TEST(ApplyMomentumTest, Nesterov) {
  // 1: accum = [1, -2];  w -= 0.1 * (g + 0.9 * accum) = 0.1 * [1.9, -3.8]
  //    -> [0.81, 2.38]
  // 2: accum = [1.9, -3.8];  w -= 0.1 * ([1, -2] + [1.71, -3.42])
  //    = [0.271, -0.542] -> [0.539, 2.922]
  std::vector<Tensor> r = TwoSteps(true);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_TRUE(TensorNear(r[0], {0.81f, 2.38f}, {2}));
  EXPECT_TRUE(TensorNear(r[1], {1, -2}, {2}));
  EXPECT_TRUE(TensorNear(r[2], {0.539f, 2.922f}, {2}));
  EXPECT_TRUE(TensorNear(r[3], {1.9f, -3.8f}, {2}));
}

TEST(ApplyMomentumTest, SlotOfAnotherShapeNamesBothVariables) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  VariableHandle a = Variable(s.WithOpName("accum"), Const<float>(s, {0}, {1}));
  ApplyMomentum(s, w.handle, a.handle, Const(s, 0.1f),
                Const<float>(s, {1, -2}, {2}), Const(s, 0.9f));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ApplyMomentum: slot variable 'accum' is float32[1] but "
                "variable 'w' is float32[2]"),
            std::string::npos)
      << s.status();
}

// The in-place float32 path on sizes around the packet width and split
// over 2 intra-op threads: three steps against the update as a scalar
// float32 loop.
TEST(ApplyMomentumTest, InPlaceMatchesScalarLoopOnOddSizes) {
  const float lr = 0.05f, mu = 0.9f;
  for (bool nesterov : {false, true}) {
    for (int64_t n : {1, 9, 1001, 70001}) {
      SCOPED_TRACE(absl::StrCat("n=", n, nesterov ? " nesterov" : ""));
      const Tensor w0 = ::ipuflow::testing::RandomTensor({n}, -1, 1, 1);
      Scope s = Scope::NewRootScope();
      VariableHandle w = Variable(s.WithOpName("w"), Const(s, w0));
      VariableHandle a =
          Variable(s.WithOpName("accum"),
                   Const(s, Tensor::Filled(DType::kFloat32, {n}, 0)));
      Output grad = Placeholder(s, DType::kFloat32, {n});
      Node* step = ApplyMomentum(s, w.handle, a.handle, Const(s, lr), grad,
                                 Const(s, mu), nesterov);
      ASSERT_TRUE(s.ok()) << s.status();
      SessionOptions options;
      options.intra_op_threads = 2;
      Session session(s.graph(), options);
      ASSERT_TRUE(session.Initialize().ok());
      std::vector<float> rw(w0.data<float>(), w0.data<float>() + n), ra(n, 0);
      for (int i = 0; i < 3; ++i) {
        const Tensor g = ::ipuflow::testing::RandomTensor({n}, -1, 1, 5 + i);
        ASSERT_TRUE(session.Run({{grad, g}}, {}, {step}, nullptr).ok());
        for (int64_t j = 0; j < n; ++j) {
          const float gj = g.data<float>()[j];
          ra[j] = mu * ra[j] + gj;
          rw[j] -= nesterov ? lr * (gj + mu * ra[j]) : lr * ra[j];
        }
      }
      std::vector<Tensor> out;
      ASSERT_TRUE(session.Run({}, {w.value, a.value}, &out).ok());
      EXPECT_TRUE(TensorNear(out[0], rw, {n}, 1e-6, 1e-5));
      EXPECT_TRUE(TensorNear(out[1], ra, {n}, 1e-6, 1e-5));
    }
  }
}

TEST(ApplyMomentumTest, UninitialisedSlotIsFailedPrecondition) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  Output a = Variable(s.WithOpName("accum"), DType::kFloat32, {2});
  Node* step = ApplyMomentum(s.WithOpName("m"), w.handle, a, Const(s, 0.1f),
                             Const<float>(s, {1, -2}, {2}), Const(s, 0.9f));
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  absl::Status st = session.Run({}, {}, {step}, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("ApplyMomentum 'm'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("variable 'accum'"), std::string::npos) << st;
}

}  // namespace
}  // namespace ipuflow::ops
