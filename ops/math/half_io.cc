#include "ops/math/half_io.h"

#include <algorithm>
#include <memory>

#ifdef __F16C__
#include <immintrin.h>
#endif

#include "core/half.h"
#include "core/half_rounding.h"

namespace ipuflow::ops {
namespace {

// Conversions are memory-bound: a few cycles per element.
constexpr double kConvertCost = 2.0;

}  // namespace

void WidenFast(const half* src, float* dst, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  WidenHalf(src + i, dst + i, n - i);
}

void WidenParallel(const KernelContext& ctx, const half* src, float* dst,
                   int64_t n) {
  if (n == 0) return;
  ctx.ParallelFor(n, kConvertCost, [&](int64_t b, int64_t e) {
    WidenFast(src + b, dst + b, e - b);
  });
}

// float16 values held as float32 back to float16: nearest-even is exact.
void NarrowExact(const float* src, half* dst, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<half>(src[i]);
}

void NarrowExactParallel(const KernelContext& ctx, const float* src, half* dst,
                         int64_t n) {
  if (n == 0) return;
  ctx.ParallelFor(n, kConvertCost, [&](int64_t b, int64_t e) {
    NarrowExact(src + b, dst + b, e - b);
  });
}

void StoreExactOutput(const KernelContext& ctx, const Tensor& src,
                      Tensor* dst) {
  if (dst->dtype() == DType::kFloat16) {
    NarrowExactParallel(ctx, src.data<float>(), dst->data<half>(),
                        src.NumElements());
    return;
  }
  if (src.data<float>() == dst->data<float>()) return;
  std::copy_n(src.data<float>(), src.NumElements(), dst->data<float>());
}

void RoundParallel(const KernelContext& ctx, int output, const float* src,
                   half* dst, int64_t n) {
  if (n == 0) return;
  ctx.ParallelFor(n, kConvertCost, [&](int64_t b, int64_t e) {
    RoundToHalf(ctx, output, src + b, dst + b, e - b, /*first=*/b);
  });
}

Tensor ThreadScratch(int slot, const TensorShape& shape) {
  thread_local std::shared_ptr<TensorBuffer> buffers[kScratchSlots];
  std::shared_ptr<TensorBuffer>& b = buffers[slot];
  const size_t bytes = shape.num_elements() * sizeof(float);
  if (b == nullptr || b->size() < bytes) {
    b = std::make_shared<TensorBuffer>(std::max<size_t>(bytes, 64));
  }
  return Tensor(DType::kFloat32, shape, b);
}

Tensor AsFloat32(const KernelContext& ctx, const Tensor& t, int slot) {
  if (t.dtype() != DType::kFloat16) return t;
  Tensor out = slot >= 0 ? ThreadScratch(slot, t.shape())
                         : Tensor(DType::kFloat32, t.shape());
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
                                              Tensor* scratch, int slot) {
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(output, shape));
  if (y->dtype() != DType::kFloat16) return y;
  if (slot >= 0) {
    *scratch = ThreadScratch(slot, shape);
  } else {
    ASSIGN_OR_RETURN(*scratch, Tensor::Allocate(DType::kFloat32, shape));
  }
  return scratch;
}

}  // namespace ipuflow::ops
