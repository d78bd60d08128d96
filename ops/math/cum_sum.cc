#include "ops/math/cum_sum.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"

namespace ipuflow::ops {
namespace {

// The accumulator: float64 for float32, float32 for float16 (the IPU's
// float32 partials), unsigned for integers (wrapping, no signed overflow).
template <typename T>
using CumAcc = std::conditional_t<
    std::is_same_v<T, float>, double,
    std::conditional_t<std::is_same_v<T, half>, float,
                       std::make_unsigned_t<std::conditional_t<
                           std::is_integral_v<T>, T, int32_t>>>>;

template <typename T>
T FromAcc(CumAcc<T> a) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(a);  // Two's complement (C++20; every compiler).
  } else {
    return static_cast<T>(a);
  }
}

template <typename T>
CumAcc<T> ToAcc(T v) {
  if constexpr (std::is_same_v<T, half>) {
    return static_cast<float>(v);
  } else {
    return static_cast<CumAcc<T>>(v);
  }
}

// One [r, inner-block] slab: acc over k in order (reversed when `reverse`),
// written before (exclusive) or after (inclusive) adding x[k].
template <typename T>
void CumSlab(const KernelContext& ctx, const T* x, T* y, int64_t r,
             int64_t inner, int64_t i0, int64_t n, bool exclusive, bool reverse,
             int64_t out_offset) {
  std::vector<CumAcc<T>> acc(n, CumAcc<T>(0));
  std::vector<float> row;  // float16: the float32 results of one row.
  if constexpr (std::is_same_v<T, half>) row.resize(n);
  for (int64_t step = 0; step < r; ++step) {
    const int64_t k = reverse ? r - 1 - step : step;
    const T* xk = x + k * inner + i0;
    T* yk = y + k * inner + i0;
    if (!exclusive) {
      for (int64_t i = 0; i < n; ++i) acc[i] += ToAcc(xk[i]);
    }
    if constexpr (std::is_same_v<T, half>) {
      std::copy(acc.begin(), acc.end(), row.begin());
      RoundToHalf(ctx, 0, row.data(), yk, n, out_offset + k * inner + i0);
    } else {
      for (int64_t i = 0; i < n; ++i) yk[i] = FromAcc<T>(acc[i]);
    }
    if (exclusive) {
      for (int64_t i = 0; i < n; ++i) acc[i] += ToAcc(xk[i]);
    }
  }
}

// The scan axis of a rank-`rank` input, in [0, rank). NormalizeAxis also
// takes axis 0 of a scalar (for reductions), which has no dimension to
// scan: TensorFlow's cumsum refuses it ("ScanOp: Expected scan axis in the
// range [0, 0)").
absl::StatusOr<int> ScanAxis(int64_t axis, int rank) {
  if (rank == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis,
                     " is out of range for rank 0: a scalar has no axis to "
                     "sum along (reshape it to [1])"));
  }
  return NormalizeAxis(axis, rank);
}

template <typename T>
absl::Status CumSumKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  absl::StatusOr<int> axis = ScanAxis(ctx.attr<int64_t>("axis"), x.rank());
  if (!axis.ok()) return ctx.InvalidArgument(axis.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  if (x.NumElements() == 0) return absl::OkStatus();
  const int64_t outer = x.shape().DimProduct(0, *axis);
  const int64_t r = x.dim(*axis);
  const int64_t inner = x.shape().DimProduct(*axis + 1, x.rank());
  const bool exclusive = ctx.attr<bool>("exclusive");
  const bool reverse = ctx.attr<bool>("reverse");
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const T* px = x.data<T>();
  T* py = y->data<T>();
  ctx.ParallelFor(outer * blocks, kCwiseCost * r * std::min(inner, kBlock),
                  [&](int64_t b, int64_t e) {
                    for (int64_t u = b; u < e; ++u) {
                      const int64_t o = u / blocks, i0 = (u % blocks) * kBlock;
                      const int64_t off = o * r * inner;
                      CumSlab<T>(ctx, px + off, py + off, r, inner, i0,
                                 std::min(kBlock, inner - i0), exclusive,
                                 reverse, off);
                    }
                  });
  return absl::OkStatus();
}

REGISTER_OP("CumSum")
    .Input("x")
    .RequiredAttr("axis", AttrType::kInt)
    .Attr("exclusive", false)
    .Attr("reverse", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      const DType dt = c.input_dtype(0);
      if (dt == DType::kBool || dt == DType::kResource) {
        return absl::InvalidArgumentError(
            absl::StrCat(c.InputName(0), " is ", DTypeName(dt),
                         "; expected a numeric type"));
      }
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      RETURN_IF_ERROR(c.attr<bool>("exclusive").status());
      RETURN_IF_ERROR(c.attr<bool>("reverse").status());
      const TensorShape& shape = c.input_shape(0);
      absl::StatusOr<int> a = ScanAxis(axis, shape.rank());
      if (!a.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(a.status().message(), "; ", c.InputName(0),
                         " has shape ", shape.DebugString()));
      }
      c.set_output(0, dt, shape);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return CumSumKernel<T>(ctx),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // y_i = sum over j <= i of x_j;  dx_j = sum over i >= j of dy_i: the
    // cumulative sum of dy in the other direction, with the same exclusive.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(CumSum(s, dy[0], op.attr<int64_t>("axis"),
                           op.attr<bool>("exclusive"),
                           !op.attr<bool>("reverse")));
      return absl::OkStatus();
    });

}  // namespace

Output CumSum(const Scope& scope, Output x, int64_t axis, bool exclusive,
              bool reverse) {
  return scope.AddNode(
      "CumSum", {x},
      {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
}

}  // namespace ipuflow::ops
