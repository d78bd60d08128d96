#include "ops/rnn/rnn_graph.h"

#include "absl/strings/str_cat.h"
#include "ops/array/fill.h"

namespace ipuflow::ops::rnn {

Output ZeroState(const Scope& scope, const char* layer, Output input,
                 Output recurrent_kernel, bool time_major,
                 const char* instead) {
  const TensorShape& xs = input.shape();
  const TensorShape& rs = recurrent_kernel.shape();
  const int64_t batch =
      xs.rank() == 3 ? xs.dim(time_major ? 1 : 0) : kUnknownDim;
  const int64_t units = rs.rank() == 2 ? rs.dim(0) : kUnknownDim;
  if (batch == kUnknownDim || units == kUnknownDim) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        layer, ": a zero initial state needs a known batch and units; input ",
        xs.DebugString(), ", recurrent_kernel ", rs.DebugString(), " (or give ",
        instead, ")")));
    return Output();
  }
  return Fill(scope.NewSubScope(""), TensorShape({batch, units}), 0.0,
              input.dtype());
}

absl::Status AddRnnGradient(const Scope& s, const Node& op,
                            absl::Span<const Output> dy, int state_outputs,
                            int skipped_inputs, const std::string& grad_op,
                            const std::vector<std::string>& attrs,
                            std::vector<Output>* dx) {
  if (static_cast<int>(dy.size()) > state_outputs &&
      dy[state_outputs].valid()) {
    return absl::UnimplementedError(
        absl::StrCat(op.DebugName(), ": output ", state_outputs,
                     " (the cache for the gradient) is not differentiable"));
  }
  Node& fwd = const_cast<Node&>(op);
  std::vector<Output> in;
  for (int k = 0; k < state_outputs; ++k) {
    in.push_back(k < static_cast<int>(dy.size()) && dy[k].valid()
                     ? dy[k]
                     : ZerosLike(s, Output(&fwd, k)));
  }
  const int inputs = op.num_inputs();
  for (int k = 0; k < inputs - skipped_inputs; ++k) in.push_back(op.input(k));
  in.push_back(Output(&fwd, state_outputs));
  AttrMap copied;
  for (const std::string& name : attrs) copied[name] = op.attrs().at(name);
  Node* n = s.AddNode(grad_op, in, std::move(copied));
  if (n == nullptr) return s.status();
  dx->clear();
  for (int k = 0; k < inputs; ++k) dx->push_back(Output(n, k));
  return absl::OkStatus();
}

absl::Status NoSecondDerivative(const char* layer, const Node& op) {
  return absl::UnimplementedError(absl::StrCat("second derivatives of ", layer,
                                               " are not implemented (node '",
                                               op.name(), "')"));
}

}  // namespace ipuflow::ops::rnn
