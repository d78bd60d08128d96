#include "ops/nn/max_pool_2d.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#ifdef __F16C__
#include <immintrin.h>
#endif

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "core/prefetch.h"
#include "ops/cwise.h"
#include "ops/nn/window_2d.h"

namespace ipuflow::ops {
namespace {

// Wide channels (c >= one SIMD packet) are processed in whole packets of
// Eigen's packet math, the last one overlapping the one before when c is
// not a multiple: the shared channels get the same value twice. Dynamic
// Eigen expressions over c = 10 floats spent most of their time peeling.
namespace pk = Eigen::internal;
using Packet = pk::packet_traits<float>::type;
constexpr int64_t kPoolLanes = pk::unpacket_traits<Packet>::size;

// Calls f(offset) for the packets covering channels [0, c).
// REQUIRES: c >= kPoolLanes.
template <typename F>
inline void ForEachPacket(int64_t c, F f) {
  for (int64_t o = 0; o + kPoolLanes < c; o += kPoolLanes) f(o);
  f(c - kPoolLanes);
}

// A packet of floats from float or float16 memory, and back. float16 is
// widened with F16C and narrowed without rounding: a pool's values are its
// input's. So float16 pools run on their tensors in place, with no float32
// copies (they cost the float16 ConvNet step a tenth of its time).
template <typename T>
inline Packet LoadPacket(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return pk::ploadu<Packet>(p);
  } else {
#if defined(__F16C__) && !defined(EIGEN_VECTORIZE_AVX512)
    static_assert(kPoolLanes == 8);
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
    alignas(EIGEN_MAX_ALIGN_BYTES) float f[kPoolLanes];
    for (int64_t i = 0; i < kPoolLanes; ++i) f[i] = static_cast<float>(p[i]);
    return pk::pload<Packet>(f);
#endif
  }
}

template <typename T>
inline void StorePacket(T* p, const Packet& v) {
  if constexpr (std::is_same_v<T, float>) {
    pk::pstoreu(p, v);
  } else {
#if defined(__F16C__) && !defined(EIGEN_VECTORIZE_AVX512)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
#else
    alignas(EIGEN_MAX_ALIGN_BYTES) float f[kPoolLanes];
    pk::pstore(f, v);
    for (int64_t i = 0; i < kPoolLanes; ++i) p[i] = static_cast<half>(f[i]);
#endif
  }
}

// The max of a window's packets at p + i * row + j * col, i < kh, j < kw,
// in window order, from -inf (pmax keeps its first argument when the other
// is NaN: NaN inputs are skipped). KH, KW > 0 fix the window's size at
// compile time: the loops unroll, where two-iteration loops of unknown
// count cost the 2x2 pool three times its loads (branches, induction).
template <int KH, int KW, typename T>
inline Packet WindowMax(const T* p, int64_t row, int64_t col, int64_t kh,
                        int64_t kw) {
  Packet m = pk::pset1<Packet>(-std::numeric_limits<float>::infinity());
  if constexpr (KH > 0 && KW > 0) {
    for (int i = 0; i < KH; ++i) {
      for (int j = 0; j < KW; ++j)
        m = pk::pmax(m, LoadPacket(p + i * row + j * col));
    }
  } else {
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j)
        m = pk::pmax(m, LoadPacket(p + i * row + j * col));
    }
  }
  return m;
}

// The ConvNet's pool (2x2 windows, stride 2, no padding, every window
// whole) one output row at a time: input rows `a` and `b`, `ow` windows of
// c >= kPoolLanes channels; everything in registers, no clipping. Same order
// and NaN rule as WindowMax, so the same results. AVX2 on every CPU: an
// AVX-512F variant (16-lane blocks, the channel tail masked) measured 1.2x
// slower forward and 1.1x backward on the 2-vCPU EPYC with AVX-512
// (kernel_vs_onednn_benchmark, same binary, the variant capped by an
// environment variable: 25.6 vs 21.0 us, 47.5 vs 42.6 us at [40,24,24,10]).
// A second layout, the two input rows' maximum in whole 16-lane vectors to a
// buffer and then each window's two pixels as masked c-lane loads (pipelined
// a row ahead so loads do not meet in-flight stores), was 0.71-0.80x the
// AVX2 rows' speed at [40,24,24,10] (session 8, a standalone A/B of the two
// row functions, 15 alternating rounds). This pool already runs at 0.86x
// oneDNN's forward time and 0.87x its backward (kernel_vs_onednn_benchmark).
inline bool Is2x2Tiled(const Window2D& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.pad_top == 0 &&
         g.pad_left == 0 && 2 * g.oh <= g.h && 2 * g.ow <= g.w &&
         g.c >= kPoolLanes;
}

