// Every registered op is complete: a shape function, a kernel, and a
// gradient or a declared reason for having none. Linking //ops brings in
// every op family, so a new op is checked without being listed here.
#include "core/op_registry.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace ipuflow
