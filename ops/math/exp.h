// Exp: y = e^x, element-wise; float32/float16. Overflow gives inf (no
// error).
//
//   Output unnormalised = ops::Exp(scope, logits);
#ifndef IPUFLOW_OPS_MATH_EXP_H_
#define IPUFLOW_OPS_MATH_EXP_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Exp(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_EXP_H_
