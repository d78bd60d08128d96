// LayerNorm, GroupNorm / InstanceNorm and BatchNorm: values against a
// float64 reference written here, gradients against finite differences,
// float16 against float32, errors, GraphDef round trips, and batch
// statistics over replicas equal to one replica's statistics over the
// whole batch.
#include <cmath>
#include <vector>

#include "core/gradients.h"
#include "core/graph_def.h"
#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/gather.h"
#include "ops/collective/replica_index.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/norm/batch_norm.h"
#include "ops/norm/group_norm.h"
#include "ops/norm/layer_norm.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

// Group normalisation in float64, the plain way: x as [N, C, S] or
// [N, S, C]; group of channel c per `strided`; across_batch: one
// statistic per group over the batch.
std::vector<float> Reference(const std::vector<float>& x, int64_t n_n,
                             int64_t c_n, int64_t s_n, bool channels_last,
                             int64_t g_n, bool strided, bool across_batch,
                             const std::vector<float>& gamma,
                             const std::vector<float>& beta, double eps) {
  auto index = [&](int64_t n, int64_t c, int64_t s) {
    return channels_last ? (n * s_n + s) * c_n + c : (n * c_n + c) * s_n + s;
  };
  auto group = [&](int64_t c) { return strided ? c % g_n : c / (c_n / g_n); };
  std::vector<float> y(x.size());
  const int64_t outer = across_batch ? 1 : n_n;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t g = 0; g < g_n; ++g) {
      std::vector<int64_t> members;
      for (int64_t n = 0; n < n_n; ++n) {
        if (!across_batch && n != o) continue;
        for (int64_t c = 0; c < c_n; ++c) {
          if (group(c) != g) continue;
          for (int64_t s = 0; s < s_n; ++s) members.push_back(index(n, c, s));
        }
      }
      double mean = 0, var = 0;
      for (int64_t i : members) mean += x[i];
      mean /= members.size();
      for (int64_t i : members) var += (x[i] - mean) * (x[i] - mean);
      var /= members.size();
      for (int64_t i : members) {
        const int64_t c = channels_last ? i % c_n : (i / s_n) % c_n;
        y[i] = static_cast<float>(
            (x[i] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c]);
      }
    }
  }
  return y;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

TEST(LayerNormTest, PerTokenByHand) {
  Scope s = Scope::NewRootScope();
  // Token 0: mean 2, var 2/3; token 1: constant, so y = beta.
  Output x = Const<float>(s, {1, 2, 3, 4, 4, 4}, {2, 3});
  auto ln = LayerNorm(s, x, Const<float>(s, {1, 2, 3}, {3}),
                      Const<float>(s, {0, 1, 0}, {3}), {.epsilon = 1e-5f});
  auto out = RunGraph(s, {}, {ln.y, ln.mean, ln.inv_std});
  ASSERT_TRUE(out.ok()) << out.status();
  const double inv = 1 / std::sqrt(2.0 / 3 + 1e-5);
  EXPECT_TRUE(TensorNear(
      (*out)[0],
      {static_cast<float>(-inv), 1, static_cast<float>(3 * inv), 0, 1, 0},
      {2, 3}));
  EXPECT_TRUE(TensorNear((*out)[1], {2, 4}, {2}));
  EXPECT_TRUE(TensorNear(
      (*out)[2],
      {static_cast<float>(inv), static_cast<float>(1 / std::sqrt(1e-5))}, {2},
      1e-3, 1e-5));
}

TEST(LayerNormTest, OverTheLastTwoAxesMatchesReference) {
  Scope s = Scope::NewRootScope();
  const Tensor xv = RandomTensor({3, 2, 4}, -2, 5, 1);
  const Tensor gv = RandomTensor({2, 4}, 0.5, 2, 2);
  const Tensor bv = RandomTensor({2, 4}, -1, 1, 3);
  auto ln = LayerNorm(s, Const(s, xv), Const(s, gv), Const(s, bv),
                      {.begin_norm_axis = 1});
  EXPECT_EQ(ln.mean.shape(), TensorShape({3}));
  // Per token: [N=3, S=1, C=8], one group.
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ln.y),
                         Reference(Values(xv), 3, 8, 1, true, 1, false, false,
                                   Values(gv), Values(bv), 1e-3),
                         {3, 2, 4}, 1e-5, 1e-5));
}

