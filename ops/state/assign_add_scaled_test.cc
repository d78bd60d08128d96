#include "ops/state/assign_add_scaled.h"

#include <cstring>

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/mul.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

// Runs `targets` `times` times, then returns `value`.
Tensor RunThenRead(const Scope& scope, const std::vector<Node*>& targets,
                   int times, Output value) {
  EXPECT_TRUE(scope.ok()) << scope.status();
  Session session(scope.graph());
  EXPECT_TRUE(session.Initialize().ok());
  for (int i = 0; i < times; ++i) {
    absl::Status s = session.Run({}, {}, targets, nullptr);
    EXPECT_TRUE(s.ok()) << s;
  }
  std::vector<Tensor> out;
  EXPECT_TRUE(session.Run({}, {value}, &out).ok());
  return out.empty() ? Tensor() : out[0];
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.TotalBytes() == b.TotalBytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

// Two float32 variables with the same random [301, 17] values, one for the
// fused op and one for the ops it replaces, and a random delta.
struct FusedAndUnfused {
  explicit FusedAndUnfused(int seed)
      : init(testing::RandomTensor(TensorShape({301, 17}), -3, 3, seed)),
        fused(Variable(scope.WithOpName("fused"), Const(scope, init))),
        unfused(Variable(scope.WithOpName("unfused"), Const(scope, init))),
        delta(Const(scope, testing::RandomTensor(TensorShape({301, 17}), -5, 5,
                                                 seed + 1))) {}
  Scope scope = Scope::NewRootScope();
  Tensor init;
  VariableHandle fused, unfused;
  Output delta;
};

TEST(AssignAddScaledTest, AddsTheScaledDelta) {
  Scope scope = Scope::NewRootScope();
  VariableHandle w =
      Variable(scope.WithOpName("w"), Const<float>(scope, {1, 2, 3}, {3}));
  Node* add =
      AssignAddScaled(scope, w.handle, Const<float>(scope, {8, -4, 0.5f}, {3}),
                      Const(scope, 0.25f));
  // 1 + 2, 2 - 1, 3 + 0.125; twice: 5, 0, 3.25.
  EXPECT_TRUE(testing::TensorNear(RunThenRead(scope, {add}, 1, w.value),
                                  {3, 1, 3.125f}, {3}));
  EXPECT_TRUE(testing::TensorNear(RunThenRead(scope, {add}, 2, w.value),
                                  {5, 0, 3.25f}, {3}));
}

// The product is rounded before the add. With d = s = 1 + 2^-23 the exact
// product is 1 + 2^-22 + 2^-46, rounded 1 + 2^-22; with acc = -(1 + 2^-22)
// the two-step result is exactly 0, a fused multiply-add would give 2^-46.
TEST(AssignAddScaledTest, RoundsTheProductFirstAsMulThenAssignAdd) {
  const float one_ulp = 1.0f + 0x1p-23f;
  const int n = 37;  // Whole vector packets and a scalar tail.
  Scope scope = Scope::NewRootScope();
  VariableHandle w = Variable(
      scope.WithOpName("w"),
      Const(scope, Tensor::FromVector<float>(
                       std::vector<float>(n, -(1.0f + 0x1p-22f)), {n})));
  Node* add = AssignAddScaled(
      scope, w.handle,
      Const(scope,
            Tensor::FromVector<float>(std::vector<float>(n, one_ulp), {n})),
      Const(scope, one_ulp));
  const Tensor got = RunThenRead(scope, {add}, 1, w.value);
  ASSERT_EQ(got.NumElements(), n);
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, got.data<float>() + i, 4);
    EXPECT_EQ(bits, 0u) << "element " << i << " = " << got.data<float>()[i];
  }
}

