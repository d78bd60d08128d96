// RMSPropOptimizer and AdagradOptimizer (ops/state/apply_rms_prop.h has the
// formulas: TensorFlow's ApplyRMSProp and ApplyAdagradV2, as Keras'
// RMSprop and Adagrad with their defaults). RMSprop's slots are
// "<var>/RMSProp/rms" and "<var>/RMSProp/momentum", Adagrad's
// "<var>/Adagrad/accumulator" (the sum of squared gradients without the
// initial value, which the update adds), all zero-initialised.
//
//   optimizers::RMSPropOptimizer opt(/*lr=*/1e-3f);
//   Node* train = opt.Minimize(scope, loss);
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_RMS_PROP_H_
#define IPUFLOW_OPTIMIZERS_RMS_PROP_H_

#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

class RMSPropOptimizer : public Optimizer {
 public:
  // Keras' defaults (TensorFlow 1's RMSPropOptimizer: epsilon 1e-10 and
  // ms initialised to ones).
  RMSPropOptimizer(Hyperparameter learning_rate, float rho = 0.9f,
                   float momentum = 0.0f, float epsilon = 1e-7f)
      : Optimizer("RMSProp"),
        learning_rate_(learning_rate),
        rho_(rho),
        momentum_(momentum),
        epsilon_(epsilon) {}

  bool UpdatesElementwise() const override { return true; }

 protected:
  std::vector<std::string> SlotNames() const override {
    return {"rms", "momentum"};
  }
  std::vector<Node*> Prepare(const Scope& scope) override;
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  const Hyperparameter learning_rate_;
  const float rho_, momentum_, epsilon_;
  Output lr_, rho_t_, mu_t_, eps_t_;  // Built by the current ApplyGradients.
};

class AdagradOptimizer : public Optimizer {
 public:
  // Keras' defaults (PyTorch: initial value 0, epsilon 1e-10).
  AdagradOptimizer(Hyperparameter learning_rate,
                   float initial_accumulator_value = 0.1f,
                   float epsilon = 1e-7f)
      : Optimizer("Adagrad"),
        learning_rate_(learning_rate),
        initial_(initial_accumulator_value),
        epsilon_(epsilon) {}

  bool UpdatesElementwise() const override { return true; }

 protected:
  std::vector<std::string> SlotNames() const override {
    return {"accumulator"};
  }
  std::vector<Node*> Prepare(const Scope& scope) override;
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  const Hyperparameter learning_rate_;
  const float initial_, epsilon_;
  Output lr_, eps_t_;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_RMS_PROP_H_
