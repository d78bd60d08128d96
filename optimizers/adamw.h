// AdamWOptimizer: Adam with decoupled weight decay (Loshchilov & Hutter),
// exactly torch.optim.AdamW: each step first scales the variable by
// 1 - lr * weight_decay, then takes the Adam step (ops/state/apply_adam.h).
// Defaults are PyTorch's: weight_decay = 0.01, beta1 = 0.9, beta2 = 0.999,
// epsilon = 1e-8. Every trained variable is decayed, biases included; to
// exempt some, use two optimizers over VarList::Matching selections.
//
//   optimizers::AdamWOptimizer adamw(/*lr=*/1e-3f, /*weight_decay=*/0.05f);
//   Node* train = adamw.Minimize(scope, loss);
//
// Slots are named "<var>/AdamW/m" and "<var>/AdamW/v".
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_ADAMW_H_
#define IPUFLOW_OPTIMIZERS_ADAMW_H_

#include "optimizers/adam.h"

namespace ipuflow::optimizers {

class AdamWOptimizer : public AdamOptimizer {
 public:
  explicit AdamWOptimizer(Hyperparameter learning_rate,
                          float weight_decay = 0.01f, float beta1 = 0.9f,
                          float beta2 = 0.999f, float epsilon = 1e-8f)
      : AdamOptimizer("AdamW", learning_rate, beta1, beta2, epsilon,
                      weight_decay) {}
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_ADAMW_H_
