#include "ops/array/concat.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/fill.h"
#include "ops/array/slice.h"

namespace ipuflow::ops {
namespace {

using NameFn = std::function<std::string(int)>;

struct ConcatGeometry {
  int axis;
  TensorShape out;  // -1 where unknown.
};

// The shape of concatenating `shapes` along `axis`, or an error naming the
// first input that does not fit (as `name(i)`) and the shapes involved.
absl::StatusOr<ConcatGeometry> ConcatShape(absl::Span<const TensorShape> shapes,
                                           int64_t axis, const NameFn& name) {
  const TensorShape& first = shapes[0];
  if (first.rank() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(0), " is a scalar; Concat needs rank >= 1 (Reshape to [1])"));
  }
  ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, first.rank()));
  ConcatGeometry g{a, first};
  std::vector<int> source(first.rank(), 0);  // Input that fixed each dim.
  for (int i = 1; i < static_cast<int>(shapes.size()); ++i) {
    const TensorShape& s = shapes[i];
    auto mismatch = [&](int d) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(i), " has shape ", s.DebugString(), " but ", name(source[d]),
          " has shape ", shapes[source[d]].DebugString(),
          "; all dimensions but the concat axis ", a, " must match"));
    };
    if (s.rank() != first.rank()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(i), " has shape ", s.DebugString(), " but ", name(0),
          " has shape ", first.DebugString(), "; ranks must match"));
    }
    for (int d = 0; d < s.rank(); ++d) {
      if (d == a) {
        if (g.out.dim(d) < 0 || s.dim(d) < 0) {
          g.out.set_dim(d, -1);
          continue;
        }
        absl::StatusOr<int64_t> sum = PaddedDim(g.out.dim(d), s.dim(d), 0);
        if (!sum.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "concatenating ", name(i), " (shape ", s.DebugString(),
              ") along axis ", a, ": ", sum.status().message()));
        }
        g.out.set_dim(d, *sum);
      } else if (s.dim(d) >= 0 && g.out.dim(d) < 0) {
        g.out.set_dim(d, s.dim(d));
        source[d] = i;
      } else if (s.dim(d) >= 0 && s.dim(d) != g.out.dim(d)) {
        return mismatch(d);
      }
    }
  }
  return g;
}

std::vector<TensorShape> InputShapes(const ShapeContext& c, int first) {
  std::vector<TensorShape> shapes;
  for (int i = first; i < c.num_inputs(); ++i)
    shapes.push_back(c.input_shape(i));
  return shapes;
}

std::vector<TensorShape> InputShapes(const KernelContext& ctx, int first) {
  std::vector<TensorShape> shapes;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    shapes.push_back(ctx.input(i).shape());
  }
  return shapes;
}

// How kernels name values[i] (shape functions use ShapeContext::InputName).
std::string ValueName(int i) { return absl::StrCat("input 'values[", i, "]'"); }

// Row pieces of values[i] within rows of the concatenated tensor `whole`:
// each of the outer = prod(dims[:axis]) rows holds every value's slab.
// `to_whole` picks the copy direction (Concat) or its reverse (ConcatGrad).
std::vector<RowPiece> Pieces(const Tensor& whole,
                             const std::vector<const Tensor*>& parts, int axis,
                             bool to_whole) {
  const int64_t elem = static_cast<int64_t>(DTypeSize(whole.dtype()));
  const int64_t whole_row = whole.shape().DimProduct(axis, whole.rank()) * elem;
  std::vector<RowPiece> pieces;
  int64_t offset = 0;
  for (const Tensor* p : parts) {
    const int64_t row = p->shape().DimProduct(axis, p->rank()) * elem;
    char* w = static_cast<char*>(whole.raw_data()) + offset;
    char* q = static_cast<char*>(p->raw_data());
    pieces.push_back(to_whole ? RowPiece{w, whole_row, q, row, row}
                              : RowPiece{q, row, w, whole_row, row});
    offset += row;
  }
  return pieces;
}

absl::Status ConcatKernel(KernelContext& ctx) {
  absl::StatusOr<ConcatGeometry> g =
      ConcatShape(InputShapes(ctx, 0), ctx.attr<int64_t>("axis"), ValueName);
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, g->out));
  std::vector<const Tensor*> parts;
  for (int i = 0; i < ctx.num_inputs(); ++i) parts.push_back(&ctx.input(i));
  CopyRowPieces(ctx, g->out.DimProduct(0, g->axis),
                Pieces(*y, parts, g->axis, /*to_whole=*/true));
  return absl::OkStatus();
}

