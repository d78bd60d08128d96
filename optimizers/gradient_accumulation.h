// GradientAccumulationOptimizer: wraps another optimizer so that its update
// is applied once every `num_mini_batches` runs of the training step, with
// the gradients of those runs accumulated: the effective batch of N
// mini-batches without the memory of one (Graphcore's
// GradientAccumulationOptimizerV2).
//
//   optimizers::AdamOptimizer adam(/*lr=*/1e-3f);
//   optimizers::GradientAccumulationOptimizer opt(
//       &adam, /*num_mini_batches=*/4,
//       GradientAccumulationReductionMethod::kMean);
//   Node* train = opt.Minimize(scope, loss);
//   for (int i = 0; i < 400; ++i) session.Run(feed(i), {}, {train}, nullptr);
//   // 100 Adam updates, each with the mean gradient of 4 mini-batches.
//
// Every run of the step, for each variable (N = num_mini_batches, n in
// [0, N) the index of this mini-batch within the accumulation):
//   acc = acc * accum_scale + grad * grad_scale, where
//     kSum:         accum_scale 1,        grad_scale 1
//     kMean:        accum_scale 1,        grad_scale 1/N (each gradient is
//                   scaled before it is added: no float16 overflow)
//     kRunningMean: accum_scale n/(n+1),  grad_scale 1/(n+1) (acc is the mean
//                   of the gradients so far)
//   if n == N-1: the inner optimizer applies acc (cast to its
//                GradientDType: the variable's, or float32 for a float16
//                variable with a master copy) as the gradient, then acc = 0;
//   n = (n + 1) mod N.
// Other runs change neither the variables nor the inner optimizer's state
// (its slots, Adam's step): after k*N runs the variables are exactly those
// of k inner updates with the accumulated gradients.
//
// Graph: a counter "GradientAccumulation/counter" (int32 n, non-trainable)
// and per variable an accumulator "<var>/GradientAccumulation/accumulator"
// (non-trainable, zero-initialised by an initializer, on the variable's
// IPU); with an explicit `dtype` the accumulator cannot be a slot (slots have
// the variable's dtype) and is "GradientAccumulation/<var>/accumulator".
//
// How the update is made conditional. There is no conditional op, and the
// exact alternatives are limited: a Select mask or a 0/1 factor could undo
// an SGD step, but not the inner optimizer's side effects (Adam's moments
// and step counter would advance every run). So the inner optimizer's
// ApplyGradients is built as the body of a loops::WhileLoop that carries
// the bool "n == N-1" and runs at most once: one iteration on the N-th run,
// none otherwise. The inner update is then the very ops the inner optimizer
// builds, run with the accumulated gradient, and nothing else.
//
// Limitations:
//  - The wrapper builds through Prepare and ApplyDense, one variable at a
//    time: each variable gets its own conditional and its own call of the
//    inner ApplyGradients, so shared inner state is per variable (Adam's
//    steps are "GradientAccumulation/Adam/step", ".../Adam_1/step", ... in
//    variable order; its slots "GradientAccumulation/<var>/Adam/m").
//    Optimizers whose update of a variable depends only on its own gradient
//    (SGD, Momentum, Adam, AdamW, LAMB) give the same numbers; one coupling
//    variables (global-norm clipping) would need one conditional for all
//    (ApplyGradients is virtual, as CrossReplicaOptimizer uses).
//  - Each conditional update runs after its accumulation, so after
//    everything the gradient depends on: for ComputeGradients' gradients,
//    the loss and every variable read it makes. Reads of the variable that
//    the loss does not use, run in the same step, are not ordered with the
//    update (a loop node does not declare to core/program.h the variables
//    its body writes).
//  - Wrapping an optimizer that itself accumulates is InvalidArgument.
//
// Offloading and replicated optimizer-state sharding (the original's
// offload_weight_update_variables and replicated_optimizer_state_sharding,
// TensorFlow IPU guide 6.9; WeightUpdateOptions, below). The variables only
// the inner update uses (the variables it creates: Adam's m and v,
// momentum, master weights; not the weights, not the accumulators) live in
// remote memory between updates: each conditional update is bracketed by
// a load (before) and a store (after) node, optimizers/offloaded_state.h.
// Compiled into a device program (IPUStrategy::Compile, a loops::Repeat
// body), the program decides which go to remote memory (those of at least
// IPUConfig.minimum_remote_tensor_size bytes, x R with sharding: the rule
// pipelines use, core/memory_plan.h PlaceOptimizerState), counts them in
// the report's remote category (1/R per replica with sharding, and the
// saving), and streams them at run time: with sharding over R replicas the
// store is a reduce-scatter with the LOCAL op (each replica keeps ceil(n/R)
// elements) and the load an all-gather. Bytes moved count in each IPU's
// TransferCounters::remote_memory; the numbers are bitwise those of
// offloading off. Outside a device program the state stays on the IPU.
//
//   WeightUpdateOptions wu;
//   wu.offload_weight_update_variables = true;      // unset: automatic
//   wu.replicated_optimizer_state_sharding = true;  // 1/R per replica
//   CrossReplicaGradientAccumulationOptimizerV2 opt(
//       &adam, /*num_mini_batches=*/4,
//       GradientAccumulationReductionMethod::kMean, ReplicaReduction::kMean,
//       /*dtype=*/{}, wu);
//
// The sharded update (ZeRO-1, the original's elementwise clustering of the
// resource update). With sharding, an inner optimizer whose update is
// elementwise (UpdatesElementwise: SGD, Momentum, Adam, AdamW; not LAMB)
// and a variable whose state the program shards (all of its state of the
// weight's size at least minimum_remote_tensor_size x R bytes), replica r
// of R updates only its chunk [r c, min(n, (r+1) c)), c = ceil(n/R), of
// the flattened weight: the load node hands the update the shard {r, R}
// (ops/state/update_shard.h), the load brings back only this replica's
// chunk of the state (no all-gather), the cross-replica reduction of the
// accumulated gradient is a reduce-scatter into that chunk, the update ops
// compute that chunk of the weight and state, and one all-gather of the
// weight (GatherVariableShards) follows; the store keeps the chunk. Per
// replica the update's arithmetic drops to 1/R; bytes sent go from the
// gradient all-reduce's 2 (R-1)/R x size to x c per reduce-scatter
// and all-gather. Both collectives add in rank order, so the numbers are
// bitwise those of sharding off. Other updates (LAMB, state kept whole,
// R = 1) run on whole tensors and all-gather the state on load. Pipelines
// offload through the same RemoteState (pipelining/pipeline_backward.cc).
// Emulation: tensors keep their whole shape on the IPU (the report counts
// the 1/R); elements outside the chunk are not read.
// Between updates an offloaded slot is not on its IPU: read it with
// Executable::ReadVariables.
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_GRADIENT_ACCUMULATION_H_
#define IPUFLOW_OPTIMIZERS_GRADIENT_ACCUMULATION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ipu/remote_state.h"
#include "optimizers/cross_replica.h"
#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

