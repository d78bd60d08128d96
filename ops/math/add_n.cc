#include "ops/math/add_n.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

template <typename T>
absl::Status AddNKernel(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).shape() != first.shape()) {
      return ctx.InvalidArgument(
          "input ", i, " has shape ", ctx.input(i).shape().DebugString(),
          " but input 0 has ", first.shape().DebugString());
    }
  }
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, first.shape()));
  T* po = out->data<T>();
  const int n = ctx.num_inputs();
  if constexpr (std::is_same_v<T, half>) {
    // Summed in float32, rounded once (through RoundToHalf): gradients of
    // float16 values reaching one output lose no more than one rounding.
    ctx.ParallelFor(
        first.NumElements(), kCwiseCost * n, [&](int64_t b, int64_t e) {
          ArrayX<float> sum(e - b), term(e - b);
          WidenFast(ctx.input(0).data<half>() + b, sum.data(), e - b);
          for (int i = 1; i < n; ++i) {
            WidenFast(ctx.input(i).data<half>() + b, term.data(), e - b);
            sum += term;
          }
          RoundToHalf(ctx, 0, sum.data(), po + b, e - b, b);
        });
    return absl::OkStatus();
  }
  ctx.ParallelFor(first.NumElements(), kCwiseCost * n,
                  [&](int64_t b, int64_t e) {
                    ArrayMap<T> o(po + b, e - b);
                    o = ConstArrayMap<T>(ctx.input(0).data<T>() + b, e - b);
                    for (int i = 1; i < n; ++i) {
                      o += ConstArrayMap<T>(ctx.input(i).data<T>() + b, e - b);
                    }
                  });
  return absl::OkStatus();
}

REGISTER_OP("AddN")
    .VariadicInput("inputs")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      if (c.num_inputs() == 0) {
        return absl::InvalidArgumentError("needs at least one input");
      }
      TensorShape shape = c.input_shape(0);
      for (int i = 1; i < c.num_inputs(); ++i) {
        RETURN_IF_ERROR(c.ExpectSameDType(0, i));
        absl::StatusOr<TensorShape> merged =
            TensorShape::Merge(shape, c.input_shape(i));
        if (!merged.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              c.InputName(i), " has shape ", c.input_shape(i).DebugString(),
              " but ", c.InputName(0), " has ", shape.DebugString(),
              "; AddN does not broadcast"));
        }
        shape = *merged;
      }
      c.set_output(0, c.input_dtype(0), shape);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return AddNKernel<T>(ctx),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // y = sum_i x_i;  dy/dx_i = 1
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->assign(op.num_inputs(), dy[0]);
      return absl::OkStatus();
    });

}  // namespace

Output AddN(const Scope& scope, const std::vector<Output>& inputs) {
  return scope.AddNode("AddN", inputs);
}

}  // namespace ipuflow::ops
