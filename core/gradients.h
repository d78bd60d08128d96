// Symbolic differentiation: AddGradients builds, in the same graph, the
// nodes that compute d(sum of ys)/d(xs).
//
//   std::vector<Output> grads;
//   RETURN_IF_ERROR(AddGradients(scope, {loss}, {w, b}, {}, &grads));
//
// xs may be any float outputs, not only variable reads (pipelining
// differentiates a stage with respect to its inputs). Each backward node is
// placed on the IPU and block of the forward node it differentiates. An x
// that does not influence any y gets ZerosLike(x). An op on the path without
// a gradient is an error naming it, unless it declared why it has none, in
// which case no gradient flows through it.
#ifndef IPUFLOW_CORE_GRADIENTS_H_
#define IPUFLOW_CORE_GRADIENTS_H_

#include <vector>

#include "absl/status/status.h"
#include "core/graph.h"
#include "core/scope.h"

namespace ipuflow {

// `grad_ys` is empty (each y is seeded with ones) or one per y.
absl::Status AddGradients(const Scope& scope, const std::vector<Output>& ys,
                          const std::vector<Output>& xs,
                          const std::vector<Output>& grad_ys,
                          std::vector<Output>* grad_xs);

// Sum of `terms` (a single term is returned as is).
Output AddTerms(const Scope& scope, const std::vector<Output>& terms);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_GRADIENTS_H_
