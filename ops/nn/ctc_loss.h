// CTCLoss: the connectionist temporal classification loss of unsegmented
// label sequences (Graves et al. 2006), with the PyTorch CTCLoss interface
// (torch.nn.functional.ctc_loss; ../shared/reference/wave2_reference.md
// section 5). Forward and backward run in log space over the label sequence
// with blanks inserted, l' = (blank, l_0, blank, ..., l_{L-1}, blank).
//
//   Output logp = ops::LogSoftmax(scope, logits);            // [T, N, C]
//   Output loss = ops::CTCLoss(scope, logp, targets, input_lengths,
//                              target_lengths);               // a scalar
//   RETURN_IF_ERROR(AddGradients(scope, {loss}, {w}, {}, &grads));
//
// log_probs: float32 or float16 [T, N, C] (float16 is widened, the lattice
//   computed in double as for float32, the loss and gradient rounded once;
//   both have log_probs' dtype), class C-wide including the blank. They need
//   not be normalised: the gradient is d loss / d log_probs itself, correct
//   for any producer (PyTorch's is the gradient wrt pre-log_softmax logits,
//   right only when log_softmax is in the graph; reference 5.2).
// targets: int32 or int64, either padded [N, S] (values past a sample's
//   target length are ignored) or 1-D, the samples' targets concatenated
//   (size sum(target_lengths)). Labels are in [0, C) and never the blank.
// input_lengths, target_lengths: int32 or int64 [N]; input_lengths[n] <= T,
//   target_lengths[n] <= S for 2-D targets.
// Bad lengths or labels are InvalidArgument at run time, naming the node,
// the sample and the value; shapes, dtypes and `blank` are checked while
// building.
//
// An input too short for its target (it needs L plus the number of adjacent
// equal labels, which require a blank between them) has loss +inf and, as in
// PyTorch, a NaN gradient; zero_infinity makes both 0. A NaN among a
// sample's log_probs (t < its input length) makes its loss and gradient NaN,
// zero_infinity or not: it applies to infinite losses only.
#ifndef IPUFLOW_OPS_NN_CTC_LOSS_H_
#define IPUFLOW_OPS_NN_CTC_LOSS_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

// How per-sample losses become the op's output.
enum class LossReduction {
  kNone,  // [N]: each sample's negative log-likelihood.
  kSum,   // Scalar: their sum.
  kMean,  // Scalar: mean over the batch of loss_n / max(target_length_n, 1).
};

struct CTCLossOptions {
  int64_t blank = 0;  // The blank's class; 0 <= blank < C.
  LossReduction reduction = LossReduction::kMean;
  bool zero_infinity = false;  // +inf losses and their gradients become 0.
};

Output CTCLoss(const Scope& scope, Output log_probs, Output targets,
               Output input_lengths, Output target_lengths,
               CTCLossOptions options = {});

// d(loss)/d(log_probs) [T, N, C] given d(loss) (the shape of CTCLoss's
// output): what CTCLoss's gradient builds. Zero for t >= input_lengths[n].
Output CTCLossGrad(const Scope& scope, Output log_probs, Output targets,
                   Output input_lengths, Output target_lengths, Output dloss,
                   CTCLossOptions options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CTC_LOSS_H_
