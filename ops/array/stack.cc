#include "ops/array/stack.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/strided_slice.h"

namespace ipuflow::ops {
namespace {

// The stacked shape: values' shape with N inserted at `axis`; `known` is
// their common shape (unknown dims filled in from any value that knows them).
absl::StatusOr<TensorShape> StackShape(
    const std::vector<TensorShape>& shapes, int64_t axis,
    const std::function<std::string(int)>& name) {
  if (shapes.empty()) {
    return absl::InvalidArgumentError("needs at least one value");
  }
  TensorShape common = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    const TensorShape& s = shapes[i];
    if (s.rank() != common.rank()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(i), " has shape ", s.DebugString(), " but ", name(0), " has ",
          shapes[0].DebugString(), "; stacked values need one shape"));
    }
    for (int d = 0; d < s.rank(); ++d) {
      if (common.dim(d) < 0) {
        common.set_dim(d, s.dim(d));
      } else if (s.dim(d) >= 0 && s.dim(d) != common.dim(d)) {
        return absl::InvalidArgumentError(absl::StrCat(
            name(i), " has shape ", s.DebugString(), " but ", name(0), " has ",
            shapes[0].DebugString(), "; stacked values need one shape"));
      }
    }
  }
  const int rank = common.rank() + 1;
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for ", shapes.size(),
                     " values of shape ", common.DebugString(), " (valid: [",
                     -rank, ", ", rank - 1, "])"));
  }
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  std::vector<int64_t> dims(common.dims().begin(), common.dims().end());
  dims.insert(dims.begin() + a, static_cast<int64_t>(shapes.size()));
  TensorShape out(dims);
  RETURN_IF_ERROR(ValidateShape(out));
  return out;
}

absl::Status StackKernel(KernelContext& ctx) {
  std::vector<TensorShape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    shapes.push_back(ctx.input(i).shape());
  }
  absl::StatusOr<TensorShape> out =
      StackShape(shapes, ctx.attr<int64_t>("axis"),
                 [](int i) { return absl::StrCat("input 'values[", i, "]'"); });
  if (!out.ok()) return ctx.InvalidArgument(out.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, *out));
  if (y->NumElements() == 0) return absl::OkStatus();
  const int64_t axis = ctx.attr<int64_t>("axis");
  const int a = static_cast<int>(axis < 0 ? axis + out->rank() : axis);
  const int64_t elem = static_cast<int64_t>(DTypeSize(y->dtype()));
  // Each of the outer rows of y holds one slab of every value in turn.
  const int64_t slab = out->DimProduct(a + 1, out->rank()) * elem;
  const int64_t n = ctx.num_inputs();
  std::vector<RowPiece> pieces;
  for (int i = 0; i < n; ++i) {
    pieces.push_back({static_cast<char*>(y->raw_data()) + i * slab, n * slab,
                      static_cast<const char*>(ctx.input(i).raw_data()), slab,
                      slab});
  }
  CopyRowPieces(ctx, out->DimProduct(0, a), pieces);
  return absl::OkStatus();
}

REGISTER_OP("Stack")
    .VariadicInput("values")
    .Attr("axis", int64_t{0})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      if (c.num_inputs() == 0) {
        return absl::InvalidArgumentError("needs at least one value");
      }
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      for (int i = 1; i < c.num_inputs(); ++i) {
        RETURN_IF_ERROR(c.ExpectSameDType(i, 0));
      }
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      std::vector<TensorShape> shapes;
      for (int i = 0; i < c.num_inputs(); ++i) {
        shapes.push_back(c.input_shape(i));
      }
      ASSIGN_OR_RETURN(TensorShape out, StackShape(shapes, axis, [&c](int i) {
                         return c.InputName(i);
                       }));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel(StackKernel)
    // y[..., i, ...] = values[i];  dvalues[i] = dy[..., i, ...], a strided
    // slice that drops the axis.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const int rank = op.input(0).shape().rank() + 1;
      const int64_t axis = op.attr<int64_t>("axis");
      const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
      std::vector<int64_t> begin(a + 1, 0), end(a + 1, 0), strides(a + 1, 1);
      StridedSliceOptions o;
      o.begin_mask = (int64_t{1} << a) - 1;
      o.end_mask = (int64_t{1} << a) - 1;
      o.shrink_axis_mask = int64_t{1} << a;
      for (int i = 0; i < op.num_inputs(); ++i) {
        begin[a] = i;
        end[a] = i + 1;
        dx->push_back(StridedSlice(s, dy[0], begin, end, strides, o));
      }
      return absl::OkStatus();
    });

}  // namespace

Output Stack(const Scope& scope, const std::vector<Output>& values,
             int64_t axis) {
  return scope.AddNode("Stack", values, {{"axis", axis}});
}

}  // namespace ipuflow::ops
