// A float32 buffer for one output of a kernel that computes in float32:
// the output itself when it is float32, else a scratch that Finish rounds
// once into the float16 output (through RoundToHalf, ops/math/half_io.h).
//
//   Float32Output y;
//   RETURN_IF_ERROR(y.Allocate(ctx, 0, x.shape()));
//   Compute(y.data());
//   y.Finish(ctx);
//
// One per output and kernel invocation; not shared between threads.
#ifndef IPUFLOW_OPS_MATH_FLOAT32_OUTPUT_H_
#define IPUFLOW_OPS_MATH_FLOAT32_OUTPUT_H_

#include "core/kernel.h"
#include "core/status.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {

class Float32Output {
 public:
  absl::Status Allocate(KernelContext& ctx, int output,
                        const TensorShape& shape) {
    output_ = output;
    ASSIGN_OR_RETURN(buffer_,
                     AllocateFloat32Output(ctx, output, shape, &scratch_));
    return absl::OkStatus();
  }
  float* data() { return buffer_->data<float>(); }
  void Finish(KernelContext& ctx) {
    if (buffer_ == &scratch_) {
      StoreOutput(ctx, output_, scratch_, ctx.mutable_output(output_));
    }
  }

 private:
  int output_ = 0;
  Tensor scratch_;
  Tensor* buffer_ = nullptr;
};

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_FLOAT32_OUTPUT_H_