// How gradients of the mini-batches are combined (table above). Shared with
// pipelining, which always accumulates.
enum class GradientAccumulationReductionMethod { kSum, kMean, kRunningMean };

// The accumulators' dtype: each variable's (the default), one dtype for
// all, or chosen per variable (the original's callable `dtype` argument).
class AccumulationDType {
 public:
  AccumulationDType() = default;
  AccumulationDType(std::nullopt_t) {}               // NOLINT: implicit.
  AccumulationDType(DType dtype) : fixed_(dtype) {}  // NOLINT: implicit.
  AccumulationDType(std::optional<DType> dtype)      // NOLINT: implicit.
      : fixed_(dtype) {}
  using PerVariable = std::function<DType(const ops::VariableInfo&)>;
  AccumulationDType(PerVariable f) : per_variable_(std::move(f)) {}  // NOLINT

  // The dtype for `var`.
  DType For(const ops::VariableInfo& var) const {
    if (per_variable_) return per_variable_(var);
    return fixed_.value_or(var.dtype);
  }
  // True when every accumulator has its variable's dtype (so it can be a
  // slot of the variable).
  bool is_default() const { return !fixed_.has_value() && !per_variable_; }
  // The one dtype given for every variable, if any (a per-variable choice
  // is checked per variable when the accumulator is built).
  std::optional<DType> fixed() const { return fixed_; }

 private:
  std::optional<DType> fixed_;
  PerVariable per_variable_;
};

