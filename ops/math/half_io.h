// float16 inputs and outputs of kernels that compute in float32, as the
// IPU's float32 partials do (TensorFlow IPU guide, "Half-precision floating
// point and stochastic rounding"): each float16 input is widened once, the
// float32 kernel runs unchanged, and each float16 output is rounded once,
// through RoundToHalf (core/half_rounding.h), which applies the device's
// floating-point behaviour. Both conversions are Eigen casts (F16C on
// x86-64-v3) shared out in chunks over the intra-op pool.
//
//   const Tensor x = AsFloat32(ctx, ctx.input(0));   // no copy if float32
//   Tensor y32(DType::kFloat32, shape);
//   Compute(x.data<float>(), y32.data<float>());
//   ASSIGN_OR_RETURN(Tensor* y, ctx.allocate_output(0, shape));
//   StoreOutput(ctx, 0, y32, y);                     // rounds if float16
//
// Stateless; safe from any thread.
#ifndef IPUFLOW_OPS_MATH_HALF_IO_H_
#define IPUFLOW_OPS_MATH_HALF_IO_H_

#include <cstdint>

#include "core/half.h"
#include "core/kernel.h"
#include "core/tensor.h"

namespace ipuflow::ops {

// Float32 scratch for float16 kernels, kept per thread and reused across
// runs: a fresh buffer of a megabyte page-faults on every run (the kernel
// zeroes its pages), which cost the float16 ConvNet step about 10%.
// Slot `slot` (0 <= slot < kScratchSlots) of the calling thread, viewed as a
// float32 tensor of `shape` (grown when too small). The view is valid until
// the same slot is asked for again on this thread: a kernel uses distinct
// slots for the tensors it holds at once and keeps none past its return.
inline constexpr int kScratchSlots = 8;
Tensor ThreadScratch(int slot, const TensorShape& shape);

// `t` itself when it is float32 (sharing its buffer); a float32 copy when it
// is float16: freshly allocated, or ThreadScratch(slot) when slot >= 0.
// REQUIRES: t is float32 or float16.
Tensor AsFloat32(const KernelContext& ctx, const Tensor& t, int slot = -1);

// Widens n float16 values to float32 (exact), in parallel chunks, 8 at a
// time with F16C. (Eigen 3.4's Array::cast<float>() on half is scalar: its
// scalar_cast_op has no packet form, ~1 ns an element against ~0.1 here.)
void WidenParallel(const KernelContext& ctx, const half* src, float* dst,
                   int64_t n);
// The same on the calling thread.
void WidenFast(const half* src, float* dst, int64_t n);
// NarrowExactParallel on the calling thread.
void NarrowExact(const float* src, half* dst, int64_t n);

// Narrows n float32 values that are float16 values already (a maximum, a
// copy, a select of widened float16 inputs) to float16, in parallel chunks.
// Exact, so no rounding mode applies: kernels that compute new values round
// through RoundParallel / RoundToHalf instead.
void NarrowExactParallel(const KernelContext& ctx, const float* src, half* dst,
                         int64_t n);

// Rounds n float32 values into elements [0, n) of the node's float16 output
// `output`, through RoundToHalf, in parallel chunks.
void RoundParallel(const KernelContext& ctx, int output, const float* src,
                   half* dst, int64_t n);

// NarrowExactParallel of a float32 tensor into the float16 `dst`, or a copy
// when `dst` is float32 (for kernels whose results are input values).
void StoreExactOutput(const KernelContext& ctx, const Tensor& src, Tensor* dst);

// Writes the float32 result `src` into `dst`, the node's output `output`:
// rounded through RoundParallel when `dst` is float16, copied when it is
// float32 (kernels that compute float32 outputs in place need neither).
// REQUIRES: src is float32 with dst's element count.
void StoreOutput(const KernelContext& ctx, int output, const Tensor& src,
                 Tensor* dst);

// A float32 scratch tensor of `shape` for a float16 output, or the output
// itself (allocated) when it is float32: compute into the result, then
// StoreOutput(ctx, output, result, y) (a no-op when they are the same).
// The scratch is ThreadScratch(slot) when slot >= 0.
absl::StatusOr<Tensor*> AllocateFloat32Output(KernelContext& ctx, int output,
                                              const TensorShape& shape,
                                              Tensor* scratch, int slot = -1);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_HALF_IO_H_
