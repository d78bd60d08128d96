// LossScalingOptimizer: loss scaling for float16 training, static or
// automatic, around any optimizer. The loss is multiplied by the scale S
// before the backward pass (so small float16 gradients do not underflow),
// and every gradient is multiplied by 1/S before the inner optimizer sees it
// (so its state is updated with true gradients), as PopTorch's
// `loss_scaling` ("Loss scaling", PopTorch user guide).
//
//   optimizers::AdamOptimizer adam(1e-3f);
//   adam.set_master_weights(true);                  // float32 masters
//   optimizers::LossScalingOptimizer opt(&adam, LossScaling::GradScaler());
//   Node* train = opt.Minimize(scope, loss);        // float16 model's loss
//   ...; strategy.ReadVariables(opt.scale_variable());   // the current S
//
// Methods (S: the scale, a float32 scalar):
//  - kStatic (PopTorch loss_scaling): S = loss_scaling, a constant. With a
//    power of two and no overflow, float32 training is bitwise that of the
//    unscaled loss (x * 2^k and x * 2^-k are exact).
//  - kAutomatic (PopTorch / PopART automatic loss scaling, its histogram
//    rule): each float16 gradient g (as the backward pass produced it, i.e.
//    scaled) is counted into lower = #{|g| < E} and upper = #{|g| >= E},
//    E = 65504 x bin_edge_location; counts are summed over the gradients,
//    over the micro-batches of a gradient-accumulation step and over the
//    replicas (CrossReplicaSum). Every update_period optimizer steps, with
//    t = threshold_upper_count_proportion and f = t / (1 - t):
//        S <- S x 0.5  if upper > f x lower,   else  S <- S x 2.
//    float32 gradients are not tracked; none in float16 is InvalidArgument
//    "[AutomaticLossScale transform] No tracked gradient tensors of type fp16
//    were found." There is no inf/NaN guard and no skipped step (as PopART).
//  - kGradScaler (PyTorch's torch.amp.GradScaler): S starts at init_scale;
//    each step, if any gradient has an inf or NaN (summed over replicas; a
//    float16 gradient's +-65504 counts too: with nanoo off, the default,
//    that is where an overflow saturates instead of becoming inf; and so
//    does a float16 65504 cast to float32 on its way to a float32 weight,
//    counted at that cast, ops::kFloat16GradientCasts, since as float32 it
//    is an ordinary number),
//    the inner update is skipped (variables and optimizer state unchanged),
//    S <- S x backoff_factor and the growth tracker is reset; otherwise the
//    update runs and tracker += 1, and when it reaches growth_interval:
//    S <- S x growth_factor, tracker = 0.
// The new S applies from the next step. S lives in the non-trainable float32
// variable "LossScaling/scale" (under the scope's prefix; scale_variable()),
// updated inside the device program, so it works in loops::Repeat and is
// identical on every replica; ReadVariables or a ReadVariable fetch reports
// it. kGradScaler's tracker is "LossScaling/growth_tracker" (int32).
//
// Gradient accumulation: wrap the GradientAccumulationOptimizer (or its
// cross-replica form): LossScalingOptimizer(&accumulating, ...). Gradients
// are unscaled per micro-batch, in the accumulator's dtype. kAutomatic then
// sums the statistics of the N micro-batches of the last optimizer step of
// each period of update_period steps (PopART runs its histograms in N of
// every N x update_period executions) and updates S with the weight update.
// kGradScaler sums the inf/NaN counts of the N micro-batches and decides at
// the weight update: it gates the accumulation wrapper's own conditional
// update (GradientAccumulationOptimizer::SetApplyGate), which then applies
// or empties its accumulators; S and the tracker change only then.
// kGradScaler in a pipeline is Unimplemented (its conditional update would
// be a device loop spanning the stages' IPUs, which the weight update cannot
// run); static and kAutomatic work in pipelines, kAutomatic there counting the
// accumulated gradients at the weight update.
//
// Differences from the originals, on purpose: kAutomatic tracks the
// gradients the optimizer receives (one per variable), not PopART's
// intermediate gradients of convolutions and matmuls; NaN counts as
// "upper". The gradient unscaling runs in float32 whenever the gradient is
// float16 (then rounded once), so 1/S never underflows in float16.
// Consequence of tracking only the variables' gradients: an overflow that
// saturates (nanoo off) before any of them reaches the bin edge is not
// seen. A float16 loss seeds its backward pass with S itself, which
// saturates at 65504 once S exceeds it, and S then grows without bound while
// the unscaled gradients shrink. Compute the loss in float32 (cast the
// logits, as autocast does; the main example does): the scaled gradient
// then enters float16 as S x d(loss)/d(logits).
//
// How kGradScaler skips: the inner ApplyGradients is the body of a
// loops::WhileLoop that runs at most once, while "no inf/NaN" holds (the
// mechanism gradient_accumulation.h uses). That is a real conditional: the
// skipped step runs none of the inner optimizer's ops, so Adam's moments
// and step count are untouched, and an all-finite step runs exactly the ops
// it runs without the scaler. Selecting between old and new values would
// have needed a copy of every variable and slot each step.
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_LOSS_SCALING_H_
#define IPUFLOW_OPTIMIZERS_LOSS_SCALING_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

