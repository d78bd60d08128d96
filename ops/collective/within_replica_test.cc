// Collectives within a replica (Graphcore's within_replica_ops): values by
// hand after Graphcore's docstring examples, the padding's part in every
// op, placement (output i on IPU i) and the same results on a sharded
// IPUStrategy, gradients by finite differences, and the errors.
#include "ops/collective/within_replica.h"

#include <cmath>
#include <vector>

#include "core/gradients.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add_n.h"
#include "ops/math/reduce_sum.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

// Graphcore's all_reduce example: IPU0 [x0, y0], IPU1-3 [x, y, z].
std::vector<Output> Example(const Scope& s) {
  return {Const<float>(s.WithIpu(0), {1, 2}, {2}),
          Const<float>(s.WithIpu(1), {3, 4, 5}, {3}),
          Const<float>(s.WithIpu(2), {-1, 0.5f, 2}, {3}),
          Const<float>(s.WithIpu(3), {2, 2, -3}, {3})};
}

TEST(WithinReplicaTest, AllReduceEveryOpPadsWithZeros) {
  struct Case {
    std::string op;
    std::vector<float> want;
  };
  // z of IPU0 is the padding 0: op(0, 5, 2, -3).
  const std::vector<Case> cases = {{"sum", {5, 8.5f, 4}},
                                   {"mul", {-6, 8, 0}},
                                   {"min", {-1, 0.5f, -3}},
                                   {"max", {3, 4, 5}},
                                   {"local", {}}};
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    const std::vector<Output> in = Example(s);
    std::vector<Output> y = WithinReplicaAllReduce(s, in, c.op);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(y.size(), 4u);
    auto out = RunGraph(s, {}, y);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(y[i].node->ipu(), i);
      const std::vector<float> local[] = {
          {1, 2, 0}, {3, 4, 5}, {-1, 0.5f, 2}, {2, 2, -3}};
      EXPECT_TRUE(
          TensorNear((*out)[i], c.op == "local" ? local[i] : c.want, {3}, 0, 0))
          << c.op << " shard " << i;
    }
  }
}

TEST(WithinReplicaTest, ReduceScatterGivesShardIItsChunk) {
  // 4 shards of [x, y, z]: chunks of ceil(3 / 4) = 1; shard 3 the padding.
  Scope s = Scope::NewRootScope();
  std::vector<Output> in;
  for (int i = 0; i < 4; ++i) {
    in.push_back(
        Const<float>(s.WithIpu(i), {1.0f + i, 10.0f * (i + 1), -1}, {3}));
  }
  std::vector<Output> sum = WithinReplicaReduceScatter(s, in, "sum");
  std::vector<Output> local = WithinReplicaReduceScatter(s, in, "local");
  std::vector<Output> fetch = sum;
  fetch.insert(fetch.end(), local.begin(), local.end());
  auto out = RunGraph(s, {}, fetch);
  ASSERT_TRUE(out.ok()) << out.status();
  const float want[] = {10, 100, -4, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(sum[i].node->ipu(), i);
    EXPECT_TRUE(TensorNear((*out)[i], {want[i]}, {1}, 0, 0)) << i;
  }
  // local: shard i keeps chunk i of its own input.
  EXPECT_TRUE(TensorNear((*out)[4], {1}, {1}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[5], {20}, {1}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[6], {-1}, {1}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[7], {0}, {1}, 0, 0));
}

