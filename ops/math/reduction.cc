#include "ops/math/reduction.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/half_rounding.h"
#include "core/tensor_eigen.h"
#include "ops/array/copy_kernels.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/math/scalar_ops.h"

namespace ipuflow::ops {
namespace {

template <typename Acc>
struct SumReducer {
  static Acc Combine2(Acc a, Acc b) { return a + b; }
  template <typename X>
  static Acc Redux(const X& x) {
    return x.sum();
  }
  template <typename X>
  static void Combine(ArrayMap<Acc>& acc, const X& x) {
    acc += x;
  }
};

// Max and Min: a NaN-propagating functor (scalar_ops.h) combines values.
template <typename Acc, template <typename> class Op>
struct FunctorReducer {
  static Acc Combine2(Acc a, Acc b) { return Op<Acc>()(a, b); }
  template <typename X>
  static Acc Redux(const X& x) {
    return x.redux(Op<Acc>());
  }
  template <typename X>
  static void Combine(ArrayMap<Acc>& acc, const X& x) {
    acc = acc.binaryExpr(x, Op<Acc>());
  }
};
template <typename Acc>
using MaxReducer = FunctorReducer<Acc, NanMax>;
template <typename Acc>
using MinReducer = FunctorReducer<Acc, NanMin>;

template <typename Acc>
struct ProdReducer {
  static Acc Combine2(Acc a, Acc b) { return a * b; }
  template <typename X>
  static Acc Redux(const X& x) {
    return x.prod();
  }
  template <typename X>
  static void Combine(ArrayMap<Acc>& acc, const X& x) {
    acc *= x;
  }
};

// Long reductions are pairwise over leaves: the rounding error of a sum of
// r float32 values then grows as log2(r) roundings, not r (N. J. Higham,
// "The accuracy of floating point summation", SIAM J. Sci. Comput. 14,
// 1993), so 4e6 rows sum within 10x of a float64 sum rounded once, where
// adding them one after another lost 3e-5. A contiguous leaf is one
// vectorised Eigen reduction of kRowLeaf values; a strided leaf adds
// kSliceLeaf slices one after another.
constexpr int64_t kRowLeaf = 256;
constexpr int64_t kSliceLeaf = 16;

// The reduction of x[0, r), pairwise over leaves. REQUIRES: r >= 1.
template <typename Reducer, typename Src, typename Acc>
Acc ReduxPairwise(const Src* x, int64_t r) {
  if (r <= kRowLeaf) {
    return Reducer::Redux(ConstArrayMap<Src>(x, r).template cast<Acc>());
  }
  const int64_t h = (r / 2 + kRowLeaf - 1) / kRowLeaf * kRowLeaf;
  return Reducer::Combine2(ReduxPairwise<Reducer, Src, Acc>(x, h),
                           ReduxPairwise<Reducer, Src, Acc>(x + h, r - h));
}

// acc[i] = reduce over k in [k0, k1) of s[k * inner + i], i < n, pairwise
// over leaves of slices; `scratch` holds n values per level below.
// REQUIRES: k1 > k0.
template <typename Reducer, typename Src, typename Acc>
void ReduceSlices(const Src* s, int64_t inner, int64_t k0, int64_t k1,
                  int64_t n, Acc* acc, Acc* scratch) {
  ArrayMap<Acc> a(acc, n);
  if (k1 - k0 <= kSliceLeaf) {
    a = ConstArrayMap<Src>(s + k0 * inner, n).template cast<Acc>();
    for (int64_t k = k0 + 1; k < k1; ++k) {
      Reducer::Combine(
          a, ConstArrayMap<Src>(s + k * inner, n).template cast<Acc>());
    }
    return;
  }
  const int64_t mid = k0 + (k1 - k0) / 2;
  ReduceSlices<Reducer, Src, Acc>(s, inner, k0, mid, n, acc, scratch);
  ReduceSlices<Reducer, Src, Acc>(s, inner, mid, k1, n, scratch, scratch + n);
  Reducer::Combine(a, ConstArrayMap<Acc>(scratch, n));
}

// Levels of ReduceSlices' recursion below the top for r slices.
inline int SliceLevels(int64_t r) {
  int levels = 0;
  for (int64_t m = r; m > kSliceLeaf; m = (m + 1) / 2) ++levels;
  return levels;
}

// dst[o, i] = reduce over k of src[o, k, i], for a [outer, r, inner] view.
// REQUIRES: r >= 1.
template <typename Reducer, typename Src, typename Acc>
void ReducePass(const KernelContext& ctx, const Src* src, Acc* dst,
                int64_t outer, int64_t r, int64_t inner) {
  if (inner == 1) {
    ctx.ParallelFor(outer, kCwiseCost * r, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        dst[o] = ReduxPairwise<Reducer, Src, Acc>(src + o * r, r);
      }
    });
    return;
  }
  // Blocks of the inner dimension, so a small `outer` still parallelises and
  // each block's accumulators stay in cache.
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t width = std::min(inner, kBlock);
  const int levels = SliceLevels(r);
  ctx.ParallelFor(
      outer * blocks, kCwiseCost * r * width, [&](int64_t b, int64_t e) {
        std::vector<Acc> scratch(static_cast<size_t>(levels) * width);
        for (int64_t u = b; u < e; ++u) {
          const int64_t o = u / blocks, i0 = (u % blocks) * kBlock;
          const int64_t n = std::min(kBlock, inner - i0);
          ReduceSlices<Reducer, Src, Acc>(src + o * r * inner + i0, inner, 0, r,
                                          n, dst + o * inner + i0,
                                          scratch.data());
        }
      });
}

