#include "examples/models.h"

#include "ops/array/reshape.h"
#include "ops/math/arg_max.h"
#include "ops/math/cast.h"
#include "ops/math/equal.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/max_pool_2d.h"
#include "ops/nn/relu.h"
#include "ops/state/initializers.h"
#include "ops/state/variable.h"

namespace ipuflow::models {
namespace {

Output Weight(const Scope& scope, const std::string& name,
              const TensorShape& shape, int64_t seed) {
  return ops::Variable(scope.WithOpName(name),
                       ops::GlorotUniform(scope, shape, seed))
      .value;
}

Output Bias(const Scope& scope, int64_t units) {
  return ops::Variable(scope.WithOpName("b"), ops::Zeros(scope, {units})).value;
}

// Conv k5 VALID with bias, MaxPool 2, ReLU.
Output ConvPoolRelu(const Scope& scope, Output x, int64_t in, int64_t out,
                    int64_t seed) {
  Output w = Weight(scope, "w", {5, 5, in, out}, seed);
  Output y = ops::BiasAdd(scope, ops::Conv2D(scope, x, w, {1, 1}, "VALID"),
                          Bias(scope, out));
  y = ops::MaxPool2D(scope, y, {2, 2}, {2, 2}, "VALID");
  return ops::Relu(scope, y);
}

}  // namespace

Output Dense(const Scope& scope, Output x, int64_t units, bool relu,
             int64_t seed) {
  const int64_t in = x.valid() ? x.shape().dim(x.shape().rank() - 1) : 1;
  Output w = Weight(scope, "w", {in, units}, seed);
  Output y = ops::BiasAdd(scope, ops::MatMul(scope, x, w), Bias(scope, units));
  return relu ? ops::Relu(scope, y) : y;
}

Output ConvNetBlock(const Scope& scope, int block, Output x) {
  switch (block) {
    case 0:
      return ConvPoolRelu(scope.NewSubScope("conv1"), x, 1, 10, 1);
    case 1:
      return ConvPoolRelu(scope.NewSubScope("conv2"), x, 10, 20, 2);
    case 2:
      return Dense(scope.NewSubScope("fc1"), ops::Reshape(scope, x, {-1, 320}),
                   256, /*relu=*/true, 3);
    default:
      return Dense(scope.NewSubScope("fc2"), x, 10, /*relu=*/false, 4);
  }
}

Output ConvNet(const Scope& scope, Output images,
               const std::vector<Scope>& block_scopes) {
  Output x = images;
  for (int b = 0; b < 4; ++b) {
    x = ConvNetBlock(block_scopes.empty() ? scope : block_scopes[b], b, x);
  }
  return x;
}

Output Mlp(const Scope& scope, Output images, int64_t hidden) {
  Output x = ops::Reshape(scope, images, {-1, 784});
  x = Dense(scope.NewSubScope("hidden"), x, hidden, /*relu=*/true, 1);
  return Dense(scope.NewSubScope("logits"), x, 10, /*relu=*/false, 2);
}

Output Accuracy(const Scope& scope, Output logits, Output labels) {
  Output predicted = ops::ArgMax(scope, logits, 1, DType::kInt32);
  Output correct = ops::Cast(scope, ops::Equal(scope, predicted, labels),
                             DType::kFloat32);
  return ops::ReduceMean(scope, correct);
}

int64_t ConvNetForwardFlops() {
  const int64_t conv1 = 24 * 24 * 10 * 5 * 5 * 1;
  const int64_t conv2 = 8 * 8 * 20 * 5 * 5 * 10;
  const int64_t fc = 320 * 256 + 256 * 10;
  return 2 * (conv1 + conv2 + fc);
}

}  // namespace ipuflow::models
