#include "ops/array/pad.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/slice.h"
#include "ops/array/strided_slice.h"

namespace ipuflow::ops {
namespace {

enum class PadMode { kConstant, kReflect, kSymmetric, kReplicate };

absl::StatusOr<PadMode> ParsePadMode(const std::string& mode) {
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "symmetric") return PadMode::kSymmetric;
  if (mode == "replicate") return PadMode::kReplicate;
  return absl::InvalidArgumentError(
      absl::StrCat("mode is '", mode,
                   "'; expected constant, reflect, symmetric or replicate"));
}

// The largest padding `mode` allows on a side of a dimension of size `dim`
// (-1: no limit).
int64_t MaxPadding(PadMode mode, int64_t dim) {
  switch (mode) {
    case PadMode::kReflect:
      return dim - 1;
    case PadMode::kSymmetric:
      return dim;
    case PadMode::kReplicate:
      return dim >= 1 ? -1 : 0;
    default:
      return -1;
  }
}

// The source coordinate of output coordinate j (padded by `before`) in a
// dimension of size `dim`, for a non-constant mode. REQUIRES: the padding is
// within MaxPadding.
int64_t SourceIndex(PadMode mode, int64_t j, int64_t before, int64_t dim) {
  int64_t p = j - before;
  switch (mode) {
    case PadMode::kReflect:
      if (p < 0) p = -p;
      if (p >= dim) p = 2 * (dim - 1) - p;
      return p;
    case PadMode::kSymmetric:
      if (p < 0) p = -p - 1;
      if (p >= dim) p = 2 * dim - 1 - p;
      return p;
    default:
      return std::clamp<int64_t>(p, 0, dim - 1);
  }
}

absl::StatusOr<TensorShape> PaddedShape(const TensorShape& x,
                                        absl::Span<const int64_t> paddings,
                                        const std::string& input_name,
                                        PadMode mode = PadMode::kConstant) {
  if (static_cast<int>(paddings.size()) != 2 * x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paddings ", IntListString(paddings), " has ", paddings.size(),
        " values; ", input_name, " of shape ", x.DebugString(), " needs ",
        2 * x.rank(), " (a before and an after value per dimension)"));
  }
  TensorShape out;
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t before = paddings[2 * i], after = paddings[2 * i + 1];
    if (before < 0 || after < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("paddings ", IntListString(paddings),
                       " has a negative value for "
                       "dimension ",
                       i, " of ", input_name, " (shape ", x.DebugString(),
                       "); use Slice to crop"));
    }
    if (x.dim(i) < 0) {
      out.AddDim(-1);
      continue;
    }
    const int64_t limit = MaxPadding(mode, x.dim(i));
    if (limit >= 0 && (before > limit || after > limit)) {
      return absl::InvalidArgumentError(
          absl::StrCat("paddings ", IntListString(paddings), " for dimension ",
                       i, " of ", input_name, " (shape ", x.DebugString(),
                       ") exceed ", limit, ", the most a ",
                       mode == PadMode::kReflect     ? "reflect"
                       : mode == PadMode::kSymmetric ? "symmetric"
                                                     : "replicate",
                       " padding of ", x.dim(i), " elements allows"));
    }
    absl::StatusOr<int64_t> d = PaddedDim(x.dim(i), before, after);
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("paddings ", IntListString(paddings), " for dimension ",
                       i, " of ", input_name, " (shape ", x.DebugString(),
                       "): ", d.status().message()));
    }
    out.AddDim(*d);
  }
  return out;
}

