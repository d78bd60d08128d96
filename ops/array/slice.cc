#include "ops/array/slice.h"

#include "absl/strings/str_cat.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/pad.h"
#include "ops/array/strided_slice.h"

namespace ipuflow::ops {
namespace {

// The output shape of slicing `x` (dims may be unknown), or an error
// naming the attributes, the input and its shape.
absl::StatusOr<TensorShape> SliceShape(const TensorShape& x,
                                       absl::Span<const int64_t> begin,
                                       absl::Span<const int64_t> size,
                                       const std::string& input_name) {
  const std::string where =
      absl::StrCat(input_name, " (shape ", x.DebugString(), ")");
  if (static_cast<int>(begin.size()) != x.rank() ||
      static_cast<int>(size.size()) != x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "begin ", IntListString(begin), " and size ", IntListString(size),
        " must have one entry per dimension of ", where));
  }
  TensorShape out;
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t dim = x.dim(i);
    const bool past_end =
        dim >= 0 &&
        (begin[i] > dim || (size[i] >= 0 && begin[i] + size[i] > dim));
    if (begin[i] < 0 || size[i] < -1 || past_end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "begin ", IntListString(begin), " and size ", IntListString(size),
          " do not select a box of ", where, " in dimension ", i,
          " (need 0 <= begin <= begin + size <= ",
          dim < 0 ? std::string("?") : absl::StrCat(dim),
          ", or size -1 for the rest)"));
    }
    out.AddDim(size[i] >= 0 ? size[i] : (dim >= 0 ? dim - begin[i] : -1));
  }
  return out;
}

absl::Status SliceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& begin = ctx.attr<std::vector<int64_t>>("begin");
  const auto& size = ctx.attr<std::vector<int64_t>>("size");
  absl::StatusOr<TensorShape> shape =
      SliceShape(x.shape(), begin, size, "input 'x'");
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, *shape));
  const std::vector<int64_t> strides = RowMajorStrides(x.shape());
  int64_t offset = 0;
  for (int i = 0; i < x.rank(); ++i) offset += begin[i] * strides[i];
  const size_t elem = DTypeSize(x.dtype());
  StridedCopy(ctx, shape->dims(), y->raw_data(), RowMajorStrides(*shape),
              static_cast<const char*>(x.raw_data()) + offset * elem, strides,
              elem);
  return absl::OkStatus();
}

// dx for y = Slice(x, begin, size): dy padded back to x's shape. Pad needs
// each "after" padding at build time; when a dimension of x is unknown (and
// not sliced to its end) StridedSliceGrad takes x's shape at run time.
Output SliceGradient(const Scope& s, const Node& op, Output dy) {
  const Output x = op.input(0);
  const auto& begin = op.attr<std::vector<int64_t>>("begin");
  const auto& size = op.attr<std::vector<int64_t>>("size");
  std::vector<int64_t> paddings, end;
  StridedSliceOptions to_end;
  bool static_pad = true;
  for (int i = 0; i < x.shape().rank(); ++i) {
    const int64_t dim = x.shape().dim(i);
    if (size[i] == -1) {
      to_end.end_mask |= int64_t{1} << i;
    } else if (dim < 0) {
      static_pad = false;
    }
    paddings.push_back(begin[i]);
    paddings.push_back(size[i] == -1 || dim < 0 ? 0 : dim - begin[i] - size[i]);
    end.push_back(size[i] == -1 ? 0 : begin[i] + size[i]);
  }
  if (static_pad) return Pad(s, dy, paddings);
  return StridedSliceGrad(s, dy, x, begin, end,
                          std::vector<int64_t>(begin.size(), 1), to_end);
}

REGISTER_OP("Slice")
    .Input("x")
    .RequiredAttr("begin", AttrType::kIntList)
    .RequiredAttr("size", AttrType::kIntList)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(auto begin, c.attr<std::vector<int64_t>>("begin"));
      ASSIGN_OR_RETURN(auto size, c.attr<std::vector<int64_t>>("size"));
      ASSIGN_OR_RETURN(TensorShape out, SliceShape(c.input_shape(0), begin,
                                                   size, c.InputName(0)));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel(SliceKernel)
    // y = x[begin : begin + size];  dx = dy inside the box, 0 outside
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(SliceGradient(s, op, dy[0]));
      return absl::OkStatus();
    });

}  // namespace

Output Slice(const Scope& scope, Output x, const std::vector<int64_t>& begin,
             const std::vector<int64_t>& size) {
  return scope.AddNode("Slice", {x}, {{"begin", begin}, {"size", size}});
}

}  // namespace ipuflow::ops
