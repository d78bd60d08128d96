#include "ops/math/tile.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/copy_kernels.h"
#include "ops/array/reshape.h"
#include "ops/math/reduce_sum.h"

namespace ipuflow::ops {
namespace {

absl::StatusOr<TensorShape> TiledShape(const TensorShape& x,
                                       absl::Span<const int64_t> multiples,
                                       const std::string& input_name) {
  if (static_cast<int>(multiples.size()) != x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("multiples ", IntListString(multiples), " has ",
                     multiples.size(), " values; ", input_name, " of shape ",
                     x.DebugString(), " needs ", x.rank()));
  }
  TensorShape out;
  for (int d = 0; d < x.rank(); ++d) {
    const int64_t m = multiples[d];
    if (m < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("multiples ", IntListString(multiples),
                       " has a negative value for ", "dimension ", d, " of ",
                       input_name, " (shape ", x.DebugString(), ")"));
    }
    if (x.dim(d) < 0) {
      out.AddDim(m == 0 ? 0 : -1);
      continue;
    }
    if (m != 0 && x.dim(d) > kMaxTensorElements / m) {
      return absl::InvalidArgumentError(
          absl::StrCat("multiples ", IntListString(multiples), " tile ",
                       input_name, " of shape ", x.DebugString(), " past ",
                       kMaxTensorElements, " elements in dimension ", d));
    }
    out.AddDim(x.dim(d) * m);
  }
  absl::Status valid = ValidateShape(out);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "multiples ", IntListString(multiples), " for ", input_name,
        " of shape ", x.DebugString(), ": ", valid.message()));
  }
  return out;
}

absl::Status TileKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& multiples = ctx.attr<std::vector<int64_t>>("multiples");
  absl::StatusOr<TensorShape> shape =
      TiledShape(x.shape(), multiples, "input 'x'");
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, *shape));
  if (y->NumElements() == 0) return absl::OkStatus();
  // y viewed as [m_0, d_0, m_1, d_1, ...]: source strides 0 over the m's.
  const std::vector<int64_t> xs = RowMajorStrides(x.shape());
  std::vector<int64_t> dims, src;
  for (int d = 0; d < x.rank(); ++d) {
    dims.push_back(multiples[d]);
    dims.push_back(x.dim(d));
    src.push_back(0);
    src.push_back(xs[d]);
  }
  if (dims.empty()) {  // A scalar.
    std::memcpy(y->raw_data(), x.raw_data(), DTypeSize(x.dtype()));
    return absl::OkStatus();
  }
  StridedCopy(ctx, dims, y->raw_data(), RowMajorStrides(TensorShape(dims)),
              x.raw_data(), src, DTypeSize(x.dtype()));
  return absl::OkStatus();
}

REGISTER_OP("Tile")
    .Input("x")
    .RequiredAttr("multiples", AttrType::kIntList)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(auto multiples,
                       c.attr<std::vector<int64_t>>("multiples"));
      ASSIGN_OR_RETURN(TensorShape out,
                       TiledShape(c.input_shape(0), multiples, c.InputName(0)));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel(TileKernel)
    // y = x repeated;  dx = the sum of dy's copies: dy as [m_0, d_0, ...]
    // summed over the m axes.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const TensorShape& x = op.input(0).shape();
      if (!x.IsFullyDefined()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Tile '", op.name(), "': its gradient needs input 'x''s shape at ",
            "build time, got ", x.DebugString()));
      }
      const auto& multiples = op.attr<std::vector<int64_t>>("multiples");
      std::vector<int64_t> dims, axes;
      for (int d = 0; d < x.rank(); ++d) {
        axes.push_back(2 * d);
        dims.push_back(multiples[d]);
        dims.push_back(x.dim(d));
      }
      dx->push_back(ReduceSum(s, Reshape(s, dy[0], TensorShape(dims)), axes));
      return absl::OkStatus();
    });

}  // namespace

Output Tile(const Scope& scope, Output x,
            const std::vector<int64_t>& multiples) {
  return scope.AddNode("Tile", {x}, {{"multiples", multiples}});
}

}  // namespace ipuflow::ops