TEST(LayerNormTest, GradientMatchesFiniteDifferences) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3, 4});
  Output g = Placeholder(s, DType::kFloat32, {4});
  Output b = Placeholder(s, DType::kFloat32, {4});
  auto err = MaxGradientError(
      s, {x, g, b},
      {RandomTensor({2, 3, 4}, -2, 2, 1), RandomTensor({4}, 0.5, 2, 2),
       RandomTensor({4}, -1, 1, 3)},
      LayerNorm(s, x, g, b).y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 2e-3);
}

TEST(LayerNormTest, Float16MatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return LayerNorm(s, x[0], x[1], x[2]).y;
      },
      {RandomTensor({6, 16}, -3, 3, 1), RandomTensor({16}, 0.5, 2, 2),
       RandomTensor({16}, -1, 1, 3)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 4e-3);
}

TEST(LayerNormTest, Errors) {
  {
    Scope s = Scope::NewRootScope();
    LayerNorm(s.WithOpName("ln"), Const<float>(s, {1, 2, 3, 4}, {2, 2}),
              Const<float>(s, {1, 1, 1}, {3}), Const<float>(s, {0, 0}, {2}));
    EXPECT_NE(s.status().message().find(
                  "LayerNorm 'ln': input 'gamma' has shape [3] but x [2,2] "
                  "is normalised over [2]"),
              std::string::npos)
        << s.status();
  }
  {
    Scope s = Scope::NewRootScope();
    LayerNorm(s, Const<float>(s, {1, 2}, {2}), Const<float>(s, {1, 1}, {2}),
              Const<float>(s, {0, 0}, {2}), {.begin_norm_axis = 1});
    EXPECT_NE(s.status().message().find(
                  "begin_norm_axis 1 is out of range for x of rank 1"),
              std::string::npos)
        << s.status();
  }
  {
    Scope s = Scope::NewRootScope();
    LayerNorm(s, Const<float>(s, {1, 2}, {2}), Const<float>(s, {1, 1}, {2}),
              Const<float>(s, {0, 0}, {2}), {.epsilon = -1});
    EXPECT_NE(s.status().message().find("epsilon must be finite and >= 0"),
              std::string::npos)
        << s.status();
  }
}

TEST(GroupNormTest, StridedAndContiguousGroupingMatchReference) {
  const Tensor xv = RandomTensor({2, 3, 6}, -2, 3, 4);  // NHWC, C = 6.
  const Tensor gv = RandomTensor({6}, 0.5, 2, 5);
  const Tensor bv = RandomTensor({6}, -1, 1, 6);
  for (bool strided : {true, false}) {
    Scope s = Scope::NewRootScope();
    auto gn = GroupNorm(s, Const(s, xv), Const(s, gv), Const(s, bv),
                        {.groups = 3, .strided_channel_grouping = strided});
    EXPECT_EQ(gn.mean.shape(), TensorShape({2, 3}));
    EXPECT_TRUE(TensorNear(RunOne(s, {}, gn.y),
                           Reference(Values(xv), 2, 6, 3, true, 3, strided,
                                     false, Values(gv), Values(bv), 1e-6),
                           {2, 3, 6}, 1e-5, 1e-5))
        << "strided " << strided;
  }
  // The two groupings differ on these values.
  Scope s = Scope::NewRootScope();
  auto a = GroupNorm(s, Const(s, xv), Const(s, gv), Const(s, bv),
                     {.groups = 3, .strided_channel_grouping = true});
  auto b = GroupNorm(s, Const(s, xv), Const(s, gv), Const(s, bv),
                     {.groups = 3, .strided_channel_grouping = false});
  auto out = RunGraph(s, {}, {a.y, b.y});
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(TensorNear((*out)[0], (*out)[1], 1e-3, 0));
}

TEST(GroupNormTest, ChannelsFirstAndGradient) {
  const Tensor xv = RandomTensor({2, 4, 3}, -2, 3, 7);  // NCW, C = 4.
  const Tensor gv = RandomTensor({4}, 0.5, 2, 8);
  const Tensor bv = RandomTensor({4}, -1, 1, 9);
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 4, 3});
  Output g = Placeholder(s, DType::kFloat32, {4});
  Output b = Placeholder(s, DType::kFloat32, {4});
  for (bool strided : {true, false}) {
    GroupNormOptions o{
        .groups = 2, .channels_axis = 1, .strided_channel_grouping = strided};
    Output y = GroupNorm(s, x, g, b, o).y;
    EXPECT_TRUE(TensorNear(RunOne(s, {{x, xv}, {g, gv}, {b, bv}}, y),
                           Reference(Values(xv), 2, 4, 3, false, 2, strided,
                                     false, Values(gv), Values(bv), 1e-6),
                           {2, 4, 3}, 1e-5, 1e-5));
    auto err = MaxGradientError(s, {x, g, b}, {xv, gv, bv}, y);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 2e-3) << "strided " << strided;
  }
}

