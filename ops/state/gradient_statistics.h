// GradientHistogram and NonFiniteCount: the two statistics loss scaling
// takes of gradients, as ops (one file: they share the chunked count)
// (built by optimizers/loss_scaling.cc; usable alone):
//
//   GradientHistogram: PopART's HistogramOp with one level on absolute
//   values: lower = #{ |x| < edge }, upper = #{ |x| >= edge }, as float32
//   scalars. Infinities count as upper; so does NaN (whose comparisons are
//   false, so it is "not below the edge": a NaN gradient pushes the scale
//   down, as an overflow does).
//   NonFiniteCount: the number of inf / NaN elements of x, and for float16
//   x also of +-65504 (GradScaler's found_inf, as a float32 count so
//   counts add across tensors and replicas). float16's largest value is
//   where an overflow saturates with nanoo off (IPUConfig's default), so
//   it counts as one.
//
//   auto [lower, upper] = ops::GradientHistogram(scope, grad, 65504 * 0.125f);
//   Output bad = ops::NonFiniteCount(scope, grad);
//
// Both accept float32 and float16 x (float16 is widened exactly), count in
// 64-bit integers and round the count to float32 once (exact below 2^24).
// Not differentiable: they measure gradients.
#ifndef IPUFLOW_OPS_STATE_GRADIENT_STATISTICS_H_
#define IPUFLOW_OPS_STATE_GRADIENT_STATISTICS_H_

#include <utility>

#include "core/scope.h"

namespace ipuflow::ops {

// {lower, upper}; `edge` must be >= 0.
std::pair<Output, Output> GradientHistogram(const Scope& scope, Output x,
                                            float edge);
Output NonFiniteCount(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_GRADIENT_STATISTICS_H_
