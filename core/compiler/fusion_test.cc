// Fusion: which chains become one node, and how the node order and values
// are rewritten. The fused kernels' results against the unfused graph are
// tested with the kernels (ops/nn/fused_bias_activation_test.cc).
#include "core/compiler/fusion.h"

#include <string>

#include "core/compiler/liveness.h"
#include "core/compiler/test_graph.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/program.h"
#include "core/scope.h"
#include "core/thread_pool.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/max_pool_2d.h"
#include "ops/nn/relu.h"

namespace ipuflow::compiler {
namespace {

// A chain whose intermediate differs from the output in shape (the ops
// layer registers none such today): ReluGrad's kernel, then MaxPoolGrad's.
REGISTER_FUSION("test:ReluGrad+MaxPoolGrad")
    .Chain({"ReluGrad", "MaxPoolGrad"}, {2})
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(Tensor * masked,
                       ctx.RunChainKernel(0, {&ctx.input(0), &ctx.input(1)}));
      return ctx.RunChainKernel(1, {&ctx.input(2), &ctx.input(3), masked})
          .status();
    });

// Conv2D -> BiasAdd -> Relu on a fed image; the fed filter and bias.
struct Block {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2, 6, 6, 1});
  Output w = ops::Placeholder(s, DType::kFloat32, {3, 3, 1, 4});
  Output b = ops::Placeholder(s, DType::kFloat32, {4});
  Output conv = ops::Conv2D(s, x, w, {1, 1}, "VALID");
  Output bias = ops::BiasAdd(s, conv, b);
  Output relu = ops::Relu(s, bias);
  ProgramSpec SpecFor(std::vector<Output> fetches) const {
    return Spec({x, w, b},
                {TensorShape({2, 6, 6, 1}), TensorShape({3, 3, 1, 4}),
                 TensorShape({4})},
                std::move(fetches));
  }
};

std::vector<std::string> Ops(const std::vector<const Node*>& chain) {
  std::vector<std::string> out;
  for (const Node* n : chain) out.push_back(n->op());
  return out;
}

TEST(FusionTest, ConvBiasReluBecomesOneNodeWithTheChainsInputs) {
  Block g;
  FrontPhases f = RunFrontPhases(*g.s.graph(), g.SpecFor({g.relu}));
  ASSERT_EQ(f.order.size(), 3);
  const int x = f.values.feed_values[0], w = f.values.feed_values[1],
            b = f.values.feed_values[2];
  const int conv_value = f.values.first_output[0];
  const Fusion fusion =
      FuseChains(g.SpecFor({g.relu}), f.types, &f.order, &f.values);
  EXPECT_EQ(fusion.absorbed, 2);
  ASSERT_EQ(f.order.size(), 1);
  EXPECT_EQ(f.order.nodes[0], g.relu.node);
  EXPECT_EQ(f.order.position[g.relu.node->id()], 0);
  EXPECT_EQ(f.order.position[g.conv.node->id()], -1);
  EXPECT_EQ(Ops(fusion.chains[0]),
            (std::vector<std::string>{"Conv2D", "BiasAdd", "Relu"}));
  ASSERT_NE(fusion.defs[0], nullptr);
  EXPECT_EQ(fusion.defs[0]->name, "Conv2D+BiasAdd+Relu");
  // Conv2D's inputs, then BiasAdd's other input.
  EXPECT_EQ(f.values.inputs[0], (std::vector<int>{x, w, b}));
  // The intermediates have the output's shape: written into it, never
  // produced, not planned.
  EXPECT_EQ(f.values.producer[conv_value], -1);
  const Liveness live = ComputeLiveness(f.order, f.values, f.types, 1);
  EXPECT_TRUE(live.intervals.empty());  // The only output is fetched.
}

TEST(FusionTest, NothingFusesWhenSwitchedOff) {
  Block g;
  ProgramSpec spec = g.SpecFor({g.relu});
  spec.fuse = false;
  FrontPhases f = RunFrontPhases(*g.s.graph(), spec);
  const Fusion fusion = FuseChains(spec, f.types, &f.order, &f.values);
  EXPECT_EQ(fusion.absorbed, 0);
  EXPECT_EQ(f.order.size(), 3);
  EXPECT_FALSE(FusionEnabled(spec));
}

TEST(FusionTest, AFetchedIntermediateEndsTheChain) {
  Block g;
  // BiasAdd's output is fetched: Relu cannot absorb it, but BiasAdd (whose
  // own output may be fetched) still absorbs the convolution.
  const ProgramSpec spec = g.SpecFor({g.relu, g.bias});
  FrontPhases f = RunFrontPhases(*g.s.graph(), spec);
  const Fusion fusion = FuseChains(spec, f.types, &f.order, &f.values);
  ASSERT_EQ(f.order.size(), 2);
  EXPECT_EQ(Ops(fusion.chains[0]),
            (std::vector<std::string>{"Conv2D", "BiasAdd"}));
  EXPECT_TRUE(fusion.chains[1].empty());
  EXPECT_EQ(f.order.nodes[1], g.relu.node);
}

