#include "ops/nn/ipu_dropout.h"

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/nn/dropout_mask.h"

namespace ipuflow::ops {
namespace {

absl::Status CheckIpuDropoutRate(float rate) {
  if (rate >= 0.0f && rate < 1.0f) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("rate must be in [0, 1), got ", rate));
}

// y = x * mask(key): kept elements times 1 / (1 - rate), computed in x's
// dtype as Dropout does (x * scale).
template <typename T>
absl::Status ApplyMask(KernelContext& ctx, uint64_t key, float rate) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y_t, ctx.allocate_output(0, x.shape()));
  const T* px = x.data<T>();
  T* py = y_t->data<T>();
  const T scale = static_cast<T>(1.0f / (1.0f - rate));
  ctx.ParallelFor(x.NumElements(), 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      py[i] = DropoutKeeps(key, i, rate) ? T(px[i] * scale) : T(0);
    }
  });
  return absl::OkStatus();
}

absl::Status DropoutShape(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  ASSIGN_OR_RETURN(float rate, c.attr<float>("rate"));
  RETURN_IF_ERROR(CheckIpuDropoutRate(rate));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return absl::OkStatus();
}

absl::Status RunMask(KernelContext& ctx, uint64_t key) {
  const float rate = ctx.attr<float>("rate");
  absl::Status valid = CheckIpuDropoutRate(rate);
  if (!valid.ok()) return ctx.InvalidArgument(valid.message());
  const DType dtype = ctx.input(0).dtype();
  IPUFLOW_SWITCH_FLOAT(dtype, return ApplyMask<T>(ctx, key, rate),
                       return UnsupportedDType(ctx, dtype));
}

REGISTER_OP("IpuDropout")
    .Input("x")
    .Attr("rate", 0.5f)
    .Attr("seed", int64_t{0})
    .SetStateful()
    // Each replica draws its own mask (its key includes the global replica).
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(DropoutShape(c));
      RETURN_IF_ERROR(c.attr<int64_t>("seed").status());
      c.set_output(1, DType::kInt64, TensorShape());
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.state() == nullptr)
        ctx.state() = std::make_unique<NodeRunCount>();
      const uint64_t run =
          static_cast<NodeRunCount*>(ctx.state().get())->runs++;
      const uint64_t key =
          DropoutKey(static_cast<uint64_t>(ctx.attr<int64_t>("seed")), run,
                     static_cast<uint64_t>(ctx.global_replica()));
      ASSIGN_OR_RETURN(Tensor * seed, ctx.allocate_output(1, TensorShape()));
      seed->data<int64_t>()[0] = static_cast<int64_t>(key);
      return RunMask(ctx, key);
    })
    // y = x * mask(key):  dx = dy * mask(key), the mask regenerated.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(IpuDropoutWithSeed(
          s, dy[0], Output(const_cast<Node*>(&op), 1), op.attr<float>("rate")));
      return absl::OkStatus();
    });

REGISTER_OP("IpuDropoutWithSeed")
    .Input("x")
    .Input("seed")
    .Attr("rate", 0.5f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(DropoutShape(c));
      RETURN_IF_ERROR(c.ExpectDType(1, DType::kInt64));
      RETURN_IF_ERROR(c.ExpectRank(1, 0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.input(1).NumElements() != 1) {
        return ctx.InvalidArgument("seed must be a scalar, got ",
                                   ctx.input(1).shape().DebugString());
      }
      return RunMask(ctx,
                     static_cast<uint64_t>(ctx.input(1).data<int64_t>()[0]));
    })
    // Linear in x for a fixed key: dx = dy * mask(key); the key is an
    // integer.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(
          IpuDropoutWithSeed(s, dy[0], op.input(1), op.attr<float>("rate")));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

IpuDropoutOutputs IpuDropout(const Scope& scope, Output x, float rate,
                             int64_t seed) {
  Node* n = scope.AddNode("IpuDropout", {x}, {{"rate", rate}, {"seed", seed}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

Output IpuDropoutWithSeed(const Scope& scope, Output x, Output seed,
                          float rate) {
  return scope.AddNode("IpuDropoutWithSeed", {x, seed}, {{"rate", rate}});
}

}  // namespace ipuflow::ops
