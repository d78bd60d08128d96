// Optimizer: builds the training step of a graph. ComputeGradients
// differentiates the loss with respect to the variables' reads;
// ApplyGradients builds one fused update op per variable (ops/state/apply_*),
// creating the slot variables it needs (zero-initialised, registered as
// initializers) and returns a Group of the updates; Minimize does both.
//
//   optimizers::AdamOptimizer opt(/*lr=*/1e-3f);
//   Node* train = opt.Minimize(scope, loss);          // trainable variables
//   if (!scope.ok()) return scope.status();
//   RETURN_IF_ERROR(session.Initialize());            // variables and slots
//   for (...) RETURN_IF_ERROR(session.Run(feeds, {loss}, {train}, &out));
//
// Gradients are taken with respect to every ReadVariable of a variable that
// the loss depends on, and summed: a variable read twice (shared weights)
// gets both contributions. Updates run after every read of the variable
// built before them (core/program.h orders accesses by creation), so the
// step sees one consistent set of weights.
//
// Master weights (mixed precision, as Graphcore's and Apex's "master
// weights"): with set_master_weights(true), each float16 variable gets a
// float32 copy "<var>/<name>/master" (non-trainable, initialised from the
// variable's initial value by an initializer, on its IPU). The update runs
// on the master, with float32 slots ("<var>/<name>/m" is float32) and the
// gradient cast to float32; then the variable the model reads is assigned
// Cast(master, float16) (one rounding, through RoundToHalf). Updates far
// below the float16 spacing of a weight accumulate in the master instead of
// vanishing:
//
//   optimizers::GradientDescentOptimizer sgd(1e-3f);
//   sgd.set_master_weights(true);
//   Node* train = sgd.Minimize(scope, loss);   // loss of a float16 model
//
// float32 variables are untouched by the option. GradientDType(var) tells
// wrappers (gradient accumulation, pipelines) in which dtype to hand the
// gradient over: float32 for a variable with a master, so an accumulated
// float32 gradient is never rounded to float16 on its way.
//
// Errors follow the builders' convention: the first one is recorded in the
// scope, and the functions return an empty vector or nullptr.
//
// Thread safety: an Optimizer is used by one thread while building; the ops
// it builds may run anywhere.
#ifndef IPUFLOW_OPTIMIZERS_OPTIMIZER_H_
#define IPUFLOW_OPTIMIZERS_OPTIMIZER_H_

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/option_checks.h"
#include "core/scope.h"
#include "ops/state/handle.h"
#include "ops/state/variable.h"
#include "optimizers/var_list.h"

namespace ipuflow::optimizers {

struct GradAndVar {
  Output grad;               // Invalid when the loss does not depend on it.
  Node* variable = nullptr;  // A Variable node.
};

// A hyperparameter such as a learning rate: a constant, or a float32 scalar
// tensor of the graph being built (a fed Placeholder, a schedule).
class Hyperparameter {
 public:
  Hyperparameter(float value) : value_(value) {}     // NOLINT: implicit.
  Hyperparameter(Output tensor) : value_(tensor) {}  // NOLINT: implicit.
  // The value as an output of `scope`'s graph (a Const for a constant).
  // A constant must be finite and >= 0, else InvalidArgument "<owner>:
  // <field> is nan; ..." is recorded in the scope (a NaN, infinite or
  // negative learning rate trained silently to garbage: issue 22); a
  // tensor's value is the caller's to check.
  Output ToOutput(const Scope& scope, const std::string& owner,
                  const char* field) const;

 private:
  std::variant<float, Output> value_;
};

// OK if `loss` is float32 or float16; else InvalidArgument naming it.
absl::Status CheckLossDType(const Output& loss);

// An optimizer's constant options, checked when its update is built (the
// ranges torch.optim's constructors enforce): add rules, then Record puts
// InvalidArgument "<owner>: <field> is <value>; it must be ..." in `scope`
// (every failed rule) and returns false if any failed.
class OptionRules {
 public:
  explicit OptionRules(const std::string& owner) : check_(owner) {}
  // Finite and >= 0 (momentum, weight decay, epsilon, ...).
  OptionRules& NonNegative(const char* field, float value);
  // Finite, in [lo, hi].
  OptionRules& Between(const char* field, float value, float lo, float hi);
  // Finite, in [0, 1): a moving-average decay (Adam's betas; 1 would divide
  // by a bias correction of 0).
  OptionRules& Decay(const char* field, float value);
  // A rule of the caller's own that failed.
  OptionRules& Fail(const std::string& message);
  bool Record(const Scope& scope) const;

 private:
  OptionChecker check_;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "GradientDescent", "Momentum", "Adam", "AdamW": the sub-scope its nodes
  // are built in and the middle part of its slots' names ("w/Adam/m").
  const std::string& name() const { return name_; }
  // True for wrappers that accumulate gradients over several steps
  // themselves (a pipeline, which always accumulates, rejects them).
  virtual bool accumulates_gradients() const { return false; }

