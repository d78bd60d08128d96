#include "ops/nn/conv_small.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <numeric>
#include <vector>

#include "Eigen/Core"
#include "core/mutex.h"
#include "core/prefetch.h"
#include "ops/nn/conv_rows_avx512.h"
#include "ops/nn/conv_small_avx512.h"
#include "ops/nn/conv_util.h"

namespace ipuflow::ops {
namespace {

// Eigen's SIMD packets, as TensorFlow's depthwise convolution uses them:
// the kernels need their accumulators in registers, which fixed-size Eigen
// arrays do not guarantee.
namespace pk = Eigen::internal;
using Packet = pk::packet_traits<float>::type;
constexpr int kLanes = pk::unpacket_traits<Packet>::size;
// The limits of UseSmallConv, from conv_benchmark on AVX2 (one thread):
// with up to three packets of output channels the direct kernels beat the
// GEMM path at every patch length measured (25 to 1152, 1.2x to 4x); with
// four, whose 8 accumulators per block leave the FMA units short of
// independent work, only for short patches.
constexpr int kMaxPackets = 4;
constexpr int64_t kMaxPatch = 1024;
constexpr int64_t kMaxPatchFourPackets = 64;
// Output pixels per gather (their dy rows stay in L1), and at most this many
// floats of border patch copies per pixel chunk.
constexpr int64_t kChunkPixels = 256;
constexpr int64_t kChunkFloats = 16384;
constexpr int64_t kMinRun = 16;

// Register blocking, at most 12 accumulators (16 SIMD registers with AVX).
// Forward: pixels per block of V-packet outputs, each weight packet loaded
// once per block. Filter: patch entries per pass of V-packet sums.
constexpr int ForwardPixels(int v) {
  return v == 1 ? 8 : v == 2 ? 4 : v == 3 ? 3 : 2;
}
constexpr int FilterEntries(int v) { return v == 1 ? 12 : v == 2 ? 6 : 3; }

// Set by SetSmallConvIsaForTesting: -1 (none) or a CpuIsa.
std::atomic<int> isa_for_testing{-1};
// Set by SetSmallConvRowsForTesting: -1 (none), 0 or 1.
std::atomic<int> rows_for_testing{-1};

// See SmallConvIsa. On the 2-vCPU EPYC (a Zen 4) a 512-bit FMA issues at
// about the rate of two 256-bit ones, so the AVX-512 loops win only where
// they run fewer instructions for the same lanes: 9-16 and 25-32 channels
// in whole zmm registers (conv_benchmark, one thread, alternated with
// IPUFLOW_MAX_ISA=avx2: Conv2D 1->10 1.1x, 3->16 1.08x, 1->32 1.4x, 3->32
// and 8->32 0.95x; filter gradient ->32 1.2-1.9x). With a ymm in the
// layout (up to 8, 17-24 channels) they tied or lost (10->20: Conv2D 0.98x,
// filter 0.94x) and the AVX2 loops stay; the testing override forces them.
// (Conv2D with 9-12 and 17-24 channels may take the pixel-row loop
// instead: ForwardByRows.)
CpuIsa ChosenIsa(int64_t oc) {
  const int forced = isa_for_testing.load(std::memory_order_relaxed);
  if (forced >= 0) {
    return forced == static_cast<int>(CpuIsa::kAvx512) &&
                   oc <= avx512::kSmallConvMaxChannels
               ? CpuIsa::kAvx512
               : CpuIsa::kAvx2;
  }
  return UsedIsa() == CpuIsa::kAvx512 && oc <= avx512::kSmallConvMaxChannels &&
                 avx512::SmallConvPackedWidth(oc) % 16 == 0
             ? CpuIsa::kAvx512
             : CpuIsa::kAvx2;
}

// Conv2D with 9-12 or 17-24 channels on AVX-512 runs the pixel-row loop of
// conv_rows_avx512.h instead where it measured as fast as the channel
// packets (AVX-512's zmm for 9-16, AVX2's for 17-24) or faster: patches of
// 64 floats or more (to pay for each block's transposes), and where its
// lanes are busier: rows of 8 pixels or more (blocks then span rows),
// except with 24 channels, which fill the packets, on rows whose blocks
// span rows (masked loads: a tie); rows shorter than 8 with 17-24
// channels where they fill their block as much as oc fills 24 lanes.
// conv_benchmark, one thread, CPU time, BM_Conv2DPixelRowsForced (the
// loops in one process, medians of 5, interleaved), rows against AVX2:
// B2's 10->20 (ow 8, k 250) 1.25x (BM_B2_Conv2D alternated with
// IPUFLOW_MAX_ISA=avx2: 247 vs 312 us); 10->17 1.45x; 10->24 1.05x; 6->20
// 1.23x; 3->20 (k 75) 1.13x, ow 24: 1.07x; 8->20, ow 14: 1.07x; 10->20,
// ow 10: 1.01x; 16->24, ow 12: 1.02x; 32->24, ow 14: 1.01x; 1->20 (k 25):
// 0.88x. Against the zmm loops: 10->10 (ow 8, k 250) 1.44x, 10->12 1.22x,
// 10->16 0.89x, B1's 1->10 (k 25) 0.97x.
bool ForwardByRows(const Window2D& g, int64_t oc) {
  if (!avx512::ConvRowsTakes(oc)) return false;
  const int forced = isa_for_testing.load(std::memory_order_relaxed);
  const CpuIsa isa = forced >= 0 ? static_cast<CpuIsa>(forced) : UsedIsa();
  if (isa != CpuIsa::kAvx512) return false;
  const int rows = rows_for_testing.load(std::memory_order_relaxed);
  if (rows >= 0) return rows == 1;
  if (PatchSize(g) < 64) return false;
  if (oc <= 16) return g.ow >= 8;
  if (g.ow < 8) return g.ow * 24 >= oc * 8;
  return g.ow % 8 == 0 || oc < 24;
}

// The geometry every shard shares (read-only).
struct Plan {
  Plan(const Window2D& geometry, int64_t out_channels);

