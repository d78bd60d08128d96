// AssignAddScaled: variable += delta * scale, and AssignScaledAddScaled:
// variable = variable * variable_scale + delta * delta_scale, each in one
// pass over memory, for the gradient accumulators of
// optimizers/gradient_accumulation.h (each micro-batch's gradient scaled by
// 1/N and added: TensorFlow IPU guide 6.7,
// "GradientAccumulationReductionMethod.MEAN"; a pipeline's accumulators,
// whose scales are fed per micro-batch, including RUNNING_MEAN's).
//
//   Node* acc = ops::AssignAddScaled(scope, accumulator.handle, grad,
//                                    ops::Const(scope, 0.125f));
//
// Bitwise the result of the unfused ops (Mul(delta, scale) then AssignAdd;
// Mul(ReadVariable, variable_scale) + Mul(delta, delta_scale) then
// Assign): each product is rounded to float32 before it is added (this
// op's library is built with -ffp-contract=off, so the compiler never
// fuses them into an FMA). The unfused ops read and write [delta]-sized
// intermediates; the fused ones read delta and the variable once and write
// the variable once. float32 variables only; delta has the variable's dtype
// and shape, the scales are float32 scalars. No outputs: run them as a
// target or a control input.
#ifndef IPUFLOW_OPS_STATE_ASSIGN_ADD_SCALED_H_
#define IPUFLOW_OPS_STATE_ASSIGN_ADD_SCALED_H_

#include "core/scope.h"

namespace ipuflow::ops {

// variable += delta * scale (the product rounded first).
Node* AssignAddScaled(const Scope& scope, Output handle, Output delta,
                      Output scale);

// variable = variable * variable_scale + delta * delta_scale (the products
// rounded first).
Node* AssignScaledAddScaled(const Scope& scope, Output handle, Output delta,
                            Output variable_scale, Output delta_scale);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_ASSIGN_ADD_SCALED_H_
