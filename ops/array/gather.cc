#include "ops/array/gather.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/half.h"
#include "ops/array/copy_kernels.h"
#include "ops/cwise.h"

namespace ipuflow::ops {
namespace {

// How a gather walks params: params is [outer, limit, inner] around the
// axis, the output is [outer, num_indices, inner].
struct GatherGeometry {
  int axis = 0;
  int64_t outer = 1, limit = 0, inner = 1;
  TensorShape out;  // -1 where unknown.
};

absl::StatusOr<GatherGeometry> GatherShape(const TensorShape& params,
                                           const TensorShape& indices,
                                           int64_t axis,
                                           const std::string& params_name) {
  if (params.rank() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(params_name, " is a scalar; Gather needs rank >= 1"));
  }
  GatherGeometry g;
  ASSIGN_OR_RETURN(g.axis, NormalizeAxis(axis, params.rank()));
  for (int d = 0; d < g.axis; ++d) g.out.AddDim(params.dim(d));
  for (int64_t d : indices.dims()) g.out.AddDim(d);
  for (int d = g.axis + 1; d < params.rank(); ++d) g.out.AddDim(params.dim(d));
  g.outer = params.DimProduct(0, g.axis);
  g.limit = params.dim(g.axis);
  g.inner = params.DimProduct(g.axis + 1, params.rank());
  return g;
}

absl::Status ExpectIndices(const ShapeContext& c, int i) {
  if (!IsInteger(c.input_dtype(i))) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.InputName(i), " must be int32 or int64, got ",
                     DTypeName(c.input_dtype(i))));
  }
  return absl::OkStatus();
}

// "[1,0]": the position of flat element i in a tensor of `shape`.
std::string Position(const TensorShape& shape, int64_t i) {
  std::vector<int64_t> idx(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    idx[d] = i % shape.dim(d);
    i /= shape.dim(d);
  }
  return absl::StrCat("[", absl::StrJoin(idx, ","), "]");
}

// An error naming the first index outside [0, g.limit).
template <typename Index>
absl::Status CheckIndices(const Tensor& indices, const GatherGeometry& g,
                          const TensorShape& params,
                          const std::string& params_name) {
  const Index* idx = indices.data<Index>();
  for (int64_t i = 0; i < indices.NumElements(); ++i) {
    if (idx[i] < 0 || idx[i] >= g.limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "indices", Position(indices.shape(), i), " = ", idx[i],
          " is out of range [0, ", g.limit, ") for dimension ", g.axis, " of ",
          params_name, " (shape ", params.DebugString(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAnyIndices(const Tensor& indices, const GatherGeometry& g,
                             const TensorShape& params,
                             const std::string& params_name) {
  if (indices.dtype() == DType::kInt32) {
    return CheckIndices<int32_t>(indices, g, params, params_name);
  }
  return CheckIndices<int64_t>(indices, g, params, params_name);
}

template <typename Index>
void GatherSlices(const KernelContext& ctx, const GatherGeometry& g,
                  const Tensor& params, const Tensor& indices, Tensor* y) {
  const int64_t n = indices.NumElements();
  const int64_t bytes = g.inner * static_cast<int64_t>(DTypeSize(y->dtype()));
  const char* src = static_cast<const char*>(params.raw_data());
  char* dst = static_cast<char*>(y->raw_data());
  const Index* idx = indices.data<Index>();
  ctx.ParallelFor(g.outer * n, kCopyCost * bytes / 16 + 4,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t u = begin; u < end; ++u) {
                      const int64_t o = u / n, row = o * g.limit + idx[u % n];
                      std::memcpy(dst + u * bytes, src + row * bytes, bytes);
                    }
                  });
}

absl::Status GatherKernel(KernelContext& ctx) {
  const Tensor& params = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  absl::StatusOr<GatherGeometry> g =
      GatherShape(params.shape(), indices.shape(), ctx.attr<int64_t>("axis"),
                  "input 'params'");
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  absl::Status s =
      CheckAnyIndices(indices, *g, params.shape(), "input 'params'");
  if (!s.ok()) return ctx.InvalidArgument(s.message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, g->out));
  if (y->NumElements() == 0) return absl::OkStatus();
  if (indices.dtype() == DType::kInt32) {
    GatherSlices<int32_t>(ctx, *g, params, indices, y);
  } else {
    GatherSlices<int64_t>(ctx, *g, params, indices, y);
  }
  return absl::OkStatus();
}

// dx[o, idx[n], :] += dy[o, n, :]. Work is split by (outer row, block of
// inner columns), so no two shards touch the same element even when
// indices repeat.
template <typename T, typename Index>
void ScatterAddRows(const KernelContext& ctx, const GatherGeometry& g,
                    const Tensor& dy, const Tensor& indices, Tensor* dx) {
  constexpr int64_t kBlock = 512;
  const int64_t n = indices.NumElements();
  const int64_t blocks = (g.inner + kBlock - 1) / kBlock;
  const Index* idx = indices.data<Index>();
  const T* src = dy.data<T>();
  T* dst = dx->data<T>();
  ctx.ParallelFor(
      g.outer * blocks, kCwiseCost * n * std::min(kBlock, g.inner),
      [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t o = u / blocks, c0 = (u % blocks) * kBlock;
          const int64_t w = std::min(kBlock, g.inner - c0);
          for (int64_t k = 0; k < n; ++k) {
            ArrayMap<T>(dst + (o * g.limit + idx[k]) * g.inner + c0, w) +=
                ConstArrayMap<T>(src + (o * n + k) * g.inner + c0, w);
          }
        }
      });
}

