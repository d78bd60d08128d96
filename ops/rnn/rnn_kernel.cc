#include "ops/rnn/rnn_kernel.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ipuflow::ops::rnn {

absl::StatusOr<RnnDims> KernelDims(KernelContext& ctx,
                                   const absl::StatusOr<RnnDims>& dims,
                                   int cache_blocks, TensorShape* cache) {
  if (!dims.ok()) return ctx.InvalidArgument(dims.status().message());
  RnnDims d = *dims;
  d.go_backwards = ctx.attr<bool>("go_backwards");
  absl::StatusOr<TensorShape> shape = CacheShape(d, cache_blocks);
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  *cache = *std::move(shape);
  return d;
}

absl::Status CheckIncomingGradients(KernelContext& ctx, const RnnDims& d,
                                    int states, int input, int cache,
                                    const TensorShape& cache_shape) {
  const TensorShape state({d.batch, d.units});
  bool match = ctx.input(0).shape() == d.Sequence(d.units) &&
               ctx.input(cache).shape() == cache_shape;
  std::string given =
      absl::StrCat("doutput ", ctx.input(0).shape().DebugString());
  for (int i = 1; i <= states; ++i) {
    match = match && ctx.input(i).shape() == state;
    absl::StrAppend(&given, ", ", i == 1 ? "dh " : "dc ",
                    ctx.input(i).shape().DebugString());
  }
  if (match) return absl::OkStatus();
  return ctx.InvalidArgument(
      given, " and cache ", ctx.input(cache).shape().DebugString(),
      " do not match input ", ctx.input(input).shape().DebugString(), " and ",
      d.units, " units");
}

void InputAndKernelGradients(const RnnDims& d, const RowMat& dz,
                             const Tensor& x32, const Tensor& kernel32,
                             float* dx, float* dkernel) {
  const int64_t rows = d.time * d.batch, w = d.gates * d.units;
  ConstMat kernel(kernel32.data<float>(), d.input_size, w);
  ConstMat x(x32.data<float>(), rows, d.input_size);
  Mat(dx, rows, d.input_size).noalias() = dz * kernel.transpose();
  Mat(dkernel, d.input_size, w).noalias() = x.transpose() * dz;
}

}  // namespace ipuflow::ops::rnn