TEST(GroupNormTest, InstanceNormIsOneChannelPerGroup) {
  const Tensor xv = RandomTensor({2, 5, 3}, -2, 3, 10);  // NSC, C = 3.
  const Tensor gv = RandomTensor({3}, 0.5, 2, 11);
  const Tensor bv = RandomTensor({3}, -1, 1, 12);
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 5, 3});
  Output g = Placeholder(s, DType::kFloat32, {3});
  Output b = Placeholder(s, DType::kFloat32, {3});
  auto in = InstanceNorm(s, x, g, b);
  EXPECT_EQ(in.mean.shape(), TensorShape({2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {{x, xv}, {g, gv}, {b, bv}}, in.y),
                         Reference(Values(xv), 2, 3, 5, true, 3, false, false,
                                   Values(gv), Values(bv), 1e-6),
                         {2, 5, 3}, 1e-5, 1e-5));
  auto err = MaxGradientError(s, {x, g, b}, {xv, gv, bv}, in.y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 2e-3);
}

TEST(GroupNormTest, Float16MatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return GroupNorm(s, x[0], x[1], x[2], {.groups = 4}).y;
      },
      {RandomTensor({2, 3, 8}, -3, 3, 1), RandomTensor({8}, 0.5, 2, 2),
       RandomTensor({8}, -1, 1, 3)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 4e-3);
}

TEST(GroupNormTest, Errors) {
  auto message = [](int64_t groups, int64_t axis) {
    Scope s = Scope::NewRootScope();
    GroupNorm(s.WithOpName("gn"), Const(s, RandomTensor({2, 3, 6}, 0, 1, 1)),
              Const(s, RandomTensor({6}, 0, 1, 1)),
              Const(s, RandomTensor({6}, 0, 1, 1)),
              {.groups = groups, .channels_axis = axis});
    return std::string(s.status().message());
  };
  EXPECT_NE(message(4, -1).find("GroupNorm 'gn': groups (4) must divide the "
                                "channel count 6 of x [2,3,6]"),
            std::string::npos)
      << message(4, -1);
  EXPECT_NE(message(0, -1).find("groups must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(message(2, 0).find("channels_axis must be 1 or the last axis"),
            std::string::npos)
      << message(2, 0);
  // Channels on axis 1 are 3, not gamma's 6.
  EXPECT_NE(message(1, 1).find("input 'gamma' has shape [6]"),
            std::string::npos)
      << message(1, 1);
}

TEST(BatchNormTest, TrainingMatchesReferenceAndGradient) {
  const Tensor xv = RandomTensor({4, 3, 2}, -2, 3, 13);  // NCW, C = 3.
  const Tensor gv = RandomTensor({3}, 0.5, 2, 14);
  const Tensor bv = RandomTensor({3}, -1, 1, 15);
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {4, 3, 2});
  Output g = Placeholder(s, DType::kFloat32, {3});
  Output b = Placeholder(s, DType::kFloat32, {3});
  auto bn = BatchNorm(s, x, g, b, {.channels_axis = 1});
  auto out =
      RunGraph(s, {{x, xv}, {g, gv}, {b, bv}}, {bn.y, bn.mean, bn.variance});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0],
                         Reference(Values(xv), 4, 3, 2, false, 3, false, true,
                                   Values(gv), Values(bv), 1e-3),
                         {4, 3, 2}, 1e-5, 1e-5));
  // Channel 0's mean and biased variance by hand.
  const std::vector<float> v = Values(xv);
  double m = 0, var = 0;
  for (int n = 0; n < 4; ++n) m += v[n * 6] + v[n * 6 + 1];
  m /= 8;
  for (int n = 0; n < 4; ++n) {
    var += (v[n * 6] - m) * (v[n * 6] - m) +
           (v[n * 6 + 1] - m) * (v[n * 6 + 1] - m);
  }
  var /= 8;
  EXPECT_NEAR((*out)[1].data<float>()[0], m, 1e-6);
  EXPECT_NEAR((*out)[2].data<float>()[0], var, 1e-5);
  auto err = MaxGradientError(s, {x, g, b}, {xv, gv, bv}, bn.y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 2e-3);
}

