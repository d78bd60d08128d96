// PopnnLSTM: a long short-term memory layer over a whole sequence in one
// op, as Graphcore's PopnnLSTM (IPU TensorFlow Addons
// `ipu_tensorflow_addons.keras.layers.PopnnLSTM`, which follows Keras's
// `LSTM`): per step t,
//   z = x_t kernel + h_{t-1} recurrent_kernel + bias          [batch, 4u]
//   i, f, g, o = sigmoid(z_i), sigmoid(z_f), tanh(z_g), sigmoid(z_o)
//   c_t = f * c_{t-1} + i * g;   h_t = o * tanh(c_t)
// Keras's weight layout and gate order (i, f, c, o): kernel [input_size,
// 4u], recurrent_kernel [u, 4u], bias [4u] (unit_forget_bias is an
// initialiser's business: put 1 in bias[u, 2u)). The input is batch-major
// [batch, time, input_size] (Keras's default) or, with time_major,
// [time, batch, input_size] (Graphcore's TF1 ops-level PopnnLSTM). The
// initial state (h, c) is an input (zeros when the builder is not given
// one, as Keras and Graphcore).
//
// Outputs: the sequence of h_t ([batch, time, u] or time-major), the final
// h and c ([batch, u]; Keras's return_state), and a float32 cache of each
// step's gates and states that the gradient (PopnnLSTMGrad, back-
// propagation through time) reads instead of recomputing. float32 and
// float16 (computed in float32, each output rounded once). Activations are
// tanh / sigmoid only (Graphcore's defaults).
//
//   ops::LstmOutputs r = ops::PopnnLSTM(scope, x, kernel, recurrent, bias);
//   Output last = r.h;              // return_sequences = false
//   Output seq = r.output;          // return_sequences = true
#ifndef IPUFLOW_OPS_RNN_LSTM_H_
#define IPUFLOW_OPS_RNN_LSTM_H_

#include <optional>

#include "core/scope.h"

namespace ipuflow::ops {

struct LstmOptions {
  bool time_major = false;
  // Keras's go_backwards: the steps read the input from its last time step
  // to its first, and `output` is in the order of the steps (the reversed
  // sequence, as Keras returns it).
  bool go_backwards = false;
  // Both or neither ([batch, units], the input's dtype); zeros when absent
  // (the batch and units must then be known when the graph is built).
  std::optional<Output> initial_h, initial_c;
};

struct LstmOutputs {
  Output output;  // Every step's h: [batch, time, units] (or time-major).
  Output h, c;    // The final state, [batch, units].
  Output cache;   // float32 [time, batch, 6 * units], for the gradient.
};

LstmOutputs PopnnLSTM(const Scope& scope, Output input, Output kernel,
                      Output recurrent_kernel, Output bias,
                      const LstmOptions& options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_RNN_LSTM_H_
