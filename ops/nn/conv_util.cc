#include "ops/nn/conv_util.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "ops/math/partials_type.h"

namespace ipuflow::ops {

absl::StatusOr<Window2D> ConvWindow(const TensorShape& input,
                                    const TensorShape& filter,
                                    const WindowAttrs& a,
                                    int64_t* out_channels) {
  const char* format = DataFormatName(a.format);
  if (input.rank() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("input must have rank 4 (",
                                                   format, "), got shape ",
                                                   input.DebugString()));
  }
  if (filter.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("filter must have rank 4 [kh,kw,in,out], got shape ",
                     filter.DebugString()));
  }
  const Dims4 in = ToNhwc(input, a.format);
  const int64_t filter_in = filter.dim(2);
  if (in.c >= 0 && filter_in >= 0 && in.c != filter_in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input has ", in.c, " channels (input shape ", input.DebugString(),
        ", data_format ", format, ") but the filter expects ", filter_in,
        " (filter shape ", filter.DebugString(), " is [kh,kw,in,out])"));
  }
  *out_channels = filter.dim(3);
  Dims4 merged = in;
  if (merged.c < 0) merged.c = filter_in;
  absl::StatusOr<Window2D> g =
      MakeWindow2D(merged, filter.dim(0), filter.dim(1), a);
  if (!g.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        g.status().message(), "; input shape ", input.DebugString(), " (",
        format, "), filter shape ", filter.DebugString()));
  }
  return g;
}

absl::StatusOr<Window2D> ConvShapeWindow(const ShapeContext& c, WindowAttrs* a,
                                         int64_t* out_channels) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  RETURN_IF_ERROR(c.ExpectRank(0, 4));
  RETURN_IF_ERROR(c.ExpectRank(1, 4));
  RETURN_IF_ERROR(CheckPartialsType(c));
  ASSIGN_OR_RETURN(*a, ParseWindowAttrs(c.attrs(), /*has_ksize=*/false));
  return ConvWindow(c.input_shape(0), c.input_shape(1), *a, out_channels);
}

absl::StatusOr<Window2D> ConvKernelWindow(const KernelContext& ctx,
                                          WindowAttrs* a,
                                          int64_t* out_channels) {
  absl::StatusOr<WindowAttrs> attrs =
      ParseWindowAttrs(ctx.node().attrs(), /*has_ksize=*/false);
  if (!attrs.ok()) return ctx.InvalidArgument(attrs.status().message());
  *a = *attrs;
  absl::StatusOr<Window2D> g =
      ConvWindow(ctx.input(0).shape(), ctx.input(1).shape(), *a, out_channels);
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  return g;
}

TensorShape ConvOutputShape(const Window2D& g, int64_t out_channels,
                            const WindowAttrs& a) {
  return FromNhwc({g.n, g.oh, g.ow, out_channels}, a.format);
}

int64_t RowsPerChunk(const Window2D& g) {
  constexpr int64_t kMaxChunkFloats = int64_t{1} << 18;  // 1 MiB.
  return std::max<int64_t>(
      1, kMaxChunkFloats / std::max<int64_t>(1, g.ow * PatchSize(g)));
}

void Im2Col(const float* x, const Window2D& g, int64_t r0, int64_t r1,
            float* cols) {
  using Vec = Eigen::Map<Eigen::ArrayXf>;
  using ConstVec = Eigen::Map<const Eigen::ArrayXf>;
  const int64_t k = PatchSize(g), run = g.kw * g.c;
  const size_t c_bytes = g.c * sizeof(float);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / g.oh, oh = r % g.oh;
    const float* img = x + n * g.h * g.w * g.c;
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      float* dst = cols + ((r - r0) * g.ow + ow) * k;
      const int64_t iw0 = ow * g.sw - g.pad_left;
      const bool inside_w = iw0 >= 0 && iw0 + g.kw <= g.w;
      for (int64_t kh = 0; kh < g.kh; ++kh) {
        const int64_t ih = oh * g.sh - g.pad_top + kh;
        if (ih < 0 || ih >= g.h) {
          std::memset(dst, 0, run * sizeof(float));
          dst += run;
          continue;
        }
        if (inside_w) {
          // The window's row is kw * c contiguous floats: one inlined copy
          // (a memcpy call per pixel dominated the ConvNet's time at c = 1).
          Vec(dst, run) = ConstVec(img + (ih * g.w + iw0) * g.c, run);
          dst += run;
          continue;
        }
        for (int64_t kw = 0; kw < g.kw; ++kw, dst += g.c) {
          const int64_t iw = iw0 + kw;
          if (iw < 0 || iw >= g.w) {
            std::memset(dst, 0, c_bytes);
          } else {
            std::memcpy(dst, img + (ih * g.w + iw) * g.c, c_bytes);
          }
        }
      }
    }
  }
}

void Col2ImAdd(const float* cols, const Window2D& g, int64_t r0, int64_t r1,
               float* x) {
  using Vec = Eigen::Map<Eigen::ArrayXf>;
  using ConstVec = Eigen::Map<const Eigen::ArrayXf>;
  const int64_t k = PatchSize(g), run = g.kw * g.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / g.oh, oh = r % g.oh;
    float* img = x + n * g.h * g.w * g.c;
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      const float* src = cols + ((r - r0) * g.ow + ow) * k;
      const int64_t iw0 = ow * g.sw - g.pad_left;
      const bool inside_w = iw0 >= 0 && iw0 + g.kw <= g.w;
      for (int64_t kh = 0; kh < g.kh; ++kh) {
        const int64_t ih = oh * g.sh - g.pad_top + kh;
        if (ih < 0 || ih >= g.h) {
          src += run;
          continue;
        }
        if (inside_w) {  // As in Im2Col: one contiguous run of kw * c.
          Vec(img + (ih * g.w + iw0) * g.c, run) += ConstVec(src, run);
          src += run;
          continue;
        }
        for (int64_t kw = 0; kw < g.kw; ++kw, src += g.c) {
          const int64_t iw = iw0 + kw;
          if (iw < 0 || iw >= g.w) continue;
          Vec(img + (ih * g.w + iw) * g.c, g.c) += ConstVec(src, g.c);
        }
      }
    }
  }
}

}  // namespace ipuflow::ops
