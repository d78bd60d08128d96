// Helpers for op tests: run a graph on a host Session, compare tensors, and
// check an op's gradient against central finite differences.
//
//   Scope s = Scope::NewRootScope();
//   Output x = ops::Placeholder(s, DType::kFloat32, {2, 3});
//   Output y = ops::Square(s, x);
//   Tensor xv = RandomTensor({2, 3}, -1, 1, /*seed=*/1);
//   EXPECT_THAT_TENSOR(RunOne(s, {{x, xv}}, y), {...});
//   EXPECT_LT(*MaxGradientError(s, {x}, {xv}, y), 1e-3);
#ifndef IPUFLOW_CORE_TESTING_OP_TEST_H_
#define IPUFLOW_CORE_TESTING_OP_TEST_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/scope.h"
#include "core/session.h"
#include "core/tensor.h"
#include "gtest/gtest.h"

namespace ipuflow::testing {

// RunGraph: runs `fetches` on a new Session over the scope's graph
// (initialising variables first).
absl::StatusOr<std::vector<Tensor>> RunGraph(
    const Scope& scope, const FeedList& feeds,
    const std::vector<Output>& fetches);
// Like RunGraph with one fetch; fails the current test and returns an invalid
// tensor on error.
Tensor RunOne(const Scope& scope, const FeedList& feeds, Output fetch);

// Uniform values in [lo, hi), deterministic for a seed.
Tensor RandomTensor(const TensorShape& shape, float lo, float hi, uint32_t seed,
                    DType dtype = DType::kFloat32);

// Element-wise |a - e| <= atol + rtol * |e|, same shape; any numeric dtype.
::testing::AssertionResult TensorNear(const Tensor& actual,
                                      const Tensor& expected,
                                      double atol = 1e-5, double rtol = 1e-5);
::testing::AssertionResult TensorNear(const Tensor& actual,
                                      const std::vector<float>& expected,
                                      const TensorShape& shape,
                                      double atol = 1e-5, double rtol = 1e-5);

struct GradientCheckOptions {
  double delta = 1e-3;  // Finite-difference step.
  uint32_t seed = 7;    // For the random projection of y.
};

// The largest error between AddGradients and central finite differences of
// L = sum(r * y) for a random r, over every element of every x:
// |analytic - numeric| / max(1, |numeric|). xs must be Placeholders fed with
// `x_values`. Builds the gradient nodes in the scope's graph.
absl::StatusOr<double> MaxGradientError(const Scope& scope,
                                        const std::vector<Output>& xs,
                                        const std::vector<Tensor>& x_values,
                                        Output y,
                                        GradientCheckOptions options = {});

}  // namespace ipuflow::testing

#endif  // IPUFLOW_CORE_TESTING_OP_TEST_H_
