// NLLLoss: the negative log-likelihood of labels under log-probabilities,
// as PyTorch 1.13's torch.nn.NLLLoss: log_probs [N, C] (float), labels [N]
// (int32 or int64), class weights [C]; rows whose label is ignore_index
// count for nothing. reduction "none" gives [N] (-w[y] log_probs[i, y],
// 0 for ignored rows), "sum" their sum, "mean" their sum over the sum of
// the weights of the rows not ignored (NaN when every row is ignored, as
// torch). Labels outside [0, C) other than ignore_index are an error. The
// gradient is for log_probs (NLLLossGrad); labels and weights are not
// differentiated. float32 and float16.
//
//   Output logp = ops::LogSoftmax(scope, logits);
//   Output loss = ops::NLLLoss(scope, logp, labels, class_weights,
//                              {.ignore_index = 0});
#ifndef IPUFLOW_OPS_LOSS_NLL_LOSS_H_
#define IPUFLOW_OPS_LOSS_NLL_LOSS_H_

#include <cstdint>
#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

struct NLLLossOptions {
  int64_t ignore_index = -100;     // torch's default.
  std::string reduction = "mean";  // "none", "sum", "mean".
};

Output NLLLoss(const Scope& scope, Output log_probs, Output labels,
               Output weights, const NLLLossOptions& options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_LOSS_NLL_LOSS_H_
