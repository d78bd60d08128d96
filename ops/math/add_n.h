// AddN: the element-wise sum of any number of same-shaped tensors (how
// autodiff sums the gradients reaching one output).
//
//   Output total = ops::AddN(scope, {a, b, c});
#ifndef IPUFLOW_OPS_MATH_ADD_N_H_
#define IPUFLOW_OPS_MATH_ADD_N_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output AddN(const Scope& scope, const std::vector<Output>& inputs);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ADD_N_H_
