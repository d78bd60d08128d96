// The graph side shared by the recurrent layers (PopnnLSTM, PopnnGRU):
// zero initial states when the builder is given none, and the wiring of a
// forward op's gradient to its back-propagation-through-time op. The
// kernels are each layer's own (lstm.cc, gru.cc).
#ifndef IPUFLOW_OPS_RNN_RNN_GRAPH_H_
#define IPUFLOW_OPS_RNN_RNN_GRAPH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/scope.h"

namespace ipuflow::ops::rnn {

// A zero state [batch, units] in the input's dtype: batch from `input`
// ([batch, time, i] or time-major), units from `recurrent_kernel`. Both
// must be known when the graph is built; otherwise records an error naming
// `layer`, the shapes and `instead` (what to pass) and returns an invalid
// Output.
Output ZeroState(const Scope& scope, const char* layer, Output input,
                 Output recurrent_kernel, bool time_major, const char* instead);

// A forward recurrent op's outputs are `state_outputs` differentiable ones
// (the sequence and the final states) and then the cache. Adds `grad_op`
// with inputs (d outputs, zeros for those nothing depends on; the forward
// op's inputs but the last `skipped_inputs`; the cache), copies `attrs`
// from the forward node, and sets *dx to its outputs, one per forward
// input. A gradient flowing into the cache is an error.
absl::Status AddRnnGradient(const Scope& s, const Node& op,
                            absl::Span<const Output> dy, int state_outputs,
                            int skipped_inputs, const std::string& grad_op,
                            const std::vector<std::string>& attrs,
                            std::vector<Output>* dx);

// A gradient op's own gradient: an error naming the layer and the node
// (rather than NotDifferentiable's silent zeros).
absl::Status NoSecondDerivative(const char* layer, const Node& op);

}  // namespace ipuflow::ops::rnn

#endif  // IPUFLOW_OPS_RNN_RNN_GRAPH_H_
