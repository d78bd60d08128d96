// Element-wise kernels with numpy broadcasting, shared by the unary, binary
// and comparison ops. An op supplies a functor over Eigen array expressions:
//
//   struct AddFn {
//     template <typename A, typename B>
//     auto operator()(const A& a, const B& b) const { return a + b; }
//   };
//   IPUFLOW_SWITCH_NUMERIC(ctx.input(0).dtype(),
//       return (BinaryKernel<T, T>(ctx, AddFn())), ...);
//
// Broadcasting splits the output into rows of its innermost dimension; each
// row is one Eigen expression (vectorised), rows run in parallel on the
// device's intra-op pool.
#ifndef IPUFLOW_OPS_CWISE_H_
#define IPUFLOW_OPS_CWISE_H_

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/kernel.h"

namespace ipuflow::ops {

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ArrayX = Eigen::Array<T, Eigen::Dynamic, 1>;

// Cycles per element for the cost model (element-wise ops are cheap).
inline constexpr double kCwiseCost = 4.0;

// Strides (in elements) of `in` broadcast to `out`: 0 where it broadcasts.
std::vector<int64_t> BroadcastStrides(const TensorShape& in,
                                      const TensorShape& out);

// Where row `row` of `out`'s innermost dimension starts in x and in y,
// given their BroadcastStrides.
inline std::pair<int64_t, int64_t> BroadcastRowOffsets(
    int64_t row, const TensorShape& out, const std::vector<int64_t>& sx,
    const std::vector<int64_t>& sy) {
  int64_t ox = 0, oy = 0;
  for (int d = out.rank() - 2; d >= 0; --d) {
    const int64_t i = row % out.dim(d);
    row /= out.dim(d);
    ox += i * sx[d];
    oy += i * sy[d];
  }
  return {ox, oy};
}

template <typename T, typename F>
absl::Status UnaryKernel(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  const T* px = x.data<T>();
  T* py = y->data<T>();
  if constexpr (std::is_same_v<T, half>) {
    // float16: f runs in float32 on widened chunks and each result is
    // rounded once, by the device's rounding (core/half_rounding.h), not
    // after every step of f as Eigen's half arithmetic would.
    constexpr int64_t kChunk = 1024;
    ctx.ParallelFor(x.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
      float buf[kChunk];
      for (int64_t i = b; i < e; i += kChunk) {
        const int64_t m = std::min(kChunk, e - i);
        WidenHalf(px + i, buf, m);
        ArrayMap<float>(buf, m) = f(ConstArrayMap<float>(buf, m));
        RoundToHalf(ctx, 0, buf, py + i, m, i);
      }
    });
    return absl::OkStatus();
  }
  ctx.ParallelFor(x.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    ArrayMap<T>(py + b, e - b) = f(ConstArrayMap<T>(px + b, e - b));
  });
  return absl::OkStatus();
}

// y = fn(x) through a float32 array function (ops/math/vector_math.h:
// each value computed by the same instructions wherever it sits). float32
// is computed in place of the output, float16 widened in chunks and each
// result rounded once, by the device's rounding.
using FloatArrayFn = void (*)(const float* x, float* y, int64_t n);
absl::Status UnaryArrayKernel(KernelContext& ctx, FloatArrayFn fn,
                              double cost_per_element = kCwiseCost);

// y[i] = f(x[i]) for a scalar float function f (float -> float), called
// once per element with no packet form, so a value's result does not
// depend on where it sits (the element-wise ops defined by C library
// functions: Erf, Sin, Log1p, GELU, ...). float16 is widened in chunks, f
// runs in float32 and each result is rounded once.
template <typename F>
absl::Status PointwiseKernel(KernelContext& ctx, F f,
                             double cost_per_element = 4 * kCwiseCost);

// dx[i] = g(x[i], dy[i]) for inputs x, dy of one shape (the gradient ops of
// the pointwise ops), computed like PointwiseKernel.
template <typename G>
absl::Status PointwiseGradKernel(KernelContext& ctx, G g,
                                 double cost_per_element = 4 * kCwiseCost);