  Window2D g;
  int64_t oc, k;  // Output channels, patch length.
  // The AVX-512 inner loops (conv_small_avx512.h: zmm registers and a
  // ymm, the last one masked), chosen once per call by SmallConvIsa(oc).
  bool avx512;
  int lanes;    // Floats per packet: kLanes, or 8 with avx512.
  int packets;  // ceil(oc / lanes).
  // Packet v holds output channels [start[v], start[v] + lanes). With
  // avx512, start[v] = 8 * v, ending at SmallConvPackedWidth(oc), the
  // layout of conv_small_avx512.h's packed filter and sums. Otherwise,
  // when oc is not a multiple of kLanes the last packet overlaps the one
  // before (the shared channels are computed twice, identically), so loads
  // and stores stay inside a pixel's channels; with oc < kLanes there is
  // one packet, zero-padded (`padded`).
  int64_t start[kMaxPackets] = {};
  bool padded;
  // Patch entry j of an interior pixel is at src + window[j]; of a copied
  // border patch, at src + identity[j].
  std::vector<ptrdiff_t> window, identity;
  int64_t chunk_rows;
  bool may_pad;  // Some window covers padding.
  // Interior pixels as runs of a row (PixelRuns) rather than listed: with
  // output rows of at least kMinRun pixels. With short rows (8 pixels,
  // conv_benchmark's B2) the per-row block tails cost more than the
  // listing saves.
  bool runs;
};

Plan::Plan(const Window2D& geometry, int64_t out_channels)
    : g(geometry), oc(out_channels), k(PatchSize(geometry)) {
  avx512 = ChosenIsa(oc) == CpuIsa::kAvx512;
  if (avx512) {
    lanes = 8;
    packets = static_cast<int>(avx512::SmallConvPackedWidth(oc) / 8);
    padded = false;
    for (int v = 0; v < packets; ++v) start[v] = int64_t{v} * lanes;
  } else {
    lanes = kLanes;
    packets = static_cast<int>((oc + kLanes - 1) / kLanes);
    padded = oc < kLanes;
    for (int v = 0; v < packets; ++v) {
      start[v] = padded ? 0 : std::min<int64_t>(v * kLanes, oc - kLanes);
    }
  }
  for (int64_t kh = 0; kh < g.kh; ++kh) {
    for (int64_t kw = 0; kw < g.kw; ++kw) {
      for (int64_t c = 0; c < g.c; ++c) {
        window.push_back((kh * g.w + kw) * g.c + c);
      }
    }
  }
  identity.resize(k);
  std::iota(identity.begin(), identity.end(), 0);
  const int64_t pixels = std::min(kChunkPixels, kChunkFloats / k);
  chunk_rows = std::max<int64_t>(1, pixels / std::max<int64_t>(1, g.ow));
  may_pad = g.pad_top > 0 || g.pad_left > 0 ||
            (g.oh - 1) * g.sh + g.kh > g.h + g.pad_top ||
            (g.ow - 1) * g.sw + g.kw > g.w + g.pad_left;
  runs = g.ow >= kMinRun;
}

// Output pixels (flat index (n * oh + oh) * ow + ow) and where their
// patches start.
struct PixelSet {
  std::vector<const float*> src;
  std::vector<int64_t> pixel;
  int64_t size() const { return static_cast<int64_t>(pixel.size()); }
};

// Runs of consecutive interior pixels of one output row: run r's pixel i
// (< count[r]) is pixel[r] + i, its patch at src[r] + i * step. Computing
// these per pixel costs less than gathering a pointer per pixel.
struct PixelRuns {
  std::vector<const float*> src;
  std::vector<int64_t> pixel, count;
  ptrdiff_t step = 0;
  int64_t size() const { return static_cast<int64_t>(pixel.size()); }
};

// How the block loops find P pixels: listed one by one (border patches),
// or as a run of one row (interior).
struct ListedPixels {
  const float* const* src;
  const int64_t* pixel;
  const float* Src(int64_t i) const { return src[i]; }
  int64_t Pixel(int64_t i) const { return pixel[i]; }
  ListedPixels From(int64_t i) const { return {src + i, pixel + i}; }
};
struct RunPixels {
  const float* src;
  ptrdiff_t step;
  int64_t pixel;
  const float* Src(int64_t i) const { return src + i * step; }
  int64_t Pixel(int64_t i) const { return pixel + i; }
  RunPixels From(int64_t i) const { return {src + i * step, step, pixel + i}; }
};

// One shard's view of a chunk of output rows: the pixels whose window lies
// inside the image read x in place; the others read a zero-padded copy.
class Patches {
 public:
  explicit Patches(const Plan& p)
      : p_(p), copies_(p.may_pad ? p.chunk_rows * p.g.ow * p.k : 0) {
    for (PixelSet* s : {&listed_, &border_}) {
      s->src.reserve(p.chunk_rows * p.g.ow);
      s->pixel.reserve(p.chunk_rows * p.g.ow);
    }
    interior_.src.reserve(p.chunk_rows);
    interior_.pixel.reserve(p.chunk_rows);
    interior_.count.reserve(p.chunk_rows);
    interior_.step = p.g.sw * p.g.c;
  }

