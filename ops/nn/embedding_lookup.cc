#include "ops/nn/embedding_lookup.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

absl::Status CheckFactor(int64_t k, int64_t rows) {
  if (k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("serialization_factor must be >= 1, got ", k));
  }
  if (rows != kUnknownDim && rows % k != 0) {
    return absl::InvalidArgumentError(absl::StrCat("serialization_factor ", k,
                                                   " must divide the table's ",
                                                   rows, " rows"));
  }
  return absl::OkStatus();
}

absl::Status CheckIds(const ShapeContext& c, int i) {
  if (c.input_dtype(i) == DType::kInt32 || c.input_dtype(i) == DType::kInt64) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "input 'ids' must be int32 or int64, got ", DTypeName(c.input_dtype(i))));
}

TensorShape LookupShape(const TensorShape& params, const TensorShape& ids) {
  TensorShape out = ids;
  for (int d = 1; d < params.rank(); ++d) out.AddDim(params.dim(d));
  return out;
}

// The ids as int64, checked against [0, rows).
absl::StatusOr<std::vector<int64_t>> ReadIds(const KernelContext& ctx,
                                             const Tensor& ids, int64_t rows) {
  std::vector<int64_t> out(ids.NumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = ids.dtype() == DType::kInt32 ? ids.data<int32_t>()[i]
                                          : ids.data<int64_t>()[i];
    if (out[i] < 0 || out[i] >= rows) {
      return ctx.InvalidArgument("id ", out[i], " at flat position ", i,
                                 " is out of range [0, ", rows, ")");
    }
  }
  return out;
}

absl::Status CheckKernelFactor(const KernelContext& ctx, int64_t rows) {
  absl::Status s = CheckFactor(ctx.attr<int64_t>("serialization_factor"), rows);
  return s.ok() ? s : ctx.InvalidArgument(s.message());
}

template <typename T>
absl::Status LookupKernel(KernelContext& ctx) {
  const Tensor& params = ctx.input(0);
  const int64_t rows = params.dim(0);
  RETURN_IF_ERROR(CheckKernelFactor(ctx, rows));
  ASSIGN_OR_RETURN(std::vector<int64_t> ids, ReadIds(ctx, ctx.input(1), rows));
  ASSIGN_OR_RETURN(Tensor * out,
                   ctx.allocate_output(
                       0, LookupShape(params.shape(), ctx.input(1).shape())));
  const int64_t width = params.shape().DimProduct(1, params.rank());
  const int64_t k = ctx.attr<int64_t>("serialization_factor");
  const int64_t slice = rows / k;
  const T* p = params.data<T>();
  T* o = out->data<T>();
  const int64_t n = static_cast<int64_t>(ids.size());
  // Slice s owns rows [s * slice, (s + 1) * slice): its partial result is
  // its rows' values and zeros; the sum of the partials is written as each
  // slice's rows land (the other slices contribute exact zeros).
  std::fill_n(o, n * width, T(0));
  for (int64_t s = 0; s < k; ++s) {
    const int64_t lo = s * slice, hi = lo + slice;
    ctx.ParallelFor(n, 2.0 * width, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (ids[i] < lo || ids[i] >= hi) continue;
        std::memcpy(o + i * width, p + ids[i] * width, width * sizeof(T));
      }
    });
  }
  return absl::OkStatus();
}

REGISTER_OP("EmbeddingLookup")
    .Input("params")
    .Input("ids")
    .Attr("serialization_factor", int64_t{1})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      RETURN_IF_ERROR(CheckIds(c, 1));
      if (c.input_shape(0).rank() < 1) {
        return absl::InvalidArgumentError(
            "input 'params' must have rank >= 1 (rows first)");
      }
      ASSIGN_OR_RETURN(int64_t k, c.attr<int64_t>("serialization_factor"));
      RETURN_IF_ERROR(CheckFactor(k, c.input_shape(0).dim(0)));
      c.set_output(0, c.input_dtype(0),
                   LookupShape(c.input_shape(0), c.input_shape(1)));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const DType dtype = ctx.input(0).dtype();
      IPUFLOW_SWITCH_FLOAT(dtype, return LookupKernel<T>(ctx),
                           return UnsupportedDType(ctx, dtype));
    })
    // y[i] = params[ids[i]]:  dparams = scatter-add of dy at ids.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(
          EmbeddingLookupGrad(s, dy[0], op.input(1), op.input(0),
                              op.attr<int64_t>("serialization_factor")));
      dx->push_back(Output());  // Integer ids.
      return absl::OkStatus();
    });

