// Losses of (input, target) element by element, as PyTorch 1.13's
// torch.nn functional losses, with its `reduction` ("mean", the default;
// "sum"; "none", the element-wise losses; "batchmean", the sum over the
// batch size, dim 0, as kl_div recommends):
//   MSELoss            (x - t)^2
//   L1Loss             |x - t|  (gradient 0 at x = t, as torch's sign)
//   HuberLoss          0.5 d^2 if |d| <= delta else delta (|d| - delta / 2),
//                      d = x - t, delta > 0 (torch.nn.HuberLoss)
//   BCEWithLogitsLoss  x logits, t in [0, 1]:
//                      -[pos_weight t log s(x) + (1 - t) log(1 - s(x))],
//                      computed as (1 - t) x + (1 + (pos_weight - 1) t)
//                      softplus(-x), stable for any x (pos_weight a scalar
//                      here; torch's is per class)
//   KLDivLoss          x = log q; t = p (or log p with log_target):
//                      t (log t - x), 0 where t = 0 (torch.nn.KLDivLoss)
// Inputs have one float dtype and the same shape. Gradients for both
// inputs (PointwiseLossGrad). float32 and float16 (computed in float32;
// reductions summed in float64).
//
//   Output loss = ops::MSELoss(scope, prediction, target);   // scalar
//   Output per_elem = ops::HuberLoss(scope, p, t, {.reduction = "none",
//                                                  .delta = 0.5f});
#ifndef IPUFLOW_OPS_LOSS_POINTWISE_LOSS_H_
#define IPUFLOW_OPS_LOSS_POINTWISE_LOSS_H_

#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

struct LossOptions {
  std::string reduction = "mean";  // "mean", "sum", "none", "batchmean".
  float delta = 1.0f;              // HuberLoss.
  float pos_weight = 1.0f;         // BCEWithLogitsLoss.
  bool log_target = false;         // KLDivLoss.
};

Output MSELoss(const Scope& scope, Output input, Output target,
               const LossOptions& options = {});
Output L1Loss(const Scope& scope, Output input, Output target,
              const LossOptions& options = {});
Output HuberLoss(const Scope& scope, Output input, Output target,
                 const LossOptions& options = {});
Output BCEWithLogitsLoss(const Scope& scope, Output logits, Output target,
                         const LossOptions& options = {});
Output KLDivLoss(const Scope& scope, Output log_input, Output target,
                 const LossOptions& options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_LOSS_POINTWISE_LOSS_H_