absl::Status GatherGradKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const TensorShape& like = ctx.input(2).shape();
  absl::StatusOr<GatherGeometry> g = GatherShape(
      like, indices.shape(), ctx.attr<int64_t>("axis"), "input 'like'");
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  if (dy.shape() != g->out) {
    return ctx.InvalidArgument(
        "input 'dy' has shape ", dy.shape().DebugString(),
        " but gathering from input 'like' (shape ", like.DebugString(),
        ") gives ", g->out.DebugString());
  }
  absl::Status s = CheckAnyIndices(indices, *g, like, "input 'like'");
  if (!s.ok()) return ctx.InvalidArgument(s.message());
  ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, like));
  FillTensor(ctx, *dx, 0.0);
  if (dy.NumElements() == 0) return absl::OkStatus();
  const bool i32 = indices.dtype() == DType::kInt32;
  IPUFLOW_SWITCH_NUMERIC(
      dy.dtype(),
      (i32 ? ScatterAddRows<T, int32_t>(ctx, *g, dy, indices, dx)
           : ScatterAddRows<T, int64_t>(ctx, *g, dy, indices, dx)),
      return UnsupportedDType(ctx, dy.dtype()));
  return absl::OkStatus();
}

REGISTER_OP("Gather")
    .Input("params")
    .Input("indices")
    .Attr("axis", int64_t{0})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      RETURN_IF_ERROR(ExpectIndices(c, 1));
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      ASSIGN_OR_RETURN(GatherGeometry g,
                       GatherShape(c.input_shape(0), c.input_shape(1), axis,
                                   c.InputName(0)));
      if (c.input_constant(1) != nullptr && g.limit >= 0) {  // Check early.
        RETURN_IF_ERROR(CheckAnyIndices(*c.input_constant(1), g,
                                        c.input_shape(0), c.InputName(0)));
      }
      c.set_output(0, c.input_dtype(0), g.out);
      return absl::OkStatus();
    })
    .SetKernel(GatherKernel)
    // y[o, n, i] = params[o, indices[n], i];
    // d params = dy added at the gathered slices;  indices: none (integers)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(GatherGrad(s, dy[0], op.input(1), op.input(0),
                               op.attr<int64_t>("axis")));
      dx->push_back(Output());
      return absl::OkStatus();
    });

REGISTER_OP("GatherGrad")
    .Input("dy")
    .Input("indices")
    .Input("like")
    .Attr("axis", int64_t{0})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectIndices(c, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 2));
      if (c.input_dtype(0) == DType::kBool ||
          c.input_dtype(0) == DType::kResource) {
        return absl::InvalidArgumentError(
            absl::StrCat(c.InputName(0), " is ", DTypeName(c.input_dtype(0)),
                         "; expected a numeric type"));
      }
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      ASSIGN_OR_RETURN(GatherGeometry g,
                       GatherShape(c.input_shape(2), c.input_shape(1), axis,
                                   c.InputName(2)));
      if (!c.input_shape(0).IsCompatibleWith(g.out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            c.InputName(0), " has shape ", c.input_shape(0).DebugString(),
            " but gathering from ", c.InputName(2), " (shape ",
            c.input_shape(2).DebugString(), ") gives ", g.out.DebugString()));
      }
      c.set_output(0, c.input_dtype(0), c.input_shape(2));
      return absl::OkStatus();
    })
    .SetKernel(GatherGradKernel)
    // dx = scatter_add(dy, indices);  d(dy) = gather(d(dx), indices)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      dx->push_back(Gather(s, dz[0], op.input(1), op.attr<int64_t>("axis")));
      dx->push_back(Output());
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output Gather(const Scope& scope, Output params, Output indices, int64_t axis) {
  return scope.AddNode("Gather", {params, indices}, {{"axis", axis}});
}

Output GatherGrad(const Scope& scope, Output dy, Output indices, Output like,
                  int64_t axis) {
  return scope.AddNode("GatherGrad", {dy, indices, like}, {{"axis", axis}});
}

}  // namespace ipuflow::ops