// out = f(x, y) with numpy broadcasting; Out is the output element type.
template <typename T, typename Out, typename F>
absl::Status BinaryKernel(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  absl::StatusOr<TensorShape> shape = BroadcastShapes(x.shape(), y.shape());
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(0, *shape));
  const T* px = x.data<T>();
  const T* py = y.data<T>();
  Out* pz = z->data<Out>();
  const int64_t n = z->NumElements();
  if (n == 0) return absl::OkStatus();
  if (x.shape() == y.shape()) {
    ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
      ArrayMap<Out>(pz + b, e - b) =
          f(ConstArrayMap<T>(px + b, e - b), ConstArrayMap<T>(py + b, e - b));
    });
    return absl::OkStatus();
  }
  if (y.NumElements() == 1) {
    const T s = py[0];
    ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
      ArrayMap<Out>(pz + b, e - b) =
          f(ConstArrayMap<T>(px + b, e - b), ArrayX<T>::Constant(e - b, s));
    });
    return absl::OkStatus();
  }
  if (x.NumElements() == 1) {
    const T s = px[0];
    ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
      ArrayMap<Out>(pz + b, e - b) =
          f(ArrayX<T>::Constant(e - b, s), ConstArrayMap<T>(py + b, e - b));
    });
    return absl::OkStatus();
  }
  // General case: rows of the innermost output dimension.
  const TensorShape& out = *shape;
  const int rank = out.rank();
  const int64_t inner = out.dim(rank - 1);
  const int64_t rows = n / inner;
  const std::vector<int64_t> sx = BroadcastStrides(x.shape(), out);
  const std::vector<int64_t> sy = BroadcastStrides(y.shape(), out);
  ctx.ParallelFor(rows, kCwiseCost * inner, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const auto [ox, oy] = BroadcastRowOffsets(r, out, sx, sy);
      ArrayMap<Out> zr(pz + r * inner, inner);
      const bool x_full = sx[rank - 1] != 0, y_full = sy[rank - 1] != 0;
      if (x_full && y_full) {
        zr = f(ConstArrayMap<T>(px + ox, inner),
               ConstArrayMap<T>(py + oy, inner));
      } else if (x_full) {
        zr = f(ConstArrayMap<T>(px + ox, inner),
               ArrayX<T>::Constant(inner, py[oy]));
      } else if (y_full) {
        zr = f(ArrayX<T>::Constant(inner, px[ox]),
               ConstArrayMap<T>(py + oy, inner));
      } else {
        zr = f(ArrayX<T>::Constant(inner, px[ox]),
               ArrayX<T>::Constant(inner, py[oy]));
      }
    }
  });
  return absl::OkStatus();
}

inline absl::Status UnsupportedDType(const KernelContext& ctx, DType dtype) {
  return ctx.Error(absl::StatusCode::kUnimplemented, "no kernel for dtype ",
                   DTypeName(dtype));
}

template <typename F>
absl::Status PointwiseKernel(KernelContext& ctx, F f, double cost_per_element) {
  const Tensor& x = ctx.input(0);
  const DType dtype = x.dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16) {
    return UnsupportedDType(ctx, dtype);
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  constexpr int64_t kChunk = 1024;
  ctx.ParallelFor(x.NumElements(), cost_per_element, [&](int64_t b, int64_t e) {
    float buf[kChunk];
    for (int64_t i = b; i < e; i += kChunk) {
      const int64_t m = std::min(kChunk, e - i);
      const float* in = buf;
      float* out = buf;
      if (dtype == DType::kFloat32) {
        in = x.data<float>() + i;
        out = y->data<float>() + i;
      } else {
        WidenHalf(x.data<half>() + i, buf, m);
      }
      for (int64_t j = 0; j < m; ++j) out[j] = f(in[j]);
      if (dtype == DType::kFloat16) {
        RoundToHalf(ctx, 0, buf, y->data<half>() + i, m, i);
      }
    }
  });
  return absl::OkStatus();
}

template <typename G>
absl::Status PointwiseGradKernel(KernelContext& ctx, G g,
                                 double cost_per_element) {
  const Tensor& x = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const DType dtype = x.dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16) {
    return UnsupportedDType(ctx, dtype);
  }
  if (x.shape() != dy.shape()) {
    return ctx.InvalidArgument("inputs have shapes ", x.shape().DebugString(),
                               " and ", dy.shape().DebugString(),
                               "; they must be equal");
  }
  ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, x.shape()));
  constexpr int64_t kChunk = 1024;
  ctx.ParallelFor(x.NumElements(), cost_per_element, [&](int64_t b, int64_t e) {
    float bx[kChunk], bd[kChunk];
    for (int64_t i = b; i < e; i += kChunk) {
      const int64_t m = std::min(kChunk, e - i);
      const float* px = bx;
      const float* pd = bd;
      float* out = bx;
      if (dtype == DType::kFloat32) {
        px = x.data<float>() + i;
        pd = dy.data<float>() + i;
        out = dx->data<float>() + i;
      } else {
        WidenHalf(x.data<half>() + i, bx, m);
        WidenHalf(dy.data<half>() + i, bd, m);
      }
      for (int64_t j = 0; j < m; ++j) out[j] = g(px[j], pd[j]);
      if (dtype == DType::kFloat16) {
        RoundToHalf(ctx, 0, bx, dx->data<half>() + i, m, i);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_CWISE_H_
