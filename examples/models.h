// The models the examples, tests and benchmarks share: the seed tutorial's
// ConvNet and a small dense network for Fashion-MNIST.
//
// Variables are created once (Create*Params: Glorot-uniform weights, zero
// biases, with their initialisers) and read where the model is applied, so a
// model applied inside a device-loop body reads fresh weights every
// iteration, and a training loop and an evaluation loop share them.
//
//   models::ConvNetParams params = models::CreateConvNetParams(scope);
//   Output logits = models::ConvNet(body_scope, params, images);   // [N, 10]
//   Output loss = ops::SoftmaxCrossEntropyLoss(body_scope, logits, labels);
//   Output accuracy = models::Accuracy(body_scope, logits, labels);
#ifndef IPUFLOW_EXAMPLES_MODELS_H_
#define IPUFLOW_EXAMPLES_MODELS_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::models {

// Handles of a layer's weight and bias variables.
struct Layer {
  Output w;
  Output b;
};

// x [N, in] -> x W + b, [N, units]; optionally ReLU.
Layer CreateDense(const Scope& scope, int64_t in, int64_t units, int64_t seed,
                  DType dtype = DType::kFloat32);
Output Dense(const Scope& scope, const Layer& layer, Output x, bool relu);
// The tutorial's Block: x [N, H, W, C] -> 5x5 convolution (VALID, with
// bias), 2x2 max pooling, ReLU.
Output ConvPoolRelu(const Scope& scope, const Layer& layer, Output x);

// The tutorial ConvNet: images float32 [N,28,28,1] -> logits [N,10]:
// B1 Conv 1->10 k5, MaxPool 2, ReLU | B2 Conv 10->20 k5, MaxPool 2, ReLU |
// B3 Dense 320->256, ReLU | B4 Dense 256->10.
// In float16 (PopTorch's model.half()), the weights are float16 and block 0
// casts the images on the device, so every activation is float16.
struct ConvNetParams {
  Layer blocks[4];
  DType dtype = DType::kFloat32;
};
// `block_scopes`, when given, creates block b's variables in
// block_scopes[b] (e.g. on its IPU); `seed` picks the initial weights
// (the same values in either dtype, up to float16 rounding).
ConvNetParams CreateConvNetParams(const Scope& scope,
                                  const std::vector<Scope>& block_scopes = {},
                                  int64_t seed = 0,
                                  DType dtype = DType::kFloat32);
Output ConvNet(const Scope& scope, const ConvNetParams& params, Output images);
// One block (0..3), for callers that place blocks themselves.
Output ConvNetBlock(const Scope& scope, const ConvNetParams& params, int block,
                    Output x);

// images float32 [N,28,28,1] -> logits [N,10]: 784 -> hidden (ReLU) -> 10.
struct MlpParams {
  Layer hidden, logits;
};
MlpParams CreateMlpParams(const Scope& scope, int64_t hidden = 128);
Output Mlp(const Scope& scope, const MlpParams& params, Output images);

// The fraction of rows whose argmax equals the label (float32 scalar).
Output Accuracy(const Scope& scope, Output logits, Output labels);

// Floating-point operations (2 per multiply-add) of one forward pass of the
// ConvNet for one image.
int64_t ConvNetForwardFlops();

}  // namespace ipuflow::models

#endif  // IPUFLOW_EXAMPLES_MODELS_H_