template <typename T>
void MaxPool2x2Row(const T* a, const T* b, T* out, int64_t ow, int64_t c) {
  const int64_t last = c - kPoolLanes;
  const Packet ninf =
      pk::pset1<Packet>(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < ow; ++j, a += 2 * c, b += 2 * c, out += c) {
    for (int64_t o = 0;; o += kPoolLanes) {
      if (o > last) o = last;  // The last packet overlaps the one before.
      Packet m = pk::pmax(ninf, LoadPacket(a + o));
      m = pk::pmax(m, LoadPacket(a + c + o));
      m = pk::pmax(m, LoadPacket(b + o));
      m = pk::pmax(m, LoadPacket(b + c + o));
      StorePacket(out + o, m);
      if (o == last) break;
    }
  }
}

// Its gradient: dx (rows da, db) = dy at the first x == y in window order
// (a, a + c, b, b + c), 0 at the window's other pixels; as
// MaxPoolGradWindow.
template <typename T>
void MaxPoolGrad2x2Row(const T* a, const T* b, const T* y, const T* dy, T* da,
                       T* db, int64_t ow, int64_t c) {
  const int64_t last = c - kPoolLanes;
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t o = 0;; o += kPoolLanes) {
      if (o > last) o = last;
      const Packet yv = LoadPacket(y + o), dyv = LoadPacket(dy + o);
      Packet left = pk::ptrue(yv);
      auto pixel = [&](const T* x, T* dx) {
        const Packet hit = pk::pand(pk::pcmp_eq(LoadPacket(x), yv), left);
        StorePacket(dx, pk::pand(hit, dyv));
        left = pk::pandnot(left, hit);
      };
      pixel(a + o, da + o);
      pixel(a + c + o, da + c + o);
      pixel(b + o, db + o);
      pixel(b + c + o, db + c + o);
      if (o == last) break;
    }
    a += 2 * c, b += 2 * c, da += 2 * c, db += 2 * c, y += c, dy += c;
  }
}

// y[n, oh, ow, :] = max over the window's valid pixels (vectorised over
// channels), output rows in parallel.
template <typename T>
void MaxPoolForward(const KernelContext& ctx, const T* x, T* y,
                    const Window2D& g) {
  const double cost = static_cast<double>(g.ow) * g.kh * g.kw * g.c;
  if (Is2x2Tiled(g)) {
    ctx.ParallelFor(g.n * g.oh, cost, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* a = x + ((r / g.oh) * g.h + 2 * (r % g.oh)) * g.w * g.c;
        MaxPool2x2Row(a, a + g.w * g.c, y + r * g.ow * g.c, g.ow, g.c);
      }
    });
    return;
  }
  ctx.ParallelFor(g.n * g.oh, cost, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* img = x + (r / g.oh) * g.h * g.w * g.c;
      int64_t h0, h1;
      ClipWindow((r % g.oh) * g.sh - g.pad_top, g.kh, g.h, &h0, &h1);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        int64_t w0, w1;
        ClipWindow(ow * g.sw - g.pad_left, g.kw, g.w, &w0, &w1);
        T* out = y + (r * g.ow + ow) * g.c;
        if (h0 >= h1 || w0 >= w1) {  // Only padding.
          std::fill(out, out + g.c, T(0.0f));
          continue;
        }
        if (g.c >= kPoolLanes) {
          const T* first = img + (h0 * g.w + w0) * g.c;
          if (h1 - h0 == 2 && w1 - w0 == 2) {  // The ConvNet's 2x2 windows.
            ForEachPacket(g.c, [&](int64_t o) {
              StorePacket(out + o,
                          WindowMax<2, 2>(first + o, g.w * g.c, g.c, 2, 2));
            });
          } else {
            ForEachPacket(g.c, [&](int64_t o) {
              StorePacket(out + o, WindowMax<0, 0>(first + o, g.w * g.c, g.c,
                                                   h1 - h0, w1 - w0));
            });
          }
          continue;
        }
        if constexpr (!std::is_same_v<T, float>) {
          return;  // REQUIRES for float16: c >= kPoolLanes (MaxPoolKernel).
        } else {
          ArrayMap<float> outv(out, g.c);
          outv.setConstant(-std::numeric_limits<float>::infinity());
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              outv = outv.max(
                  ConstArrayMap<float>(img + (ih * g.w + iw) * g.c, g.c));
            }
          }
        }
      }
    }
  });
}

