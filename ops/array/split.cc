#include "ops/array/split.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ops/array/concat.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/fill.h"

namespace ipuflow::ops {
namespace {

// The shape of each piece (-1 where unknown) and the normalised axis.
absl::StatusOr<TensorShape> PieceShape(const TensorShape& x, int64_t num_split,
                                       int64_t axis,
                                       const std::string& input_name,
                                       int* normalized_axis) {
  if (x.rank() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(input_name, " is a scalar; Split needs rank >= 1"));
  }
  ASSIGN_OR_RETURN(*normalized_axis, NormalizeAxis(axis, x.rank()));
  const int a = *normalized_axis;
  // Each piece is an output of the node: bound their number.
  constexpr int64_t kMaxSplit = 1 << 16;
  if (num_split < 1 || num_split > kMaxSplit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_split is ", num_split, "; it must be in [1, ", kMaxSplit, "]"));
  }
  TensorShape piece = x;
  if (x.dim(a) >= 0) {
    if (x.dim(a) % num_split != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dimension ", a, " of ", input_name, " (shape ",
                       x.DebugString(), ") has size ", x.dim(a),
                       ", which is not divisible by num_split ", num_split));
    }
    piece.set_dim(a, x.dim(a) / num_split);
  }
  return piece;
}

absl::Status SplitKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t n = ctx.attr<int64_t>("num_split");
  int axis;
  absl::StatusOr<TensorShape> piece =
      PieceShape(x.shape(), n, ctx.attr<int64_t>("axis"), "input 'x'", &axis);
  if (!piece.ok()) return ctx.InvalidArgument(piece.status().message());
  const int64_t elem = static_cast<int64_t>(DTypeSize(x.dtype()));
  const int64_t row = piece->DimProduct(axis, piece->rank()) * elem;
  std::vector<RowPiece> pieces;
  for (int k = 0; k < n; ++k) {
    ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(k, *piece));
    pieces.push_back({static_cast<char*>(y->raw_data()), row,
                      static_cast<const char*>(x.raw_data()) + k * row, n * row,
                      row});
  }
  CopyRowPieces(ctx, x.shape().DimProduct(0, axis), pieces);
  return absl::OkStatus();
}

REGISTER_OP("Split")
    .Input("x")
    .RequiredAttr("num_split", AttrType::kInt)
    .Attr("axis", int64_t{0})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(int64_t n, c.attr<int64_t>("num_split"));
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      int a;
      ASSIGN_OR_RETURN(TensorShape piece, PieceShape(c.input_shape(0), n, axis,
                                                     c.InputName(0), &a));
      for (int k = 0; k < n; ++k) c.set_output(k, c.input_dtype(0), piece);
      return absl::OkStatus();
    })
    .SetKernel(SplitKernel)
    // (y_0, ..., y_n) = split(x);  dx = concat(dy_0, ..., dy_n) along axis,
    // with zeros for pieces that received no gradient
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      std::vector<Output> pieces;
      for (int k = 0; k < op.num_outputs(); ++k) {
        pieces.push_back(dy[k].valid()
                             ? dy[k]
                             : ZerosLike(s, Output(const_cast<Node*>(&op), k)));
      }
      dx->push_back(Concat(s, pieces, op.attr<int64_t>("axis")));
      return absl::OkStatus();
    });

}  // namespace

std::vector<Output> Split(const Scope& scope, Output x, int64_t num_split,
                          int64_t axis) {
  Node* n =
      scope.AddNode("Split", {x}, {{"num_split", num_split}, {"axis", axis}});
  // On error: num_split invalid outputs (clamped, num_split may be bogus).
  std::vector<Output> out(
      n == nullptr ? std::clamp<int64_t>(num_split, 0, int64_t{1} << 16) : 0);
  for (int k = 0; n != nullptr && k < n->num_outputs(); ++k) {
    out.push_back(Output(n, k));
  }
  return out;
}

}  // namespace ipuflow::ops
