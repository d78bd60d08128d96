// Erf: y = erf(x) = 2/sqrt(pi) int_0^x e^(-t^2) dt, element-wise;
// float32/float16, the C library's erff. erf(+-inf) = +-1.
//
//   Output y = ops::Erf(scope, x);
#ifndef IPUFLOW_OPS_MATH_ERF_H_
#define IPUFLOW_OPS_MATH_ERF_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Erf(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ERF_H_
