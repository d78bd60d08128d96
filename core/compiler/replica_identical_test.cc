// Replica identity: sources, what follows its inputs, collectives over all
// replicas or groups, placeholders, and variables written with identical or
// per-replica values.
#include "core/compiler/replica_identical.h"

#include "core/compiler/test_graph.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/replica_index.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::compiler {
namespace {

bool IdenticalIn(const Graph& g, const ProgramSpec& spec, const Output& o) {
  const FrontPhases f = RunFrontPhases(g, spec);
  const std::vector<bool> identical = FindReplicaIdentical(f.order);
  return identical[f.order.position[o.node->id()]];
}

TEST(ReplicaIdenticalTest, FollowsInputsFromSources) {
  Scope s = Scope::NewRootScope();
  Output c = ops::Const(s, 2.f);
  Output x = ops::Placeholder(s, DType::kFloat32, {});
  Output r = ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32);
  Output cc = ops::Mul(s, c, c);             // Identical.
  Output cx = ops::Add(s, c, x);             // A feed may differ per replica.
  Output cr = ops::Add(s, cc, r);            // The replica index differs.
  Output all = ops::CrossReplicaSum(s, cr);  // All replicas: identical again.
  Output grouped = ops::CrossReplicaSum(s, cr, ReplicaGroups::Consecutive(2));
  ASSERT_TRUE(s.ok()) << s.status();
  const ProgramSpec spec =
      Spec({x}, {TensorShape()}, {cc, cx, cr, all, grouped});
  const Graph& g = *s.graph();
  EXPECT_TRUE(IdenticalIn(g, spec, c));
  EXPECT_TRUE(IdenticalIn(g, spec, cc));
  EXPECT_FALSE(IdenticalIn(g, spec, cx));
  EXPECT_FALSE(IdenticalIn(g, spec, r));
  EXPECT_FALSE(IdenticalIn(g, spec, cr));
  EXPECT_TRUE(IdenticalIn(g, spec, all));
  EXPECT_FALSE(IdenticalIn(g, spec, grouped));
}

TEST(ReplicaIdenticalTest, VariablesStayIdenticalOnlyIfWrittenSo) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w = ops::Variable(s.WithOpName("w"), ops::Const(s, 1.f));
  ops::VariableHandle acc =
      ops::Variable(s.WithOpName("acc"), ops::Const(s, 0.f));
  Output r = ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32);
  // acc <- acc + replica: per replica. w <- w + allreduce(acc): identical.
  ops::Assign(s, acc.handle, ops::Add(s, acc.value, r));
  Output acc_read = ops::ReadVariable(s, acc.handle);
  ops::Assign(s, w.handle,
              ops::Add(s, w.value, ops::CrossReplicaSum(s, acc_read)));
  Output w_read = ops::ReadVariable(s, w.handle);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<bool> identical = ReplicaIdenticalNodes(*s.graph());
  EXPECT_TRUE(identical[w_read.node->id()]);
  EXPECT_FALSE(identical[acc_read.node->id()]);
  // Only the ReplicaIndex and what depends on the accumulator differ.
  const ProgramSpec spec = Spec({}, {}, {w_read, acc_read});
  EXPECT_TRUE(IdenticalIn(*s.graph(), spec, w_read));
  EXPECT_FALSE(IdenticalIn(*s.graph(), spec, acc_read));
}

}  // namespace
}  // namespace ipuflow::compiler
