#include "ops/cwise.h"

namespace ipuflow::ops {

std::vector<int64_t> BroadcastStrides(const TensorShape& in,
                                      const TensorShape& out) {
  std::vector<int64_t> strides(out.rank(), 0);
  int64_t stride = 1;
  for (int d = out.rank() - 1, i = in.rank() - 1; d >= 0; --d, --i) {
    if (i < 0) break;
    strides[d] = in.dim(i) == 1 ? 0 : stride;
    stride *= in.dim(i);
  }
  return strides;
}

absl::Status UnaryArrayKernel(KernelContext& ctx, FloatArrayFn fn,
                              double cost_per_element) {
  const Tensor& x = ctx.input(0);
  const DType dtype = x.dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16) {
    return UnsupportedDType(ctx, dtype);
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  if (dtype == DType::kFloat32) {
    const float* px = x.data<float>();
    float* py = y->data<float>();
    ctx.ParallelFor(x.NumElements(), cost_per_element,
                    [&](int64_t b, int64_t e) { fn(px + b, py + b, e - b); });
    return absl::OkStatus();
  }
  const half* px = x.data<half>();
  half* py = y->data<half>();
  constexpr int64_t kChunk = 1024;
  ctx.ParallelFor(x.NumElements(), cost_per_element, [&](int64_t b, int64_t e) {
    float buf[kChunk];
    for (int64_t i = b; i < e; i += kChunk) {
      const int64_t m = std::min(kChunk, e - i);
      WidenHalf(px + i, buf, m);
      fn(buf, buf, m);
      RoundToHalf(ctx, 0, buf, py + i, m, i);
    }
  });
  return absl::OkStatus();
}

}  // namespace ipuflow::ops
