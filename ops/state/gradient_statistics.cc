#include "ops/state/gradient_statistics.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {
namespace {

constexpr int64_t kChunk = 4096;

// Calls count(values, n) over x's elements as float32, in fixed chunks
// (float16 widened per chunk), and sums the per-chunk int64 results in
// order: the same counts whatever the thread count.
template <typename CountFn>
int64_t CountChunks(const KernelContext& ctx, const Tensor& x, CountFn count) {
  const int64_t n = x.NumElements();
  std::vector<int64_t> partial((n + kChunk - 1) / kChunk, 0);
  ctx.ParallelFor(static_cast<int64_t>(partial.size()), 2.0 * kChunk,
                  [&](int64_t b, int64_t e) {
                    float buf[kChunk];
                    for (int64_t c = b; c < e; ++c) {
                      const int64_t first = c * kChunk;
                      const int64_t len = std::min(kChunk, n - first);
                      const float* v;
                      if (x.dtype() == DType::kFloat16) {
                        WidenHalf(x.data<half>() + first, buf, len);
                        v = buf;
                      } else {
                        v = x.data<float>() + first;
                      }
                      partial[c] = count(v, len);
                    }
                  });
  int64_t total = 0;
  for (int64_t p : partial) total += p;
  return total;
}

absl::Status SetScalar(KernelContext& ctx, int i, float value) {
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(i, TensorShape()));
  y->data<float>()[0] = value;
  return absl::OkStatus();
}

REGISTER_OP("GradientHistogram")
    .Input("x")
    .RequiredAttr("edge", AttrType::kFloat)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      ASSIGN_OR_RETURN(float edge, c.attr<float>("edge"));
      if (!(edge >= 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("edge must be >= 0, got ", edge));
      }
      c.set_output(0, DType::kFloat32, TensorShape());
      c.set_output(1, DType::kFloat32, TensorShape());
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      const float edge = ctx.attr<float>("edge");
      const int64_t lower =
          CountChunks(ctx, x, [edge](const float* v, int64_t len) {
            int64_t k = 0;
            for (int64_t i = 0; i < len; ++i) k += std::fabs(v[i]) < edge;
            return k;
          });
      RETURN_IF_ERROR(SetScalar(ctx, 0, static_cast<float>(lower)));
      return SetScalar(ctx, 1, static_cast<float>(x.NumElements() - lower));
    })
    .NotDifferentiable("it counts gradient elements for loss scaling");

REGISTER_OP("NonFiniteCount")
    .Input("x")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      c.set_output(0, DType::kFloat32, TensorShape());
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      // float16: +-65504 counts as an overflow too. With nanoo off (the
      // default floating_point_behaviour) an overflow saturates there
      // instead of becoming inf, and GradScaler would apply the clipped
      // update without backing off (issue 22); a true gradient of exactly
      // 65504 is indistinguishable from a saturated one.
      const float limit = ctx.input(0).dtype() == DType::kFloat16
                              ? 65504.f
                              : std::numeric_limits<float>::infinity();
      const int64_t bad =
          CountChunks(ctx, ctx.input(0), [limit](const float* v, int64_t len) {
            int64_t k = 0;
            for (int64_t i = 0; i < len; ++i) k += !(std::fabs(v[i]) < limit);
            return k;
          });
      return SetScalar(ctx, 0, static_cast<float>(bad));
    })
    .NotDifferentiable("it counts gradient elements for loss scaling");

}  // namespace

std::pair<Output, Output> GradientHistogram(const Scope& scope, Output x,
                                            float edge) {
  Node* n = scope.AddNode("GradientHistogram", {x}, {{"edge", edge}});
  if (n == nullptr) return {Output(), Output()};
  return {Output(n, 0), Output(n, 1)};
}

Output NonFiniteCount(const Scope& scope, Output x) {
  Node* n = scope.AddNode("NonFiniteCount", {x});
  return n == nullptr ? Output() : Output(n);
}

}  // namespace ipuflow::ops