  // Sorts the pixels of output rows [r0, r1) into interior() (a run per
  // row) and border(). REQUIRES: r1 - r0 <= p.chunk_rows.
  void Gather(const float* x, int64_t r0, int64_t r1);
  const PixelRuns& interior() const { return interior_; }
  // Interior pixels when !p.runs (then interior() is empty).
  const PixelSet& listed() const { return listed_; }
  const PixelSet& border() const { return border_; }

 private:
  void CopyPatch(const float* img, int64_t ih0, int64_t iw0, float* dst) const;

  const Plan& p_;
  std::vector<float> copies_;  // Border patches, k floats each.
  PixelRuns interior_;
  PixelSet listed_, border_;
};

void Patches::Gather(const float* x, int64_t r0, int64_t r1) {
  const Window2D& g = p_.g;
  interior_.src.clear();
  interior_.pixel.clear();
  interior_.count.clear();
  listed_.src.clear();
  listed_.pixel.clear();
  border_.src.clear();
  border_.pixel.clear();
  float* copy = copies_.data();
  for (int64_t r = r0; r < r1; ++r) {
    const float* img = x + (r / g.oh) * g.h * g.w * g.c;
    const int64_t ih0 = (r % g.oh) * g.sh - g.pad_top;
    const bool rows_inside = ih0 >= 0 && ih0 + g.kh <= g.h;
    // Interior columns: [ow0, ow1), iw0 = ow * sw - pad_left >= 0 and
    // iw0 + kw <= w.
    int64_t ow0 = 0, ow1 = 0;
    if (rows_inside) {
      ow0 = std::min(g.ow, (g.pad_left + g.sw - 1) / g.sw);
      const int64_t last = g.w - g.kw + g.pad_left;  // Largest ow * sw.
      ow1 = last < 0 ? 0 : std::min(g.ow, last / g.sw + 1);
      ow1 = std::max(ow0, ow1);
    }
    const float* run =
        ow1 > ow0 ? img + (ih0 * g.w + ow0 * g.sw - g.pad_left) * g.c : img;
    if (ow1 > ow0 && p_.runs) {
      interior_.src.push_back(run);
      interior_.pixel.push_back(r * g.ow + ow0);
      interior_.count.push_back(ow1 - ow0);
    } else {
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        listed_.src.push_back(run + (ow - ow0) * interior_.step);
        listed_.pixel.push_back(r * g.ow + ow);
      }
    }
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      if (ow == ow0 && ow1 > ow0) {
        ow = ow1 - 1;
        continue;
      }
      const int64_t iw0 = ow * g.sw - g.pad_left;
      CopyPatch(img, ih0, iw0, copy);
      border_.src.push_back(copy);
      border_.pixel.push_back(r * g.ow + ow);
      copy += p_.k;
    }
  }
}

