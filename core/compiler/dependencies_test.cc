// Dependencies: data and control edges, and variable accesses in build
// order (an access after the last write; a write after the reads since).
#include "core/compiler/dependencies.h"

#include "core/compiler/test_graph.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/state/assign.h"
#include "ops/state/no_op.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::compiler {
namespace {

TEST(DependenciesTest, DataControlAndVariableAccessOrder) {
  Scope s = Scope::NewRootScope();
  Output c = ops::Const(s, 1.f);                                     // 0
  Output v = ops::Variable(s.WithOpName("v"), DType::kFloat32, {});  // 1
  Output r1 = ops::ReadVariable(s, v);                               // 2
  Node* w1 = ops::Assign(s, v, c);                                   // 3
  Output r2 = ops::ReadVariable(s, v);                               // 4
  Output r3 = ops::ReadVariable(s, v);                               // 5
  Node* w2 = ops::AssignAdd(s, v, r2);                               // 6
  Output r4 = ops::ReadVariable(s, v);                               // 7
  // Two nodes of one shared variable are ordered as one variable.
  ops::VariableOptions shared;
  shared.shared_name = "shared";
  Output u1 =
      ops::Variable(s.WithOpName("u1"), DType::kFloat32, {}, shared);  // 8
  Output u2 =
      ops::Variable(s.WithOpName("u2"), DType::kFloat32, {}, shared);  // 9
  Node* wu = ops::Assign(s, u1, c);                                    // 10
  Output ru = ops::ReadVariable(s, u2);                                // 11
  Node* done = ops::NoOp(s.WithControlDependencies({w2, wu}));         // 12
  ASSERT_EQ(done->id(), 12);
  const FrontPhases f =
      RunFrontPhases(*s.graph(), Spec({}, {}, {r1, r3, r4, ru}, {w1, done}));
  ASSERT_EQ(f.order.size(), 13);  // Everything: positions are ids.
  const Dependencies deps = FindDependencies(f.order, f.values);
  const std::vector<std::set<int>> expected = {
      {},            // c
      {},            // v
      {1},           // r1
      {0, 1, 2},     // w1: c, v, and r1 (read before it was built)
      {1, 3},        // r2: after w1
      {1, 3},        // r3: after w1, not after r2 (reads may overlap)
      {1, 3, 4, 5},  // w2: r2 (data), w1, r2 and r3
      {1, 6},        // r4: after w2
      {},            // u1
      {},            // u2
      {0, 8},        // wu
      {9, 10},       // ru: after wu, through the shared name
      {6, 10},       // done: control inputs
  };
  EXPECT_EQ(deps.preds, expected);
  EXPECT_EQ(deps.variables, (std::vector<std::string>{"shared", "v"}));
}

TEST(DependenciesTest, NoEdgeFromAFedValue) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  Output y = ops::Add(s, x, x);
  Output z = ops::Add(s, y, x);
  Output w = ops::Add(s, z, y);
  const FrontPhases f = RunFrontPhases(
      *s.graph(), Spec({y, x}, {TensorShape({2}), TensorShape({2})}, {w}));
  // z (0), w (1); x and y are fed.
  ASSERT_EQ(f.order.size(), 2);
  const Dependencies deps = FindDependencies(f.order, f.values);
  EXPECT_EQ(deps.preds, (std::vector<std::set<int>>{{}, {0}}));
  EXPECT_TRUE(deps.variables.empty());
}

}  // namespace
}  // namespace ipuflow::compiler
