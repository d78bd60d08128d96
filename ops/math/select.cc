#include "ops/math/select.h"

#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/vector_kernels.h"

namespace ipuflow::ops {
namespace {

// The shape cond, x and y broadcast to; the error names all three.
absl::StatusOr<TensorShape> SelectShape(const TensorShape& c,
                                        const TensorShape& x,
                                        const TensorShape& y) {
  absl::StatusOr<TensorShape> cx = BroadcastShapes(c, x);
  absl::StatusOr<TensorShape> out =
      cx.ok() ? BroadcastShapes(*cx, y) : cx.status();
  if (!out.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 'cond' ", c.DebugString(), ", input 'x' ", x.DebugString(),
        " and input 'y' ", y.DebugString(), " do not broadcast together (",
        out.status().message(), ")"));
  }
  return out;
}

// Calls k with `n` values at p: the array at p when `full`, else p[0]
// repeated (a broadcast operand).
template <typename T, typename K>
void WithRow(const T* p, int64_t n, bool full, K&& k) {
  if (full) {
    k(ConstArrayMap<T>(p, n));
  } else {
    k(ArrayX<T>::Constant(n, *p));
  }
}

template <typename T>
absl::Status SelectKernel(KernelContext& ctx) {
  const Tensor &c = ctx.input(0), &x = ctx.input(1), &y = ctx.input(2);
  absl::StatusOr<TensorShape> shape =
      SelectShape(c.shape(), x.shape(), y.shape());
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  const TensorShape& out = *shape;
  ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(0, out));
  const bool* pc = c.data<bool>();
  const T *px = x.data<T>(), *py = y.data<T>();
  T* pz = z->data<T>();
  const int64_t n = z->NumElements();
  if (n == 0) return absl::OkStatus();
  if (c.shape() == out && x.shape() == out && y.shape() == out) {
    if constexpr (sizeof(T) == 4 && std::is_trivially_copyable_v<T>) {
      // float and int32 bit for bit, AVX2 or AVX-512 (vector_kernels.h):
      // Eigen's select over a bool array runs one scalar at a time.
      const auto select4 = UsedVectorKernels().select4;
      ctx.ParallelFor(n, 1.0, [&](int64_t b, int64_t e) {
        select4(pc + b, px + b, py + b, pz + b, e - b);
      });
      return absl::OkStatus();
    }
    ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
      ArrayMap<T>(pz + b, e - b) = ConstArrayMap<bool>(pc + b, e - b)
                                       .select(ConstArrayMap<T>(px + b, e - b),
                                               ConstArrayMap<T>(py + b, e - b));
    });
    return absl::OkStatus();
  }
  // Rows of the innermost output dimension (rank >= 1 here: scalars all
  // have the output's shape).
  const int rank = out.rank();
  const int64_t inner = out.dim(rank - 1);
  const std::vector<int64_t> sc = BroadcastStrides(c.shape(), out);
  const std::vector<int64_t> sx = BroadcastStrides(x.shape(), out);
  const std::vector<int64_t> sy = BroadcastStrides(y.shape(), out);
  const bool fc = sc[rank - 1] != 0, fx = sx[rank - 1] != 0,
             fy = sy[rank - 1] != 0;
  ctx.ParallelFor(n / inner, kCwiseCost * inner, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t oc = 0, ox = 0, oy = 0, rem = r;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t i = rem % out.dim(d);
        rem /= out.dim(d);
        oc += i * sc[d];
        ox += i * sx[d];
        oy += i * sy[d];
      }
      ArrayMap<T> zr(pz + r * inner, inner);
      WithRow(pc + oc, inner, fc, [&](const auto& cr) {
        WithRow(px + ox, inner, fx, [&](const auto& xr) {
          WithRow(py + oy, inner, fy,
                  [&](const auto& yr) { zr = cr.select(xr, yr); });
        });
      });
    }
  });
  return absl::OkStatus();
}

REGISTER_OP("Select")
    .Input("cond")
    .Input("x")
    .Input("y")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectDType(0, DType::kBool));
      RETURN_IF_ERROR(c.ExpectSameDType(1, 2));
      if (c.input_dtype(1) == DType::kResource) {
        return absl::InvalidArgumentError(
            "inputs 'x' and 'y' are resource handles; select between values");
      }
      ASSIGN_OR_RETURN(
          TensorShape out,
          SelectShape(c.input_shape(0), c.input_shape(1), c.input_shape(2)));
      c.set_output(0, c.input_dtype(1), out);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_ALL(ctx.input(1).dtype(), return SelectKernel<T>(ctx),
                         return UnsupportedDType(ctx, ctx.input(1).dtype()));
    })
    // z = cond ? x : y;  dz/dx = [cond];  dz/dy = [!cond];  cond: none
    // (x and y gradients summed over their broadcast dims)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      const Output cond = op.input(0);
      const Output zeros = ZerosLike(s, dz[0]);
      dx->push_back(Output());
      dx->push_back(
          ReduceGradTo(s, Select(s, cond, dz[0], zeros), op.input(1)));
      dx->push_back(
          ReduceGradTo(s, Select(s, cond, zeros, dz[0]), op.input(2)));
      return absl::OkStatus();
    });

}  // namespace

Output Select(const Scope& scope, Output cond, Output x, Output y) {
  return scope.AddNode("Select", {cond, x, y});
}

Output Where(const Scope& scope, Output cond, Output x, Output y) {
  return Select(scope, cond, x, y);
}

}  // namespace ipuflow::ops