// The accumulation step, shared by GradientAccumulationOptimizer and
// pipelines (one builder for both):
//   acc <- acc * accum_scale + cast(grad, dtype) * grad_scale
// for the accumulator handle `acc` of `dtype`; an invalid scale is 1 (no
// node), so kSum is a plain AssignAdd. Scales are float scalars (cast to
// `dtype`). Returns the write.
struct AccumulationScales {
  Output accum_scale;
  Output grad_scale;
  // The caller guarantees 0 < |grad_scale| <= 1 (the mean's 1/N) and, if
  // set, 0 <= accum_scale <= 1: the scaled values cannot overflow or
  // become NaN where their inputs did not, so a float32 accumulation may
  // skip the scaled tensors (and their floating-point trap checks) and run
  // as one AssignAddScaled or AssignScaledAddScaled, bitwise the same. Like
  // AssignAdd's, the accumulated sum itself is not trap-checked.
  bool grad_scale_at_most_one = false;
};
Node* AccumulateGradient(const Scope& scope, Output acc, DType dtype,
                         Output grad, const AccumulationScales& scales);

// The reduction's scales (the table at the top of this file) in the graph,
// the one formula of GradientAccumulationOptimizer and pipelines, for
// micro-batch `n` (an int32 scalar in [0, num)) of `num`: the part that
// depends on n is built once per step (MakeMicroBatchScales), the rest per
// accumulator (ReductionScales). With `first_overwrites` (a pipeline,
// whose stopped step may leave partial sums behind) micro-batch 0's
// accum_scale is 0 for every method (1 after it for kSum and kMean).
// Every scale is in [0, 1].
struct MicroBatchScales {
  Output accum_scale;  // Float32; invalid: 1.
  Output grad_scale;   // Float32; invalid: the method's constant.
};
MicroBatchScales MakeMicroBatchScales(
    const Scope& scope, GradientAccumulationReductionMethod method, Output n,
    bool first_overwrites);
AccumulationScales ReductionScales(const Scope& scope,
                                   GradientAccumulationReductionMethod method,
                                   int64_t num, const MicroBatchScales& step,
                                   DType dtype);

// The original's weight-update arguments of GradientAccumulationOptimizerV2
// and CrossReplicaGradientAccumulationOptimizerV2 (defaults as there).
struct WeightUpdateOptions {
  // Unset: automatic: offload when sharding is on, or when an IPU would
  // not hold the state beside everything else; true: offload; false: keep
  // the state on the IPU.
  std::optional<bool> offload_weight_update_variables;
  // Shard offloaded state over the replicas (ZeRO-1). Needs offloading
  // (true with offload explicitly false is InvalidArgument, the original's
  // ValueError) and, over R > 1 replicas, replica-identical state: the
  // cross-replica wrapper (else InvalidArgument when the program compiles).
  bool replicated_optimizer_state_sharding = false;
};

class GradientAccumulationOptimizer : public Optimizer {
 public:
  // `optimizer`: not owned; must outlive this. `dtype`: the accumulators'
  // dtype (float32 or float16); by default each variable's. Invalid
  // arguments (null optimizer, num_mini_batches < 1, a non-float dtype) are
  // InvalidArgument, recorded in the scope by ApplyGradients.
  GradientAccumulationOptimizer(
      Optimizer* optimizer, int num_mini_batches,
      GradientAccumulationReductionMethod reduction_method =
          GradientAccumulationReductionMethod::kSum,
      AccumulationDType dtype = {}, WeightUpdateOptions weight_update = {})
      : Optimizer("GradientAccumulation"),
        optimizer_(optimizer),
        num_mini_batches_(num_mini_batches),
        reduction_method_(reduction_method),
        dtype_(std::move(dtype)),
        weight_update_(weight_update) {}
  // As above, owning `optimizer`.
  GradientAccumulationOptimizer(
      std::shared_ptr<Optimizer> optimizer, int num_mini_batches,
      GradientAccumulationReductionMethod reduction_method =
          GradientAccumulationReductionMethod::kSum,
      AccumulationDType dtype = {}, WeightUpdateOptions weight_update = {})
      : Optimizer("GradientAccumulation"),
        owned_(std::move(optimizer)),
        optimizer_(owned_.get()),
        num_mini_batches_(num_mini_batches),
        reduction_method_(reduction_method),
        dtype_(std::move(dtype)),
        weight_update_(weight_update) {}

