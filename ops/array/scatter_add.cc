#include "ops/array/scatter_add.h"

#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"

namespace ipuflow::ops {
namespace {

// Checks that `indices` fits `x` along `axis` (same rank, same dims except
// at axis; unknown dims pass) and returns the normalized axis.
absl::StatusOr<int> AlongAxisGeometry(const TensorShape& x,
                                      const TensorShape& indices, int64_t axis,
                                      const std::string& x_name,
                                      const std::string& indices_name) {
  if (x.rank() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(x_name, " is a scalar; expected rank >= 1"));
  }
  absl::StatusOr<int> a = NormalizeAxis(axis, x.rank());
  if (!a.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        a.status().message(), "; ", x_name, " has shape ", x.DebugString()));
  }
  bool fits = indices.rank() == x.rank();
  for (int d = 0; fits && d < x.rank(); ++d) {
    if (d != *a && x.dim(d) >= 0 && indices.dim(d) >= 0 &&
        x.dim(d) != indices.dim(d)) {
      fits = false;
    }
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        indices_name, " has shape ", indices.DebugString(), " but ", x_name,
        " has ", x.DebugString(), "; they must match except at axis ", *a));
  }
  return *a;
}

absl::Status ExpectScatterIndices(const ShapeContext& c, int i) {
  const DType dt = c.input_dtype(i);
  if (dt != DType::kInt32 && dt != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(i), " is ", DTypeName(dt), "; expected int32 or int64"));
  }
  return absl::OkStatus();
}

struct AlongAxis {
  int64_t outer, rx, rk,
      inner;  // x as [outer, rx, inner], indices [.., rk, ..]
};

AlongAxis ScatterDims(const Tensor& x, const Tensor& indices, int axis) {
  return {x.shape().DimProduct(0, axis), x.dim(axis), indices.dim(axis),
          x.shape().DimProduct(axis + 1, x.rank())};
}

// The first index outside [0, rx), or -1.
template <typename Index>
int64_t FirstBadIndex(const Index* idx, int64_t n, int64_t rx) {
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= rx) return i;
  }
  return -1;
}

template <typename Index>
absl::Status CheckIndices(const KernelContext& ctx, const Tensor& indices,
                          const Tensor& x, int axis) {
  const int64_t bad =
      FirstBadIndex(indices.data<Index>(), indices.NumElements(), x.dim(axis));
  if (bad < 0) return absl::OkStatus();
  return ctx.InvalidArgument("input 'indices' holds ",
                             static_cast<int64_t>(indices.data<Index>()[bad]),
                             " at flat position ", bad, ", outside [0, ",
                             x.dim(axis), ") for axis ", axis, " of input 'x' ",
                             x.shape().DebugString());
}

template <typename T, typename Index>
void Take(const KernelContext& ctx, const T* x, const Index* idx, T* y,
          const AlongAxis& g) {
  ctx.ParallelFor(g.outer * g.rk, kCopyCost * g.inner,
                  [&](int64_t b, int64_t e) {
                    for (int64_t u = b; u < e; ++u) {
                      const int64_t o = u / g.rk;
                      for (int64_t i = 0; i < g.inner; ++i) {
                        const int64_t at = u * g.inner + i;
                        y[at] = x[(o * g.rx + idx[at]) * g.inner + i];
                      }
                    }
                  });
}

// Float32 (from float16), float32 or wrapping-integer accumulation.
template <typename T>
using ScatterAcc = std::conditional_t<
    std::is_same_v<T, half>, float,
    std::conditional_t<std::is_integral_v<T>,
                       std::make_unsigned_t<std::conditional_t<
                           std::is_integral_v<T>, T, int32_t>>,
                       T>>;

template <typename T, typename Index>
absl::Status Scatter(KernelContext& ctx, const Tensor& x, const Tensor& indices,
                     const Tensor& updates, Tensor* y, const AlongAxis& g) {
  using Acc = ScatterAcc<T>;
  const Index* idx = indices.data<Index>();
  const T* px = x.data<T>();
  const T* pu = updates.data<T>();
  T* py = y->data<T>();
  // Slabs of one outer index are disjoint: parallel over outer.
  ctx.ParallelFor(
      g.outer, kCwiseCost * (g.rx + g.rk) * g.inner, [&](int64_t b, int64_t e) {
        std::vector<Acc> acc(g.rx * g.inner);
        std::vector<float> out;
        for (int64_t o = b; o < e; ++o) {
          const int64_t xo = o * g.rx * g.inner, ko = o * g.rk * g.inner;
          for (int64_t i = 0; i < g.rx * g.inner; ++i) {
            acc[i] = static_cast<Acc>(
                static_cast<
                    std::conditional_t<std::is_same_v<T, half>, float, T>>(
                    px[xo + i]));
          }
          for (int64_t i = 0; i < g.rk * g.inner; ++i) {
            const int64_t c = i % g.inner;
            acc[idx[ko + i] * g.inner + c] += static_cast<Acc>(
                static_cast<
                    std::conditional_t<std::is_same_v<T, half>, float, T>>(
                    pu[ko + i]));
          }
          if constexpr (std::is_same_v<T, half>) {
            RoundToHalf(ctx, 0, acc.data(), py + xo, g.rx * g.inner, xo);
          } else {
            for (int64_t i = 0; i < g.rx * g.inner; ++i) {
              py[xo + i] = static_cast<T>(acc[i]);
            }
          }
        }
      });
  return absl::OkStatus();
}

