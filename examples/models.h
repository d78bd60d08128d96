// The models the examples, tests and benchmarks share: the seed tutorial's
// ConvNet and a small dense network for Fashion-MNIST. Each builder creates
// its variables (Glorot-uniform weights, zero biases) in the scope and
// returns the logits. `block_scopes`, when given, places each of the
// ConvNet's four parts in its own scope (PopTorch-style blocks B1..B4).
//
//   Output logits = models::ConvNet(scope, images);           // [N, 10]
//   Output loss = ops::SoftmaxCrossEntropyLoss(scope, logits, labels);
//   Output accuracy = models::Accuracy(scope, logits, labels);
#ifndef IPUFLOW_EXAMPLES_MODELS_H_
#define IPUFLOW_EXAMPLES_MODELS_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::models {

// x [N, in] -> x W + b, [N, units]; optionally ReLU.
Output Dense(const Scope& scope, Output x, int64_t units, bool relu,
             int64_t seed);

// images float32 [N,28,28,1] -> logits [N,10]:
// Conv 1->10 k5, MaxPool 2, ReLU | Conv 10->20 k5, MaxPool 2, ReLU |
// Dense 320->256, ReLU | Dense 256->10.
Output ConvNet(const Scope& scope, Output images,
               const std::vector<Scope>& block_scopes = {});
// One part of the ConvNet (0..3), for callers that place blocks themselves.
Output ConvNetBlock(const Scope& scope, int block, Output x);

// images float32 [N,28,28,1] -> logits [N,10]: 784 -> hidden (ReLU) -> 10.
Output Mlp(const Scope& scope, Output images, int64_t hidden = 128);

// The fraction of rows whose argmax equals the label (float32 scalar).
Output Accuracy(const Scope& scope, Output logits, Output labels);

// Floating-point operations (2 per multiply-add) of one forward pass of the
// ConvNet for one image.
int64_t ConvNetForwardFlops();

}  // namespace ipuflow::models

#endif  // IPUFLOW_EXAMPLES_MODELS_H_
