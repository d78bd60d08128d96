#include "ops/nn/conv_half_partials.h"

#include "core/half.h"
#include "ops/math/partials_type.h"
#include "ops/nn/conv_util.h"

namespace ipuflow::ops {

void ConvForwardHalfPartials(const KernelContext& ctx, const float* x,
                             const float* w, float* y, const Window2D& g,
                             int64_t oc) {
  ConvForwardByBlocks(ctx, x, w, y, g, oc,
                      [](const auto& patches, const auto& filter, auto&& out) {
                        HalfPartialsProduct(patches, filter, out);
                      });
}

void ConvBackpropInputHalfPartials(const KernelContext& ctx, const float* dy,
                                   const float* w, float* dx, const Window2D& g,
                                   int64_t oc) {
  // Each image's sum over the blocks that touch a pixel is rounded once
  // more at the end, as its last partial.
  ConvBackpropInputByBlocks(
      ctx, dy, w, dx, g, oc,
      [](const auto& dy_block, const auto& wt, auto&& patches) {
        HalfPartialsProduct(dy_block, wt, patches);
      },
      [](float* image, int64_t size) {
        RoundPartialsToHalf(Eigen::Map<Eigen::ArrayXf>(image, size));
      });
}

void ConvBackpropFilterHalfPartials(const KernelContext& ctx, const float* x,
                                    const float* dy, float* dw,
                                    const Window2D& g, int64_t oc) {
  ConvBackpropFilterByBlocks(
      ctx, x, dy, dw, g, oc,
      [](const auto& patches_t, const auto& dy_block, RowMajorMatrix& sum) {
        HalfPartialsAccumulate(patches_t, dy_block, sum);
      },
      [](MatrixMap& dw, const RowMajorMatrix& sum) {
        dw += sum;
        RoundPartialsToHalf(dw);
      });
}

}  // namespace ipuflow::ops
