// The collective ops on R replicas (IPUStrategy over R emulated IPUs, each
// replica on its own thread): values by hand, replica groups, padding,
// bitwise identical replicas, errors, and gradients checked against finite
// differences of the loss summed over the replicas.
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "core/gradients.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/gather.h"
#include "ops/array/reshape.h"
#include "ops/collective/all_gather.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/reduce_scatter.h"
#include "ops/collective/replica_index.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::TensorNear;
using Op = CollectiveGroup::ReduceOp;

std::unique_ptr<IPUSystem> MakeSystem(int ipus) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  return std::move(system).value();
}

// (r + 1) * values on replica r.
Output PerReplica(const Scope& s, const std::vector<float>& values,
                  const TensorShape& shape) {
  Output r1 = Add(s, Cast(s, ReplicaIndex(s), DType::kFloat32), Const(s, 1.0f));
  return Mul(s, Const<float>(s, values, shape), r1);
}

absl::StatusOr<Tensor> RunOnReplicas(int R, const Scope& s, Output fetch) {
  auto system = MakeSystem(R);
  IPUStrategy strategy(system.get());
  ASSIGN_OR_RETURN(std::vector<Tensor> out, strategy.Run(*s.graph(), {fetch}));
  return out[0];
}

TEST(ReplicatedCollectiveTest, CrossReplicaSumWithinGroups) {
  Scope s = Scope::NewRootScope();
  Output x = PerReplica(s, {1}, {1});
  Output cons = CrossReplicaSum(s, x, ReplicaGroups::Consecutive(2));
  Output orth = CrossReplicaSum(s, x, ReplicaGroups::Orthogonal(2));
  Output mean = CrossReplicaMean(s, x, ReplicaGroups::Orthogonal(4));
  auto system = MakeSystem(8);
  IPUStrategy strategy(system.get());
  auto out = strategy.Run(*s.graph(), {cons, orth, mean});
  ASSERT_TRUE(out.ok()) << out.status();
  // {0,1} {2,3} {4,5} {6,7} of 1..8.
  EXPECT_TRUE(TensorNear((*out)[0], {3, 3, 7, 7, 11, 11, 15, 15}, {8, 1}));
  // {0,4} {1,5} {2,6} {3,7}.
  EXPECT_TRUE(TensorNear((*out)[1], {6, 8, 10, 12, 6, 8, 10, 12}, {8, 1}));
  // {0,2,4,6} -> 16/4, {1,3,5,7} -> 20/4.
  EXPECT_TRUE(TensorNear((*out)[2], {4, 5, 4, 5, 4, 5, 4, 5}, {8, 1}));
}

TEST(ReplicatedCollectiveTest, ReduceScatterShardsWithPadding) {
  Scope s = Scope::NewRootScope();
  Output x = PerReplica(s, {1, 2, 3, 4, 5}, {5});
  Output all = ReduceScatter(s, x);
  EXPECT_EQ(all.shape().DebugString(), "[?]");  // G known when running.
  Output pairs = ReduceScatter(s, x, Op::kMean, ReplicaGroups::Consecutive(2));
  EXPECT_EQ(pairs.shape(), TensorShape({3}));
  auto system = MakeSystem(4);
  IPUStrategy strategy(system.get());
  auto out = strategy.Run(*s.graph(), {all, pairs});
  ASSERT_TRUE(out.ok()) << out.status();
  // Sum over 4 replicas: 10 * [1 2 3 4 5], in chunks of 2, zero-padded.
  EXPECT_TRUE(TensorNear((*out)[0], {10, 20, 30, 40, 50, 0, 0, 0}, {4, 2}));
  // Means over {0,1}: 1.5 * x, and {2,3}: 3.5 * x, in chunks of 3.
  EXPECT_TRUE(TensorNear(
      (*out)[1], {1.5, 3, 4.5, 6, 7.5, 0, 3.5, 7, 10.5, 14, 17.5, 0}, {4, 3}));
}

TEST(ReplicatedCollectiveTest, AllGatherStacksTheGroup) {
  Scope s = Scope::NewRootScope();
  Output x = PerReplica(s, {1, 2}, {2});
  Output orth = AllGather(s, x, ReplicaGroups::Orthogonal(2));
  EXPECT_EQ(orth.shape(), TensorShape({2, 2}));
  auto out = RunOnReplicas(4, s, orth);
  ASSERT_TRUE(out.ok()) << out.status();
  // {0,2}: [x0; x2], {1,3}: [x1; x3].
  EXPECT_TRUE(TensorNear(*out, {1, 2, 3, 6, 2, 4, 4, 8, 1, 2, 3, 6, 2, 4, 4, 8},
                         {4, 2, 2}));
}

