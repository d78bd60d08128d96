#include "ops/array/pad.h"

#include "absl/strings/str_cat.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/slice.h"
#include "ops/array/strided_slice.h"

namespace ipuflow::ops {
namespace {

absl::StatusOr<TensorShape> PaddedShape(const TensorShape& x,
                                        absl::Span<const int64_t> paddings,
                                        const std::string& input_name) {
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

absl::Status PadKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& paddings = ctx.attr<std::vector<int64_t>>("paddings");
  absl::StatusOr<TensorShape> shape =
      PaddedShape(x.shape(), paddings, "input 'x'");
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, *shape));
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

REGISTER_OP("Pad")
    .Input("x")
    .RequiredAttr("paddings", AttrType::kIntList)
    .Attr("constant_value", 0.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(auto paddings, c.attr<std::vector<int64_t>>("paddings"));
      RETURN_IF_ERROR(c.attr<float>("constant_value").status());
      ASSIGN_OR_RETURN(TensorShape out,
                       PaddedShape(c.input_shape(0), paddings, c.InputName(0)));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel(PadKernel)
    // y = pad(x);  dx = dy cropped to x's box (the padding is constant)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(PadGradient(s, op, dy[0]));
      return absl::OkStatus();
    });

}  // namespace

Output Pad(const Scope& scope, Output x, const std::vector<int64_t>& paddings,
           float constant_value) {
  return scope.AddNode(
      "Pad", {x}, {{"paddings", paddings}, {"constant_value", constant_value}});
}

}  // namespace ipuflow::ops
