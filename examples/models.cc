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
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::models {
namespace {

Layer CreateLayer(const Scope& scope, const TensorShape& w_shape, int64_t units,
                  int64_t seed, DType dtype) {
  Layer layer;
  layer.w = ops::Variable(scope.WithOpName("w"),
                          ops::GlorotUniform(scope, w_shape, seed, dtype))
                .handle;
  layer.b =
      ops::Variable(scope.WithOpName("b"), ops::Zeros(scope, {units}, dtype))
          .handle;
  return layer;
}

constexpr const char* kBlockNames[4] = {"conv1", "conv2", "fc1", "fc2"};

}  // namespace

Output ConvPoolRelu(const Scope& scope, const Layer& layer, Output x) {
  Output y =
      ops::Conv2D(scope, x, ops::ReadVariable(scope, layer.w), {1, 1}, "VALID");
  y = ops::BiasAdd(scope, y, ops::ReadVariable(scope, layer.b));
  y = ops::MaxPool2D(scope, y, {2, 2}, {2, 2}, "VALID");
  return ops::Relu(scope, y);
}

Layer CreateDense(const Scope& scope, int64_t in, int64_t units, int64_t seed,
                  DType dtype) {
  return CreateLayer(scope, {in, units}, units, seed, dtype);
}

Output Dense(const Scope& scope, const Layer& layer, Output x, bool relu) {
  Output y = ops::BiasAdd(
      scope, ops::MatMul(scope, x, ops::ReadVariable(scope, layer.w)),
      ops::ReadVariable(scope, layer.b));
  return relu ? ops::Relu(scope, y) : y;
}

ConvNetParams CreateConvNetParams(const Scope& scope,
                                  const std::vector<Scope>& block_scopes,
                                  int64_t seed, DType dtype) {
  auto at = [&](int b) {
    return (block_scopes.empty() ? scope : block_scopes[b])
        .NewSubScope(kBlockNames[b]);
  };
  ConvNetParams p;
  p.dtype = dtype;
  const int64_t s = 10 * seed;
  p.blocks[0] = CreateLayer(at(0), {5, 5, 1, 10}, 10, s + 1, dtype);
  p.blocks[1] = CreateLayer(at(1), {5, 5, 10, 20}, 20, s + 2, dtype);
  p.blocks[2] = CreateDense(at(2), 320, 256, s + 3, dtype);
  p.blocks[3] = CreateDense(at(3), 256, 10, s + 4, dtype);
  return p;
}

Output ConvNetBlock(const Scope& scope, const ConvNetParams& params, int block,
                    Output x) {
  const Scope s = scope.NewSubScope(kBlockNames[block]);
  switch (block) {
    case 0:
      if (x.dtype() != params.dtype) x = ops::Cast(s, x, params.dtype);
      return ConvPoolRelu(s, params.blocks[block], x);
    case 1:
      return ConvPoolRelu(s, params.blocks[block], x);
    case 2:
      return Dense(s, params.blocks[2], ops::Reshape(s, x, {-1, 320}),
                   /*relu=*/true);
    default:
      return Dense(s, params.blocks[3], x, /*relu=*/false);
  }
}

Output ConvNet(const Scope& scope, const ConvNetParams& params, Output images) {
  Output x = images;
  for (int b = 0; b < 4; ++b) x = ConvNetBlock(scope, params, b, x);
  return x;
}

MlpParams CreateMlpParams(const Scope& scope, int64_t hidden) {
  return {CreateDense(scope.NewSubScope("hidden"), 784, hidden, 1),
          CreateDense(scope.NewSubScope("logits"), hidden, 10, 2)};
}

Output Mlp(const Scope& scope, const MlpParams& params, Output images) {
  Output x = ops::Reshape(scope, images, {-1, 784});
  x = Dense(scope, params.hidden, x, /*relu=*/true);
  return Dense(scope, params.logits, x, /*relu=*/false);
}

Output Accuracy(const Scope& scope, Output logits, Output labels) {
  Output predicted = ops::ArgMax(scope, logits, 1, DType::kInt32);
  Output correct =
      ops::Cast(scope, ops::Equal(scope, predicted, labels), DType::kFloat32);
  return ops::ReduceMean(scope, correct);
}

int64_t ConvNetForwardFlops() {
  const int64_t conv1 = 24 * 24 * 10 * 5 * 5 * 1;
  const int64_t conv2 = 8 * 8 * 20 * 5 * 5 * 10;
  const int64_t fc = 320 * 256 + 256 * 10;
  return 2 * (conv1 + conv2 + fc);
}

}  // namespace ipuflow::models
