// Every registered op is complete: a shape function, a kernel, and a
// gradient or a declared reason for having none. Linking //ops brings in
// every op family, so a new op is checked without being listed here.
#include "core/op_registry.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/gradients.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/clamp.h"
#include "ops/math/select.h"
#include "ops/nn/gelu.h"
#include "ops/nn/hardtanh.h"
#include "ops/nn/softplus.h"

namespace ipuflow {
namespace {

TEST(OpRegistryTest, EveryOpHasShapeFnKernelAndGradientOrReason) {
  const auto ops = OpRegistry::Global()->ops();
  EXPECT_GT(ops.size(), 10u);
  for (const OpDef* def : ops) {
    EXPECT_TRUE(static_cast<bool>(def->shape_fn()))
        << "op '" << def->name() << "' has no shape function";
    EXPECT_TRUE(static_cast<bool>(def->kernel()))
        << "op '" << def->name() << "' has no kernel";
    EXPECT_TRUE(def->has_gradient() ||
                !def->not_differentiable_reason().empty())
        << "op '" << def->name()
        << "' has no gradient and does not declare why (NotDifferentiable)";
  }
}

// The ops of issue 21 this suite must see (docs/OPS.md), with the type of
// one attribute each: a missing registration or a changed attribute type
// breaks saved GraphDefs.
TEST(OpRegistryTest, ModelOpsAreRegisteredWithTypedAttributes) {
  const std::vector<std::pair<std::string, std::pair<std::string, AttrType>>>
      ops = {
          {"LayerNorm", {"begin_norm_axis", AttrType::kInt}},
          {"LayerNormGrad", {"begin_norm_axis", AttrType::kInt}},
          {"GroupNorm", {"strided_channel_grouping", AttrType::kBool}},
          {"GroupNormGrad", {"groups", AttrType::kInt}},
          {"BatchNorm", {"replica_group_type", AttrType::kString}},
          {"BatchNormGrad", {"replica_group_size", AttrType::kInt}},
          {"BatchNormInference", {"epsilon", AttrType::kFloat}},
          {"BatchNormInferenceGrad", {"channels_axis", AttrType::kInt}},
          {"MSELoss", {"reduction", AttrType::kString}},
          {"L1Loss", {"reduction", AttrType::kString}},
          {"HuberLoss", {"delta", AttrType::kFloat}},
          {"BCEWithLogitsLoss", {"pos_weight", AttrType::kFloat}},
          {"KLDivLoss", {"log_target", AttrType::kBool}},
          {"PointwiseLossGrad", {"loss", AttrType::kString}},
          {"NLLLoss", {"ignore_index", AttrType::kInt}},
          {"NLLLossGrad", {"reduction", AttrType::kString}},
          {"SmoothedSparseSoftmaxCrossEntropy",
           {"label_smoothing", AttrType::kFloat}},
          {"SmoothedSparseSoftmaxCrossEntropyGrad",
           {"label_smoothing", AttrType::kFloat}},
          {"EmbeddingLookup", {"serialization_factor", AttrType::kInt}},
          {"EmbeddingLookupGrad", {"serialization_factor", AttrType::kInt}},
          {"SerializedMatMul", {"serialization_dimension", AttrType::kString}},
          {"ScaledDotProductAttention", {"causal", AttrType::kBool}},
          {"ScaledDotProductAttentionGrad", {"scale", AttrType::kFloat}},
          {"IpuDropout", {"seed", AttrType::kInt}},
          {"IpuDropoutWithSeed", {"rate", AttrType::kFloat}},
          {"RecomputationCheckpoint", {"", AttrType::kInt}},
          {"ApplyRMSProp", {"dtype", AttrType::kDType}},
          {"ApplyAdagrad", {"initial_accumulator_value", AttrType::kFloat}},
          {"ApplySGD", {"nesterov", AttrType::kBool}},
          {"PopnnLSTM", {"time_major", AttrType::kBool}},
          {"PopnnLSTMGrad", {"time_major", AttrType::kBool}},
          {"PopnnGRU", {"reset_after", AttrType::kBool}},
          {"PopnnGRUGrad", {"reset_after", AttrType::kBool}},
          {"WithinReplicaAllReduce", {"op", AttrType::kString}},
          {"WithinReplicaReduceScatter", {"shard", AttrType::kInt}},
          {"WithinReplicaAllGather", {"", AttrType::kInt}},
      };
  for (const auto& [name, attr] : ops) {
    absl::StatusOr<const OpDef*> def = OpRegistry::Global()->Find(name);
    ASSERT_TRUE(def.ok()) << def.status();
    if (attr.first.empty()) continue;
    const AttrDef* a = (*def)->FindAttr(attr.first);
    ASSERT_NE(a, nullptr) << name << "." << attr.first;
    EXPECT_EQ(a->type, attr.second) << name << "." << attr.first;
  }
}

// Attribute values outside an op's range are refused when the node is
// built, naming the node and the value (issue 21's ops).
TEST(OpRegistryTest, NewOpsRefuseBadAttributes) {
  struct Case {
    std::string expected;
    std::function<void(const Scope&, Output)> build;
  };
  const std::vector<Case> cases = {
      {"Gelu 'bad': approximate must be \"none\" or \"tanh\", got \"erf\"",
       [](const Scope& s, Output x) { ops::Gelu(s, x, "erf"); }},
      {"Clamp 'bad': min 2 must not exceed max 1",
       [](const Scope& s, Output x) { ops::Clamp(s, x, 2.0f, 1.0f); }},
      {"Hardtanh 'bad': min_val 1 must not exceed max_val -1",
       [](const Scope& s, Output x) { ops::Hardtanh(s, x, 1.0f, -1.0f); }},
      {"Softplus 'bad': beta must be finite and non-zero, got 0",
       [](const Scope& s, Output x) { ops::Softplus(s, x, 0.0f); }},
  };
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    Output x = ops::Placeholder(s, DType::kFloat32, {3});
    c.build(s.WithOpName("bad"), x);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.expected), std::string::npos)
        << s.status();
  }
}

// Relu6 and Where are builders over Hardtanh and Select, not ops of their
// own; second derivatives of the smooth activations are an error, not a
// silent zero.
TEST(OpRegistryTest, BuildersAndSecondDerivatives) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {3});
  EXPECT_EQ(ops::Relu6(s, x).node->op(), "Hardtanh");
  Output c = ops::Placeholder(s, DType::kBool, {3});
  EXPECT_EQ(ops::Where(s, c, x, x).node->op(), "Select");
  Output y = ops::Gelu(s, x);
  std::vector<Output> g1, g2;
  ASSERT_TRUE(AddGradients(s, {y}, {x}, {}, &g1).ok());
  const absl::Status second = AddGradients(s, {g1[0]}, {x}, {}, &g2);
  EXPECT_EQ(second.code(), absl::StatusCode::kUnimplemented) << second;
  EXPECT_NE(second.message().find("second derivatives of Gelu"),
            std::string::npos)
      << second;
}

}  // namespace
}  // namespace ipuflow