// For every output element of a non-constant padding: the flat source
// index in x, row by row of the output's last dimension. Calls
// fn(out_flat, src_flat) for every element, rows in parallel when
// `parallel` (the forward copy), in order otherwise (the gradient's sums).
template <typename Fn>
void ForEachSource(const KernelContext& ctx, const TensorShape& x,
                   const TensorShape& y, absl::Span<const int64_t> paddings,
                   PadMode mode, bool parallel, Fn fn) {
  const int rank = x.rank();
  std::vector<std::vector<int64_t>> maps(rank);
  for (int d = 0; d < rank; ++d) {
    for (int64_t j = 0; j < y.dim(d); ++j) {
      maps[d].push_back(SourceIndex(mode, j, paddings[2 * d], x.dim(d)));
    }
  }
  const std::vector<int64_t> xs = RowMajorStrides(x);
  const int64_t cols = rank == 0 ? 1 : y.dim(rank - 1);
  const int64_t rows = cols == 0 ? 0 : y.num_elements() / cols;
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t rest = r, src = 0;
      for (int d = rank - 2; d >= 0; --d) {
        src += maps[d][rest % y.dim(d)] * xs[d];
        rest /= y.dim(d);
      }
      for (int64_t c = 0; c < cols; ++c) {
        fn(r * cols + c, rank == 0 ? 0 : src + maps[rank - 1][c]);
      }
    }
  };
  if (parallel) {
    ctx.ParallelFor(rows, kCopyCost * cols, run);
  } else {
    run(0, rows);
  }
}

absl::Status PadKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& paddings = ctx.attr<std::vector<int64_t>>("paddings");
  absl::StatusOr<PadMode> mode = ParsePadMode(ctx.attr<std::string>("mode"));
  if (!mode.ok()) return ctx.InvalidArgument(mode.status().message());
  absl::StatusOr<TensorShape> shape =
      PaddedShape(x.shape(), paddings, "input 'x'", *mode);
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, *shape));
  if (*mode != PadMode::kConstant) {
    if (y->NumElements() == 0) return absl::OkStatus();
    WithElementType(DTypeSize(x.dtype()), [&](auto u) {
      using U = decltype(u);
      const U* px = static_cast<const U*>(x.raw_data());
      U* py = static_cast<U*>(y->raw_data());
      ForEachSource(ctx, x.shape(), *shape, paddings, *mode, true,
                    [&](int64_t o, int64_t i) { py[o] = px[i]; });
    });
    return absl::OkStatus();
  }
  if (*shape != x.shape()) {
    FillTensor(ctx, *y, ctx.attr<float>("constant_value"));
  }
  const std::vector<int64_t> y_strides = RowMajorStrides(*shape);
  int64_t offset = 0;
  for (int i = 0; i < x.rank(); ++i) offset += paddings[2 * i] * y_strides[i];
  const size_t elem = DTypeSize(x.dtype());
  StridedCopy(ctx, x.shape().dims(),
              static_cast<char*>(y->raw_data()) + offset * elem, y_strides,
              x.raw_data(), RowMajorStrides(x.shape()), elem);
  return absl::OkStatus();
}

// dx for y = Pad(x, paddings): dy[before : before + x.shape]. Slice needs
// the size of each dimension with an "after" padding at build time; when
// one is unknown, StridedSlice ends it at -after instead.
Output PadGradient(const Scope& s, const Node& op, Output dy) {
  const TensorShape& x = op.input(0).shape();
  const auto& paddings = op.attr<std::vector<int64_t>>("paddings");
  std::vector<int64_t> begin, size, end;
  StridedSliceOptions to_end;
  bool static_size = true;
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t before = paddings[2 * i], after = paddings[2 * i + 1];
    begin.push_back(before);
    size.push_back(after == 0 ? -1 : x.dim(i));
    end.push_back(-after);
    if (after == 0) to_end.end_mask |= int64_t{1} << i;
    if (after != 0 && x.dim(i) < 0) static_size = false;
  }
  if (static_size) return Slice(s, dy, begin, size);
  return StridedSlice(s, dy, begin, end, std::vector<int64_t>(begin.size(), 1),
                      to_end);
}