TEST(BatchNormTest, InferenceUsesGivenStatisticsAndGradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 2});
  Output g = Placeholder(s, DType::kFloat32, {2});
  Output b = Placeholder(s, DType::kFloat32, {2});
  Output m = Placeholder(s, DType::kFloat32, {2});
  Output v = Placeholder(s, DType::kFloat32, {2});
  Output y = BatchNormInference(s, x, g, b, m, v, {.epsilon = 0});
  const Tensor xv = Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor gv = Tensor::FromVector<float>({2, 1}, {2});
  const Tensor bv = Tensor::FromVector<float>({0, 1}, {2});
  const Tensor mv = Tensor::FromVector<float>({1, 0}, {2});
  const Tensor vv = Tensor::FromVector<float>({4, 16}, {2});
  // (x - m) / sqrt(v) * g + b: channel 0 (x-1)/2*2, channel 1 x/4 + 1.
  EXPECT_TRUE(
      TensorNear(RunOne(s, {{x, xv}, {g, gv}, {b, bv}, {m, mv}, {v, vv}}, y),
                 {0, 1.5f, 2, 2}, {2, 2}));
  Output y2 = BatchNormInference(s, x, g, b, m, v);
  auto err = MaxGradientError(s, {x, g, b, m, v}, {xv, gv, bv, mv, vv}, y2);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 2e-3);
}

TEST(BatchNormTest, Float16MatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return BatchNorm(s, x[0], x[1], x[2]).y;
      },
      {RandomTensor({8, 2, 4}, -3, 3, 1), RandomTensor({4}, 0.5, 2, 2),
       RandomTensor({4}, -1, 1, 3)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 4e-3);
}

TEST(BatchNormTest, LayerUpdatesMovingStatistics) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {0, 4, 2, 8}, {2, 2});  // Channels last.
  BatchNormLayerOptions o;
  o.momentum = 0.75f;
  auto layer = BatchNormalization(s.NewSubScope("bn"), x, true, o);
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, layer.updates, &out).ok());
  ASSERT_TRUE(
      session
          .Run({}, {layer.moving_mean.value, layer.moving_variance.value}, &out)
          .ok());
  // Batch means {1, 6}, biased variances {1, 4}; moving from 0 and 1.
  EXPECT_TRUE(TensorNear(out[0], {0.25f, 1.5f}, {2}));
  EXPECT_TRUE(TensorNear(out[1], {1.0f, 1.75f}, {2}));
  // Inference reads the moving statistics.
  auto infer = BatchNormalization(s.NewSubScope("bn2"), x, false, o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(session.Run({}, {infer.y}, &out).ok());
  const float inv = 1 / std::sqrt(1 + 1e-3f);
  EXPECT_TRUE(TensorNear(out[0], {0, 4 * inv, 2 * inv, 8 * inv}, {2, 2}));
}

TEST(BatchNormTest, Errors) {
  Scope s = Scope::NewRootScope();
  BatchNorm(s.WithOpName("bn"), Const(s, RandomTensor({2, 3}, 0, 1, 1)),
            Const(s, RandomTensor({3}, 0, 1, 1)),
            Const(s, RandomTensor({3}, 0, 1, 1)), {.replica_group_size = -2});
  EXPECT_FALSE(s.ok());
  Scope s2 = Scope::NewRootScope();
  BatchNormalization(s2, Const(s2, RandomTensor({2, 3}, 0, 1, 1)), true,
                     {.momentum = 1.5f});
  EXPECT_NE(s2.status().message().find("momentum must be in [0, 1], got 1.5"),
            std::string::npos)
      << s2.status();
}

