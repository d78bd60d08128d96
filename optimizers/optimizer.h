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
// Errors follow the builders' convention: the first one is recorded in the
// scope, and the functions return an empty vector or nullptr.
//
// Thread safety: an Optimizer is used by one thread while building; the ops
// it builds may run anywhere.
#ifndef IPUFLOW_OPTIMIZERS_OPTIMIZER_H_
#define IPUFLOW_OPTIMIZERS_OPTIMIZER_H_

#include <string>
#include <variant>
#include <vector>

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
  Output ToOutput(const Scope& scope) const;

 private:
  std::variant<float, Output> value_;
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

  // d(loss)/d(variable) for each variable of `var_list`, in its order.
  std::vector<GradAndVar> ComputeGradients(const Scope& scope, Output loss,
                                           const VarList& var_list = {});
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
  // The slot "<var>/<name>/<slot>" (SlotNames()).
  Output MakeSlot(const Scope& scope, const ops::VariableInfo& var,
                  const std::string& slot) const;

  const std::string name_;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_OPTIMIZER_H_
