// ScaledDotProductAttention: softmax(scale * Q K^T + mask) V in one op, as
// PyTorch 2's scaled_dot_product_attention (no dropout): query
// [..., S, D], key [..., T, D], value [..., T, E] with the same leading
// (batch, head) dimensions; scale 0 means 1 / sqrt(D). With causal, query i
// attends keys j <= i only (PyTorch's is_causal: the top-left aligned lower
// triangle), and masked probabilities are exactly 0. Outputs the attention
// [..., S, E] and the float32 probabilities [..., S, T], which the
// gradient (ScaledDotProductAttentionGrad) reuses instead of recomputing
// them. float32 and float16 (computed in float32, rounded once). Equal to
// the composite BatchMatMul / Softmax / BatchMatMul within float32
// rounding (scaled_dot_product_attention_test.cc).
//
//   auto att = ops::ScaledDotProductAttention(scope, q, k, v,
//                                             {.causal = true});
//   Output context = att.output;
#ifndef IPUFLOW_OPS_NN_SCALED_DOT_PRODUCT_ATTENTION_H_
#define IPUFLOW_OPS_NN_SCALED_DOT_PRODUCT_ATTENTION_H_

#include "core/scope.h"

namespace ipuflow::ops {

struct AttentionOptions {
  bool causal = false;
  float scale = 0.0f;  // 0: 1 / sqrt(D).
};

struct AttentionOutputs {
  Output output;  // [..., S, E].
  Output probs;   // float32 [..., S, T].
};

AttentionOutputs ScaledDotProductAttention(
    const Scope& scope, Output query, Output key, Output value,
    const AttentionOptions& options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_SCALED_DOT_PRODUCT_ATTENTION_H_
