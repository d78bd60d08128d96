// The fused kernels against the unfused graph, the reference: a small
// ConvNet (the tutorial's blocks: Conv2D + BiasAdd, MaxPool, Relu; dense
// MatMul + BiasAdd (+ Relu); softmax cross-entropy) run by two Sessions,
// one with ProgramSpec::fuse off. Forward values and every gradient must
// agree, in float32 and float16, and the fused program's memory plan must
// not need more than the unfused one.
#include <vector>

#include "core/gradients.h"
#include "core/program.h"
#include "core/scope.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/reshape.h"
#include "ops/math/cast.h"
#include "ops/math/mat_mul.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/max_pool_2d.h"
#include "ops/nn/relu.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"

namespace ipuflow {
namespace {

using testing::RandomTensor;
using testing::TensorNear;

struct Net {
  Scope s = Scope::NewRootScope();
  std::vector<Output> params;  // Placeholders: w1 b1 w2 b2 w3 b3 w4 b4.
  Output x, labels, conv1, pooled1, loss;
  std::vector<Output> grads;
  FeedList feeds;
};

// x [4, 16, 16, 1] -> conv 3x3 (4) + bias -> pool 2 -> relu -> conv 3x3 (6)
// + bias -> pool 2 -> relu -> [4, 24] -> dense 16 + bias + relu -> dense 5
// + bias -> mean softmax cross-entropy (in float32).
void Build(DType dtype, Net* n) {
  const Scope& s = n->s;
  const std::vector<TensorShape> shapes = {
      {3, 3, 1, 4}, {4}, {3, 3, 4, 6}, {6}, {24, 16}, {16}, {16, 5}, {5}};
  uint32_t seed = 1;
  for (const TensorShape& shape : shapes) {
    Output p = ops::Placeholder(s, dtype, shape);
    n->params.push_back(p);
    n->feeds.push_back({p, RandomTensor(shape, -0.5f, 0.5f, seed++, dtype)});
  }
  n->x = ops::Placeholder(s, dtype, {4, 16, 16, 1});
  n->feeds.push_back(
      {n->x, RandomTensor({4, 16, 16, 1}, 0.0f, 1.0f, seed++, dtype)});
  n->labels = ops::Placeholder(s, DType::kInt32, {4});
  Tensor labels(DType::kInt32, {4});
  for (int i = 0; i < 4; ++i) labels.span<int32_t>()[i] = (i * 3) % 5;
  n->feeds.push_back({n->labels, labels});
  const auto& p = n->params;
  n->conv1 = ops::Conv2D(s, n->x, p[0], {1, 1}, "VALID");
  Output y = ops::BiasAdd(s, n->conv1, p[1]);
  n->pooled1 = ops::MaxPool2D(s, y, {2, 2}, {2, 2}, "VALID");
  y = ops::Relu(s, n->pooled1);
  y = ops::BiasAdd(s, ops::Conv2D(s, y, p[2], {1, 1}, "VALID"), p[3]);
  y = ops::Relu(s, ops::MaxPool2D(s, y, {2, 2}, {2, 2}, "VALID"));
  y = ops::Reshape(s, y, {4, 24});
  y = ops::Relu(s, ops::BiasAdd(s, ops::MatMul(s, y, p[4]), p[5]));
  y = ops::BiasAdd(s, ops::MatMul(s, y, p[6]), p[7]);
  if (dtype != DType::kFloat32) y = ops::Cast(s, y, DType::kFloat32);
  n->loss = ops::SoftmaxCrossEntropyLoss(s, y, n->labels);
  std::vector<Output> xs = p;
  xs.push_back(n->x);
  IPU_CHECK_OK(AddGradients(s, {n->loss}, xs, {}, &n->grads));
  IPU_CHECK_OK(s.status());
}

struct NetRun {
  std::vector<Tensor> out;
  int fused_away = 0;
  int64_t peak_bytes = 0;
};

NetRun RunNet(const Net& n, const std::vector<Output>& fetches, bool fuse) {
  SessionOptions options;
  options.fuse = fuse;
  Session session(n.s.graph(), options);
  NetRun r;
  IPU_CHECK_OK(session.Run(n.feeds, fetches, {}, &r.out));
  absl::StatusOr<Program*> p = session.GetProgram(n.feeds, fetches, {});
  IPU_CHECK_OK(p.status());
  r.fused_away = (*p)->num_fused_away();
  r.peak_bytes = (*p)->memory().peak_bytes;
  return r;
}

void ExpectFusedMatchesUnfused(DType dtype, double atol, double rtol) {
  Net n;
  Build(dtype, &n);
  std::vector<Output> fetches = {n.loss};
  fetches.insert(fetches.end(), n.grads.begin(), n.grads.end());
  const NetRun fused = RunNet(n, fetches, true);
  const NetRun unfused = RunNet(n, fetches, false);
  // Training: conv + bias twice, dense + bias (+ relu) twice; the pools'
  // ReLUs stay (MaxPoolGrad reads the pools' outputs too).
  EXPECT_EQ(unfused.fused_away, 0);
  EXPECT_EQ(fused.fused_away, 1 + 1 + 2 + 1);
  EXPECT_LE(fused.peak_bytes, unfused.peak_bytes);
  ASSERT_EQ(fused.out.size(), unfused.out.size());
  for (size_t i = 0; i < fused.out.size(); ++i) {
    EXPECT_TRUE(TensorNear(fused.out[i], unfused.out[i], atol, rtol))
        << "fetch " << i << " (" << fetches[i].name() << ")";
  }
  // Forward only: the pools' ReLUs fuse too (no MaxPoolGrad reads them).
  const NetRun fwd = RunNet(n, {n.loss}, true);
  const NetRun fwd_ref = RunNet(n, {n.loss}, false);
  EXPECT_EQ(fwd.fused_away, 2 + 2 + 2 + 1);
  EXPECT_LE(fwd.peak_bytes, fwd_ref.peak_bytes);
  EXPECT_TRUE(TensorNear(fwd.out[0], fwd_ref.out[0], atol, rtol));
}

TEST(FusedBiasActivationTest, Float32MatchesTheUnfusedGraph) {
  ExpectFusedMatchesUnfused(DType::kFloat32, 1e-6, 1e-6);
}

TEST(FusedBiasActivationTest, Float16MatchesTheUnfusedGraph) {
  ExpectFusedMatchesUnfused(DType::kFloat16, 1e-3, 1e-2);
}

TEST(FusedBiasActivationTest, FetchedIntermediatesAreNotFusedAway) {
  Net n;
  Build(DType::kFloat32, &n);
  // conv1 and the first pool are fetched: conv1 + bias and pool + relu
  // stay apart (forward only), the rest still fuses; values unchanged.
  const std::vector<Output> fetches = {n.loss, n.conv1, n.pooled1};
  const NetRun fused = RunNet(n, fetches, true);
  const NetRun unfused = RunNet(n, fetches, false);
  EXPECT_EQ(fused.fused_away, 1 + 1 + 2 + 1);
  for (size_t i = 0; i < fetches.size(); ++i) {
    EXPECT_TRUE(TensorNear(fused.out[i], unfused.out[i], 1e-6, 1e-6)) << i;
  }
}

}  // namespace
}  // namespace ipuflow