TEST(ReplicatedCollectiveTest, ScatterThenGatherIsBitwiseTheAllReduce) {
  const int R = 4;
  Scope s = Scope::NewRootScope();
  // Values whose float sum depends on the order of addition.
  Output r1 = Add(s, Cast(s, ReplicaIndex(s), DType::kFloat32), Const(s, 1.0f));
  Output x =
      Mul(s, Const(s, RandomTensor({7}, -1, 1, 3)), Mul(s, r1, Const(s, 1e3f)));
  x = Add(s, x, Const(s, RandomTensor({7}, -1e-3f, 1e-3f, 4)));
  Output sum = CrossReplicaSum(s, x);
  Output regathered = Reshape(s, AllGather(s, ReduceScatter(s, x)), {-1});
  auto system = MakeSystem(R);
  IPUStrategy strategy(system.get());
  auto out = strategy.Run(*s.graph(), {sum, regathered});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& a = (*out)[0];  // [4, 7]
  const Tensor& b = (*out)[1];  // [4, 8]: 2 per chunk, one padding zero.
  ASSERT_EQ(b.shape(), TensorShape({R, 8}));
  for (int r = 0; r < R; ++r) {
    EXPECT_EQ(std::memcmp(a.data<float>() + 7 * r, a.data<float>(), 28), 0);
    EXPECT_EQ(std::memcmp(b.data<float>() + 8 * r, a.data<float>(), 28), 0);
    EXPECT_EQ(b.data<float>()[8 * r + 7], 0.0f);
  }
}

TEST(ReplicatedCollectiveTest, GroupSizeMustDivideTheReplicas) {
  Scope s = Scope::NewRootScope();
  Output y = ReduceScatter(s.WithOpName("rs"), PerReplica(s, {1, 2}, {2}),
                           Op::kSum, ReplicaGroups::Consecutive(3));
  auto out = RunOnReplicas(4, s, y);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(out.status().message());
  EXPECT_NE(msg.find("ReduceScatter 'rs'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("replicas, 4"), std::string::npos) << msg;
}

TEST(ReplicatedCollectiveTest, BadAttributesAreRejectedWhenBuilding) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2}, {2});
  s.AddNode("AllGather", {x}, {{"replica_group_size", int64_t{-1}}});
  EXPECT_NE(s.status().message().find("replica_group_size is -1"),
            std::string::npos)
      << s.status();
  Scope t = Scope::NewRootScope();
  t.AddNode("ReduceScatter", {Const<float>(t, {1}, {1})}, {{"op", "max"}});
  EXPECT_NE(t.status().message().find("'max'"), std::string::npos)
      << t.status();
  Scope u = Scope::NewRootScope();
  AllGather(u, Const(u, Tensor::FromVector<bool>({true})));
  EXPECT_NE(u.status().message().find("bool"), std::string::npos) << u.status();
}

TEST(ReplicatedCollectiveTest, OnTheHostActAsOneReplica) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(TensorNear(testing::RunOne(s, {}, ReduceScatter(s, x)),
                         {1, 2, 3, 4}, {4}));
  EXPECT_TRUE(TensorNear(testing::RunOne(s, {}, AllGather(s, x)), {1, 2, 3, 4},
                         {1, 2, 2}));
  auto bad = testing::RunGraph(
      s, {}, {CrossReplicaSum(s, x, ReplicaGroups::Consecutive(2))});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// L = sum_r sum(w_r * flat(f(x_r))), with x_r = X[r] and w_r = W[r] fed.
