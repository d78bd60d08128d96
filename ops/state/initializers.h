// Initial values for variables: builders over the random ops (and Fill),
// with the usual fan-in/fan-out scaling.
//
//   VariableHandle w = ops::Variable(scope.WithOpName("w"),
//                                    ops::GlorotUniform(scope, {784, 10}));
//   VariableHandle b = ops::Variable(scope.WithOpName("b"),
//                                    ops::Zeros(scope, {10}));
//
// Fans follow Keras: for a shape [..., in, out], fan_in = in * receptive
// field and fan_out = out * receptive field, the receptive field being the
// product of the leading dimensions (1 for a matrix); a vector has
// fan_in = fan_out = its size, a scalar 1.
#ifndef IPUFLOW_OPS_STATE_INITIALIZERS_H_
#define IPUFLOW_OPS_STATE_INITIALIZERS_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

// Uniform in [-limit, limit), limit = sqrt(6 / (fan_in + fan_out)) (Glorot &
// Bengio 2010). Seed 0 derives the seed from the node name
// (ops/state/random.h).
Output GlorotUniform(const Scope& scope, const TensorShape& shape,
                     int64_t seed = 0, DType dtype = DType::kFloat32);

// A tensor of zeros. Builds a "Fill" node by name: the op lives in ops/array
// (which ops/state does not depend on), so programs must link it, as //ops
// does; otherwise the scope records NotFound naming "Fill".
Output Zeros(const Scope& scope, const TensorShape& shape,
             DType dtype = DType::kFloat32);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_INITIALIZERS_H_