// Fills `y` for a reduction over zero elements (no passes can run).
template <typename T>
absl::Status ReduceEmpty(KernelContext& ctx, Reduction kind, Tensor* y) {
  const Tensor& x = ctx.input(0);
  if (kind == Reduction::kSum) {
    y->flat<T>().setZero();
    return absl::OkStatus();
  }
  if (kind == Reduction::kProd) {
    y->flat<T>().setConstant(T(1));
    return absl::OkStatus();
  }
  if constexpr (!std::is_integral_v<T>) {
    if (kind == Reduction::kMean) {
      y->flat<T>().setConstant(std::numeric_limits<T>::quiet_NaN());
      return absl::OkStatus();
    }
  }
  return ctx.InvalidArgument(
      kind == Reduction::kMax   ? "the maximum"
      : kind == Reduction::kMin ? "the minimum"
                                : "the integer mean",
      " over zero elements is undefined (input 'x' has shape ",
      x.shape().DebugString(), ")");
}

// Writes the result of the last pass (`acc`, n values; may be py itself) to
// py: cast from the accumulation type, divided by `count` for a mean.
template <typename T, typename Acc>
void Finish(const KernelContext& ctx, Reduction kind, int64_t count,
            const Acc* acc, T* py, int64_t n) {
  const bool mean = kind == Reduction::kMean;
  if (std::is_same_v<Acc, T> && !mean) return;  // Written in place.
  ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
    ConstArrayMap<Acc> a(acc + b, e - b);
    if constexpr (std::is_same_v<T, half> && std::is_same_v<Acc, float>) {
      // float32 sums of float16 values: rounded once, by the device's mode.
      if (mean) {
        const ArrayX<float> m = a / static_cast<float>(count);
        RoundToHalf(ctx, 0, m.data(), py + b, e - b, b);
      } else {
        RoundToHalf(ctx, 0, acc + b, py + b, e - b, b);
      }
      return;
    }
    if (mean) {
      ArrayMap<T>(py + b, e - b) =
          (a / static_cast<Acc>(count)).template cast<T>();
    } else {
      ArrayMap<T>(py + b, e - b) = a.template cast<T>();
    }
  });
}

// The [outer, r, inner] view in which the innermost group of reduced dims
// of `cs` is reduced; removes that group from `cs` (merging the kept dims
// either side, which are now adjacent).
struct PassDims {
  int64_t outer = 1, r = 1, inner = 1;
};
PassDims PopInnermostReduced(CoalescedShape* cs) {
  int j = static_cast<int>(cs->dims.size()) - 1;
  while (!cs->reduced[j]) --j;
  PassDims d;
  for (int i = 0; i < j; ++i) d.outer *= cs->dims[i];
  for (size_t i = j + 1; i < cs->dims.size(); ++i) d.inner *= cs->dims[i];
  d.r = cs->dims[j];
  cs->dims.erase(cs->dims.begin() + j);
  cs->reduced.erase(cs->reduced.begin() + j);
  if (j > 0 && j < static_cast<int>(cs->dims.size())) {
    cs->dims[j - 1] *= cs->dims[j];
    cs->dims.erase(cs->dims.begin() + j);
    cs->reduced.erase(cs->reduced.begin() + j);
  }
  return d;
}