// PopART's prefix of the automatic method's errors, which ipuflow keeps.
inline constexpr char kAutomaticLossScaleError[] =
    "[AutomaticLossScale transform] ";

enum class LossScalingMethod { kStatic, kAutomatic, kGradScaler };

// PopART's AutomaticLossScalingSettings (defaults are PopART's).
struct AutomaticLossScalingSettings {
  float bin_edge_location = 0.125f;                // E = 65504 x this.
  float threshold_upper_count_proportion = 1e-7f;  // t.
  int update_period = 1;                           // Optimizer steps.
};

// torch.amp.GradScaler's arguments (defaults are PyTorch's).
struct GradScalerSettings {
  float init_scale = 65536.f;  // 2^16.
  float growth_factor = 2.f;
  float backoff_factor = 0.5f;
  int growth_interval = 2000;
};

struct LossScaling {
  LossScalingMethod method = LossScalingMethod::kStatic;
  // kStatic's S; kAutomatic's initial S (PopTorch: a manually set
  // loss_scaling becomes the initial value). PopTorch's default is 1.
  float loss_scaling = 1.f;
  AutomaticLossScalingSettings automatic;
  GradScalerSettings grad_scaler;

  static LossScaling Static(float scale) {
    return {LossScalingMethod::kStatic, scale, {}, {}};
  }
  static LossScaling Automatic(float initial_scale = 1.f,
                               AutomaticLossScalingSettings settings = {}) {
    return {LossScalingMethod::kAutomatic, initial_scale, settings, {}};
  }
  static LossScaling GradScaler(GradScalerSettings settings = {}) {
    return {LossScalingMethod::kGradScaler, 1.f, {}, settings};
  }
};

// Bounds of the settings: a scale (static, initial, GradScaler's) is at
// most 2^32 (float32 losses x S stay finite), a growth factor at most
// 2^16, periods and intervals at most 2^30 optimizer steps.
inline constexpr double kMaxLossScale = 4294967296.0;
inline constexpr double kMaxGrowthFactor = 65536.0;
inline constexpr int64_t kMaxLossScalingPeriod = int64_t{1} << 30;

// Every field of `scaling` for its whole range (the one validation style,
// core/option_checks.h): `method` a LossScalingMethod; loss_scaling
// (kStatic, kAutomatic) finite in (0, kMaxLossScale]; kAutomatic's
// bin_edge_location and threshold_upper_count_proportion in [0, 1],
// update_period in [1, kMaxLossScalingPeriod]; kGradScaler's init_scale in
// (0, kMaxLossScale], growth_factor in (1, kMaxGrowthFactor],
// backoff_factor in (0, 1), growth_interval in [1, kMaxLossScalingPeriod].
// InvalidArgument "LossScaling: <field> is <value>; it must be ..." naming
// every field at fault. LossScalingOptimizer checks it before building.
absl::Status CheckLossScaling(const LossScaling& scaling);