// dx for a non-constant padding: every element of dy added to the x
// element it copies (float32 sums, in order; float16 rounded once).
absl::Status PadGradKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const auto& paddings = ctx.attr<std::vector<int64_t>>("paddings");
  absl::StatusOr<PadMode> mode = ParsePadMode(ctx.attr<std::string>("mode"));
  if (!mode.ok()) return ctx.InvalidArgument(mode.status().message());
  absl::StatusOr<TensorShape> shape =
      PaddedShape(x.shape(), paddings, "input 'x'", *mode);
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  if (*shape != dy.shape()) {
    return ctx.InvalidArgument(
        "input 'dy' has shape ", dy.shape().DebugString(), " but x ",
        x.shape().DebugString(), " pads to ", shape->DebugString());
  }
  ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, x.shape()));
  if (dx->NumElements() == 0) return absl::OkStatus();
  std::vector<float> acc(dx->NumElements(), 0.0f);
  if (*mode == PadMode::kConstant) {
    return ctx.InvalidArgument("mode 'constant' has no PadGrad (a slice)");
  }
  IPUFLOW_SWITCH_FLOAT(
      dy.dtype(),
      {
        const T* pdy = dy.data<T>();
        ForEachSource(ctx, x.shape(), *shape, paddings, *mode, false,
                      [&](int64_t o, int64_t i) {
                        acc[i] += static_cast<float>(pdy[o]);
                      });
      },
      return ctx.InvalidArgument("no kernel for dtype ",
                                 DTypeName(dy.dtype())));
  if (dx->dtype() == DType::kFloat16) {
    RoundToHalf(ctx, 0, acc.data(), dx->data<half>(), dx->NumElements());
  } else {
    std::copy(acc.begin(), acc.end(), dx->data<float>());
  }
  return absl::OkStatus();
}

REGISTER_OP("Pad")
    .Input("x")
    .RequiredAttr("paddings", AttrType::kIntList)
    .Attr("constant_value", 0.0f)
    .Attr("mode", "constant")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(auto paddings, c.attr<std::vector<int64_t>>("paddings"));
      RETURN_IF_ERROR(c.attr<float>("constant_value").status());
      ASSIGN_OR_RETURN(std::string mode_name, c.attr<std::string>("mode"));
      ASSIGN_OR_RETURN(PadMode mode, ParsePadMode(mode_name));
      ASSIGN_OR_RETURN(TensorShape out, PaddedShape(c.input_shape(0), paddings,
                                                    c.InputName(0), mode));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel(PadKernel)
    // constant: y = pad(x);  dx = dy cropped to x's box. reflect /
    // symmetric / replicate: each y element copies one x element, so dx
    // sums the dy elements that copy it (PadGrad).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const std::string& mode = op.attr<std::string>("mode");
      if (mode == "constant") {
        dx->push_back(PadGradient(s, op, dy[0]));
      } else {
        dx->push_back(
            s.AddNode("PadGrad", {dy[0], op.input(0)},
                      {{"paddings", op.attr<std::vector<int64_t>>("paddings")},
                       {"mode", mode}}));
      }
      return absl::OkStatus();
    });

REGISTER_OP("PadGrad")
    .Input("dy")
    .Input("x")
    .RequiredAttr("paddings", AttrType::kIntList)
    .RequiredAttr("mode", AttrType::kString)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      ASSIGN_OR_RETURN(auto paddings, c.attr<std::vector<int64_t>>("paddings"));
      ASSIGN_OR_RETURN(std::string mode_name, c.attr<std::string>("mode"));
      ASSIGN_OR_RETURN(PadMode mode, ParsePadMode(mode_name));
      if (mode == PadMode::kConstant) {
        return absl::InvalidArgumentError(
            "mode 'constant' has no PadGrad (its gradient is a slice)");
      }
      ASSIGN_OR_RETURN(TensorShape out, PaddedShape(c.input_shape(1), paddings,
                                                    c.InputName(1), mode));
      if (!c.input_shape(0).IsCompatibleWith(out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            c.InputName(0), " has shape ", c.input_shape(0).DebugString(),
            " but ", c.InputName(1), " ", c.input_shape(1).DebugString(),
            " pads to ", out.DebugString()));
      }
      c.set_output(0, c.input_dtype(0), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel(PadGradKernel)
    // PadGrad is the adjoint of the padding: its own gradient is the
    // padding of ddx with the same mode (x only gives the shape).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(
          s.AddNode("Pad", {dy[0]},
                    {{"paddings", op.attr<std::vector<int64_t>>("paddings")},
                     {"mode", op.attr<std::string>("mode")}}));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output Pad(const Scope& scope, Output x, const std::vector<int64_t>& paddings,
           float constant_value) {
  return scope.AddNode(
      "Pad", {x}, {{"paddings", paddings}, {"constant_value", constant_value}});
}

Output Pad(const Scope& scope, Output x, const std::vector<int64_t>& paddings,
           const std::string& mode) {
  return scope.AddNode("Pad", {x}, {{"paddings", paddings}, {"mode", mode}});
}

}  // namespace ipuflow::ops