// dx[first argmax of each window] += dy, one image per task (windows of an
// image may overlap). `left` marks channels whose max is not found yet.
void MaxPoolBackwardOverlapping(const KernelContext& ctx, const float* x,
                                const float* y, const float* dy, float* dx,
                                const Window2D& g) {
  const int64_t image = g.h * g.w * g.c;
  const double cost = 3.0 * g.oh * g.ow * g.kh * g.kw * g.c;
  ctx.ParallelFor(g.n, cost, [&](int64_t b, int64_t e) {
    ArrayX<float> left(g.c), hit(g.c);
    for (int64_t n = b; n < e; ++n) {
      std::fill(dx + n * image, dx + (n + 1) * image, 0.0f);
      for (int64_t r = n * g.oh; r < (n + 1) * g.oh; ++r) {
        int64_t h0, h1;
        ClipWindow((r % g.oh) * g.sh - g.pad_top, g.kh, g.h, &h0, &h1);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t w0, w1;
          ClipWindow(ow * g.sw - g.pad_left, g.kw, g.w, &w0, &w1);
          const int64_t o = (r * g.ow + ow) * g.c;
          const ConstArrayMap<float> yv(y + o, g.c), dyv(dy + o, g.c);
          left.setOnes();
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              const int64_t i = n * image + (ih * g.w + iw) * g.c;
              hit =
                  (ConstArrayMap<float>(x + i, g.c) == yv).cast<float>() * left;
              ArrayMap<float>(dx + i, g.c) += hit * dyv;
              left -= hit;
            }
          }
        }
      }
    }
  });
}

// One window of the disjoint case: dx = dy at the first x == y in window
// order, 0 at its other pixels; in whole packets of channels.
// KH, KW > 0: the window's size at compile time (as WindowMax).
template <int KH, int KW, typename T>
void MaxPoolGradWindow(const T* img, const T* y, const T* dy, T* dximg,
                       const Window2D& g, int64_t h0, int64_t h1, int64_t w0,
                       int64_t w1) {
  const int64_t row = g.w * g.c, first = (h0 * g.w + w0) * g.c;
  const int64_t kh = KH > 0 ? KH : h1 - h0, kw = KW > 0 ? KW : w1 - w0;
  ForEachPacket(g.c, [&](int64_t o) {
    const Packet yv = LoadPacket(y + o);
    const Packet dyv = LoadPacket(dy + o);
    Packet left = pk::ptrue(yv);  // All bits set: not found yet.
    auto pixel = [&](int64_t i) {
      const Packet hit = pk::pand(pk::pcmp_eq(LoadPacket(img + i), yv), left);
      StorePacket(dximg + i, pk::pand(hit, dyv));
      left = pk::pandnot(left, hit);
    };
    if constexpr (KH > 0 && KW > 0) {
      for (int i = 0; i < KH; ++i) {
        for (int j = 0; j < KW; ++j) pixel(first + i * row + j * g.c + o);
      }
    } else {
      for (int64_t i = 0; i < kh; ++i) {
        for (int64_t j = 0; j < kw; ++j) pixel(first + i * row + j * g.c + o);
      }
    }
  });
}