// Each replica's dL/dx_r (AddGradients inside the replicated program) must
// match the central difference of L in X[r]; f is linear, so the
// difference is exact up to rounding.
void ExpectGradientMatches(
    int R, const TensorShape& x_shape, int64_t y_size,
    const std::function<Output(const Scope&, Output)>& f) {
  Scope s = Scope::NewRootScope();
  std::vector<int64_t> dims = {R};
  for (int i = 0; i < x_shape.rank(); ++i) dims.push_back(x_shape.dim(i));
  const TensorShape all_x{absl::Span<const int64_t>(dims)};
  Output X = Placeholder(s, DType::kFloat32, all_x);
  Output W = Placeholder(s, DType::kFloat32, {R, y_size});
  Output r = ReplicaIndex(s);
  Output x = Gather(s, X, r);
  Output y = Reshape(s, f(s, x), {-1});
  Output loss = ReduceSum(s, Mul(s, y, Gather(s, W, r)));
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {loss}, {x}, {}, &grads).ok());
  ASSERT_TRUE(s.status().ok()) << s.status();

  auto system = MakeSystem(R);
  IPUStrategy strategy(system.get());
  Tensor xv = RandomTensor(all_x, -1, 1, 7);
  const Tensor wv = RandomTensor({R, y_size}, -1, 1, 8);
  auto total = [&](const Tensor& xs) -> double {
    auto out = strategy.Run(*s.graph(), {loss}, {}, {{X, xs}, {W, wv}});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return 0;
    double sum = 0;
    for (int k = 0; k < R; ++k) sum += (*out)[0].data<float>()[k];
    return sum;
  };
  auto out = strategy.Run(*s.graph(), {grads[0]}, {}, {{X, xv}, {W, wv}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& analytic = (*out)[0];  // [R, ...x_shape]
  ASSERT_EQ(analytic.shape(), all_x);
  const float eps = 0.5f;
  for (int64_t i = 0; i < xv.NumElements(); ++i) {
    const float keep = xv.data<float>()[i];
    xv.data<float>()[i] = keep + eps;
    const double up = total(xv);
    xv.data<float>()[i] = keep - eps;
    const double down = total(xv);
    xv.data<float>()[i] = keep;
    EXPECT_NEAR(analytic.data<float>()[i], (up - down) / (2 * eps), 1e-3)
        << "element " << i << " (replica " << i / x_shape.num_elements() << ")";
  }
}

TEST(ReplicatedCollectiveTest, CrossReplicaGradientsWithinGroups) {
  ExpectGradientMatches(4, {2, 3}, 6, [](const Scope& s, Output x) {
    return CrossReplicaSum(s, x, ReplicaGroups::Consecutive(2));
  });
  ExpectGradientMatches(4, {3}, 3, [](const Scope& s, Output x) {
    return CrossReplicaMean(s, x, ReplicaGroups::Orthogonal(2));
  });
}

TEST(ReplicatedCollectiveTest, ReduceScatterGradientIsAllGather) {
  // n = 5 over 4 replicas: chunks of 2, padded.
  ExpectGradientMatches(
      4, {5}, 2, [](const Scope& s, Output x) { return ReduceScatter(s, x); });
  ExpectGradientMatches(4, {5}, 3, [](const Scope& s, Output x) {
    return ReduceScatter(s, x, Op::kMean, ReplicaGroups::Orthogonal(2));
  });
  // Mean over all replicas: G counted when running.
  ExpectGradientMatches(4, {5}, 2, [](const Scope& s, Output x) {
    return ReduceScatter(s, x, Op::kMean);
  });
}

TEST(ReplicatedCollectiveTest, AllGatherGradientIsReduceScatter) {
  ExpectGradientMatches(4, {2, 3}, 12, [](const Scope& s, Output x) {
    return AllGather(s, x, ReplicaGroups::Orthogonal(2));
  });
  ExpectGradientMatches(
      4, {3}, 12, [](const Scope& s, Output x) { return AllGather(s, x); });
  ExpectGradientMatches(2, {3}, 6, [](const Scope& s, Output x) {
    return AllGather(s, x, ReplicaGroups::Consecutive(2));
  });
}

// Issue 9: a collective's error reaches the host naming the node and the
// replica, and the strategy runs the next collective normally.
TEST(ReplicatedCollectiveTest, ErrorsNameTheNodeAndTheReplica) {
  Scope s = Scope::NewRootScope();
  Output x = PerReplica(s, {1}, {1});
  // Groups of 3 cannot divide 4 replicas: known only when it runs.
  Output bad = CrossReplicaSum(s.WithOpName("bad_sum"), x,
                               ReplicaGroups::Consecutive(3));
  Output good = CrossReplicaSum(s.WithOpName("good_sum"), x);
  auto system = MakeSystem(4);
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), {bad}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  // Every replica fails alike: whichever reports first is the root cause.
  bool names_a_replica = false;
  for (int r = 0; r < 4; ++r) {
    names_a_replica |=
        st.message().find(absl::StrCat("replica ", r, " (IPU ", r, ")")) !=
        std::string::npos;
  }
  EXPECT_TRUE(names_a_replica) << st;
  EXPECT_NE(st.message().find("'bad_sum'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("size 3"), std::string::npos) << st;
  auto out = strategy.Run(*s.graph(), {good});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {10, 10, 10, 10}, {4, 1}));
}

}  // namespace
}  // namespace ipuflow::ops