absl::Status TakeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  absl::StatusOr<int> axis =
      AlongAxisGeometry(x.shape(), indices.shape(), ctx.attr<int64_t>("axis"),
                        "input 'x'", "input 'indices'");
  if (!axis.ok()) return ctx.InvalidArgument(axis.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, indices.shape()));
  if (y->NumElements() == 0) return absl::OkStatus();
  const AlongAxis g = ScatterDims(x, indices, *axis);
  const bool i32 = indices.dtype() == DType::kInt32;
  RETURN_IF_ERROR(i32 ? CheckIndices<int32_t>(ctx, indices, x, *axis)
                      : CheckIndices<int64_t>(ctx, indices, x, *axis));
  WithElementType(DTypeSize(x.dtype()), [&](auto u) {
    using U = decltype(u);
    if (i32) {
      Take(ctx, static_cast<const U*>(x.raw_data()), indices.data<int32_t>(),
           static_cast<U*>(y->raw_data()), g);
    } else {
      Take(ctx, static_cast<const U*>(x.raw_data()), indices.data<int64_t>(),
           static_cast<U*>(y->raw_data()), g);
    }
  });
  return absl::OkStatus();
}

absl::Status ScatterKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  absl::StatusOr<int> axis =
      AlongAxisGeometry(x.shape(), indices.shape(), ctx.attr<int64_t>("axis"),
                        "input 'x'", "input 'indices'");
  if (!axis.ok()) return ctx.InvalidArgument(axis.status().message());
  if (updates.shape() != indices.shape()) {
    return ctx.InvalidArgument(
        "input 'updates' has shape ", updates.shape().DebugString(),
        " but input 'indices' has ", indices.shape().DebugString());
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  if (y->NumElements() == 0) return absl::OkStatus();
  const AlongAxis g = ScatterDims(x, indices, *axis);
  const bool i32 = indices.dtype() == DType::kInt32;
  RETURN_IF_ERROR(i32 ? CheckIndices<int32_t>(ctx, indices, x, *axis)
                      : CheckIndices<int64_t>(ctx, indices, x, *axis));
  IPUFLOW_SWITCH_NUMERIC(
      x.dtype(),
      return (i32 ? Scatter<T, int32_t>(ctx, x, indices, updates, y, g)
                  : Scatter<T, int64_t>(ctx, x, indices, updates, y, g)),
      return ctx.InvalidArgument("no kernel for dtype ", DTypeName(x.dtype())));
}

REGISTER_OP("TakeAlongAxis")
    .Input("x")
    .Input("indices")
    .RequiredAttr("axis", AttrType::kInt)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      RETURN_IF_ERROR(ExpectScatterIndices(c, 1));
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      RETURN_IF_ERROR(AlongAxisGeometry(c.input_shape(0), c.input_shape(1),
                                        axis, c.InputName(0), c.InputName(1))
                          .status());
      c.set_output(0, c.input_dtype(0), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel(TakeKernel)
    // y = x[idx] along axis;  dx = dy added into zeros at idx.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const int64_t axis = op.attr<int64_t>("axis");
      dx->push_back(
          ScatterAdd(s, ZerosLike(s, op.input(0)), op.input(1), dy[0], axis));
      dx->push_back(Output());
      return absl::OkStatus();
    });

REGISTER_OP("ScatterAdd")
    .Input("x")
    .Input("indices")
    .Input("updates")
    .RequiredAttr("axis", AttrType::kInt)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      const DType dt = c.input_dtype(0);
      if (dt == DType::kBool || dt == DType::kResource) {
        return absl::InvalidArgumentError(
            absl::StrCat(c.InputName(0), " is ", DTypeName(dt),
                         "; expected a numeric type"));
      }
      RETURN_IF_ERROR(ExpectScatterIndices(c, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(2, 0));
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      RETURN_IF_ERROR(AlongAxisGeometry(c.input_shape(0), c.input_shape(1),
                                        axis, c.InputName(0), c.InputName(1))
                          .status());
      if (!c.input_shape(2).IsCompatibleWith(c.input_shape(1))) {
        return absl::InvalidArgumentError(absl::StrCat(
            c.InputName(2), " has shape ", c.input_shape(2).DebugString(),
            " but ", c.InputName(1), " has ", c.input_shape(1).DebugString()));
      }
      c.set_output(0, dt, c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel(ScatterKernel)
    // y = x + scatter(updates);  dx = dy, dupdates = dy[idx] along axis.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(dy[0]);
      dx->push_back(Output());
      dx->push_back(
          TakeAlongAxis(s, dy[0], op.input(1), op.attr<int64_t>("axis")));
      return absl::OkStatus();
    });

}  // namespace

Output ScatterAdd(const Scope& scope, Output x, Output indices, Output updates,
                  int64_t axis) {
  return scope.AddNode("ScatterAdd", {x, indices, updates}, {{"axis", axis}});
}

Output TakeAlongAxis(const Scope& scope, Output x, Output indices,
                     int64_t axis) {
  return scope.AddNode("TakeAlongAxis", {x, indices}, {{"axis", axis}});
}

}  // namespace ipuflow::ops
