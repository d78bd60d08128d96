// PopnnGRU: a gated recurrent unit layer over a whole sequence in one op,
// as Graphcore's PopnnGRU (IPU TensorFlow Addons
// `ipu_tensorflow_addons.keras.layers.PopnnGRU`, which follows Keras's
// `GRU`): gate order (z, r, n) = (update, reset, candidate), kernel
// [input_size, 3u], recurrent_kernel [u, 3u]; per step t, with
// xw = x_t kernel and hr = h_{t-1} recurrent_kernel (blocks _z, _r, _n):
//   z = sigmoid(xw_z + hr_z + b_z);   r = sigmoid(xw_r + hr_r + b_r)
//   reset_after (bias [2, 3u]: input bias b_i, recurrent bias b_h):
//     n = tanh(xw_n + b_i,n + r * (hr_n + b_h,n))   (z, r add both biases)
//   reset_after = false (bias [3u]):
//     n = tanh(xw_n + (r * h_{t-1}) recurrent_kernel_n + b_n)
//   h_t = z * h_{t-1} + (1 - z) * n
// reset_after defaults to true (Keras 2 and the Addons signature; Graphcore
// TF1's ops-level PopnnGRU defaults to false and stores its reset_after
// bias as [3, 2, u]). Batch-major input [batch, time, input_size] or
// time_major [time, batch, input_size]; initial state [batch, u] (zeros
// when the builder is not given one).
//
// Outputs: every step's h, the final h, and a float32 cache [time, batch,
// 5u] (z, r, n, h_t and hr_n + b_h,n, or r * h_{t-1} without reset_after)
// for the gradient (PopnnGRUGrad, back-propagation through time). float32
// and float16 (computed in float32, each output rounded once).
//
//   ops::GruOutputs r = ops::PopnnGRU(scope, x, kernel, recurrent, bias);
#ifndef IPUFLOW_OPS_RNN_GRU_H_
#define IPUFLOW_OPS_RNN_GRU_H_

#include <optional>

#include "core/scope.h"

namespace ipuflow::ops {

struct GruOptions {
  bool time_major = false;
  bool reset_after = true;
  // Keras's go_backwards: the steps read the input from its last time step
  // to its first, and `output` is in the order of the steps (the reversed
  // sequence, as Keras returns it).
  bool go_backwards = false;
  std::optional<Output> initial_h;  // Zeros when absent.
};

struct GruOutputs {
  Output output;  // Every step's h: [batch, time, units] (or time-major).
  Output h;       // The final state, [batch, units].
  Output cache;   // float32 [time, batch, 5 * units], for the gradient.
};

GruOutputs PopnnGRU(const Scope& scope, Output input, Output kernel,
                    Output recurrent_kernel, Output bias,
                    const GruOptions& options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_RNN_GRU_H_
