// GCC 12 warns -Wuninitialized inside its own avx512fintrin.h when Eigen's
// AVX-512 kernels are inlined here (GCC bug 105593, fixed in GCC 13). The
// pragma must come before the headers that pull those intrinsics in.
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "ops/math/pow.h"

#include <cmath>

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/equal.h"
#include "ops/math/greater.h"
#include "ops/math/log.h"
#include "ops/math/mul.h"
#include "ops/math/select.h"
#include "ops/math/sub.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

// The C library's pow for every element (no packet form: Eigen's
// vectorised pow and its scalar tail can differ in the last bit, so an
// element's result would depend on where it sits).
struct PowFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    using T = typename A::Scalar;
    return a.binaryExpr(b, [](T u, T v) -> T {
      return static_cast<T>(
          std::pow(static_cast<float>(u), static_cast<float>(v)));
    });
  }
};

REGISTER_OP("Pow")
    .Input("x")
    .Input("y")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(shape_fns::BroadcastBinary(c));
      return c.ExpectFloat(0);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_FLOAT(ctx.input(0).dtype(),
                           return (BinaryKernel<T, T>(ctx, PowFn())),
                           return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // z = x^y;  dz/dx = y * x^(y-1), taken as 0 where y = 0 (PyTorch's
    // rule: the formula gives 0 * inf = NaN at x = 0, y = 0; TensorFlow
    // gives NaN there);  dz/dy = z * ln(x), taken as 0 where x <= 0 (ln
    // undefined; numpy and TF do the same).
    // (each summed over its broadcast dims)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      const Output x = op.input(0), y = op.input(1);
      const Output x_pow = Pow(s, x, Sub(s, y, OnesLike(s, y)));
      const Output y_zeros = ZerosLike(s, y);
      const Output dz_dx =
          Select(s, Equal(s, y, y_zeros), y_zeros, Mul(s, y, x_pow));
      dx->push_back(ReduceGradTo(s, Mul(s, dz[0], dz_dx), x));
      const Output zeros = ZerosLike(s, x);
      const Output log_x = Select(s, Greater(s, x, zeros), Log(s, x), zeros);
      dx->push_back(
          ReduceGradTo(s, Mul(s, dz[0], Mul(s, OutputOf(op), log_x)), y));
      return absl::OkStatus();
    });

}  // namespace

Output Pow(const Scope& scope, Output x, Output y) {
  return scope.AddNode("Pow", {x, y});
}

}  // namespace ipuflow::ops