void Patches::CopyPatch(const float* img, int64_t ih0, int64_t iw0,
                        float* dst) const {
  const Window2D& g = p_.g;
  for (int64_t ih = ih0; ih < ih0 + g.kh; ++ih) {
    for (int64_t iw = iw0; iw < iw0 + g.kw; ++iw, dst += g.c) {
      if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) {
        std::fill(dst, dst + g.c, 0.0f);
      } else {
        std::copy_n(img + (ih * g.w + iw) * g.c, g.c, dst);
      }
    }
  }
}

// The oc channels of one output pixel from its V packets.
template <int V>
inline void StoreChannels(const Plan& p, const Packet* acc, float* y) {
  if (p.padded) {
    alignas(EIGEN_MAX_ALIGN_BYTES) float lanes[kLanes];
    pk::pstoreu(lanes, acc[0]);
    std::copy_n(lanes, p.oc, y);
    return;
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) pk::pstoreu(y + p.start[v], acc[v]);
}

// y of P pixels = sum over patch entries j of patch[j] * w[j, :], with the
// packed weights w ([k, V * kLanes]) loaded once per entry for all P.
template <int V, int P, typename S>
void ForwardBlock(const Plan& p, S s, const ptrdiff_t* off, const float* w,
                  float* y) {
  Packet acc[P][V];
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = pk::pset1<Packet>(0.0f);
  }
  for (int64_t j = 0; j < p.k; ++j, w += V * kLanes) {
    Packet wj[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) wj[v] = pk::ploadu<Packet>(w + v * kLanes);
    const ptrdiff_t o = off[j];
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) {
      const Packet xi = pk::pset1<Packet>(s.Src(i)[o]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = pk::pmadd(xi, wj[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) {
    StoreChannels<V>(p, acc[i], y + s.Pixel(i) * p.oc);
  }
}

// The last `left` (< P) pixels of a set as one block, not `left` blocks of
// one pixel, whose V accumulator chains leave the FMA units waiting.
template <int V, int P, typename S>
void ForwardTail(int64_t left, const Plan& p, S s, const ptrdiff_t* off,
                 const float* w, float* y) {
  if constexpr (P > 0) {
    if (left == P) return ForwardBlock<V, P>(p, s, off, w, y);
    ForwardTail<V, P - 1>(left, p, s, off, w, y);
  }
}

template <int V, typename S>
void ForwardSet(const Plan& p, S s, int64_t count, const ptrdiff_t* off,
                const float* w, float* y) {
  constexpr int P = ForwardPixels(V);
  int64_t i = 0;
  for (; i + P <= count; i += P) {
    ForwardBlock<V, P>(p, s.From(i), off, w, y);
  }
  ForwardTail<V, P - 1>(count - i, p, s.From(i), off, w, y);
}

template <typename S>
void RunForwardAvx2(const Plan& p, S s, int64_t count, const ptrdiff_t* off,
                    const float* w, float* y) {
  switch (p.packets) {
    case 1:
      return ForwardSet<1>(p, s, count, off, w, y);
    case 2:
      return ForwardSet<2>(p, s, count, off, w, y);
    case 3:
      return ForwardSet<3>(p, s, count, off, w, y);
    default:
      return ForwardSet<4>(p, s, count, off, w, y);
  }
}

// The set's outputs with the plan's inner loops.
void RunForwardSet(const Plan& p, const PixelSet& s, const ptrdiff_t* off,
                   const float* w, float* y) {
  if (p.avx512) {
    return avx512::SmallConvForwardSet(s.src.data(), s.pixel.data(), s.size(),
                                       off, p.k, w, p.oc, y);
  }
  RunForwardAvx2(p, ListedPixels{s.src.data(), s.pixel.data()}, s.size(), off,
                 w, y);
}

// The runs' outputs, a run at a time (each output's sum does not depend on
// which pixels share its block).
void RunForwardRuns(const Plan& p, const PixelRuns& s, const ptrdiff_t* off,
                    const float* w, float* y) {
  for (int64_t r = 0; r < s.size(); ++r) {
    if (p.avx512) {
      avx512::SmallConvForwardRun(s.src[r], s.step, s.pixel[r], s.count[r], off,
                                  p.k, w, p.oc, y);
    } else {
      RunForwardAvx2(p, RunPixels{s.src[r], s.step, s.pixel[r]}, s.count[r],
                     off, w, y);
    }
  }
}

// The filter [k, oc] as [k, packets * lanes] packets (see Plan::start),
// zeros past oc.
std::vector<float> PackFilter(const Plan& p, const float* w) {
  std::vector<float> packed(p.k * p.packets * p.lanes, 0.0f);
  for (int64_t j = 0; j < p.k; ++j) {
    for (int v = 0; v < p.packets; ++v) {
      const int64_t lanes = std::min<int64_t>(p.lanes, p.oc - p.start[v]);
      std::copy_n(w + j * p.oc + p.start[v], lanes,
                  &packed[(j * p.packets + v) * p.lanes]);
    }
  }
  return packed;
}

// Forward by conv_rows_avx512.h's loop: each shard relays out the images
// of its rows once, into a buffer whose padding stays zero.
void ForwardRows(const KernelContext& ctx, const Plan& p, const float* x,
                 const float* w, float* y, const ConvRowEpilogue& epilogue) {
  const Window2D& g = p.g;
  const avx512::ConvRowsShape s{g.h,  g.w,  g.c,  g.kh,      g.kw,       g.sh,
                                g.sw, g.oh, g.ow, g.pad_top, g.pad_left, p.oc};
  const double cost = 2.0 * g.ow * p.k * p.oc;
  // Chunks of whole pairs of 8-pixel blocks where the image's rows allow:
  // the loop leaves idle lanes only in a call's last block.
  const int64_t pair_rows = 16 / std::gcd<int64_t>(g.ow, 16);
  const int64_t chunk_rows =
      (p.chunk_rows + pair_rows - 1) / pair_rows * pair_rows;
  ctx.ParallelFor(g.n * g.oh, cost, [&](int64_t b, int64_t e) {
    std::vector<float> xp(avx512::ConvRowsImageFloats(s), 0.0f);
    int64_t image = -1;
    for (int64_t r0 = b; r0 < e; r0 += chunk_rows) {
      const int64_t r1 = std::min(e, r0 + chunk_rows);
      for (int64_t r = r0; r < r1;) {
        const int64_t n = r / g.oh;
        const int64_t end = std::min(r1, (n + 1) * g.oh);
        if (n != image) {
          const int64_t floats = g.h * g.w * g.c;
          avx512::ConvRowsRelayout(s, x + n * floats, xp.data());
          image = n;
          // The next image's input, on its way to the cache while this
          // one computes: in the pipelined example another core wrote it,
          // and the relayout waited for it (8% of conv2's time).
          if (n + 1 < g.n) {
            PrefetchBytes(x + (n + 1) * floats, floats * sizeof(float));
          }
        }
        avx512::ConvRowsForward(s, xp.data(), w, r - n * g.oh, end - n * g.oh,
                                y + n * g.oh * g.ow * p.oc);
        r = end;
      }
      if (epilogue) epilogue(r0, r1);
    }
  });
}

void Forward(const KernelContext& ctx, const Plan& p, const float* x,
             const float* w, float* y, const ConvRowEpilogue& epilogue) {
  if (ForwardByRows(p.g, p.oc)) return ForwardRows(ctx, p, x, w, y, epilogue);
  const std::vector<float> packed = PackFilter(p, w);
  const double cost = 2.0 * p.g.ow * p.k * p.oc;
  ctx.ParallelFor(p.g.n * p.g.oh, cost, [&](int64_t b, int64_t e) {
    Patches patches(p);
    for (int64_t r0 = b; r0 < e; r0 += p.chunk_rows) {
      patches.Gather(x, r0, std::min(e, r0 + p.chunk_rows));
      RunForwardRuns(p, patches.interior(), p.window.data(), packed.data(), y);
      RunForwardSet(p, patches.listed(), p.window.data(), packed.data(), y);
      RunForwardSet(p, patches.border(), p.identity.data(), packed.data(), y);
      if (epilogue) epilogue(r0, std::min(e, r0 + p.chunk_rows));
    }
  });
}

// A pixel's dy row: dy + (pixel - pixel0) * stride, its packets at
// Plan::start.
struct DyRows {
  const float* dy;
  int64_t stride, pixel0;
};

// sum[j, :] += sum over the pixels of patch[j] * dy[pixel, :] for G
// patch entries j (sum and off start at the first), G * V accumulators.
// The pixels: those of segments [0, segments) in order, count[q] of
// seg[q] each.
template <int V, int G, typename S>
void FilterBlock(const Plan& p, const S* seg, const int64_t* count,
                 int64_t segments, const ptrdiff_t* off, const DyRows& d,
                 float* sum) {
  Packet acc[G][V];
#pragma GCC unroll 12
  for (int j = 0; j < G; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[j][v] = pk::ploadu<Packet>(sum + (j * V + v) * kLanes);
    }
  }
  for (int64_t q = 0; q < segments; ++q) {
    const S s = seg[q];
    for (int64_t i = 0; i < count[q]; ++i) {
      const float* dy = d.dy + (s.Pixel(i) - d.pixel0) * d.stride;
      Packet dv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) dv[v] = pk::ploadu<Packet>(dy + p.start[v]);
      const float* src = s.Src(i);
#pragma GCC unroll 12
      for (int j = 0; j < G; ++j) {
        const Packet xj = pk::pset1<Packet>(src[off[j]]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
          acc[j][v] = pk::pmadd(xj, dv[v], acc[j][v]);
        }
      }
    }
  }
#pragma GCC unroll 12
  for (int j = 0; j < G; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      pk::pstoreu(sum + (j * V + v) * kLanes, acc[j][v]);
    }
  }
}