template <typename Reducer, typename T, typename Acc>
absl::Status Reduce(KernelContext& ctx, Reduction kind,
                    const std::vector<int>& axes, const TensorShape& shape) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, shape));
  const int64_t n = y->NumElements();
  if (n == 0) return absl::OkStatus();
  const int64_t count = x.NumElements() / n;  // Elements per output.
  if (count == 0) return ReduceEmpty<T>(ctx, kind, y);
  CoalescedShape cs = Coalesce(x.shape(), axes);
  const int passes =
      static_cast<int>(std::count(cs.reduced.begin(), cs.reduced.end(), true));
  if (passes == 0) {  // Only size-1 dims were reduced: a copy.
    y->flat<T>() = x.flat<T>();
    return absl::OkStatus();
  }
  T* py = y->data<T>();
  ArrayX<Acc> cur, next;
  for (int p = 0; p < passes; ++p) {
    const PassDims d = PopInnermostReduced(&cs);
    Acc* dst = nullptr;
    if constexpr (std::is_same_v<Acc, T>) {
      if (p + 1 == passes) dst = py;  // Straight into the output.
    }
    if (dst == nullptr) {
      next.resize(d.outer * d.inner);
      dst = next.data();
    }
    if (p == 0) {
      ReducePass<Reducer, T, Acc>(ctx, x.data<T>(), dst, d.outer, d.r, d.inner);
    } else {
      ReducePass<Reducer, Acc, Acc>(ctx, cur.data(), dst, d.outer, d.r,
                                    d.inner);
    }
    std::swap(cur, next);
  }
  const Acc* result;
  if constexpr (std::is_same_v<Acc, T>) {
    result = py;
  } else {
    result = cur.data();
  }
  Finish<T, Acc>(ctx, kind, count, result, py, n);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReductionKernel(KernelContext& ctx, Reduction kind) {
  const Tensor& x = ctx.input(0);
  absl::StatusOr<std::vector<int>> axes =
      NormalizeReductionAxes(ctx.attr<std::vector<int64_t>>("axes"), x.rank());
  if (!axes.ok()) {
    return ctx.InvalidArgument(axes.status().message(),
                               "; input 'x' has shape ",
                               x.shape().DebugString());
  }
  const TensorShape shape =
      ReducedShape(x.shape(), *axes, ctx.attr<bool>("keep_dims"));
  if (kind == Reduction::kMax) {
    IPUFLOW_SWITCH_NUMERIC(
        x.dtype(),
        return (Reduce<MaxReducer<T>, T, T>(ctx, kind, *axes, shape)),
        return UnsupportedDType(ctx, x.dtype()));
  }
  if (kind == Reduction::kMin) {
    IPUFLOW_SWITCH_NUMERIC(
        x.dtype(),
        return (Reduce<MinReducer<T>, T, T>(ctx, kind, *axes, shape)),
        return UnsupportedDType(ctx, x.dtype()));
  }
  if (kind == Reduction::kProd) {
    // Floats only (the shape function refuses integers): a signed integer
    // product overflows.
    IPUFLOW_SWITCH_FLOAT(
        x.dtype(),
        return (Reduce<ProdReducer<AccumType<T>>, T, AccumType<T>>(
            ctx, kind, *axes, shape)),
        return UnsupportedDType(ctx, x.dtype()));
  }
  IPUFLOW_SWITCH_NUMERIC(
      x.dtype(),
      return (Reduce<SumReducer<AccumType<T>>, T, AccumType<T>>(ctx, kind,
                                                                *axes, shape)),
      return UnsupportedDType(ctx, x.dtype()));
}

float PairwiseSum(const float* x, int64_t n) {
  if (n <= 0) return 0.0f;
  return ReduxPairwise<SumReducer<float>, float, float>(x, n);
}

