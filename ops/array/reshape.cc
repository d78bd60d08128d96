#include "ops/array/reshape.h"

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {
namespace {

// Resolves the -1 in `target` against `in`; error when counts differ.
absl::StatusOr<TensorShape> ResolveShape(const TensorShape& in,
                                         const TensorShape& target) {
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < target.rank(); ++i) {
    if (target.dim(i) == -1) {
      if (infer >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape ", target.DebugString(), " has more than one -1"));
      }
      infer = i;
    } else if (target.dim(i) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", target.DebugString(), " has a negative size"));
    }
  }
  // The product of the known sizes, zero-aware and saturating (the target
  // passed ValidateShape, so a saturated product means an error below).
  {
    TensorShape known_dims = target;
    if (infer >= 0) known_dims.set_dim(infer, 1);
    known = known_dims.num_elements();
  }
  TensorShape out = target;
  const int64_t n = in.num_elements();
  if (n < 0) {
    // The input is not fully known: only check what can be checked.
    if (infer < 0 && in.IsFullyDefined()) return out;
    return out;
  }
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot reshape ", in.DebugString(), " (", n,
                       " elements) to ", target.DebugString()));
    }
    out.set_dim(infer, n / known);
  } else if (known != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reshape ", in.DebugString(), " (", n, " elements) to ",
        target.DebugString(), " (", known, " elements)"));
  }
  return out;
}

REGISTER_OP("Reshape")
    .Input("x")
    .RequiredAttr("shape", AttrType::kShape)
    .Forwards(0, 0)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(TensorShape target, c.attr<TensorShape>("shape"));
      ASSIGN_OR_RETURN(TensorShape out, ResolveShape(c.input_shape(0), target));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      absl::StatusOr<TensorShape> shape =
          ResolveShape(ctx.input(0).shape(), ctx.attr<TensorShape>("shape"));
      if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
      ASSIGN_OR_RETURN(Tensor out, ctx.input(0).Reshaped(*shape));
      ctx.set_output(0, std::move(out));
      return absl::OkStatus();
    })
    // y = reshape(x);  dy/dx = reshape(dy) back to x's shape
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ReshapeLike(s, dy[0], op.input(0)));
      return absl::OkStatus();
    });

REGISTER_OP("ReshapeLike")
    .Input("x")
    .Input("like")
    .Forwards(0, 0)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      const int64_t a = c.input_shape(0).num_elements();
      const int64_t b = c.input_shape(1).num_elements();
      if (a >= 0 && b >= 0 && a != b) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot reshape ", c.input_shape(0).DebugString(),
                         " to ", c.input_shape(1).DebugString()));
      }
      c.set_output(0, c.input_dtype(0), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      absl::StatusOr<Tensor> out = ctx.input(0).Reshaped(ctx.input(1).shape());
      if (!out.ok()) return ctx.InvalidArgument(out.status().message());
      ctx.set_output(0, *std::move(out));
      return absl::OkStatus();
    })
    // y = reshape(x, shape(like));  dy/dx = reshape(dy) to x's shape
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ReshapeLike(s, dy[0], op.input(0)));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output Reshape(const Scope& scope, Output x, const TensorShape& shape) {
  return scope.AddNode("Reshape", {x}, {{"shape", shape}});
}

Output ReshapeLike(const Scope& scope, Output x, Output like) {
  return scope.AddNode("ReshapeLike", {x, like});
}

}  // namespace ipuflow::ops