absl::Status ConcatGradKernel(KernelContext& ctx) {
  absl::StatusOr<ConcatGeometry> g =
      ConcatShape(InputShapes(ctx, 1), ctx.attr<int64_t>("axis"), ValueName);
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  const Tensor& dy = ctx.input(0);
  if (dy.shape() != g->out) {
    return ctx.InvalidArgument(
        "input 'dy' has shape ", dy.shape().DebugString(),
        " but the values concatenate to ", g->out.DebugString());
  }
  std::vector<const Tensor*> parts;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(Tensor * part,
                     ctx.allocate_output(i - 1, ctx.input(i).shape()));
    parts.push_back(part);
  }
  CopyRowPieces(ctx, g->out.DimProduct(0, g->axis),
                Pieces(dy, parts, g->axis, /*to_whole=*/false));
  return absl::OkStatus();
}

// y = concat(x_0, ..., x_n) along axis;  dx_i = dy[.., o_i : o_i + n_i, ..]
absl::Status ConcatGradient(const Scope& s, const Node& op,
                            absl::Span<const Output> dy,
                            std::vector<Output>* dx) {
  const int rank = op.input(0).shape().rank();
  const int axis = static_cast<int>((op.attr<int64_t>("axis") + rank) % rank);
  bool sizes_known = true;
  for (const Output& x : op.inputs()) sizes_known &= x.shape().dim(axis) >= 0;
  if (!sizes_known) {
    *dx = ConcatGrad(s, dy[0], op.inputs(), axis);
    return absl::OkStatus();
  }
  std::vector<int64_t> begin(rank, 0), size(rank, -1);
  for (const Output& x : op.inputs()) {
    size[axis] = x.shape().dim(axis);
    dx->push_back(Slice(s, dy[0], begin, size));
    begin[axis] += size[axis];
  }
  return absl::OkStatus();
}

REGISTER_OP("Concat")
    .VariadicInput("values")
    .RequiredAttr("axis", AttrType::kInt)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      if (c.num_inputs() == 0) {
        return absl::InvalidArgumentError("needs at least one input");
      }
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      for (int i = 1; i < c.num_inputs(); ++i) {
        RETURN_IF_ERROR(c.ExpectSameDType(i, 0));
      }
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      ASSIGN_OR_RETURN(ConcatGeometry g,
                       ConcatShape(InputShapes(c, 0), axis,
                                   [&c](int i) { return c.InputName(i); }));
      c.set_output(0, c.input_dtype(0), g.out);
      return absl::OkStatus();
    })
    .SetKernel(ConcatKernel)
    .SetGradient(ConcatGradient);

REGISTER_OP("ConcatGrad")
    .Input("dy")
    .VariadicInput("values")
    .RequiredAttr("axis", AttrType::kInt)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      if (c.num_inputs() < 2) {
        return absl::InvalidArgumentError("needs dy and at least one value");
      }
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      ASSIGN_OR_RETURN(ConcatGeometry g,
                       ConcatShape(InputShapes(c, 1), axis,
                                   [&c](int i) { return c.InputName(i + 1); }));
      if (!c.input_shape(0).IsCompatibleWith(g.out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            c.InputName(0), " has shape ", c.input_shape(0).DebugString(),
            " but the values concatenate to ", g.out.DebugString()));
      }
      for (int i = 1; i < c.num_inputs(); ++i) {
        TensorShape piece = c.input_shape(i);
        for (int d = 0; d < piece.rank(); ++d) {
          if (d != g.axis && piece.dim(d) < 0) {
            piece.set_dim(d, c.input_shape(0).dim(d));
          }
        }
        c.set_output(i - 1, c.input_dtype(0), piece);
      }
      return absl::OkStatus();
    })
    .SetKernel(ConcatGradKernel)
    // (dx_0, ..., dx_n) = split(dy);  d(dy) = concat(ddx_i, or zeros)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      std::vector<Output> pieces;
      for (int k = 0; k < op.num_outputs(); ++k) {
        pieces.push_back(dz[k].valid()
                             ? dz[k]
                             : ZerosLike(s, Output(const_cast<Node*>(&op), k)));
      }
      dx->push_back(Concat(s, pieces, op.attr<int64_t>("axis")));
      dx->resize(op.num_inputs());  // No gradient for the values' shapes.
      return absl::OkStatus();
    });

}  // namespace

Output Concat(const Scope& scope, const std::vector<Output>& values,
              int64_t axis) {
  return scope.AddNode("Concat", values, {{"axis", axis}});
}

std::vector<Output> ConcatGrad(const Scope& scope, Output dy,
                               const std::vector<Output>& values,
                               int64_t axis) {
  std::vector<Output> inputs = {dy};
  inputs.insert(inputs.end(), values.begin(), values.end());
  Node* n = scope.AddNode("ConcatGrad", inputs, {{"axis", axis}});
  std::vector<Output> out(values.size());
  for (size_t i = 0; n != nullptr && i < values.size(); ++i) {
    out[i] = Output(n, static_cast<int>(i));
  }
  return out;
}

}  // namespace ipuflow::ops