// The last `left` (< G) patch entries.
template <int V, int G, typename S>
void FilterTail(int64_t left, const Plan& p, const S* seg, const int64_t* count,
                int64_t segments, const ptrdiff_t* off, const DyRows& d,
                float* sum) {
  if constexpr (G > 0) {
    if (left == G) {
      return FilterBlock<V, G>(p, seg, count, segments, off, d, sum);
    }
    FilterTail<V, G - 1>(left, p, seg, count, segments, off, d, sum);
  }
}

template <int V, typename S>
void FilterSet(const Plan& p, const S* seg, const int64_t* count,
               int64_t segments, const ptrdiff_t* off, const DyRows& d,
               float* sum) {
  if (segments == 0) return;
  constexpr int G = FilterEntries(V);
  int64_t j = 0;
  for (; j + G <= p.k; j += G) {
    FilterBlock<V, G>(p, seg, count, segments, off + j, d,
                      sum + j * V * kLanes);
  }
  FilterTail<V, G - 1>(p.k - j, p, seg, count, segments, off + j, d,
                       sum + j * V * kLanes);
}

template <typename S>
void RunFilterAvx2(const Plan& p, const S* seg, const int64_t* count,
                   int64_t segments, const ptrdiff_t* off, const DyRows& d,
                   float* sum) {
  switch (p.packets) {
    case 1:
      return FilterSet<1>(p, seg, count, segments, off, d, sum);
    case 2:
      return FilterSet<2>(p, seg, count, segments, off, d, sum);
    case 3:
      return FilterSet<3>(p, seg, count, segments, off, d, sum);
    default:
      return FilterSet<4>(p, seg, count, segments, off, d, sum);
  }
}

