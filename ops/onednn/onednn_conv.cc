#include "ops/onednn/onednn_conv.h"

#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops/onednn/onednn.h"

namespace ipuflow::ops::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum Kind : int64_t { kForward, kBackwardData, kBackwardWeights };

// kind, batch, then the rest of ConvDims.
using Key = std::array<int64_t, 17>;

Key MakeKey(Kind kind, int64_t batch, const ConvDims& d) {
  return {kind,      batch,      d.h,      d.w,     d.c,    d.oc,
          d.kh,      d.kw,       d.sh,     d.sw,    d.oh,   d.ow,
          d.pad_top, d.pad_left, d.groups, d.dil_h, d.dil_w};
}

// One primitive and what running it needs. `weights` is the filter (or its
// gradient) in the layout the primitive chose; `hwio` is ipuflow's.
struct ConvPrimitive {
  dnnl::primitive conv;
  memory::desc src, weights, dst, hwio, scratchpad;
  bool reorder = false;                 // weights != hwio.
  dnnl::primitive to_weights, to_hwio;  // Reorders, when `reorder`.
};

struct Descs {
  memory::desc src, any_weights, hwio, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

Descs MakeDescs(int64_t batch, const ConvDims& d) {
  const auto f32 = memory::data_type::f32;
  Descs s;
  s.src = memory::desc({batch, d.c, d.h, d.w}, f32, Tag::nhwc);
  s.dst = memory::desc({batch, d.oc, d.oh, d.ow}, f32, Tag::nhwc);
  if (d.groups == 1) {
    s.any_weights = memory::desc({d.oc, d.c, d.kh, d.kw}, f32, Tag::any);
    s.hwio = memory::desc({d.oc, d.c, d.kh, d.kw}, f32, Tag::hwio);
  } else {
    // oneDNN's grouped weights are [g, oc / g, c / g, kh, kw]; ipuflow's
    // [kh, kw, c / g, oc] with oc = g * (oc / g) + o is that with strides.
    const int64_t cg = d.c / d.groups, ocg = d.oc / d.groups;
    const memory::dims dims = {d.groups, ocg, cg, d.kh, d.kw};
    s.any_weights = memory::desc(dims, f32, Tag::any);
    s.hwio = memory::desc(
        dims, f32, memory::dims{ocg, 1, d.oc, d.kw * cg * d.oc, cg * d.oc});
  }
  s.strides = {d.sh, d.sw};
  s.dilates = {d.dil_h - 1, d.dil_w - 1};  // oneDNN counts the gaps.
  s.pad_l = {d.pad_top, d.pad_left};
  // oneDNN wants oh = (h + top + bottom - kh_eff) / sh + 1 for the dilated
  // window kh_eff; VALID may leave rows unread (negative "padding"), which
  // a bottom padding of 0 gives too.
  const int64_t kh_eff = (d.kh - 1) * d.dil_h + 1;
  const int64_t kw_eff = (d.kw - 1) * d.dil_w + 1;
  s.pad_r = {
      std::max<int64_t>(0, (d.oh - 1) * d.sh + kh_eff - d.h - d.pad_top),
      std::max<int64_t>(0, (d.ow - 1) * d.sw + kw_eff - d.w - d.pad_left)};
  return s;
}

dnnl::convolution_forward::primitive_desc ForwardPd(
    const Descs& s, const dnnl::primitive_attr& attr) {
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      s.src, s.any_weights, s.dst, s.strides, s.dilates, s.pad_l, s.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
}

ConvPrimitive Finish(dnnl::primitive conv, const memory::desc& weights,
                     const memory::desc& scratchpad, const Descs& s) {
  ConvPrimitive p;
  p.conv = std::move(conv);
  p.src = s.src;
  p.dst = s.dst;
  p.hwio = s.hwio;
  p.weights = weights;
  p.scratchpad = scratchpad;
  p.reorder = weights != s.hwio;
  if (p.reorder) {
    const dnnl::engine& e = Engine();
    p.to_weights =
        dnnl::reorder(dnnl::reorder::primitive_desc(e, s.hwio, e, weights));
    p.to_hwio =
        dnnl::reorder(dnnl::reorder::primitive_desc(e, weights, e, s.hwio));
  }
  return p;
}

ConvPrimitive MakePrimitive(Kind kind, int64_t batch, const ConvDims& d) {
  UseOneThread();  // The primitive's thread count is fixed here.
  const Descs s = MakeDescs(batch, d);
  const dnnl::primitive_attr attr = ScratchpadAttr();
  const dnnl::convolution_forward::primitive_desc fwd = ForwardPd(s, attr);
  switch (kind) {
    case kForward:
      return Finish(dnnl::convolution_forward(fwd), fwd.weights_desc(),
                    fwd.scratchpad_desc(), s);
    case kBackwardData: {
      const dnnl::convolution_backward_data::desc desc(
          dnnl::algorithm::convolution_direct, s.src, s.any_weights, s.dst,
          s.strides, s.dilates, s.pad_l, s.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(desc, attr,
                                                               Engine(), fwd);
      return Finish(dnnl::convolution_backward_data(pd), pd.weights_desc(),
                    pd.scratchpad_desc(), s);
    }
    case kBackwardWeights: {
      const dnnl::convolution_backward_weights::desc desc(
          dnnl::algorithm::convolution_direct, s.src, s.any_weights, s.dst,
          s.strides, s.dilates, s.pad_l, s.pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(
          desc, attr, Engine(), fwd);
      return Finish(dnnl::convolution_backward_weights(pd),
                    pd.diff_weights_desc(), pd.scratchpad_desc(), s);
    }
  }
  return {};
}

PrimitiveCache<Key, ConvPrimitive>& Cache() {
  static auto* cache = new PrimitiveCache<Key, ConvPrimitive>;
  return *cache;
}

std::shared_ptr<const ConvPrimitive> Get(Kind kind, int64_t batch,
                                         const ConvDims& d) {
  return Cache().GetOrCreate(MakeKey(kind, batch, d),
                             [&] { return MakePrimitive(kind, batch, d); });
}

// The batch split: `shards` consecutive runs of `per` images (the last
// may be shorter), one per thread of the pool and the caller, unless the
// convolution is too small to share.
struct Split {
  int64_t per, shards;
  int64_t begin(int64_t s) const { return s * per; }
  int64_t size(int64_t s, int64_t n) const {
    return std::min(n, (s + 1) * per) - s * per;
  }
};

// Multiply-adds per image, as cycles for ThreadPool's split rule (about 16
// per cycle).
double CyclesPerImage(const ConvDims& d) {
  return static_cast<double>(d.oh) * d.ow * d.kh * d.kw * (d.c / d.groups) *
         d.oc / 16;
}

// One share per thread the pool's split rule would use for the whole batch
// (ThreadPool::ShardCount), so ParallelFor below runs each share on its own
// thread, and a batch too small to split is one primitive call.
Split SplitBatch(const ThreadPool& pool, const ConvDims& d) {
  const int64_t threads =
      ThreadPool::ShardCount(d.n, CyclesPerImage(d), pool.Parallelism());
  const int64_t per = (d.n + threads - 1) / threads;
  return {per, (d.n + per - 1) / per};
}

// The filter in `p`'s layout: `hwio` itself, or a reordered copy in
// `storage`.
const float* PrimitiveWeights(const ConvPrimitive& p, const float* hwio,
                              std::vector<float>* storage) {
  if (!p.reorder) return hwio;
  storage->resize(p.weights.get_size() / sizeof(float) + 16);
  dnnl::memory from = Wrap(p.hwio, hwio), to = Wrap(p.weights, storage->data());
  Execute(p.to_weights, memory::desc(),
          {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  return storage->data();
}

// oneDNN 2.6's 1x1 backward-weights kernels (jit_avx2_1x1,
// jit_avx512_common_1x1) run a strided 1x1 convolution of an NHWC source
// at unit stride over a subsampled copy ("rtus") in the scratchpad, which
// they book as is * ic floats per thread but address as is * ic_block:
// with fewer input channels than the block (8 on AVX2, 16 on AVX-512) they
// write past the scratchpad (oneDNN issue 6035, open in 2026). A 1x1
// window is never padded, so the strided convolution is the unit-stride
// one of x's pixels at (i * sh, j * sw): we subsample x here, and oneDNN
// never takes that path.
bool IsStridedPointwise(const ConvDims& d) {
  return d.kh == 1 && d.kw == 1 && (d.sh > 1 || d.sw > 1) && d.pad_top == 0 &&
         d.pad_left == 0;
}

// x's pixels that the windows of `d` read, [n, oh, ow, c], into `*out`;
// returns the unit-stride geometry over them. REQUIRES:
// IsStridedPointwise(d).
ConvDims Subsample(const ThreadPool& pool, const float* x, const ConvDims& d,
                   std::vector<float>* out) {
  out->resize(d.n * d.oh * d.ow * d.c);
  pool.ParallelFor(d.n * d.oh, 1.0 * d.ow * d.c, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t n = r / d.oh, i = r % d.oh;
      const float* row = x + ((n * d.h + i * d.sh) * d.w) * d.c;
      float* dst = out->data() + r * d.ow * d.c;
      for (int64_t j = 0; j < d.ow; ++j) {
        std::copy_n(row + j * d.sw * d.c, d.c, dst + j * d.c);
      }
    }
  });
  ConvDims unit = d;
  unit.h = d.oh;
  unit.w = d.ow;
  unit.sh = unit.sw = 1;
  return unit;
}

bool IsEmpty(const ConvDims& d) {
  return d.n * d.h * d.w * d.c * d.oc * d.kh * d.kw * d.oh * d.ow == 0;
}

// Runs `fn` and turns oneDNN's exceptions into a status.
template <typename Fn>
absl::Status Guard(const char* what, const ConvDims& d, Fn fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat(
        "oneDNN ", what, " failed for input [", d.n, ",", d.h, ",", d.w, ",",
        d.c, "], filter [", d.kh, ",", d.kw, ",", d.c / d.groups, ",", d.oc,
        "], strides [", d.sh, ",", d.sw, "], dilations [", d.dil_h, ",",
        d.dil_w, "], groups ", d.groups, ": ", e.what()));
  }
}

// Forward and backward-data: each share reads and writes its own images.
// `in` and `out` are the per-image sizes of the primitive's source and
// destination arguments.
void RunBatched(const ThreadPool& pool, Kind kind, const ConvDims& d,
                const float* in, int64_t in_image, int in_arg, const float* w,
                float* out, int64_t out_image, int out_arg) {
  const Split split = SplitBatch(pool, d);
  std::shared_ptr<const ConvPrimitive> main = Get(kind, split.per, d);
  std::vector<float> reordered;
  const float* main_w = PrimitiveWeights(*main, w, &reordered);
  pool.ParallelFor(
      split.shards, CyclesPerImage(d) * split.per, [&](int64_t b, int64_t e) {
        for (int64_t s = b; s < e; ++s) {
          const int64_t n = split.size(s, d.n), i0 = split.begin(s);
          std::shared_ptr<const ConvPrimitive> p =
              n == split.per ? main : Get(kind, n, d);
          std::vector<float> own;
          const float* pw = p == main ? main_w : PrimitiveWeights(*p, w, &own);
          const bool forward = kind == kForward;
          const memory::desc& in_desc = forward ? p->src : p->dst;
          const memory::desc& out_desc = forward ? p->dst : p->src;
          Execute(p->conv, p->scratchpad,
                  {{in_arg, Wrap(in_desc, in + i0 * in_image)},
                   {DNNL_ARG_WEIGHTS, Wrap(p->weights, pw)},
                   {out_arg, Wrap(out_desc, out + i0 * out_image)}});
        }
      });
}

}  // namespace

