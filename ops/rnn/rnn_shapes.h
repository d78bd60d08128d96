// The shapes shared by the recurrent ops (PopnnLSTM, PopnnGRU and their
// gradients): Keras's weight layout (kernel [input_size, gates * units],
// recurrent_kernel [units, gates * units], gate blocks side by side), the
// input batch-major [batch, time, input_size] or time-major
// [time, batch, input_size], states [batch, units]. Checked once here so
// shape functions and kernels give the same errors.
#ifndef IPUFLOW_OPS_RNN_RNN_SHAPES_H_
#define IPUFLOW_OPS_RNN_RNN_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor_shape.h"

namespace ipuflow::ops::rnn {

struct RnnDims {
  int64_t time = 0, batch = 0, input_size = 0, units = 0;
  int gates = 0;  // 4 (LSTM) or 3 (GRU).
  bool time_major = false;
  // Keras's go_backwards: step t reads input time `time - 1 - t`, and the
  // output sequence is in the order of the steps (the reversed sequence).
  bool go_backwards = false;
  // Row of (t, b) in the input / output sequence viewed as [rows, features].
  int64_t Row(int64_t t, int64_t b) const {
    return time_major ? t * batch + b : b * time + t;
  }
  // The input row that step `step` reads for batch element b.
  int64_t SourceRow(int64_t step, int64_t b) const {
    return Row(go_backwards ? time - 1 - step : step, b);
  }
  TensorShape Sequence(int64_t features) const {
    return time_major ? TensorShape({time, batch, features})
                      : TensorShape({batch, time, features});
  }
};

// What the op takes: `gates` blocks; `bias_rows` 0 for a bias [gates *
// units], 2 for [2, gates * units] (GRU's reset_after: input and recurrent
// biases); `states` the shapes of the initial states. The weights must be
// fully defined; the input's batch and time may be unknown (kUnknownDim in
// the result). Errors name the argument and its shape.
absl::StatusOr<RnnDims> CheckRnnShapes(int gates, bool time_major,
                                       const TensorShape& input,
                                       const std::vector<TensorShape>& states,
                                       const TensorShape& kernel,
                                       const TensorShape& recurrent_kernel,
                                       const TensorShape& bias, int bias_rows);

// The float32 cache the forward op hands its gradient: [time, batch,
// per_step * units]; errors if the element count does not fit.
absl::StatusOr<TensorShape> CacheShape(const RnnDims& d, int per_step);

}  // namespace ipuflow::ops::rnn

#endif  // IPUFLOW_OPS_RNN_RNN_SHAPES_H_
