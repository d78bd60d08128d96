// Row-wise kernels over the last axis, shared by Softmax, LogSoftmax and
// their gradient ops: every input has the same shape, each row (the last
// axis) is computed independently in float32 (float16 rows are widened,
// and the results rounded through RoundToHalf), rows in parallel on the
// intra-op pool.
//
//   // out = softmax(in[0]) per row
//   return RowwiseKernel(ctx, /*cost_per_element=*/20,
//       [](const RowInputs& in, Eigen::ArrayXf& out) {
//         out = in[0] - in[0].maxCoeff();
//         VecExp(out.data(), out.data(), out.size());  // vector_math.h
//         out /= out.sum();
//       });
//
// Thread safety: stateless; `fn` is called concurrently on distinct rows.
#ifndef IPUFLOW_OPS_NN_ROWWISE_H_
#define IPUFLOW_OPS_NN_ROWWISE_H_

#include <type_traits>
#include <vector>

#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {

using RowInputs = std::vector<Eigen::ArrayXf>;

// Every input is float of one dtype and (compatible) shape, of rank >= 1;
// output 0 has that shape and dtype.
absl::Status RowwiseShape(ShapeContext& c);

template <typename T, typename Fn>
absl::Status RowwiseKernelT(KernelContext& ctx, double cost_per_element,
                            const Fn& fn) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.shape()));
  if (x.NumElements() == 0) return absl::OkStatus();
  const int64_t cols = x.dim(x.rank() - 1);
  const int64_t rows = x.NumElements() / cols;
  T* po = out->data<T>();
  ctx.ParallelFor(rows, cost_per_element * cols, [&](int64_t b, int64_t e) {
    RowInputs in(ctx.num_inputs(), Eigen::ArrayXf(cols));
    Eigen::ArrayXf res(cols);
    for (int64_t r = b; r < e; ++r) {
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        if constexpr (std::is_same_v<T, half>) {
          WidenFast(ctx.input(i).data<half>() + r * cols, in[i].data(), cols);
        } else {
          in[i] = ConstArrayMap<T>(ctx.input(i).data<T>() + r * cols, cols);
        }
      }
      fn(in, res);
      if constexpr (std::is_same_v<T, half>) {
        RoundToHalf(ctx, 0, res.data(), po + r * cols, cols, r * cols);
      } else {
        ArrayMap<T>(po + r * cols, cols) = res;
      }
    }
  });
  return absl::OkStatus();
}

// fn(const RowInputs& in, Eigen::ArrayXf& out) computes one row.
template <typename Fn>
absl::Status RowwiseKernel(KernelContext& ctx, double cost_per_element,
                           const Fn& fn) {
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).shape() != ctx.input(0).shape()) {
      return ctx.InvalidArgument(
          "inputs have shapes ", ctx.input(0).shape().DebugString(), " and ",
          ctx.input(i).shape().DebugString(), "; they must be equal");
    }
  }
  const DType dtype = ctx.input(0).dtype();
  IPUFLOW_SWITCH_FLOAT(dtype,
                       return (RowwiseKernelT<T>(ctx, cost_per_element, fn)),
                       return UnsupportedDType(ctx, dtype));
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_ROWWISE_H_
