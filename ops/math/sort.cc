#include "ops/math/sort.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/array/scatter_add.h"
#include "ops/cwise.h"
#include "ops/math/scalar_ops.h"

namespace ipuflow::ops {
namespace {

constexpr int64_t kMaxSortLength = std::numeric_limits<int32_t>::max();

// a before b in ascending order, NaN above every number.
template <typename T>
bool Below(T a, T b) {
  if (IsNaN(a)) return false;
  return IsNaN(b) || a < b;
}

// Sorts each [r]-long line (stride `inner`) of x, or keeps its first k when
// k < r; writes values and indices [outer, k, inner].
template <typename T>
void SortLines(const KernelContext& ctx, const T* x, T* values,
               int32_t* indices, int64_t outer, int64_t r, int64_t inner,
               int64_t k, bool descending) {
  const double cost = kCwiseCost * r * (1 + std::log2(static_cast<double>(r)));
  ctx.ParallelFor(outer * inner, cost, [&](int64_t b, int64_t e) {
    std::vector<int32_t> order(r);
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / inner, i = u % inner;
      const T* line = x + o * r * inner + i;
      std::iota(order.begin(), order.end(), 0);
      auto cmp = [&](int32_t p, int32_t q) {
        const T a = line[p * inner], c = line[q * inner];
        return descending ? Below(c, a) : Below(a, c);
      };
      if (k < r) {
        // Ties by the lower index: a stable order on (value, index).
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int32_t p, int32_t q) {
                            return cmp(p, q) || (!cmp(q, p) && p < q);
                          });
      } else {
        std::stable_sort(order.begin(), order.end(), cmp);
      }
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (o * k + j) * inner + i;
        values[at] = line[order[j] * inner];
        indices[at] = order[j];
      }
    }
  });
}

absl::Status CheckSortable(const ShapeContext& c) {
  const DType dt = c.input_dtype(0);
  if (dt == DType::kBool || dt == DType::kResource) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " is ", DTypeName(dt), "; expected a numeric type"));
  }
  if (c.input_shape(0).rank() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " is a scalar; ", c.op_name(), " needs rank >= 1"));
  }
  return absl::OkStatus();
}

absl::Status SortKernel(KernelContext& ctx, bool top_k) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) {
    return ctx.InvalidArgument("input 'x' is a scalar; needs rank >= 1");
  }
  absl::StatusOr<int> axis =
      top_k ? absl::StatusOr<int>(x.rank() - 1)
            : NormalizeAxis(ctx.attr<int64_t>("axis"), x.rank());
  if (!axis.ok()) return ctx.InvalidArgument(axis.status().message());
  const int64_t r = x.dim(*axis);
  if (r > kMaxSortLength) {
    return ctx.InvalidArgument("axis ", *axis, " of input 'x' ",
                               x.shape().DebugString(), " is longer than ",
                               kMaxSortLength, " (int32 indices)");
  }
  const int64_t k = top_k ? ctx.attr<int64_t>("k") : r;
  if (k < 0 || k > r) {
    return ctx.InvalidArgument("k is ", k, " but the last dimension of input ",
                               "'x' ", x.shape().DebugString(), " has ", r,
                               " elements");
  }
  TensorShape shape = x.shape();
  shape.set_dim(*axis, k);
  ASSIGN_OR_RETURN(Tensor * values, ctx.allocate_output(0, shape));
  ASSIGN_OR_RETURN(Tensor * indices, ctx.allocate_output(1, shape));
  if (values->NumElements() == 0) return absl::OkStatus();
  const int64_t outer = x.shape().DimProduct(0, *axis);
  const int64_t inner = x.shape().DimProduct(*axis + 1, x.rank());
  const bool descending = top_k || ctx.attr<bool>("descending");
  IPUFLOW_SWITCH_NUMERIC(
      x.dtype(),
      SortLines<T>(ctx, x.data<T>(), values->data<T>(),
                   indices->data<int32_t>(), outer, r, inner, k, descending),
      return UnsupportedDType(ctx, x.dtype()));
  return absl::OkStatus();
}

// values = x[indices] along axis;  dx = dvalues added back at indices.
absl::Status SortGradient(const Scope& s, const Node& op,
                          absl::Span<const Output> dy, std::vector<Output>* dx,
                          int64_t axis) {
  dx->push_back(ScatterAdd(s, ZerosLike(s, op.input(0)),
                           Output(const_cast<Node*>(&op), 1), dy[0], axis));
  return absl::OkStatus();
}

REGISTER_OP("Sort")
    .Input("x")
    .Attr("axis", int64_t{-1})
    .Attr("descending", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSortable(c));
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      RETURN_IF_ERROR(c.attr<bool>("descending").status());
      const TensorShape& shape = c.input_shape(0);
      absl::StatusOr<int> a = NormalizeAxis(axis, shape.rank());
      if (!a.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(a.status().message(), "; ", c.InputName(0),
                         " has shape ", shape.DebugString()));
      }
      if (shape.dim(*a) > kMaxSortLength) {
        return absl::InvalidArgumentError(absl::StrCat(
            "axis ", axis, " of ", c.InputName(0), " ", shape.DebugString(),
            " is longer than ", kMaxSortLength, " (int32 indices)"));
      }
      c.set_output(0, c.input_dtype(0), shape);
      c.set_output(1, DType::kInt32, shape);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) { return SortKernel(ctx, false); })
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      return SortGradient(s, op, dy, dx, op.attr<int64_t>("axis"));
    });

REGISTER_OP("TopK")
    .Input("x")
    .RequiredAttr("k", AttrType::kInt)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSortable(c));
      ASSIGN_OR_RETURN(int64_t k, c.attr<int64_t>("k"));
      TensorShape shape = c.input_shape(0);
      const int last = shape.rank() - 1;
      if (k < 0 || (shape.dim(last) >= 0 && k > shape.dim(last))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "k is ", k, " but the last dimension of ", c.InputName(0), " ",
            shape.DebugString(), " has ", shape.dim(last), " elements"));
      }
      if (shape.dim(last) > kMaxSortLength) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the last dimension of ", c.InputName(0), " ", shape.DebugString(),
            " is longer than ", kMaxSortLength, " (int32 indices)"));
      }
      shape.set_dim(last, k);
      c.set_output(0, c.input_dtype(0), shape);
      c.set_output(1, DType::kInt32, shape);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) { return SortKernel(ctx, true); })
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      return SortGradient(s, op, dy, dx, -1);
    });

}  // namespace

SortOutputs Sort(const Scope& scope, Output x, int64_t axis, bool descending) {
  Node* n =
      scope.AddNode("Sort", {x}, {{"axis", axis}, {"descending", descending}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

SortOutputs TopK(const Scope& scope, Output x, int64_t k) {
  Node* n = scope.AddNode("TopK", {x}, {{"k", k}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

}  // namespace ipuflow::ops
