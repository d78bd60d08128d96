// AssignAddScaled: variable += delta * scale in one pass over memory, for
// the gradient accumulators of optimizers/gradient_accumulation.h (each
// micro-batch's gradient scaled by 1/N and added: TensorFlow IPU guide 6.7,
// "GradientAccumulationReductionMethod.MEAN").
//
//   Node* acc = ops::AssignAddScaled(scope, accumulator.handle, grad,
//                                    ops::Const(scope, 0.125f));
//
// Bitwise the result of Mul(delta, scale) followed by AssignAdd: each
// product is rounded to float32 before it is added (this op's library is
// built with -ffp-contract=off, so the compiler never fuses the two into an
// FMA). The unfused pair reads and writes a [delta]-sized intermediate; the
// fused op reads delta and the variable once and writes the variable once.
// float32 variables only; delta has the variable's dtype and shape, scale
// is a float32 scalar. No outputs: run it as a target or a control input.
#ifndef IPUFLOW_OPS_STATE_ASSIGN_ADD_SCALED_H_
#define IPUFLOW_OPS_STATE_ASSIGN_ADD_SCALED_H_

#include "core/scope.h"

namespace ipuflow::ops {

// variable += delta * scale (the product rounded first).
Node* AssignAddScaled(const Scope& scope, Output handle, Output delta,
                      Output scale);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_ASSIGN_ADD_SCALED_H_
