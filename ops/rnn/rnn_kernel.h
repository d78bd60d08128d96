// The kernel side shared by the recurrent layers (PopnnLSTM, PopnnGRU and
// their back-propagation-through-time ops): the dimensions a kernel runs
// with, the check of a gradient op's inputs against them, and the input and
// kernel gradients once every step's pre-activation gradients are known.
// Each layer keeps its own cell (the gates' arithmetic) in lstm.cc / gru.cc.
#ifndef IPUFLOW_OPS_RNN_RNN_KERNEL_H_
#define IPUFLOW_OPS_RNN_RNN_KERNEL_H_

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/kernel.h"
#include "ops/rnn/rnn_shapes.h"

namespace ipuflow::ops::rnn {

using RowMat =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMat>;
using Mat = Eigen::Map<RowMat>;

// What a kernel runs with: `dims` (the op's CheckRnnShapes) and the node's
// go_backwards; the shape error as the kernel's InvalidArgument (naming the
// node). *cache: the cache's shape for `cache_blocks` per-step blocks,
// checked to fit.
absl::StatusOr<RnnDims> KernelDims(KernelContext& ctx,
                                   const absl::StatusOr<RnnDims>& dims,
                                   int cache_blocks, TensorShape* cache);

// A gradient op's incoming gradients against the forward's dims: input 0
// (doutput) the output sequence's shape, inputs 1 .. `states` (dh, and dc
// for the LSTM) [batch, units], input `cache` of `cache_shape` (KernelDims);
// else InvalidArgument naming each and the forward input (input `input`).
absl::Status CheckIncomingGradients(KernelContext& ctx, const RnnDims& d,
                                    int states, int input, int cache,
                                    const TensorShape& cache_shape);

// dx = dz * kernel^T and dkernel = x^T * dz, with dz [time * batch, gates *
// units] the pre-activations' gradients of every step, rows in the input's
// order; x and kernel float32.
void InputAndKernelGradients(const RnnDims& d, const RowMat& dz,
                             const Tensor& x32, const Tensor& kernel32,
                             float* dx, float* dkernel);

}  // namespace ipuflow::ops::rnn

#endif  // IPUFLOW_OPS_RNN_RNN_KERNEL_H_