  // Keep float32 master copies of float16 variables (header comment).
  // Applies to the ApplyGradients calls built after it.
  void set_master_weights(bool on) { master_weights_ = on; }
  bool master_weights() const { return master_weights_; }
  // The dtype ApplyGradients wants `var`'s gradient in: float32 when `var`
  // is float16 and has a master copy, else the variable's dtype. Virtual
  // for wrappers, which answer for their inner optimizer.
  virtual DType GradientDType(const ops::VariableInfo& var) const;

  // Sharded weight updates (replicated optimizer-state sharding, ZeRO-1;
  // gradient_accumulation.h): true when the update of each element of a
  // variable depends only on that element of the variable, its slots and
  // its gradient (SGD, Momentum, Adam, AdamW; not LAMB, whose trust ratio
  // needs whole norms), so one replica may compute a chunk of it. Wrappers
  // answer for their inner optimizer.
  virtual bool UpdatesElementwise() const { return false; }
  // The shard (an int32 [2] {index, count}, ops/state/update_shard.h) the
  // next ApplyGradients updates: each update op computes only that chunk
  // of its variable and slots. Invalid (the default): whole variables.
  // REQUIRES: UpdatesElementwise(), when valid.
  void set_update_shard(Output shard) { update_shard_ = shard; }
  const Output& update_shard() const { return update_shard_; }
  // Per-variable shards for one ApplyGradients over several variables (a
  // pipeline's weight update, where the program decides for each weight
  // whether its update is sharded): the update of a variable listed here
  // takes its own shard, others update_shard(). Wrappers pass them on.
  // REQUIRES: UpdatesElementwise(), when not empty.
  void set_update_shards(std::map<const Node*, Output> shards) {
    update_shards_ = std::move(shards);
  }
  const std::map<const Node*, Output>& update_shards() const {
    return update_shards_;
  }
  // The shard of `variable`'s update (invalid: the whole variable).
  Output UpdateShardOf(const Node* variable) const {
    auto it = update_shards_.find(variable);
    return it != update_shards_.end() ? it->second : update_shard_;
  }

  // True when ApplyGradients builds its update as a conditional sub-program
  // (a device loop run at most once: LossScalingOptimizer's GradScaler).
  // Pipelines refuse it: their weight update cannot run a loop whose body
  // spans the stages' IPUs.
  virtual bool updates_conditionally() const { return false; }

  // The seed d(scaled loss)/d(loss) for a backward pass built by hand (a
  // pipeline's last stage): invalid (ones) unless a wrapper scales the loss
  // (LossScalingOptimizer: the loss scale, as `loss`'s dtype).
  virtual Output LossGradientSeed(const Scope& scope, Output loss) {
    return Output();
  }

  // d(loss)/d(variable) for each variable of `var_list`, in its order.
  // Virtual for wrappers that change the loss (loss_scaling.h scales it).
  virtual std::vector<GradAndVar> ComputeGradients(
      const Scope& scope, Output loss, const VarList& var_list = {});
  // The update of every pair with a gradient, grouped in one NoOp
  // "<name>/apply". Pairs without a gradient are skipped; none at all is
  // InvalidArgument naming the variables. Virtual for wrappers that change
  // the gradients and hand them to an inner optimizer (cross_replica.h).
  virtual Node* ApplyGradients(const Scope& scope,
                               const std::vector<GradAndVar>& grads_and_vars);
  Node* Minimize(const Scope& scope, Output loss, const VarList& var_list = {});

 protected:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}

  // The slot variables each trained variable gets, e.g. {"m", "v"}: each is
  // a non-trainable variable "<var>/<name>/<slot>" of the variable's dtype
  // and shape, on its IPU, zero-initialised by an initializer.
  virtual std::vector<std::string> SlotNames() const { return {}; }
  // Called once per ApplyGradients, in the optimizer's sub-scope, before the
  // updates: builds what they share (hyperparameter tensors, step counters).
  // Returns nodes the group must also run.
  virtual std::vector<Node*> Prepare(const Scope& scope) = 0;
  // The update of one variable, built in `scope` (named and placed for it);
  // `slots` are the handles of its SlotNames(), in order.
  virtual Node* ApplyDense(const Scope& scope, Output grad,
                           const ops::VariableInfo& var,
                           const std::vector<Output>& slots) = 0;

 private:
  // The slot "<var>/<name>/<slot>" (SlotNames()), of `dtype`.
  Output MakeSlot(const Scope& scope, const ops::VariableInfo& var,
                  const std::string& slot, DType dtype) const;
  // The float32 master "<var>/<name>/master" of the float16 `var`.
  absl::StatusOr<ops::VariableInfo> MakeMaster(
      const Scope& scope, const ops::VariableInfo& var) const;
  // The update of `var` through its master: ApplyDense on the master with
  // `grad` as float32, then var = Cast(master, float16). Returns the copy.
  Node* ApplyThroughMaster(const Scope& scope, const Scope& update_scope,
                           Output grad, const ops::VariableInfo& var);

  const std::string name_;
  bool master_weights_ = false;
  Output update_shard_;
  std::map<const Node*, Output> update_shards_;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_OPTIMIZER_H_
