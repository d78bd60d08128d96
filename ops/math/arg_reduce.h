// Machinery shared by ArgMax and ArgMin: the shape function (input 'x'
// numeric of rank >= 1, `axis` required, `output_type` int32 or int64) and
// the kernel. Ties give the first index; NaN counts as the extremum (the
// first NaN wins, like numpy.argmax / numpy.argmin).
//
// Stateless; safe from any thread.
#ifndef IPUFLOW_OPS_MATH_ARG_REDUCE_H_
#define IPUFLOW_OPS_MATH_ARG_REDUCE_H_

#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {

absl::Status ArgReduceShapeFn(ShapeContext& c);
// The index of the maximum (min = false) or minimum (min = true).
absl::Status ArgReduceKernel(KernelContext& ctx, bool min);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ARG_REDUCE_H_
