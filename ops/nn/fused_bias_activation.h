// Fused kernels for a producer followed by its bias and activation, as
// TensorFlow's grappler remapper forms _FusedConv2D / _FusedMatMul
// (Conv2D|MatMul -> BiasAdd [-> Relu]) and XLA fuses elementwise
// consumers into their producer. Registered with REGISTER_FUSION
// (core/op_registry.h); the compiler's fusion phase (core/compiler/
// fusion.h) decides where they apply, so there are no builders here: a
// graph says Conv2D, BiasAdd, Relu, and the program runs one node.
//
//   Conv2D+BiasAdd[+Relu]: on the direct small-channel path (float32,
//     conv_small.h) the bias and ReLU run on each chunk of output rows as
//     the convolution finishes it (in cache, no pass of their own);
//     elsewhere as below.
//   MatMul+BiasAdd[+Relu], BiasAdd+Relu: the producer's own kernel writes
//     the fused node's output, then one pass adds the bias and clamps.
//   MaxPool2D+Relu: relu(maxpool(x)) == maxpool(relu(x)); the pool's
//     output is clamped in place (inference: in training MaxPoolGrad
//     reads the pool's output, a second consumer, so it does not apply).
//
// Not fused: the ReLU gradient into MaxPoolGrad. Run as ReluGrad's and
// MaxPoolGrad's kernels back to back in one node (the masked gradient in an
// arena slot planned for that step), it measured slower than the two nodes
// (conv1: 136 vs 54 + 9 us, per-node medians in one run of
// onednn_reference_benchmark --profile) and keeps ReluGrad's inputs live
// until MaxPoolGrad's output is written; a gain needs MaxPoolGrad to read
// dy through the mask itself.
//
// NHWC (channels last) bias only; float32 and float16 (float16 widened per
// block, summed in float32 and rounded once through RoundToHalf, as the
// unfused BiasAdd does).
#ifndef IPUFLOW_OPS_NN_FUSED_BIAS_ACTIVATION_H_
#define IPUFLOW_OPS_NN_FUSED_BIAS_ACTIVATION_H_

namespace ipuflow::ops {}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_FUSED_BIAS_ACTIVATION_H_
