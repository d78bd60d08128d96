// Split: cuts x into `num_split` equal pieces along `axis` (negative counts
// from the end).
//
//   // [N,3D] -> three [N,D] pieces:
//   std::vector<Output> qkv = ops::Split(scope, proj, 3, -1);
//   Output q = qkv[0];
//   // The gradient concatenates the pieces' gradients (zeros for unused ones).
#ifndef IPUFLOW_OPS_ARRAY_SPLIT_H_
#define IPUFLOW_OPS_ARRAY_SPLIT_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// Returns num_split outputs (all invalid if the node could not be added).
// REQUIRES (checked): x's size along axis is divisible by num_split.
std::vector<Output> Split(const Scope& scope, Output x, int64_t num_split,
                          int64_t axis = 0);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_SPLIT_H_
