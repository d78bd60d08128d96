#include "ops/math/batch_mat_mul.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/gemm.h"
#include "ops/math/partials_type.h"

namespace ipuflow::ops {
namespace {

TensorShape BatchDims(const TensorShape& s) {
  return TensorShape(s.dims().subspan(0, s.rank() - 2));
}

// The output shape for x and y (rank >= 2 each), or an error naming both.
absl::StatusOr<TensorShape> OutputShape(const TensorShape& x, bool adj_x,
                                        const TensorShape& y, bool adj_y) {
  const int rx = x.rank(), ry = y.rank();
  const int64_t m = x.dim(adj_x ? rx - 1 : rx - 2);
  const int64_t k = x.dim(adj_x ? rx - 2 : rx - 1);
  const int64_t k2 = y.dim(adj_y ? ry - 1 : ry - 2);
  const int64_t n = y.dim(adj_y ? ry - 2 : ry - 1);
  if (k >= 0 && k2 >= 0 && k != k2) {
    return absl::InvalidArgumentError(InnerDimsDiffer(x, adj_x, y, adj_y));
  }
  absl::StatusOr<TensorShape> batch =
      BroadcastShapes(BatchDims(x), BatchDims(y));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch dimensions of ", x.DebugString(), " x ", y.DebugString(),
        " do not broadcast (", batch.status().message(), ")"));
  }
  TensorShape out = *batch;
  out.AddDim(m);
  out.AddDim(n);
  return out;
}

// The matrix of `in` (batch dims `in_batch`) used for each output matrix.
std::vector<int64_t> MatrixIndex(const TensorShape& in_batch,
                                 const TensorShape& out_batch) {
  const int64_t count = out_batch.num_elements();
  const std::vector<int64_t> strides = BroadcastStrides(in_batch, out_batch);
  std::vector<int64_t> index(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t off = 0, rem = i;
    for (int d = out_batch.rank() - 1; d >= 0; --d) {
      off += (rem % out_batch.dim(d)) * strides[d];
      rem /= out_batch.dim(d);
    }
    index[i] = off;
  }
  return index;
}

absl::Status BatchMatMulKernel(KernelContext& ctx) {
  const Tensor &x = ctx.input(0), &y = ctx.input(1);
  const bool adj_x = ctx.attr<bool>("adj_x"), adj_y = ctx.attr<bool>("adj_y");
  if (x.rank() < 2 || y.rank() < 2) {
    return ctx.InvalidArgument("inputs must have rank >= 2, got ",
                               x.shape().DebugString(), " x ",
                               y.shape().DebugString());
  }
  absl::StatusOr<TensorShape> shape =
      OutputShape(x.shape(), adj_x, y.shape(), adj_y);
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(0, *shape));
  const int rz = shape->rank(), rx = x.rank();
  GemmShape s;
  s.m = shape->dim(rz - 2);
  s.n = shape->dim(rz - 1);
  s.k = x.dim(adj_x ? rx - 2 : rx - 1);
  s.transpose_a = adj_x;
  s.transpose_b = adj_y;
  s.half_partials = HalfPartials(ctx.node());
  const TensorShape out_batch = BatchDims(*shape);
  return BatchedGemm(ctx, x, y, s, MatrixIndex(BatchDims(x.shape()), out_batch),
                     MatrixIndex(BatchDims(y.shape()), out_batch), z);
}

REGISTER_OP("BatchMatMul")
    .Input("x")
    .Input("y")
    .Attr("adj_x", false)
    .Attr("adj_y", false)
    .Attr(kPartialsTypeAttr, kPartialsFloat)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      for (int i = 0; i < 2; ++i) {
        if (c.input_shape(i).rank() < 2) {
          return absl::InvalidArgumentError(
              absl::StrCat(c.InputName(i), " must have rank >= 2, got shape ",
                           c.input_shape(i).DebugString()));
        }
      }
      RETURN_IF_ERROR(c.ExpectFloat(0));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(CheckPartialsType(c));
      ASSIGN_OR_RETURN(bool adj_x, c.attr<bool>("adj_x"));
      ASSIGN_OR_RETURN(bool adj_y, c.attr<bool>("adj_y"));
      ASSIGN_OR_RETURN(TensorShape out, OutputShape(c.input_shape(0), adj_x,
                                                    c.input_shape(1), adj_y));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel(BatchMatMulKernel)
    // z = op(x) op(y) per batch entry;  with g = dz:
    //   z = x y:      dx = g y^T     dy = x^T g
    //   z = x^T y:    dx = y g^T     dy = x g
    //   z = x y^T:    dx = g y       dy = g^T x
    //   z = x^T y^T:  dx = y^T g^T   dy = g^T x^T
    // then summed over the batch dims each input was broadcast along. The
    // gradient products keep the forward op's partials_type.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      const Output x = op.input(0), y = op.input(1), g = dz[0];
      const bool adj_x = op.attr<bool>("adj_x"), adj_y = op.attr<bool>("adj_y");
      const std::string& partials = op.attr<std::string>(kPartialsTypeAttr);
      auto bmm = [&](Output a, Output b, bool ta, bool tb) {
        return BatchMatMul(s, a, b, {ta, tb, partials});
      };
      Output gx, gy;
      if (!adj_x && !adj_y) {
        gx = bmm(g, y, false, true);
        gy = bmm(x, g, true, false);
      } else if (adj_x && !adj_y) {
        gx = bmm(y, g, false, true);
        gy = bmm(x, g, false, false);
      } else if (!adj_x && adj_y) {
        gx = bmm(g, y, false, false);
        gy = bmm(g, x, true, false);
      } else {
        gx = bmm(y, g, true, true);
        gy = bmm(g, x, true, true);
      }
      dx->push_back(ReduceGradTo(s, gx, x));
      dx->push_back(ReduceGradTo(s, gy, y));
      return absl::OkStatus();
    });

}  // namespace

Output BatchMatMul(const Scope& scope, Output x, Output y,
                   const BatchMatMulOptions& options) {
  return scope.AddNode("BatchMatMul", {x, y},
                       {{"adj_x", options.adj_x},
                        {"adj_y", options.adj_y},
                        {kPartialsTypeAttr, options.partials_type}});
}

Output BatchMatMul(const Scope& scope, Output x, Output y, bool adj_x,
                   bool adj_y) {
  return BatchMatMul(scope, x, y, BatchMatMulOptions{adj_x, adj_y});
}

}  // namespace ipuflow::ops
