#include "ops/nn/conv_half_partials.h"

#include <algorithm>
#include <map>

#include "core/mutex.h"
#include "ops/math/partials_type.h"
#include "ops/nn/conv_util.h"

namespace ipuflow::ops {

void ConvForwardHalfPartials(const KernelContext& ctx, const float* x,
                             const float* w, float* y, const Window2D& g,
                             int64_t oc) {
  const int64_t k = PatchSize(g);
  const ConstMatrixMap wm(w, k, oc);
  const int64_t chunk = RowsPerChunk(g);
  ctx.ParallelFor(g.n * g.oh, 2.0 * g.ow * k * oc, [&](int64_t b, int64_t e) {
    RowMajorMatrix cols(std::min(chunk, e - b) * g.ow, k);
    for (int64_t r0 = b; r0 < e; r0 += chunk) {
      const int64_t r1 = std::min(e, r0 + chunk), m = (r1 - r0) * g.ow;
      Im2Col(x, g, r0, r1, cols.data());
      HalfPartialsProduct(cols.topRows(m), wm,
                          MatrixMap(y + r0 * g.ow * oc, m, oc));
    }
  });
}

void ConvBackpropInputHalfPartials(const KernelContext& ctx, const float* dy,
                                   const float* w, float* dx,
                                   const Window2D& g, int64_t oc) {
  const int64_t k = PatchSize(g);
  const ConstMatrixMap wm(w, k, oc);
  const int64_t chunk = std::min(RowsPerChunk(g), g.oh);
  const int64_t image = g.h * g.w * g.c;
  ctx.ParallelFor(g.n, 2.0 * g.oh * g.ow * k * oc, [&](int64_t b, int64_t e) {
    RowMajorMatrix cols(chunk * g.ow, k);
    for (int64_t n = b; n < e; ++n) {
      std::fill(dx + n * image, dx + (n + 1) * image, 0.0f);
      for (int64_t r0 = n * g.oh; r0 < (n + 1) * g.oh; r0 += chunk) {
        const int64_t r1 = std::min((n + 1) * g.oh, r0 + chunk);
        const int64_t m = (r1 - r0) * g.ow;
        HalfPartialsProduct(ConstMatrixMap(dy + r0 * g.ow * oc, m, oc),
                            wm.transpose(), cols.topRows(m));
        Col2ImAdd(cols.data(), g, r0, r1, dx);
      }
      RoundPartialsToHalf(
          Eigen::Map<Eigen::ArrayXf>(dx + n * image, image));
    }
  });
}

void ConvBackpropFilterHalfPartials(const KernelContext& ctx, const float* x,
                                    const float* dy, float* dw,
                                    const Window2D& g, int64_t oc) {
  const int64_t k = PatchSize(g);
  const int64_t chunk = RowsPerChunk(g);
  Mutex mu;
  std::map<int64_t, RowMajorMatrix> partials;
  ctx.ParallelFor(g.n * g.oh, 2.0 * g.ow * k * oc, [&](int64_t b, int64_t e) {
    RowMajorMatrix sum = RowMajorMatrix::Zero(k, oc);
    RowMajorMatrix cols(std::min(chunk, e - b) * g.ow, k);
    for (int64_t r0 = b; r0 < e; r0 += chunk) {
      const int64_t r1 = std::min(e, r0 + chunk), m = (r1 - r0) * g.ow;
      Im2Col(x, g, r0, r1, cols.data());
      HalfPartialsAccumulate(cols.topRows(m).transpose(),
                             ConstMatrixMap(dy + r0 * g.ow * oc, m, oc), sum);
    }
    MutexLock l(&mu);
    partials.emplace(b, std::move(sum));
  });
  MatrixMap dwm(dw, k, oc);
  dwm.setZero();
  for (const auto& [begin, sum] : partials) {
    dwm += sum;
    RoundPartialsToHalf(dwm);
  }
}

}  // namespace ipuflow::ops
