#include "core/half_rounding.h"

#include <cmath>

#include "Eigen/Core"
#include "core/floating_point.h"

namespace ipuflow {
namespace {

using FloatArray = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, 1>>;
using HalfArray = Eigen::Map<Eigen::Array<half, Eigen::Dynamic, 1>>;

constexpr float kHalfMax = 65504.0f;

}  // namespace

void RoundToHalf(const KernelContext& ctx, int output, const float* src,
                 half* dst, int64_t n, int64_t first) {
  const FloatingPointBehaviour* fp = ctx.env().floating_point;
  if (fp != nullptr && !fp->nanoo) {
    // Saturation: values beyond the float16 range (not infinities, which
    // stay infinite, nor NaN) clamp to +-65504.
    for (int64_t i = 0; i < n; ++i) {
      const float v = src[i];
      dst[i] = static_cast<half>(
          v > kHalfMax && v != INFINITY    ? kHalfMax
          : v < -kHalfMax && v != -INFINITY ? -kHalfMax
                                            : v);
    }
    return;
  }
  HalfArray(dst, n) = FloatArray(src, n).cast<half>();
}

void WidenHalf(const half* src, float* dst, int64_t n) {
  Eigen::Map<Eigen::Array<float, Eigen::Dynamic, 1>>(dst, n) =
      Eigen::Map<const Eigen::Array<half, Eigen::Dynamic, 1>>(src, n)
          .cast<float>();
}

}  // namespace ipuflow
