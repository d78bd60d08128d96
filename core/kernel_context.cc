// KernelContext's out-of-line methods (core/kernel.h): outputs placed in the
// program's arena, and fused chains (core/compiler/fusion.h).
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/compiler/fusion.h"
#include "core/kernel.h"
#include "core/program.h"

namespace ipuflow {

const TensorShape& KernelContext::planned_shape(int i) const {
  return (*plans_)[i].shape;
}

absl::StatusOr<Tensor*> KernelContext::allocate_output(
    int i, const TensorShape& shape) {
  const OutputPlan& plan = (*plans_)[i];
  if (plan.offset >= 0 && shape == plan.shape) {
    outputs_[i] = Tensor(output_dtype(i), shape, *arena_, plan.offset);
    return &outputs_[i];
  }
  // A shape known only now: checked before anything is allocated.
  const DType dtype = output_dtype(i);
  absl::StatusOr<int64_t> n = shape.CheckedNumElements();
  absl::StatusOr<int64_t> bytes =
      n.ok() ? CheckedByteSize(*n, DTypeSize(dtype), "") : n.status();
  const bool on_ipu = env_->memory_budget > 0;
  const int64_t limit = on_ipu ? env_->memory_budget : PhysicalMemoryBytes();
  if (bytes.ok() && *bytes > limit) {
    return Error(absl::StatusCode::kResourceExhausted, "output ", i, " ",
                 DTypeName(dtype), shape.DebugString(), " needs ", *bytes,
                 " bytes, more than ",
                 on_ipu ? absl::StrCat("IPU ", env_->ipu, " holds (")
                        : std::string("the host's physical memory ("),
                 limit, " bytes)");
  }
  absl::StatusOr<Tensor> t = Tensor::Allocate(dtype, shape);
  if (!t.ok()) {
    return Error(t.status().code(), "output ", i, ": ", t.status().message());
  }
  outputs_[i] = *std::move(t);
  return &outputs_[i];
}

void KernelContext::set_output(int i, Tensor t) { outputs_[i] = std::move(t); }

absl::StatusOr<Tensor*> KernelContext::RunChainKernel(
    int i, absl::Span<const Tensor* const> inputs) {
  const int size =
      fused_ == nullptr ? 0 : static_cast<int>(fused_->nodes.size());
  if (i < 0 || i >= size) {
    return Error(absl::StatusCode::kInternal, "RunChainKernel(", i,
                 ") outside the fused chain");
  }
  const Node* n = fused_->nodes[i];
  const bool last = i == size - 1;  // Writes this node's outputs.
  Tensor out[1];  // Chain nodes but the last have one output (fusion.h).
  KernelContext sub(n, Inputs(inputs.begin(), inputs.end()),
                    last ? outputs_ : out, env_, &fused_->states[i],
                    last ? plans_ : &fused_->plans[i], arena_);
  sub.replica_identical_ = replica_identical_;
  sub.run_stream_ = run_stream_;
  absl::Status s = n->op_def().kernel()(sub);
  half_overflow_.fetch_or(sub.half_overflow_.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
  if (!s.ok()) {
    if (absl::StrContains(s.message(), n->name())) return s;
    return absl::Status(s.code(),
                        absl::StrCat(n->DebugName(), ": ", s.message()));
  }
  Tensor& t = last ? outputs_[0] : out[0];
  if (!t.valid()) {
    return Error(absl::StatusCode::kInternal, n->DebugName(),
                 " did not produce output 0");
  }
  if (last) return &outputs_[0];
  // Same shape as this node's output 0: it is that output, to be finished
  // in place; else a scratch value the fused kernel consumes.
  if (t.shape() == (*plans_)[0].shape && t.dtype() == output_dtype(0)) {
    outputs_[0] = std::move(t);
    return &outputs_[0];
  }
  fused_->scratch = std::move(t);
  return &fused_->scratch;
}

}  // namespace ipuflow