TEST(WithinReplicaTest, AllGatherConcatenatesFlatInGraphcoresShape) {
  Scope s = Scope::NewRootScope();
  Output a = Const<float>(s.WithIpu(0), {1, 2, 3, 4}, {2, 2});
  Output b = Const<float>(s.WithIpu(1), {5, 6}, {2, 1});
  std::vector<Output> axis1 = WithinReplicaAllGather(s, {a, b}, 1);
  Output c = Const<float>(s.WithIpu(1), {5, 6}, {1, 2});
  std::vector<Output> axis0 = WithinReplicaAllGather(s, {a, c}, 0);
  std::vector<Output> scalars = WithinReplicaAllGather(
      s, {Const(s.WithIpu(0), 7.0f), Const(s.WithIpu(1), 8.0f)});
  ASSERT_TRUE(s.ok()) << s.status();
  auto out = RunGraph(s, {}, {axis1[0], axis1[1], axis0[1], scalars[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  // [2, 3]: the flat concatenation 1..6, not tf.concat's [[1, 2, 5], ...].
  EXPECT_TRUE(TensorNear((*out)[0], {1, 2, 3, 4, 5, 6}, {2, 3}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[1], {1, 2, 3, 4, 5, 6}, {2, 3}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[2], {1, 2, 3, 4, 5, 6}, {3, 2}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[3], {7, 8}, {2}, 0, 0));
  EXPECT_EQ(axis1[1].node->ipu(), 1);
}

TEST(WithinReplicaTest, IntegersAndBools) {
  Scope s = Scope::NewRootScope();
  Output i0 = Const(s.WithIpu(0), Tensor::FromVector<int32_t>({2, -7}));
  Output i1 = Const(s.WithIpu(1), Tensor::FromVector<int32_t>({5, 3}));
  Output b0 = Const(s.WithIpu(0), Tensor::FromVector<bool>({true, false}));
  Output b1 = Const(s.WithIpu(1), Tensor::FromVector<bool>({true, true}));
  auto out = RunGraph(s, {},
                      {WithinReplicaAllReduce(s, {i0, i1}, "sum")[1],
                       WithinReplicaAllReduce(s, {i0, i1}, "min")[0],
                       WithinReplicaAllReduce(s, {b0, b1}, "logical_and")[0],
                       WithinReplicaAllReduce(s, {b0, b1}, "logical_or")[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<int32_t>()[0], 7);
  EXPECT_EQ((*out)[0].data<int32_t>()[1], -4);
  EXPECT_EQ((*out)[1].data<int32_t>()[1], -7);
  EXPECT_TRUE((*out)[2].data<bool>()[0]);
  EXPECT_FALSE((*out)[2].data<bool>()[1]);
  EXPECT_TRUE((*out)[3].data<bool>()[1]);
}

// The same graph on a sharded model (one replica over 2 IPUs): each
// output computed on its IPU from the other IPU's input.
TEST(WithinReplicaTest, RunsShardedOnTwoIpus) {
  Scope s = Scope::NewRootScope();
  Output a = Const<float>(s.WithIpu(0), {1, 2, 3}, {3});
  Output b = Const<float>(s.WithIpu(1), {10, 20}, {2});
  std::vector<Output> y = WithinReplicaAllReduce(s, {a, b}, "sum");
  std::vector<Output> g = WithinReplicaAllGather(s, {a, b});
  ASSERT_TRUE(s.ok()) << s.status();
  IPUConfig config;
  config.set_auto_select_ipus(2);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  auto out = strategy.Run(*s.graph(), {y[0], y[1], g[0], g[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {11, 22, 3}, {3}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[1], {11, 22, 3}, {3}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[3], {1, 2, 3, 10, 20}, {5}, 0, 0));
}

// d/dx_j of sum_i r_i . y_i by finite differences, through every shard's
// output at once (AddN of their weighted sums).
TEST(WithinReplicaTest, GradientsMatchFiniteDifferences) {
  for (std::string kind :
       {"all_reduce sum", "all_reduce local", "reduce_scatter sum",
        "reduce_scatter local", "all_gather"}) {
    Scope s = Scope::NewRootScope();
    const std::vector<Tensor> values = {RandomTensor({5}, -1, 1, 1),
                                        RandomTensor({3}, -1, 1, 2),
                                        RandomTensor({4}, -1, 1, 3)};
    std::vector<Output> xs;
    for (int i = 0; i < 3; ++i) {
      xs.push_back(
          Placeholder(s.WithIpu(i), DType::kFloat32, values[i].shape()));
    }
    std::vector<Output> ys;
    if (kind == "all_gather") {
      ys = WithinReplicaAllGather(s, xs);
    } else if (kind.rfind("all_reduce", 0) == 0) {
      ys = WithinReplicaAllReduce(s, xs, kind.substr(11));
    } else {
      ys = WithinReplicaReduceScatter(s, xs, kind.substr(15));
    }
    ASSERT_EQ(ys.size(), 3u) << kind << s.status();
    std::vector<Output> sums;
    for (int i = 0; i < 3; ++i) {
      // Weight the shards differently so each one's gradient matters.
      sums.push_back(ReduceSum(s, ys[i]));
      if (i > 0) sums.back() = AddN(s, {sums.back(), sums.back()});
    }
    absl::StatusOr<double> err =
        MaxGradientError(s, xs, values, AddN(s, {sums[0], sums[1], sums[2]}));
    ASSERT_TRUE(err.ok()) << kind << ": " << err.status();
    EXPECT_LT(*err, 1e-3) << kind;
  }
  // Not implemented for mul / min / max: an error naming the op.
  Scope s = Scope::NewRootScope();
  Output a = Placeholder(s.WithIpu(0), DType::kFloat32, {2});
  Output b = Placeholder(s.WithIpu(1), DType::kFloat32, {2});
  std::vector<Output> y = WithinReplicaAllReduce(s, {a, b}, "max");
  std::vector<Output> g;
  absl::Status st = AddGradients(s, {y[0]}, {a}, {}, &g);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("op \"max\""), std::string::npos) << st;
}

TEST(WithinReplicaTest, ErrorsNameTheShardAndTheOp) {
  struct Case {
    std::string expected;
    std::function<void(const Scope&)> build;
  };
  const std::vector<Case> cases = {
      {"input shards 0 and 1 are the same tensor",
       [](const Scope& s) {
         Output a = Const<float>(s, {1}, {1});
         WithinReplicaAllReduce(s, {a, a}, "sum");
       }},
      {"op must be one of sum, mul, min, max, logical_and, logical_or, "
       "local; got \"add\"",
       [](const Scope& s) {
         WithinReplicaAllReduce(
             s, {Const<float>(s, {1}, {1}), Const<float>(s, {2}, {1})}, "add");
       }},
      {"input shard 1 has shape [2,2]; the shards must be fully known "
       "scalars or vectors",
       [](const Scope& s) {
         WithinReplicaReduceScatter(
             s,
             {Const<float>(s, {1}, {1}), Const<float>(s, {1, 2, 3, 4}, {2, 2})},
             "sum");
       }},
      {"sum / mul / min / max take float32, float16, int32 or int64, got bool",
       [](const Scope& s) {
         WithinReplicaAllReduce(s,
                                {Const(s, Tensor::FromVector<bool>({true})),
                                 Const(s, Tensor::FromVector<bool>({false}))},
                                "sum");
       }},
      {"axis 2 is outside [0, 2)",
       [](const Scope& s) {
         WithinReplicaAllGather(
             s,
             {Const<float>(s, {1, 2}, {1, 2}), Const<float>(s, {3, 4}, {1, 2})},
             2);
       }},
      {"shard 2 is outside [0, 2)",
       [](const Scope& s) {
         s.AddNode("WithinReplicaAllReduce",
                   {Const<float>(s, {1}, {1}), Const<float>(s, {2}, {1})},
                   {{"shard", int64_t{2}}});
       }},
  };
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    c.build(s);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << c.expected;
    EXPECT_NE(s.status().message().find(c.expected), std::string::npos)
        << s.status();
  }
}

}  // namespace
}  // namespace ipuflow::ops
