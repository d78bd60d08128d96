#include "ops/math/mat_mul.h"

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/gemm.h"
#include "ops/math/partials_type.h"

namespace ipuflow::ops {
namespace {

// op(a) is [m,k], op(b) is [k2,n]: the dims of the product, unknown = -1.
GemmShape ProductDims(const TensorShape& a, bool ta, const TensorShape& b,
                      bool tb, int64_t* k2) {
  GemmShape s;
  s.m = a.dim(ta ? 1 : 0);
  s.k = a.dim(ta ? 0 : 1);
  *k2 = b.dim(tb ? 1 : 0);
  s.n = b.dim(tb ? 0 : 1);
  s.transpose_a = ta;
  s.transpose_b = tb;
  return s;
}

absl::Status MatMulKernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  const bool ta = ctx.attr<bool>("transpose_a");
  const bool tb = ctx.attr<bool>("transpose_b");
  if (a.rank() != 2 || b.rank() != 2) {
    return ctx.InvalidArgument("inputs must be matrices, got ",
                               a.shape().DebugString(), " x ",
                               b.shape().DebugString());
  }
  int64_t k2;
  GemmShape s = ProductDims(a.shape(), ta, b.shape(), tb, &k2);
  s.half_partials = HalfPartials(ctx.node());
  if (s.k != k2) {
    return ctx.InvalidArgument(InnerDimsDiffer(a.shape(), ta, b.shape(), tb));
  }
  ASSIGN_OR_RETURN(Tensor * c, ctx.allocate_output(0, TensorShape({s.m, s.n})));
  const int64_t zero = 0;
  return BatchedGemm(ctx, a, b, s, {&zero, 1}, {&zero, 1}, c);
}

REGISTER_OP("MatMul")
    .Input("a")
    .Input("b")
    .Attr("transpose_a", false)
    .Attr("transpose_b", false)
    .Attr(kPartialsTypeAttr, kPartialsFloat)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectRank(0, 2));
      RETURN_IF_ERROR(c.ExpectRank(1, 2));
      RETURN_IF_ERROR(c.ExpectFloat(0));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(CheckPartialsType(c));
      ASSIGN_OR_RETURN(bool ta, c.attr<bool>("transpose_a"));
      ASSIGN_OR_RETURN(bool tb, c.attr<bool>("transpose_b"));
      int64_t k2;
      const GemmShape s =
          ProductDims(c.input_shape(0), ta, c.input_shape(1), tb, &k2);
      if (s.k >= 0 && k2 >= 0 && s.k != k2) {
        return absl::InvalidArgumentError(
            InnerDimsDiffer(c.input_shape(0), ta, c.input_shape(1), tb));
      }
      c.set_output(0, c.input_dtype(0), TensorShape({s.m, s.n}));
      return absl::OkStatus();
    })
    .SetKernel(MatMulKernel)
    // c = op(a) op(b);  with g = dc:
    //   c = a b:      da = g b^T     db = a^T g
    //   c = a^T b:    da = b g^T     db = a g
    //   c = a b^T:    da = g b       db = g^T a
    //   c = a^T b^T:  da = b^T g^T   db = g^T a^T
    // The gradient products keep the forward op's partials_type.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dc,
                    std::vector<Output>* dx) {
      const Output a = op.input(0), b = op.input(1), g = dc[0];
      const bool ta = op.attr<bool>("transpose_a");
      const bool tb = op.attr<bool>("transpose_b");
      const std::string& partials = op.attr<std::string>(kPartialsTypeAttr);
      auto mm = [&](Output x, Output y, bool tx, bool ty) {
        return MatMul(s, x, y, {tx, ty, partials});
      };
      if (!ta && !tb) {
        dx->push_back(mm(g, b, false, true));
        dx->push_back(mm(a, g, true, false));
      } else if (ta && !tb) {
        dx->push_back(mm(b, g, false, true));
        dx->push_back(mm(a, g, false, false));
      } else if (!ta && tb) {
        dx->push_back(mm(g, b, false, false));
        dx->push_back(mm(g, a, true, false));
      } else {
        dx->push_back(mm(b, g, true, true));
        dx->push_back(mm(g, a, true, true));
      }
      return absl::OkStatus();
    });

}  // namespace

Output MatMul(const Scope& scope, Output a, Output b,
              const MatMulOptions& options) {
  return scope.AddNode("MatMul", {a, b},
                       {{"transpose_a", options.transpose_a},
                        {"transpose_b", options.transpose_b},
                        {kPartialsTypeAttr, options.partials_type}});
}

Output MatMul(const Scope& scope, Output a, Output b, bool transpose_a,
              bool transpose_b) {
  return MatMul(scope, a, b, MatMulOptions{transpose_a, transpose_b});
}

}  // namespace ipuflow::ops