TEST(FusionTest, ASecondConsumerEndsTheChain) {
  Block g;
  // The convolution's output has a second reader: only BiasAdd + Relu fuse.
  Output other = ops::Add(g.s, g.conv, g.conv);
  const ProgramSpec spec = g.SpecFor({g.relu, other});
  FrontPhases f = RunFrontPhases(*g.s.graph(), spec);
  const Fusion fusion = FuseChains(spec, f.types, &f.order, &f.values);
  EXPECT_EQ(fusion.absorbed, 1);
  bool found = false;
  for (int pos = 0; pos < f.order.size(); ++pos) {
    if (f.order.nodes[pos] == g.relu.node) {
      EXPECT_EQ(Ops(fusion.chains[pos]),
                (std::vector<std::string>{"BiasAdd", "Relu"}));
      found = true;
    }
    EXPECT_NE(f.order.nodes[pos], g.bias.node);
  }
  EXPECT_TRUE(found);
}

TEST(FusionTest, AnIntermediateOfAnotherShapeIsPlannedForTheFusedStep) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2, 4, 4, 3});
  Output dy = ops::Placeholder(s, DType::kFloat32, {2, 2, 2, 3});
  Output pool = ops::MaxPool2D(s, x, {2, 2}, {2, 2}, "VALID");
  Output r = ops::Relu(s, pool);
  Output masked = ops::ReluGrad(s, dy, r);
  Output dx = ops::MaxPoolGrad(s, x, pool, masked, {2, 2}, {2, 2}, "VALID");
  const ProgramSpec spec = Spec(
      {x, dy}, {TensorShape({2, 4, 4, 3}), TensorShape({2, 2, 2, 3})}, {dx, r});
  FrontPhases f = RunFrontPhases(*s.graph(), spec);
  const int masked_value =
      f.values.first_output[f.order.position[masked.node->id()]];
  const Fusion fusion = FuseChains(spec, f.types, &f.order, &f.values);
  // MaxPool2D -> Relu does not fuse: MaxPoolGrad reads the pool's output.
  EXPECT_EQ(fusion.absorbed, 1);
  const int pos = f.order.position[dx.node->id()];
  ASSERT_GE(pos, 0);
  EXPECT_EQ(Ops(fusion.chains[pos]),
            (std::vector<std::string>{"ReluGrad", "MaxPoolGrad"}));
  EXPECT_EQ(f.values.producer[masked_value], pos);
  const Liveness live = ComputeLiveness(f.order, f.values, f.types, 1);
  bool planned = false;
  for (const Interval& iv : live.intervals) {
    if (iv.value != masked_value) continue;
    planned = true;
    EXPECT_EQ(iv.def, pos);
    EXPECT_EQ(iv.last, pos);
  }
  EXPECT_TRUE(planned);

  // Run: the fused node's ReluGrad writes its planned slot; dx as unfused.
  ThreadPool threads("fusion-test", 1);
  RunEnv env;
  env.intra_op = &threads;
  const Tensor xv = [] {
    Tensor t(DType::kFloat32, {2, 4, 4, 3});
    for (int i = 0; i < 96; ++i) t.span<float>()[i] = ((i * 37) % 23) - 11.0f;
    return t;
  }();
  const Tensor dyv = [] {
    Tensor t(DType::kFloat32, {2, 2, 2, 3});
    for (int i = 0; i < 24; ++i) t.span<float>()[i] = i + 1.0f;
    return t;
  }();
  std::vector<std::vector<float>> dxs;
  for (bool fuse : {true, false}) {
    ProgramSpec run_spec = spec;
    run_spec.fuse = fuse;
    absl::StatusOr<std::unique_ptr<Program>> p =
        Program::Compile(*s.graph(), run_spec);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->num_fused_away(), fuse ? 1 : 0);
    std::vector<Tensor> out;
    ASSERT_TRUE((*p)->Run(env, {xv, dyv}, &out).ok());
    ASSERT_TRUE(
        (*p)->Run(env, {xv, dyv}, &out).ok());  // Planned memory reused.
    dxs.emplace_back(out[0].span<float>().begin(), out[0].span<float>().end());
  }
  EXPECT_EQ(dxs[0], dxs[1]);
  float routed = 0;  // Each window routes dy where the pooled max is > 0.
  for (float v : dxs[0]) routed += v;
  EXPECT_GT(routed, 0.0f);
}

}  // namespace
}  // namespace ipuflow::compiler