// sum [k, packets * lanes] += the set's terms, with the plan's inner loops.
void RunFilterSet(const Plan& p, const PixelSet& s, const ptrdiff_t* off,
                  const DyRows& d, float* sum) {
  if (s.size() == 0) return;
  if (p.avx512) {
    return avx512::SmallConvFilterSet(s.src.data(), s.pixel.data(), s.size(),
                                      off, p.k, d.dy, d.stride, d.pixel0, p.oc,
                                      sum);
  }
  const ListedPixels all{s.src.data(), s.pixel.data()};
  const int64_t count = s.size();
  RunFilterAvx2(p, &all, &count, 1, off, d, sum);
}

// The same for interior runs, in order (the sums' order of pixels is the
// listed sets').
void RunFilterRuns(const Plan& p, const PixelRuns& s, const ptrdiff_t* off,
                   const DyRows& d, std::vector<RunPixels>& scratch,
                   float* sum) {
  if (s.size() == 0) return;
  if (p.avx512) {
    return avx512::SmallConvFilterRuns(s.src.data(), s.step, s.pixel.data(),
                                       s.count.data(), s.size(), off, p.k, d.dy,
                                       d.stride, d.pixel0, p.oc, sum);
  }
  scratch.clear();
  for (int64_t r = 0; r < s.size(); ++r) {
    scratch.push_back(RunPixels{s.src[r], s.step, s.pixel[r]});
  }
  RunFilterAvx2(p, scratch.data(), s.count.data(), s.size(), off, d, sum);
}