REGISTER_OP("EmbeddingLookupGrad")
    .Input("dy")
    .Input("ids")
    .Input("params")
    .Attr("serialization_factor", int64_t{1})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 2));
      RETURN_IF_ERROR(CheckIds(c, 1));
      if (c.input_shape(2).rank() < 1) {
        return absl::InvalidArgumentError(
            "input 'params' must have rank >= 1 (rows first)");
      }
      const TensorShape want = LookupShape(c.input_shape(2), c.input_shape(1));
      if (!c.input_shape(0).IsCompatibleWith(want)) {
        return absl::InvalidArgumentError(
            absl::StrCat("dy has shape ", c.input_shape(0).DebugString(),
                         ", expected ", want.DebugString()));
      }
      ASSIGN_OR_RETURN(int64_t k, c.attr<int64_t>("serialization_factor"));
      RETURN_IF_ERROR(CheckFactor(k, c.input_shape(2).dim(0)));
      c.set_output(0, c.input_dtype(0), c.input_shape(2));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& params = ctx.input(2);
      const int64_t rows = params.dim(0);
      RETURN_IF_ERROR(CheckKernelFactor(ctx, rows));
      const TensorShape want =
          LookupShape(params.shape(), ctx.input(1).shape());
      if (ctx.input(0).shape() != want) {
        return ctx.InvalidArgument("dy has shape ",
                                   ctx.input(0).shape().DebugString(),
                                   ", expected ", want.DebugString());
      }
      ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                       ReadIds(ctx, ctx.input(1), rows));
      const Tensor dy32 = AsFloat32(ctx, ctx.input(0));
      const float* dy = dy32.data<float>();
      Float32Output out;
      RETURN_IF_ERROR(out.Allocate(ctx, 0, params.shape()));
      float* d = out.data();
      const int64_t width = params.shape().DimProduct(1, params.rank());
      const int64_t k = ctx.attr<int64_t>("serialization_factor");
      const int64_t slice = rows / k;
      const int64_t n = static_cast<int64_t>(ids.size());
      std::fill_n(d, rows * width, 0.0f);
      // Slice by slice; within one, columns in parallel, so repeated ids
      // add in id order whatever the threads.
      for (int64_t s = 0; s < k; ++s) {
        const int64_t lo = s * slice, hi = lo + slice;
        ctx.ParallelFor(width, 2.0 * n, [&](int64_t b, int64_t e) {
          for (int64_t i = 0; i < n; ++i) {
            if (ids[i] < lo || ids[i] >= hi) continue;
            float* row = d + ids[i] * width;
            const float* g = dy + i * width;
            for (int64_t j = b; j < e; ++j) row[j] += g[j];
          }
        });
      }
      out.Finish(ctx);
      return absl::OkStatus();
    })
    // Linear in dy: the gradient of sum(g * scatter(dy)) is a lookup of g.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(EmbeddingLookup(s, g[0], op.input(1),
                                    op.attr<int64_t>("serialization_factor")));
      dx->push_back(Output());
      dx->push_back(Output());  // Only params' shape is read.
      return absl::OkStatus();
    });

}  // namespace

Output EmbeddingLookup(const Scope& scope, Output params, Output ids,
                       int64_t serialization_factor) {
  return scope.AddNode("EmbeddingLookup", {params, ids},
                       {{"serialization_factor", serialization_factor}});
}

Output EmbeddingLookupGrad(const Scope& scope, Output dy, Output ids,
                           Output params, int64_t serialization_factor) {
  return scope.AddNode("EmbeddingLookupGrad", {dy, ids, params},
                       {{"serialization_factor", serialization_factor}});
}

}  // namespace ipuflow::ops
