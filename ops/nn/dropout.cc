#include "ops/nn/dropout.h"

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/nn/dropout_mask.h"
#include "ops/nn/elementwise_grad.h"

namespace ipuflow::ops {
namespace {

absl::Status CheckRate(float rate) {
  if (rate >= 0.0f && rate < 1.0f) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("rate must be in [0, 1), got ", rate));
}

// The mask of DropoutKeeps (dropout_mask.h).
template <typename T>
absl::Status DropoutKernel(KernelContext& ctx, uint64_t key, float rate) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * py_t, ctx.allocate_output(0, x.shape()));
  T* py = py_t->data<T>();
  ASSIGN_OR_RETURN(Tensor * pm_t, ctx.allocate_output(1, x.shape()));
  T* pm = pm_t->data<T>();
  const T* px = x.data<T>();
  const T scale = static_cast<T>(1.0f / (1.0f - rate));
  ctx.ParallelFor(x.NumElements(), 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pm[i] = DropoutKeeps(key, i, rate) ? scale : T(0);
    }
    ArrayMap<T>(py + b, e - b) =
        ConstArrayMap<T>(px + b, e - b) * ConstArrayMap<T>(pm + b, e - b);
  });
  return absl::OkStatus();
}

REGISTER_OP("Dropout")
    .Input("x")
    .Attr("rate", 0.5f)
    .Attr("seed", int64_t{0})
    .SetStateful()
    // Each replica draws its own mask (its key includes the global replica).
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      ASSIGN_OR_RETURN(float rate, c.attr<float>("rate"));
      RETURN_IF_ERROR(c.attr<int64_t>("seed").status());
      RETURN_IF_ERROR(CheckRate(rate));
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      c.set_output(1, c.input_dtype(0), c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const float rate = ctx.attr<float>("rate");
      absl::Status valid = CheckRate(rate);
      if (!valid.ok()) return ctx.InvalidArgument(valid.message());
      if (ctx.state() == nullptr)
        ctx.state() = std::make_unique<NodeRunCount>();
      const uint64_t run =
          static_cast<NodeRunCount*>(ctx.state().get())->runs++;
      const uint64_t seed = static_cast<uint64_t>(ctx.attr<int64_t>("seed"));
      const uint64_t replica = static_cast<uint64_t>(ctx.global_replica());
      const uint64_t key = DropoutKey(seed, run, replica);
      const DType dtype = ctx.input(0).dtype();
      IPUFLOW_SWITCH_FLOAT(dtype, return DropoutKernel<T>(ctx, key, rate),
                           return UnsupportedDType(ctx, dtype));
    })
    // y = x * mask, mask fixed for the run:  dx = dy * mask (DropoutGrad);
    // the mask does not depend on x, so its own gradient is dropped.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(
          dy[0].valid()
              ? DropoutGrad(s, dy[0], Output(const_cast<Node*>(&op), 1))
              : Output());
      return absl::OkStatus();
    });

struct MulFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    return a * b;
  }
};

REGISTER_OP("DropoutGrad")
    .Input("dy")
    .Input("mask")
    .SetShapeFn(shape_fns::SameShapeFloatPair)
    .SetKernel([](KernelContext& ctx) {
      return ElementwiseGradKernel(ctx, MulFn());
    })
    // dx = dy * mask:  d/d(dy) = g * mask;  the mask is not differentiated.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(DropoutGrad(s, g[0], op.input(1)));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

DropoutOutputs Dropout(const Scope& scope, Output x, float rate, int64_t seed) {
  Node* n = scope.AddNode("Dropout", {x}, {{"rate", rate}, {"seed", seed}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

Output DropoutGrad(const Scope& scope, Output dy, Output mask) {
  return scope.AddNode("DropoutGrad", {dy, mask});
}

}  // namespace ipuflow::ops
