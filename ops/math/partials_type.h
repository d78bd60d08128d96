// The `partials_type` attribute of MatMul, BatchMatMul, Conv2D and its
// backprops: the precision of the running sums along the reduced dimension
// (K of a GEMM, the patch or the pixels of a convolution). As the originals:
// TensorFlow IPU's `cfg.matmuls.poplar_options['partialsType']` /
// `cfg.convolutions.poplar_options['partialsType']` and PopTorch's
// `opts.Precision.setPartialsType(torch.half | torch.float)`, which allows
// no other type (wave-2 reference, section 1.4).
//
//   "float" (the default): sums in float32; a float16 op differs from its
//       float32 twin only by the rounding of its inputs and outputs.
//   "half": the running sum is a float16 value. The emulation accumulates
//       kHalfPartialsBlock products in float32 (the IPU's AMP unit sums a
//       group of input channels per instruction before the partial is
//       written back), then rounds the running sum to float16 (nearest
//       even), block after block: long sums lose their small addends, as on
//       the device.
//
//   Output y = ops::MatMul(scope, a, b, {.partials_type = "half"});
//
// Stateless; safe from any thread.
#ifndef IPUFLOW_OPS_MATH_PARTIALS_TYPE_H_
#define IPUFLOW_OPS_MATH_PARTIALS_TYPE_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "core/dtype.h"
#include "core/graph.h"
#include "core/op_registry.h"

namespace ipuflow::ops {

inline constexpr char kPartialsTypeAttr[] = "partials_type";
inline constexpr char kPartialsFloat[] = "float";
inline constexpr char kPartialsHalf[] = "half";

// Products summed in float32 before each float16 rounding of the running
// sum with "half" partials. 16 is the number of input channels the IPU's
// AMP unit takes per half-precision instruction (poplibs' convolution
// planner groups half inputs by 16 on Mk2); a finer block loses more, a
// coarser one less. An approximation of the device: it reproduces where the
// rounding happens (between blocks, on the running sum), not the order of
// the additions inside a block.
inline constexpr int64_t kHalfPartialsBlock = 16;

// For shape functions: InvalidArgument unless the attribute is "half" or
// "float", naming the value (the node and op are added by Graph::AddNode):
// 'partials_type must be "half" or "float", got "double" ...'.
absl::Status CheckPartialsType(const ShapeContext& c);

// True when the node's partials_type is "half" (the attribute was checked
// by its shape function).
bool HalfPartials(const Node& node);

// Rounds every coefficient of `m` to the nearest float16 and back: what a
// float16 partial holds. Vectorised (F16C).
template <typename Derived>
void RoundPartialsToHalf(Eigen::DenseBase<Derived>& m) {
  m.derived() = m.derived().template cast<half>().template cast<float>();
}
template <typename Derived>
void RoundPartialsToHalf(Eigen::DenseBase<Derived>&& m) {
  RoundPartialsToHalf(m);
}

// out += a * b (a is [m,k], b [k,n], any Eigen expressions; out is [m,n]
// and holds a running sum) with "half" partials: K is summed in blocks of
// kHalfPartialsBlock, the running sum rounded to float16 after each block.
template <typename A, typename B, typename Out>
void HalfPartialsAccumulate(const A& a, const B& b, Out&& out) {
  const int64_t k = a.cols();
  for (int64_t k0 = 0; k0 < k; k0 += kHalfPartialsBlock) {
    const int64_t kb = std::min(kHalfPartialsBlock, k - k0);
    out.noalias() += a.middleCols(k0, kb) * b.middleRows(k0, kb);
    RoundPartialsToHalf(out);
  }
}

// out = a * b with "half" partials.
template <typename A, typename B, typename Out>
void HalfPartialsProduct(const A& a, const B& b, Out&& out) {
  out.setZero();
  HalfPartialsAccumulate(a, b, out);
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_PARTIALS_TYPE_H_