// The same when windows do not overlap (kh <= sh, kw <= sw) and c >=
// kPoolLanes: each input pixel belongs to at most one window, so output rows
// are independent and every window's pixels are assigned, not added to.
// Output row r's shard also zeroes its band of input rows, [r * sh - pad,
// (r + 1) * sh - pad) clipped to the image, unless the windows tile it.
template <typename T>
void MaxPoolBackwardDisjoint(const KernelContext& ctx, const T* x, const T* y,
                             const T* dy, T* dx, const Window2D& g) {
  const int64_t image = g.h * g.w * g.c, row = g.w * g.c;
  const bool tiled = g.kh == g.sh && g.kw == g.sw && g.pad_top == 0 &&
                     g.pad_left == 0 && g.oh * g.sh == g.h &&
                     g.ow * g.sw == g.w;
  const double cost = 3.0 * g.ow * g.kh * g.kw * g.c;
  ctx.ParallelFor(g.n * g.oh, cost, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t n = r / g.oh, oh = r % g.oh;
      const T* img = x + n * image;
      T* dximg = dx + n * image;
      const int64_t top = oh * g.sh - g.pad_top;
      if (!tiled) {
        const int64_t band0 = oh == 0 ? 0 : std::max<int64_t>(0, top);
        const int64_t band1 = oh == g.oh - 1 ? g.h : std::min(g.h, top + g.sh);
        std::fill(dximg + band0 * row, dximg + std::max(band0, band1) * row,
                  T(0.0f));
      }
      if (Is2x2Tiled(g)) {
        const int64_t a = top * row;
        // In a pipeline, x and y come from a stash written several
        // micro-batches earlier, mostly out of cache, and the hardware
        // prefetchers do not keep up with these six streams: asking for
        // the next-but-one output row's x and y now halved this loop's
        // share of the main example's CPU (perf: 6.9% -> 3.8%).
        if (r + 2 < e) {
          PrefetchBytes(img + a + 4 * row, 2 * row * sizeof(T));
          PrefetchBytes(y + (r + 2) * g.ow * g.c, g.ow * g.c * sizeof(T));
        }
        MaxPoolGrad2x2Row(img + a, img + a + row, y + r * g.ow * g.c,
                          dy + r * g.ow * g.c, dximg + a, dximg + a + row, g.ow,
                          g.c);
        continue;
      }
      int64_t h0, h1;
      ClipWindow(top, g.kh, g.h, &h0, &h1);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        int64_t w0, w1;
        ClipWindow(ow * g.sw - g.pad_left, g.kw, g.w, &w0, &w1);
        const int64_t o = (r * g.ow + ow) * g.c;
        if (h1 - h0 == 2 && w1 - w0 == 2) {
          MaxPoolGradWindow<2, 2>(img, y + o, dy + o, dximg, g, h0, h1, w0, w1);
        } else {
          MaxPoolGradWindow<0, 0>(img, y + o, dy + o, dximg, g, h0, h1, w0, w1);
        }
      }
    }
  });
}

void MaxPoolBackward(const KernelContext& ctx, const float* x, const float* y,
                     const float* dy, float* dx, const Window2D& g) {
  if (g.c >= kPoolLanes && g.kh <= g.sh && g.kw <= g.sw) {
    MaxPoolBackwardDisjoint(ctx, x, y, dy, dx, g);
  } else {
    MaxPoolBackwardOverlapping(ctx, x, y, dy, dx, g);
  }
}

// float16 NHWC with whole packets of channels pools in place.
bool HalfInPlace(const Tensor& x, const WindowAttrs& a, const Window2D& g) {
  return x.dtype() == DType::kFloat16 && a.format == DataFormat::kNHWC &&
         g.c >= kPoolLanes;
}

absl::Status MaxPoolKernel(KernelContext& ctx) {
  WindowAttrs a;
  ASSIGN_OR_RETURN(Window2D g, PoolKernelWindow(ctx, &a));
  if (HalfInPlace(ctx.input(0), a, g)) {
    ASSIGN_OR_RETURN(Tensor * y,
                     ctx.allocate_output(0, FromNhwc({g.n, g.oh, g.ow, g.c},
                                                     DataFormat::kNHWC)));
    MaxPoolForward(ctx, ctx.input(0).data<half>(), y->data<half>(), g);
    return absl::OkStatus();
  }
  const Tensor x = ToNhwcTensor(ctx, ctx.input(0), a.format, /*slot=*/0);
  Tensor scratch;
  ASSIGN_OR_RETURN(
      Tensor * y,
      AllocateNhwcOutput(ctx, 0, {g.n, g.oh, g.ow, g.c}, a.format, &scratch));
  MaxPoolForward(ctx, x.data<float>(), y->data<float>(), g);
  // Maxima of float16 values are float16 values: no rounding.
  RETURN_IF_ERROR(FinishNhwcOutput(ctx, 0, a.format, scratch, /*exact=*/true));
  return absl::OkStatus();
}