Tensor ReducedAxesLast(const KernelContext& ctx, const Tensor& x,
                       absl::Span<const int> axes) {
  const int rank = x.rank();
  std::vector<bool> reduced(rank, false);
  for (int a : axes) reduced[a] = true;
  const std::vector<int64_t> strides = RowMajorStrides(x.shape());
  std::vector<int64_t> dims, src_strides;
  int64_t n = 1, r = 1;
  for (int pass = 0; pass < 2; ++pass) {  // Kept dims, then reduced dims.
    for (int d = 0; d < rank; ++d) {
      if (reduced[d] != (pass == 1)) continue;
      dims.push_back(x.dim(d));
      src_strides.push_back(strides[d]);
      (pass == 0 ? n : r) *= x.dim(d);
    }
  }
  Tensor rows(x.dtype(), TensorShape({n, r}));
  if (rows.NumElements() == 0) return rows;
  if (dims.empty()) {  // A scalar.
    std::memcpy(rows.raw_data(), x.raw_data(), DTypeSize(x.dtype()));
    return rows;
  }
  StridedCopy(ctx, dims, rows.raw_data(), RowMajorStrides(TensorShape(dims)),
              x.raw_data(), src_strides, DTypeSize(x.dtype()));
  return rows;
}

absl::Status RowReductionKernel(KernelContext& ctx, const RowReduceFn& fn) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat16) {
    return UnsupportedDType(ctx, x.dtype());
  }
  absl::StatusOr<std::vector<int>> axes =
      NormalizeReductionAxes(ctx.attr<std::vector<int64_t>>("axes"), x.rank());
  if (!axes.ok()) {
    return ctx.InvalidArgument(axes.status().message(),
                               "; input 'x' has shape ",
                               x.shape().DebugString());
  }
  const TensorShape shape =
      ReducedShape(x.shape(), *axes, ctx.attr<bool>("keep_dims"));
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, shape));
  Tensor* y = out;
  if (out->dtype() == DType::kFloat16) {
    ASSIGN_OR_RETURN(scratch, Tensor::Allocate(DType::kFloat32, shape));
    y = &scratch;
  }
  const int64_t n = y->NumElements();
  if (n == 0) return absl::OkStatus();
  const Tensor rows = AsFloat32(ctx, ReducedAxesLast(ctx, x, *axes));
  const int64_t r = x.NumElements() / n;
  const float* pr = rows.data<float>();
  float* py = y->data<float>();
  ctx.ParallelFor(n, kCwiseCost * 4 * std::max<int64_t>(r, 1),
                  [&](int64_t b, int64_t e) {
                    for (int64_t o = b; o < e; ++o) py[o] = fn(pr + o * r, r);
                  });
  if (y != out) StoreOutput(ctx, 0, *y, out);
  return absl::OkStatus();
}

absl::Status BoolReductionKernel(KernelContext& ctx, bool all) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kBool) return UnsupportedDType(ctx, x.dtype());
  absl::StatusOr<std::vector<int>> axes =
      NormalizeReductionAxes(ctx.attr<std::vector<int64_t>>("axes"), x.rank());
  if (!axes.ok()) {
    return ctx.InvalidArgument(axes.status().message(),
                               "; input 'x' has shape ",
                               x.shape().DebugString());
  }
  ASSIGN_OR_RETURN(
      Tensor * y,
      ctx.allocate_output(
          0, ReducedShape(x.shape(), *axes, ctx.attr<bool>("keep_dims"))));
  const int64_t n = y->NumElements();
  if (n == 0) return absl::OkStatus();
  const Tensor rows = ReducedAxesLast(ctx, x, *axes);
  const int64_t r = x.NumElements() / n;
  const bool* pr = rows.data<bool>();
  bool* py = y->data<bool>();
  ctx.ParallelFor(
      n, kCwiseCost * std::max<int64_t>(r, 1), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const bool* row = pr + o * r;
          py[o] = all ? std::all_of(row, row + r, [](bool v) { return v; })
                      : std::any_of(row, row + r, [](bool v) { return v; });
        }
      });
  return absl::OkStatus();
}

}  // namespace ipuflow::ops