// Random values over several runs: bit for bit what Mul then AssignAdd give
// (the graph the gradient-accumulation builder used to emit).
TEST(AssignAddScaledTest, BitwiseMulThenAssignAdd) {
  for (const float scale : {0.125f, 1.0f / 3, 0.7f}) {
    FusedAndUnfused v(7);
    const Scope& scope = v.scope;
    Output s = Const(scope, scale);
    Node* a = AssignAddScaled(scope, v.fused.handle, v.delta, s);
    Node* b = AssignAdd(scope, v.unfused.handle, Mul(scope, v.delta, s));
    const Tensor got = RunThenRead(scope, {a}, 5, v.fused.value);
    const Tensor want = RunThenRead(scope, {b}, 5, v.unfused.value);
    EXPECT_TRUE(SameBits(got, want)) << "scale " << scale;
    EXPECT_FALSE(SameBits(got, v.init));
  }
}

// The pipeline's per-micro-batch scales: the first micro-batch overwrites
// (0, and a negative accumulator times 0 is -0), the mean's (1, 1/N) and
// RUNNING_MEAN's (m / (m + 1), 1 / (m + 1)).
TEST(AssignAddScaledTest, ScaledAddIsBitwiseMulMulAddAssign) {
  const float third = 1.0f / 3;
  for (const auto& [a, b] : std::vector<std::pair<float, float>>{
           {0.0f, 0.1f}, {1.0f, 0.1f}, {2 * third, third}, {1.0f, 1.0f}}) {
    FusedAndUnfused v(9);
    const Scope& scope = v.scope;
    Output va = Const(scope, a), db = Const(scope, b);
    Node* f = AssignScaledAddScaled(scope, v.fused.handle, v.delta, va, db);
    Node* u =
        Assign(scope, v.unfused.handle,
               Add(scope, Mul(scope, ReadVariable(scope, v.unfused.handle), va),
                   Mul(scope, v.delta, db)));
    const Tensor got = RunThenRead(scope, {f}, 3, v.fused.value);
    const Tensor want = RunThenRead(scope, {u}, 3, v.unfused.value);
    EXPECT_TRUE(SameBits(got, want)) << "scales " << a << ", " << b;
    EXPECT_FALSE(SameBits(got, v.init));
  }
}

TEST(AssignAddScaledTest, ScaledAddNamesItselfForOtherDTypes) {
  Scope scope = Scope::NewRootScope();
  Tensor h0(DType::kFloat16, {2});
  VariableHandle h =
      Variable(scope.WithOpName("h"), Const(scope.WithOpName("h0"), h0));
  AssignScaledAddScaled(scope.WithOpName("acc"), h.handle,
                        Const(scope.WithOpName("d"), h0), Const(scope, 1.0f),
                        Const(scope, 0.5f));
  ASSERT_TRUE(scope.ok()) << scope.status();
  Session session(scope.graph());
  ASSERT_TRUE(session.Initialize().ok());
  const absl::Status s =
      session.Run({}, {}, {scope.graph()->FindNode("acc")}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("AssignScaledAddScaled takes float32"),
            std::string::npos)
      << s;
}

TEST(AssignAddScaledTest, RefusesOtherDTypesAndShapes) {
  Scope scope = Scope::NewRootScope();
  VariableHandle h =
      Variable(scope.WithOpName("h"),
               Const(scope.WithOpName("h0"), Tensor(DType::kFloat16, {2})));
  AssignAddScaled(scope.WithOpName("wrong_delta"), h.handle,
                  Const<float>(scope, {1, 2}, {2}), Const(scope, 0.5f));
  EXPECT_EQ(scope.status().code(), absl::StatusCode::kInvalidArgument);

  Scope s2 = Scope::NewRootScope();
  VariableHandle w =
      Variable(s2.WithOpName("w"), Const<float>(s2, {1, 2, 3}, {3}));
  AssignAddScaled(s2.WithOpName("bad"), w.handle,
                  Const<float>(s2, {1, 2, 3}, {3}),
                  Const<float>(s2, {1, 2}, {2}));  // Scale not a scalar.
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::ops