// One shard's sum [k, packets * lanes] over output rows [b, e).
Eigen::ArrayXf FilterRows(const Plan& p, const float* x, const float* dy,
                          int64_t b, int64_t e) {
  Eigen::ArrayXf sum = Eigen::ArrayXf::Zero(p.k * p.packets * p.lanes);
  Patches patches(p);
  // With oc < kLanes (AVX2), dy rows are copied zero-padded to kLanes
  // floats; the AVX-512 loops mask their loads instead.
  std::vector<float> padded(p.padded ? p.chunk_rows * p.g.ow * kLanes : 0);
  std::vector<RunPixels> runs;
  for (int64_t r0 = b; r0 < e; r0 += p.chunk_rows) {
    const int64_t r1 = std::min(e, r0 + p.chunk_rows);
    patches.Gather(x, r0, r1);
    DyRows d{dy, p.oc, 0};
    if (p.padded) {
      const int64_t pixels = (r1 - r0) * p.g.ow;
      for (int64_t i = 0; i < pixels; ++i) {
        const float* row = dy + (r0 * p.g.ow + i) * p.oc;
        std::fill(std::copy_n(row, p.oc, &padded[i * kLanes]),
                  &padded[(i + 1) * kLanes], 0.0f);
      }
      d = DyRows{padded.data(), kLanes, r0 * p.g.ow};
    }
    RunFilterRuns(p, patches.interior(), p.window.data(), d, runs, sum.data());
    RunFilterSet(p, patches.listed(), p.window.data(), d, sum.data());
    RunFilterSet(p, patches.border(), p.identity.data(), d, sum.data());
  }
  return sum;
}

