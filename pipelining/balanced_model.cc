#include "pipelining/balanced_model.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/square.h"
#include "ops/nn/tanh.h"
#include "ops/state/initializers.h"
#include "ops/state/variable.h"
#include "optimizers/gradient_descent.h"

namespace ipuflow::pipelining {

StageFunction DenseTanhStage(int stage, int width, int layers) {
  return StageFunction(
      [=](const Scope& s, const std::vector<Output>& a) {
        Output h = a[0];
        for (int l = 0; l < layers; ++l) {
          ops::VariableHandle w = ops::Variable(
              s.WithOpName(absl::StrCat("w", l)),
              ops::GlorotUniform(s, {width, width}, stage * 10 + l));
          h = ops::Tanh(s, ops::MatMul(s, h, w.value));
        }
        return std::vector<Output>{h};
      },
      /*num_inputs=*/1);
}

OptimizerFunction MeanSquareSgd(float learning_rate) {
  return [learning_rate](const Scope& s, const std::vector<Output>& out) {
    return OptimizerFunctionOutput{
        std::make_shared<optimizers::GradientDescentOptimizer>(learning_rate),
        ops::ReduceMean(s, ops::Square(s, out[0]))};
  };
}

}  // namespace ipuflow::pipelining
