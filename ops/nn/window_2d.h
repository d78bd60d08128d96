// Window2D: the geometry shared by the 2-D window ops (Conv2D, MaxPool2D,
// AvgPool2D and their gradients), with TensorFlow's conventions for
// "strides"/"ksize" lists, "VALID"/"SAME" padding and "NHWC"/"NCHW" layouts,
// plus the NCHW <-> NHWC transposes that let every kernel compute in NHWC.
//
//   ASSIGN_OR_RETURN(WindowAttrs a, ParseWindowAttrs(attrs, /*ksize=*/false));
//   ASSIGN_OR_RETURN(Window2D g, MakeWindow2D(ToNhwc(x.shape(), a.format),
//                                             /*kh=*/3, /*kw=*/3, a));
//   // g.oh, g.ow: output size; g.pad_top, g.pad_left: implicit zero padding.
//
// Shapes at build time may hold unknown dims (-1); the output sizes they
// determine are then -1 too. Errors are InvalidArgument naming the attribute
// or dimension and its value; callers prefix the node.
//
// Thread safety: pure functions; the transposes run on the kernel's pool.
#ifndef IPUFLOW_OPS_NN_WINDOW_2D_H_
#define IPUFLOW_OPS_NN_WINDOW_2D_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attr_value.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/tensor_shape.h"

namespace ipuflow::ops {

enum class DataFormat { kNHWC, kNCHW };
enum class Padding { kValid, kSame };

const char* DataFormatName(DataFormat f);

// The four dimensions of an image batch, in NHWC order (any may be -1).
struct Dims4 {
  int64_t n, h, w, c;
};
// REQUIRES: s.rank() == 4.
Dims4 ToNhwc(const TensorShape& s, DataFormat f);
TensorShape FromNhwc(const Dims4& d, DataFormat f);

// The attributes of a window op: "strides", "padding", "data_format" and,
// for pooling, "ksize" (each a list of 2 spatial ints, or of 4 in the data
// format's order with 1 for the batch and channel entries).
struct WindowAttrs {
  DataFormat format = DataFormat::kNHWC;
  Padding padding = Padding::kValid;
  int64_t sh = 1, sw = 1;
  int64_t kh = 1, kw = 1;  // From "ksize" when parsed; else set by caller.
};
absl::StatusOr<WindowAttrs> ParseWindowAttrs(const AttrMap& attrs,
                                             bool has_ksize);

// A window op applied to an NHWC batch.
struct Window2D {
  int64_t n, h, w, c;  // Input.
  int64_t kh, kw;      // Window.
  int64_t sh, sw;      // Strides.
  int64_t oh, ow;      // Output (-1 if the input size is unknown).
  int64_t pad_top, pad_left;
};
// Output size and padding (TF rules). VALID: out = (in - k) / s + 1, error
// when k > in; SAME: out = ceil(in / s), half the padding before.
absl::StatusOr<Window2D> MakeWindow2D(const Dims4& in, int64_t kh, int64_t kw,
                                      const WindowAttrs& a);

// For the shape functions of the pooling ops: checks input 0 is float32 or
// float16 of rank 4 and parses the attributes (with "ksize") into `a`.
absl::StatusOr<Window2D> PoolShapeWindow(const ShapeContext& c, WindowAttrs* a);
// The shape function of AvgPool2D and MaxPool2D: [N, OH, OW, C] (in the
// op's data_format) of the input's dtype.
absl::Status PoolShape(ShapeContext& c);
// The same at run time from the kernel's input 0; errors name the node.
absl::StatusOr<Window2D> PoolKernelWindow(const KernelContext& ctx,
                                          WindowAttrs* a);

// For the gradient ops: OK if `dy` is compatible with `expected`, the
// forward op's output shape.
absl::Status CheckDyShape(const TensorShape& dy, const TensorShape& expected);

// The valid (unpadded) range [*begin, *end) of a window starting at
// `start` (may be negative) of size k over a dimension of size n.
inline void ClipWindow(int64_t start, int64_t k, int64_t n, int64_t* begin,
                       int64_t* end) {
  *begin = start < 0 ? 0 : start;
  *end = start + k > n ? n : start + k;
}

// Kernel helpers for the NCHW layout (NHWC needs no copy) and for float16
// tensors, which kernels compute on in float32 (ops/math/half_io.h).
// `t` as a float32 NHWC tensor: itself for float32 NHWC, else a widened
// and/or transposed copy (in ThreadScratch(slot), ops/math/half_io.h, when
// slot >= 0: slots 0-5 are the kernels' for their inputs, 6 and 7 these
// helpers' for outputs). REQUIRES: t is float32 or float16 of rank 4.
Tensor ToNhwcTensor(const KernelContext& ctx, const Tensor& t, DataFormat f,
                    int slot = -1);
// float32 memory for an NHWC result destined for output `i`: the output
// itself for a float32 NHWC output, else `*scratch` (allocated here, in
// ThreadScratch slot 6 for output 0). Call FinishNhwcOutput afterwards.
absl::StatusOr<Tensor*> AllocateNhwcOutput(KernelContext& ctx, int i,
                                           const Dims4& d, DataFormat f,
                                           Tensor* scratch);
// Unless the result was computed in place, allocates output `i` and
// stores `scratch` into it: transposed for NCHW, rounded through
// RoundToHalf for a float16 output, or narrowed without rounding when
// `exact` (the results are float16 input values, as a max pool's).
absl::Status FinishNhwcOutput(KernelContext& ctx, int i, DataFormat f,
                              const Tensor& scratch, bool exact = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_WINDOW_2D_H_