void BackpropFilter(const KernelContext& ctx, const Plan& p, const float* x,
                    const float* dy, float* dw) {
  Mutex mu;
  std::map<int64_t, Eigen::ArrayXf> partials;
  const double cost = 2.0 * p.g.ow * p.k * p.oc;
  ctx.ParallelFor(p.g.n * p.g.oh, cost, [&](int64_t b, int64_t e) {
    Eigen::ArrayXf sum = FilterRows(p, x, dy, b, e);
    MutexLock l(&mu);
    partials.emplace(b, std::move(sum));
  });
  Eigen::ArrayXf total = Eigen::ArrayXf::Zero(p.k * p.packets * p.lanes);
  for (const auto& [begin, sum] : partials) total += sum;
  for (int64_t j = 0; j < p.k; ++j) {
    for (int v = 0; v < p.packets; ++v) {
      const int64_t lanes = std::min<int64_t>(p.lanes, p.oc - p.start[v]);
      std::copy_n(&total[(j * p.packets + v) * p.lanes], lanes,
                  dw + j * p.oc + p.start[v]);
    }
  }
}

}  // namespace

bool UseSmallConv(const Window2D& g, int64_t oc) {
  if (oc <= 0 || g.n <= 0 || g.oh <= 0 || g.ow <= 0) return false;
  const int64_t packets = (oc + kLanes - 1) / kLanes;
  const int64_t k = PatchSize(g);
  if (k <= 0) return false;
  return packets < kMaxPackets    ? k <= kMaxPatch
         : packets == kMaxPackets ? k <= kMaxPatchFourPackets
                                  : false;
}

void SmallConvForward(const KernelContext& ctx, const float* x, const float* w,
                      float* y, const Window2D& g, int64_t oc,
                      const ConvRowEpilogue& epilogue) {
  Forward(ctx, Plan(g, oc), x, w, y, epilogue);
}

void SmallConvBackpropFilter(const KernelContext& ctx, const float* x,
                             const float* dy, float* dw, const Window2D& g,
                             int64_t oc) {
  BackpropFilter(ctx, Plan(g, oc), x, dy, dw);
}

void SetSmallConvRowsForTesting(std::optional<bool> rows) {
  rows_for_testing.store(rows ? int{*rows} : -1, std::memory_order_relaxed);
}

void SetSmallConvIsaForTesting(std::optional<CpuIsa> isa) {
  isa_for_testing.store(isa ? static_cast<int>(*isa) : -1,
                        std::memory_order_relaxed);
}

CpuIsa SmallConvIsa(int64_t oc) { return ChosenIsa(oc); }

bool SmallConvForwardByRows(const Window2D& g, int64_t oc) {
  return ForwardByRows(g, oc);
}

}  // namespace ipuflow::ops
