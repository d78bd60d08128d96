#include "ops/math/half_io.h"

#include <algorithm>

#include "core/half_rounding.h"

namespace ipuflow::ops {
namespace {

// Conversions are memory-bound: a few cycles per element.
constexpr double kConvertCost = 2.0;

}  // namespace

void WidenParallel(const KernelContext& ctx, const half* src, float* dst,
                   int64_t n) {
  if (n == 0) return;
  ctx.ParallelFor(n, kConvertCost, [&](int64_t b, int64_t e) {
    WidenHalf(src + b, dst + b, e - b);
  });
}

void RoundParallel(const KernelContext& ctx, int output, const float* src,
                   half* dst, int64_t n) {
  if (n == 0) return;
  ctx.ParallelFor(n, kConvertCost, [&](int64_t b, int64_t e) {
    RoundToHalf(ctx, output, src + b, dst + b, e - b, /*first=*/b);
  });
}

Tensor AsFloat32(const KernelContext& ctx, const Tensor& t) {
  if (t.dtype() != DType::kFloat16) return t;
  Tensor out(DType::kFloat32, t.shape());
  WidenParallel(ctx, t.data<half>(), out.data<float>(), t.NumElements());
  return out;
}

void StoreOutput(const KernelContext& ctx, int output, const Tensor& src,
                 Tensor* dst) {
  if (dst->dtype() == DType::kFloat16) {
    RoundParallel(ctx, output, src.data<float>(), dst->data<half>(),
                  src.NumElements());
    return;
  }
  if (src.data<float>() == dst->data<float>()) return;
  std::copy_n(src.data<float>(), src.NumElements(), dst->data<float>());
}

absl::StatusOr<Tensor*> AllocateFloat32Output(KernelContext& ctx, int output,
                                              const TensorShape& shape,
                                              Tensor* scratch) {
  ASSIGN_OR_RETURN(Tensor* y, ctx.allocate_output(output, shape));
  if (y->dtype() != DType::kFloat16) return y;
  ASSIGN_OR_RETURN(*scratch, Tensor::Allocate(DType::kFloat32, shape));
  return scratch;
}

}  // namespace ipuflow::ops
