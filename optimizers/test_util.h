// Test helpers for optimizers: a linear loss with a known gradient, and a
// loop that runs training steps and reads a variable after each.
//
//   Scope s = Scope::NewRootScope();
//   LinearLoss l(s, "w", {1, 2});               // loss = sum(w * c)
//   Node* train = GradientDescentOptimizer(0.1f).Minimize(s, l.loss);
//   std::vector<Tensor> w =
//       RunSteps(s, train, {l.Feed({0.5f, -1})}, l.w.value);  // one step
#ifndef IPUFLOW_OPTIMIZERS_TEST_UTIL_H_
#define IPUFLOW_OPTIMIZERS_TEST_UTIL_H_

#include <string>
#include <vector>

#include "core/scope.h"
#include "core/session.h"
#include "ops/state/variable.h"

namespace ipuflow::optimizers::testing {

// loss = sum(w * c) for a variable w (initial value w0) and a fed c of the
// same shape, so d loss / d w = c. With dtype float16, w is float16 and the
// loss sum(float32(w) * c): d loss / d w = float16(c).
struct LinearLoss {
  LinearLoss(const Scope& scope, const std::string& name,
             const std::vector<float>& w0, DType dtype = DType::kFloat32);
  // {c: values}.
  FeedList Feed(const std::vector<float>& c) const;

  ops::VariableHandle w;
  Output c;
  Output loss;
};

// Initialises the variables, then for each entry of `feeds` runs `train`
// once and fetches `fetch`; returns the fetched values. Fails the current
// test on an error.
std::vector<Tensor> RunSteps(const Scope& scope, Node* train,
                             const std::vector<FeedList>& feeds, Output fetch);

// Element i of a float32 or float16 tensor, as a float.
float At(const Tensor& t, int i);

}  // namespace ipuflow::optimizers::testing

#endif  // IPUFLOW_OPTIMIZERS_TEST_UTIL_H_