absl::Status ConvForward(const ThreadPool& pool, const float* x, const float* w,
                         float* y, const ConvDims& d) {
  if (IsEmpty(d)) {
    std::fill(y, y + d.n * d.oh * d.ow * d.oc, 0.0f);
    return absl::OkStatus();
  }
  return Guard("convolution forward", d, [&] {
    RunBatched(pool, kForward, d, x, d.h * d.w * d.c, DNNL_ARG_SRC, w, y,
               d.oh * d.ow * d.oc, DNNL_ARG_DST);
  });
}

absl::Status ConvBackwardData(const ThreadPool& pool, const float* dy,
                              const float* w, float* dx, const ConvDims& d) {
  if (IsEmpty(d)) {
    std::fill(dx, dx + d.n * d.h * d.w * d.c, 0.0f);
    return absl::OkStatus();
  }
  return Guard("convolution backward data", d, [&] {
    RunBatched(pool, kBackwardData, d, dy, d.oh * d.ow * d.oc,
               DNNL_ARG_DIFF_DST, w, dx, d.h * d.w * d.c, DNNL_ARG_DIFF_SRC);
  });
}

absl::Status ConvBackwardWeights(const ThreadPool& pool, const float* x,
                                 const float* dy, float* dw,
                                 const ConvDims& d) {
  const int64_t size = d.FilterElements();
  if (IsEmpty(d)) {
    std::fill(dw, dw + size, 0.0f);
    return absl::OkStatus();
  }
  if (IsStridedPointwise(d)) {
    std::vector<float> pixels;
    const ConvDims unit = Subsample(pool, x, d, &pixels);
    return ConvBackwardWeights(pool, pixels.data(), dy, dw, unit);
  }
  return Guard("convolution backward weights", d, [&] {
    const Split split = SplitBatch(pool, d);
    // Share s's gradient in HWIO: dw itself for share 0.
    std::vector<std::vector<float>> partial(split.shards - 1);
    for (auto& p : partial) p.resize(size);
    const int64_t x_image = d.h * d.w * d.c, dy_image = d.oh * d.ow * d.oc;
    pool.ParallelFor(
        split.shards, CyclesPerImage(d) * split.per, [&](int64_t b, int64_t e) {
          for (int64_t s = b; s < e; ++s) {
            const int64_t n = split.size(s, d.n), i0 = split.begin(s);
            std::shared_ptr<const ConvPrimitive> p =
                Get(kBackwardWeights, n, d);
            float* hwio = s == 0 ? dw : partial[s - 1].data();
            std::vector<float> blocked;
            float* out = hwio;
            if (p->reorder) {
              blocked.resize(p->weights.get_size() / sizeof(float) + 16);
              out = blocked.data();
            }
            Execute(p->conv, p->scratchpad,
                    {{DNNL_ARG_SRC, Wrap(p->src, x + i0 * x_image)},
                     {DNNL_ARG_DIFF_DST, Wrap(p->dst, dy + i0 * dy_image)},
                     {DNNL_ARG_DIFF_WEIGHTS, Wrap(p->weights, out)}});
            if (p->reorder) {
              Execute(p->to_hwio, memory::desc(),
                      {{DNNL_ARG_FROM, Wrap(p->weights, out)},
                       {DNNL_ARG_TO, Wrap(p->hwio, hwio)}});
            }
          }
        });
    for (const auto& p : partial) {
      for (int64_t i = 0; i < size; ++i) dw[i] += p[i];
    }
  });
}

int64_t CachedConvPrimitives() { return static_cast<int64_t>(Cache().size()); }

}  // namespace ipuflow::ops::onednn