  bool accumulates_gradients() const override { return true; }
  int num_mini_batches() const { return num_mini_batches_; }
  GradientAccumulationReductionMethod reduction_method() const {
    return reduction_method_;
  }
  Optimizer* inner() const { return optimizer_; }
  const WeightUpdateOptions& weight_update() const { return weight_update_; }
  // The accumulator's dtype: any float gradient is cast to it when added.
  DType GradientDType(const ops::VariableInfo& var) const override;

  // A gate on the N-th step's update, for a wrapper that may skip it
  // (LossScalingOptimizer's GradScaler): when set, the inner update runs
  // when `apply_now` holds instead of on every N-th step, and when
  // `skip_now` holds the accumulators are emptied without an update. Both
  // are bool scalars, false except on the N-th step. Applies to the next
  // ApplyGradients; an empty gate restores the default.
  struct ApplyGate {
    Output apply_now, skip_now;
  };
  void SetApplyGate(ApplyGate gate) { gate_ = gate; }

 protected:
  // The accumulator, when it has the variable's dtype.
  std::vector<std::string> SlotNames() const override;
  std::vector<Node*> Prepare(const Scope& scope) override;
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  absl::Status Validate() const;
  // acc = acc * accum_scale + grad * grad_scale for the accumulator handle
  // `acc` of `dtype`; returns the write.
  Node* Accumulate(const Scope& scope, Output acc, DType dtype,
                   Output grad) const;
  // The inner update of `var` with `acc` (built in `inner_scope`), then
  // acc = 0, run when `apply_now` (a bool scalar) holds; returns the loop.
  // With a valid `shard` (ZeRO-1) the inner optimizer updates that chunk
  // and the weight is all-gathered after it.
  Node* ApplyIf(const Scope& scope, const Scope& inner_scope, Output apply_now,
                Output acc, DType dtype, const ops::VariableInfo& var,
                Output shard) const;

  std::shared_ptr<Optimizer> owned_;
  Optimizer* const optimizer_;  // owned_ or not owned.
  const int num_mini_batches_;
  const GradientAccumulationReductionMethod reduction_method_;
  const AccumulationDType dtype_;
  const WeightUpdateOptions weight_update_;
  // The offloaded state of each ApplyGradients (the graph and the programs
  // find it as a host resource; it lives as long as this optimizer or a
  // program compiled with it).
  std::vector<std::shared_ptr<RemoteState>> remote_states_;
  // Built by the current ApplyGradients (Prepare).
  std::shared_ptr<RemoteState> remote_;
  std::string remote_id_;
  int next_update_ = 0;
  Output is_last_;  // n == N-1.
  ApplyGate gate_;
  MicroBatchScales step_scales_;  // This step's (MakeMicroBatchScales).
};

// The original's name for the same wrapper: no cross-replica reduction, so
// with R > 1 replicas each replica applies its own accumulated gradient.
using GradientAccumulationOptimizerV2 = GradientAccumulationOptimizer;

// GradientAccumulationOptimizerV2(CrossReplicaOptimizer(opt)), as in the
// original: accumulate locally over N mini-batches, then one all-reduce per
// variable per weight update, on the accumulated gradient. The two
// reductions are separate settings; the applied gradient is
//   micro-batches kSum,  replicas kMean: G = (1/R)     sum_r sum_i g_ri
//                                          (TensorFlow's default)
//   micro-batches kMean, replicas kMean: G = (1/(R N)) sum_r sum_i g_ri
//                                          (PopTorch's default)
//   micro-batches kSum,  replicas kSum:  G =           sum_r sum_i g_ri
//   kRunningMean equals kMean up to rounding.
// Its optimizer state is replica-identical, so it may be sharded over the
// replicas (WeightUpdateOptions::replicated_optimizer_state_sharding).
class CrossReplicaGradientAccumulationOptimizerV2
    : public GradientAccumulationOptimizer {
 public:
  // `optimizer` is not owned and must outlive this.
  CrossReplicaGradientAccumulationOptimizerV2(
      Optimizer* optimizer, int num_mini_batches,
      GradientAccumulationReductionMethod reduction_method =
          GradientAccumulationReductionMethod::kSum,
      ReplicaReduction replica_reduction = ReplicaReduction::kMean,
      AccumulationDType dtype = {}, WeightUpdateOptions weight_update = {})
      : GradientAccumulationOptimizer(std::make_shared<CrossReplicaOptimizer>(
                                          optimizer, replica_reduction),
                                      num_mini_batches, reduction_method,
                                      std::move(dtype), weight_update) {}
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_GRADIENT_ACCUMULATION_H_
