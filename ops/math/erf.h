// Erf: y = erf(x) = 2/sqrt(pi) int_0^x e^(-t^2) dt, element-wise;
// float32/float16, the C library's erff. erf(+-inf) = +-1.
//
//   Output y = ops::Erf(scope, x);
//   Output dx = ops::ErfGrad(scope, x, dy);  // What AddGradients builds.
#ifndef IPUFLOW_OPS_MATH_ERF_H_
#define IPUFLOW_OPS_MATH_ERF_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Erf(const Scope& scope, Output x);

// dx = dy * 2/sqrt(pi) e^(-x^2), Erf's gradient (x and dy of one shape and
// dtype; float16 computed in float32 and rounded once).
Output ErfGrad(const Scope& scope, Output x, Output dy);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ERF_H_
