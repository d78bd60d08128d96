// Cross-replica ops outside a replicated program (identity), their
// gradients, and ReplicaIndex. The replicated behaviour (a real all-reduce,
// bitwise identical replicas, groups, gradients) is tested in
// replicated_test.cc.
#include "ops/collective/cross_replica.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/collective/replica_index.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(CrossReplicaTest, IdentityOnOneReplica) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, -2, 3}, {3});
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, CrossReplicaSum(s, x)), {1, -2, 3}, {3}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, CrossReplicaMean(s, x)), {1, -2, 3}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReplicaIndex(s)), {0}, {}));
}

TEST(CrossReplicaTest, BoolIsRejected) {
  Scope s = Scope::NewRootScope();
  CrossReplicaSum(s.WithOpName("sum"),
                  Const(s, Tensor::FromVector<bool>({true})));
  EXPECT_NE(s.status().message().find("CrossReplicaSum 'sum'"),
            std::string::npos);
  EXPECT_NE(s.status().message().find("bool"), std::string::npos) << s.status();
}

TEST(CrossReplicaTest, Gradients) {
  for (bool mean : {false, true}) {
    Scope s = Scope::NewRootScope();
    Output x = Placeholder(s, DType::kFloat32, {2, 3});
    Output y = mean ? CrossReplicaMean(s, x) : CrossReplicaSum(s, x);
    auto err = MaxGradientError(s, {x}, {RandomTensor({2, 3}, -1, 1, 1)}, y);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
}

}  // namespace
}  // namespace ipuflow::ops
