// RandomUniform, RandomNormal and TruncatedNormal: seeded random tensors.
//
//   Output w0 = ops::RandomUniform(scope, {784, 10}, -0.1f, 0.1f, /*seed=*/42);
//   Output n = ops::RandomNormal(scope, {8}, /*mean=*/0, /*stddev=*/1, 42);
//   Output t = ops::TruncatedNormal(scope, {8}, 0, 0.05f, 42);  // |t| <= 0.1
//
// Each run of a node draws new numbers: run k of a node with seed s gives
// the same tensor in every graph and process (the generator is ipuflow's
// own, counter-based, not the C++ library's distributions), so two graphs
// built with the same seeds produce the same sequences. The run counter is
// kept per compiled program (core/program.h): two programs (different
// fetches) running one node each start at run 0. Seed 0 means "derive the
// seed from the node's name": distinct nodes then get distinct streams,
// still reproducibly. Element i of a run is a function of (seed, run, i)
// only, so the result does not depend on how the work is split over
// threads.
#ifndef IPUFLOW_OPS_STATE_RANDOM_H_
#define IPUFLOW_OPS_STATE_RANDOM_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

// Uniform in [minval, maxval) (exactly minval when they are equal).
Output RandomUniform(const Scope& scope, const TensorShape& shape,
                     float minval = 0, float maxval = 1, int64_t seed = 0,
                     DType dtype = DType::kFloat32);
// Normal with `mean` and `stddev` (Box-Muller).
Output RandomNormal(const Scope& scope, const TensorShape& shape,
                    float mean = 0, float stddev = 1, int64_t seed = 0,
                    DType dtype = DType::kFloat32);
// Normal, redrawn while more than 2 stddev from the mean (as TensorFlow's).
Output TruncatedNormal(const Scope& scope, const TensorShape& shape,
                       float mean = 0, float stddev = 1, int64_t seed = 0,
                       DType dtype = DType::kFloat32);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_RANDOM_H_