// Two replicas with half a batch each and statistics over both give one
// replica's values on the whole batch, forward and backward.
TEST(BatchNormTest, StatisticsOverReplicasEqualTheWholeBatch) {
  const Tensor xv = RandomTensor({2, 3, 4}, -2, 3, 21);  // [R, N/R, C]
  const Tensor rv = RandomTensor({2, 3, 4}, -1, 1, 22);
  const Tensor gv = RandomTensor({4}, 0.5, 2, 23);
  const Tensor bv = RandomTensor({4}, -1, 1, 24);
  auto build = [&](const Scope& s, Output x, Output r, int64_t group) {
    Output g = Const(s, gv), b = Const(s, bv);
    Output y = BatchNorm(s, x, g, b, {.replica_group_size = group}).y;
    Output loss = ReduceSum(s, Mul(s, y, r));
    std::vector<Output> grads;
    EXPECT_TRUE(AddGradients(s, {loss}, {x}, {}, &grads).ok());
    return std::make_pair(y, grads[0]);
  };
  // The whole batch on one device.
  Scope one = Scope::NewRootScope();
  auto [y1, dx1] = build(one, Const(one, xv.Reshaped({6, 4}).value()),
                         Const(one, rv.Reshaped({6, 4}).value()), 1);
  auto whole = RunGraph(one, {}, {y1, dx1});
  ASSERT_TRUE(whole.ok()) << whole.status();
  // Half each on two replicas.
  Scope s = Scope::NewRootScope();
  Output idx = ReplicaIndex(s);
  auto [y2, dx2] =
      build(s, Gather(s, Const(s, xv), idx), Gather(s, Const(s, rv), idx), 0);
  IPUConfig config;
  config.set_auto_select_ipus(2);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  auto rep = strategy.Run(*s.graph(), {y2, dx2});
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_TRUE(TensorNear((*rep)[0], (*whole)[0].Reshaped({2, 3, 4}).value(),
                         1e-5, 1e-5));
  EXPECT_TRUE(TensorNear((*rep)[1], (*whole)[1].Reshaped({2, 3, 4}).value(),
                         1e-5, 1e-5));
  // Local statistics differ.
  Scope l = Scope::NewRootScope();
  Output li = ReplicaIndex(l);
  auto [y3, dx3] =
      build(l, Gather(l, Const(l, xv), li), Gather(l, Const(l, rv), li), 1);
  auto local = strategy.Run(*l.graph(), {y3});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_FALSE(TensorNear((*local)[0], (*rep)[0], 1e-3, 0));
}

TEST(NormGraphDefTest, RoundTripKeepsAttributesAndValues) {
  Scope s = Scope::NewRootScope();
  const Tensor xv = RandomTensor({2, 4, 3}, -2, 3, 31);
  Output x = Const(s, xv);
  Output g4 = Const(s, RandomTensor({4}, 0.5, 2, 32));
  Output b4 = Const(s, RandomTensor({4}, -1, 1, 33));
  Output g3 = Const(s, RandomTensor({3}, 0.5, 2, 34));
  Output b3 = Const(s, RandomTensor({3}, -1, 1, 35));
  std::vector<Output> ys = {
      LayerNorm(s, x, g3, b3, {.epsilon = 1e-4f}).y,
      GroupNorm(
          s, x, g4, b4,
          {.groups = 2, .channels_axis = 1, .strided_channel_grouping = false})
          .y,
      BatchNorm(s, x, g3, b3, {.epsilon = 1e-2f}).y,
      BatchNormInference(s, x, g3, b3, b3, g3)};
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s,
                           {ReduceSum(s, ys[0]), ReduceSum(s, ys[1]),
                            ReduceSum(s, ys[2]), ReduceSum(s, ys[3])},
                           {x}, {}, &grads)
                  .ok());
  ys.push_back(grads[0]);
  ASSERT_TRUE(s.ok()) << s.status();
  auto def = ToGraphDef(*s.graph());
  ASSERT_TRUE(def.ok()) << def.status();
  Graph back;
  ASSERT_TRUE(ImportGraphDef(*def, &back).ok());
  EXPECT_EQ(back.Fingerprint(), s.graph()->Fingerprint());
  auto before = RunGraph(s, {}, ys);
  ASSERT_TRUE(before.ok()) << before.status();
  Session session(&back);
  std::vector<Output> fetches;
  for (const Output& y : ys) {
    fetches.push_back(Output(back.FindNode(y.node->name()), y.index));
  }
  std::vector<Tensor> after;
  ASSERT_TRUE(session.Run({}, fetches, &after).ok());
  for (size_t i = 0; i < ys.size(); ++i) {
    EXPECT_TRUE(TensorNear(after[i], (*before)[i], 0, 0)) << i;
  }
}

}  // namespace
}  // namespace ipuflow::ops