absl::Status MaxPoolGradKernel(KernelContext& ctx) {
  WindowAttrs a;
  ASSIGN_OR_RETURN(Window2D g, PoolKernelWindow(ctx, &a));
  const TensorShape out = FromNhwc({g.n, g.oh, g.ow, g.c}, a.format);
  for (int i : {1, 2}) {
    if (ctx.input(i).shape() != out) {
      return ctx.InvalidArgument(
          i == 1 ? "input 'y'" : "input 'dy'", " has shape ",
          ctx.input(i).shape().DebugString(),
          " but MaxPool2D's output has shape ", out.DebugString());
    }
  }
  if (HalfInPlace(ctx.input(0), a, g) && g.kh <= g.sh && g.kw <= g.sw) {
    ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, ctx.input(0).shape()));
    MaxPoolBackwardDisjoint(ctx, ctx.input(0).data<half>(),
                            ctx.input(1).data<half>(),
                            ctx.input(2).data<half>(), dx->data<half>(), g);
    return absl::OkStatus();
  }
  const Tensor x = ToNhwcTensor(ctx, ctx.input(0), a.format, /*slot=*/0);
  const Tensor y = ToNhwcTensor(ctx, ctx.input(1), a.format, /*slot=*/1);
  const Tensor dy = ToNhwcTensor(ctx, ctx.input(2), a.format, /*slot=*/2);
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * dx, AllocateNhwcOutput(ctx, 0, {g.n, g.h, g.w, g.c},
                                                   a.format, &scratch));
  MaxPoolBackward(ctx, x.data<float>(), y.data<float>(), dy.data<float>(),
                  dx->data<float>(), g);
  // Disjoint windows route each dy value to one place (exact); overlapping
  // ones may add several, which rounds.
  const bool disjoint = g.kh <= g.sh && g.kw <= g.sw;
  RETURN_IF_ERROR(FinishNhwcOutput(ctx, 0, a.format, scratch, disjoint));
  return absl::OkStatus();
}

REGISTER_OP("MaxPool2D")
    .Input("x")
    .RequiredAttr("ksize", AttrType::kIntList)
    .RequiredAttr("strides", AttrType::kIntList)
    .RequiredAttr("padding", AttrType::kString)
    .Attr("data_format", "NHWC")
    .SetShapeFn(PoolShape)
    .SetKernel(MaxPoolKernel)
    // y = max over each window of x;  dx = dy at the (first) argmax of each
    // window, 0 elsewhere (MaxPoolGrad).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      Output y(const_cast<Node*>(&op), 0);
      dx->push_back(MaxPoolGrad(s, op.input(0), y, dy[0],
                                op.attr<std::vector<int64_t>>("ksize"),
                                op.attr<std::vector<int64_t>>("strides"),
                                op.attr<std::string>("padding"),
                                op.attr<std::string>("data_format")));
      return absl::OkStatus();
    });

REGISTER_OP("MaxPoolGrad")
    .Input("x")
    .Input("y")
    .Input("dy")
    .RequiredAttr("ksize", AttrType::kIntList)
    .RequiredAttr("strides", AttrType::kIntList)
    .RequiredAttr("padding", AttrType::kString)
    .Attr("data_format", "NHWC")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      WindowAttrs a;
      ASSIGN_OR_RETURN(Window2D g, PoolShapeWindow(c, &a));
      const TensorShape out = FromNhwc({g.n, g.oh, g.ow, g.c}, a.format);
      for (int i : {1, 2}) {
        RETURN_IF_ERROR(c.ExpectSameDType(0, i));
        if (!c.input_shape(i).IsCompatibleWith(out)) {
          return absl::InvalidArgumentError(absl::StrCat(
              c.InputName(i), " has shape ", c.input_shape(i).DebugString(),
              " but MaxPool2D's output has shape ", out.DebugString()));
        }
      }
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel(MaxPoolGradKernel)
    .NotDifferentiable("second-order gradients of MaxPool2D are not supported");

}  // namespace

Output MaxPool2D(const Scope& scope, Output x,
                 const std::vector<int64_t>& ksize,
                 const std::vector<int64_t>& strides,
                 const std::string& padding, const std::string& data_format) {
  return scope.AddNode("MaxPool2D", {x},
                       {{"ksize", ksize},
                        {"strides", strides},
                        {"padding", padding},
                        {"data_format", data_format}});
}

Output MaxPoolGrad(const Scope& scope, Output x, Output y, Output dy,
                   const std::vector<int64_t>& ksize,
                   const std::vector<int64_t>& strides,
                   const std::string& padding, const std::string& data_format) {
  return scope.AddNode("MaxPoolGrad", {x, y, dy},
                       {{"ksize", ksize},
                        {"strides", strides},
                        {"padding", padding},
                        {"data_format", data_format}});
}

}  // namespace ipuflow::ops