class LossScalingOptimizer : public Optimizer {
 public:
  // `optimizer`: not owned; must outlive this. Invalid settings are
  // InvalidArgument (the originals' texts), recorded in the scope by
  // ComputeGradients / ApplyGradients.
  LossScalingOptimizer(Optimizer* optimizer, LossScaling scaling)
      : Optimizer("LossScaling"), optimizer_(optimizer), scaling_(scaling) {}
  // As above, owning `optimizer` (pipelines' optimizer_function).
  LossScalingOptimizer(std::shared_ptr<Optimizer> optimizer,
                       LossScaling scaling)
      : Optimizer("LossScaling"),
        owned_(std::move(optimizer)),
        optimizer_(owned_.get()),
        scaling_(scaling) {}

  const LossScaling& scaling() const { return scaling_; }
  Optimizer* inner() const { return optimizer_; }
  bool accumulates_gradients() const override {
    return optimizer_ != nullptr && optimizer_->accumulates_gradients();
  }
  bool updates_conditionally() const override {
    return scaling_.method == LossScalingMethod::kGradScaler ||
           (optimizer_ != nullptr && optimizer_->updates_conditionally());
  }
  DType GradientDType(const ops::VariableInfo& var) const override {
    return optimizer_ != nullptr ? optimizer_->GradientDType(var) : var.dtype;
  }

  // The gradients of loss x S (scaled gradients).
  std::vector<GradAndVar> ComputeGradients(
      const Scope& scope, Output loss, const VarList& var_list = {}) override;
  // Unscales the gradients, updates S (automatic methods), and applies the
  // inner optimizer (conditionally for kGradScaler).
  Node* ApplyGradients(const Scope& scope,
                       const std::vector<GradAndVar>& grads_and_vars) override;

  // S as `loss`'s dtype: d(loss x S)/d(loss), the seed of a backward pass
  // built by hand (a pipeline's last stage). Creates the state if needed.
  Output LossGradientSeed(const Scope& scope, Output loss) override;

  // The resource name of S's variable, "[<prefix>/]LossScaling/scale";
  // empty for kStatic (a constant) or before anything was built.
  const std::string& scale_variable() const { return scale_name_; }

 protected:
  // Not used: ApplyGradients hands the gradients to the inner optimizer.
  std::vector<Node*> Prepare(const Scope&) override { return {}; }
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  absl::Status Validate() const;
  // Creates S's variable (and the method's state) once per graph, in
  // `scope`'s "LossScaling" sub-scope (state_scope_, where every node of the
  // wrapper goes); returns S as read now (a Const for kStatic).
  Output ReadScale(const Scope& scope);
  // grad x (1 / S), in the dtype the inner optimizer wants.
  Output Unscale(const Scope& scope, Output grad, const ops::VariableInfo& var,
                 Output inverse);
  // The statistics step of kAutomatic; returns the updates of S and state.
  std::vector<Node*> AutomaticUpdate(const Scope& scope,
                                     const std::vector<GradAndVar>& scaled,
                                     Output scale);
  // kGradScaler after the unscaling: the found-inf count, the (gated or
  // looped) inner update and the updates of S and the tracker.
  Node* GradScalerApply(const Scope& scope,
                        const std::vector<GradAndVar>& scaled,
                        const std::vector<GradAndVar>& unscaled, Output scale);
  // Reads the micro-batch counter k (cycling through [0, m)), sets
  // `is_update` to k == m - 1 and adds its advance to `updates`; returns k.
  Output AdvanceCounter(int m, Output* is_update, std::vector<Node*>* updates);
  // Number of micro-batches per inner optimizer step (N of an accumulating
  // inner optimizer, else 1).
  int MicroBatches() const;

  std::shared_ptr<Optimizer> owned_;
  Optimizer* const optimizer_;
  const LossScaling scaling_;
  // Built once per graph.
  const Graph* graph_ = nullptr;
  std::optional<Scope> state_scope_;
  Output scale_handle_, tracker_handle_, counter_handle_;
  Output lower_handle_, upper_handle_, found_handle_;
  std::string scale_name_;
  // The float16 -> float32 gradient casts (ops::kFloat16GradientCasts) the
  // last ComputeGradients made, in `casts_graph_`: kGradScaler counts their
  // float16 inputs too.
  const Graph* casts_graph_ = nullptr;
  std::vector<Node*> float16_casts_;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_LOSS_SCALING_H_
