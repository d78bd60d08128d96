#include "optimizers/global_norm_clipping.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ops/array/const.h"
#include "ops/collective/cross_replica.h"
#include "ops/math/add_n.h"
#include "ops/math/cast.h"
#include "ops/math/div.h"
#include "ops/math/maximum.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/sqrt.h"
#include "ops/math/square.h"

namespace ipuflow::optimizers {

ClippedGradients ClipByGlobalNorm(const Scope& scope,
                                  const std::vector<Output>& gradients,
                                  float clip_norm, const ClipOptions& options) {
  if (!scope.ok()) return {};
  if (!(std::isfinite(clip_norm) && clip_norm > 0)) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("ClipByGlobalNorm: clip_norm must be finite and > 0, got ",
                     clip_norm)));
    return {};
  }
  const Scope s = scope.NewSubScope("clip_by_global_norm");
  std::vector<Output> squares;
  for (const Output& g : gradients) {
    if (!g.valid()) continue;
    Output g32 =
        g.dtype() == DType::kFloat32 ? g : ops::Cast(s, g, DType::kFloat32);
    squares.push_back(ops::ReduceSum(s, ops::Square(s, g32)));
  }
  ClippedGradients out;
  if (squares.empty()) {
    out.gradients = gradients;
    return out;
  }
  Output sum = squares.size() == 1 ? squares[0] : ops::AddN(s, squares);
  if (options.sum_over_replicas) {
    sum = ops::CrossReplicaSum(s.WithOpName("sum_of_squares"), sum,
                               options.replica_groups);
  }
  out.global_norm = ops::Sqrt(s.WithOpName("global_norm"), sum);
  const Output clip = ops::Const(s, clip_norm);
  const Output scale = ops::Div(s.WithOpName("scale"), clip,
                                ops::Maximum(s, out.global_norm, clip));
  for (const Output& g : gradients) {
    if (!g.valid()) {
      out.gradients.push_back(g);
      continue;
    }
    const Output sc =
        g.dtype() == DType::kFloat32 ? scale : ops::Cast(s, scale, g.dtype());
    out.gradients.push_back(ops::Mul(s, g, sc));
  }
  return out;
}

Node* GlobalNormClippingOptimizer::ApplyGradients(
    const Scope& scope, const std::vector<GradAndVar>& grads_and_vars) {
  if (!scope.ok()) return nullptr;
  if (optimizer_ == nullptr) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        "GlobalNormClipping optimizer: the optimizer to wrap is null"));
    return nullptr;
  }
  std::vector<Output> grads;
  for (const GradAndVar& gv : grads_and_vars) grads.push_back(gv.grad);
  ClippedGradients clipped =
      ClipByGlobalNorm(scope.NewSubScope(name()), grads, clip_norm_, options_);
  if (!scope.ok()) return nullptr;
  global_norm_ = clipped.global_norm;
  std::vector<GradAndVar> out = grads_and_vars;
  for (size_t i = 0; i < out.size(); ++i) out[i].grad = clipped.gradients[i];
  optimizer_->set_update_shard(update_shard());
  optimizer_->set_update_shards(update_shards());
  Node* applied = optimizer_->ApplyGradients(scope, out);
  optimizer_->set_update_shard(Output());
  optimizer_->set_update_shards({});
  return applied;
}

Node* GlobalNormClippingOptimizer::ApplyDense(const Scope& scope, Output,
                                              const ops::VariableInfo& var,
                                              const std::vector<Output>&) {
  scope.UpdateStatus(absl::InternalError(absl::StrCat(
      "GlobalNormClipping optimizer: ApplyDense called for '", var.name,
      "' (the wrapper applies through its inner optimizer)")));
  return nullptr;
}

}  // namespace ipuflow::optimizers
