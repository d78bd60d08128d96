#include "ops/nn/window_2d.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/half.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

using RowMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

absl::StatusOr<DataFormat> ParseDataFormat(const std::string& s) {
  if (s == "NHWC") return DataFormat::kNHWC;
  if (s == "NCHW") return DataFormat::kNCHW;
  return absl::InvalidArgumentError(absl::StrCat(
      "data_format must be \"NHWC\" or \"NCHW\", got \"", s, "\""));
}

absl::StatusOr<Padding> ParsePadding(const std::string& s) {
  if (s == "VALID") return Padding::kValid;
  if (s == "SAME") return Padding::kSame;
  return absl::InvalidArgumentError(
      absl::StrCat("padding must be \"VALID\" or \"SAME\", got \"", s, "\""));
}

// [h, w] from a list of 2, or of 4 in the layout's order with 1 for N and C.
absl::Status ParseHW(const AttrMap& attrs, const std::string& name,
                     DataFormat f, int64_t* h, int64_t* w) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v,
                   GetAttr<std::vector<int64_t>>(attrs, name));
  const std::string shown = absl::StrCat("[", absl::StrJoin(v, ","), "]");
  if (v.size() == 2) {
    *h = v[0];
    *w = v[1];
  } else if (v.size() == 4) {
    const bool nhwc = f == DataFormat::kNHWC;
    const int64_t n = v[0], c = nhwc ? v[3] : v[1];
    if (n != 1 || c != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " ", shown, " must be 1 in the batch and channel entries for ",
          DataFormatName(f), " (or give just [h, w])"));
    }
    *h = nhwc ? v[1] : v[2];
    *w = nhwc ? v[2] : v[3];
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " ", shown,
                     " must have 2 entries [h, w] or 4 (one per dimension)"));
  }
  // Bounded like tensor sizes so that window arithmetic cannot wrap.
  if (*h < 1 || *w < 1 || *h > kMaxTensorElements || *w > kMaxTensorElements) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " ", shown, " must be positive and at most ",
                     kMaxTensorElements));
  }
  return absl::OkStatus();
}

absl::Status WindowDim(const char* dim, int64_t in, int64_t k, int64_t s,
                       Padding p, int64_t* out, int64_t* pad_before) {
  *pad_before = 0;
  if (in < 0 || k < 0) {
    *out = -1;
    return absl::OkStatus();
  }
  if (p == Padding::kValid) {
    if (k > in) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VALID padding: window ", dim, " ", k, " is larger than the input ",
          dim, " ", in, " (use SAME padding or a smaller window)"));
    }
    *out = (in - k) / s + 1;
    return absl::OkStatus();
  }
  *out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((*out - 1) * s + k - in, 0);
  *pad_before = total / 2;
  return absl::OkStatus();
}

}  // namespace

const char* DataFormatName(DataFormat f) {
  return f == DataFormat::kNHWC ? "NHWC" : "NCHW";
}

Dims4 ToNhwc(const TensorShape& s, DataFormat f) {
  if (f == DataFormat::kNHWC) return {s.dim(0), s.dim(1), s.dim(2), s.dim(3)};
  return {s.dim(0), s.dim(2), s.dim(3), s.dim(1)};
}

TensorShape FromNhwc(const Dims4& d, DataFormat f) {
  if (f == DataFormat::kNHWC) return TensorShape({d.n, d.h, d.w, d.c});
  return TensorShape({d.n, d.c, d.h, d.w});
}

absl::StatusOr<WindowAttrs> ParseWindowAttrs(const AttrMap& attrs,
                                             bool has_ksize) {
  WindowAttrs a;
  ASSIGN_OR_RETURN(std::string format,
                   GetAttr<std::string>(attrs, "data_format"));
  ASSIGN_OR_RETURN(a.format, ParseDataFormat(format));
  ASSIGN_OR_RETURN(std::string padding, GetAttr<std::string>(attrs, "padding"));
  ASSIGN_OR_RETURN(a.padding, ParsePadding(padding));
  RETURN_IF_ERROR(ParseHW(attrs, "strides", a.format, &a.sh, &a.sw));
  if (has_ksize)
    RETURN_IF_ERROR(ParseHW(attrs, "ksize", a.format, &a.kh, &a.kw));
  return a;
}

absl::StatusOr<Window2D> MakeWindow2D(const Dims4& in, int64_t kh, int64_t kw,
                                      const WindowAttrs& a) {
  Window2D g{in.n, in.h, in.w, in.c, kh, kw, a.sh, a.sw, -1, -1, 0, 0};
  RETURN_IF_ERROR(
      WindowDim("height", in.h, kh, a.sh, a.padding, &g.oh, &g.pad_top));
  RETURN_IF_ERROR(
      WindowDim("width", in.w, kw, a.sw, a.padding, &g.ow, &g.pad_left));
  return g;
}

absl::StatusOr<Window2D> PoolShapeWindow(const ShapeContext& c,
                                         WindowAttrs* a) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectRank(0, 4));
  ASSIGN_OR_RETURN(*a, ParseWindowAttrs(c.attrs(), /*has_ksize=*/true));
  absl::StatusOr<Window2D> g =
      MakeWindow2D(ToNhwc(c.input_shape(0), a->format), a->kh, a->kw, *a);
  if (!g.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        g.status().message(), "; input shape ", c.input_shape(0).DebugString(),
        " (", DataFormatName(a->format), ")"));
  }
  return g;
}

absl::Status PoolShape(ShapeContext& c) {
  WindowAttrs a;
  ASSIGN_OR_RETURN(Window2D g, PoolShapeWindow(c, &a));
  c.set_output(0, c.input_dtype(0), FromNhwc({g.n, g.oh, g.ow, g.c}, a.format));
  return absl::OkStatus();
}

absl::StatusOr<Window2D> PoolKernelWindow(const KernelContext& ctx,
                                          WindowAttrs* a) {
  absl::StatusOr<WindowAttrs> attrs =
      ParseWindowAttrs(ctx.node().attrs(), /*has_ksize=*/true);
  if (!attrs.ok()) return ctx.InvalidArgument(attrs.status().message());
  *a = *attrs;
  absl::StatusOr<Window2D> g =
      MakeWindow2D(ToNhwc(ctx.input(0).shape(), a->format), a->kh, a->kw, *a);
  if (!g.ok()) {
    return ctx.InvalidArgument(g.status().message(), "; input shape ",
                               ctx.input(0).shape().DebugString());
  }
  return g;
}

absl::Status CheckDyShape(const TensorShape& dy, const TensorShape& expected) {
  if (dy.IsCompatibleWith(expected)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "input 'dy' has shape ", dy.DebugString(),
      " but the forward op's output has shape ", expected.DebugString()));
}

namespace {

// [N, A, B] -> [N, B, A] for each of the N images, in parallel.
void TransposeImages(const KernelContext& ctx, const float* in, float* out,
                     int64_t n, int64_t a, int64_t b) {
  ctx.ParallelFor(n, 2.0 * a * b, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Eigen::Map<RowMatrix>(out + i * a * b, b, a) =
          Eigen::Map<const RowMatrix>(in + i * a * b, a, b).transpose();
    }
  });
}

}  // namespace

Tensor ToNhwcTensor(const KernelContext& ctx, const Tensor& t, DataFormat f,
                    int slot) {
  if (f == DataFormat::kNHWC) return AsFloat32(ctx, t, slot);
  const Tensor t32 = AsFloat32(ctx, t);
  const Dims4 d = ToNhwc(t.shape(), f);
  const TensorShape nhwc = FromNhwc(d, DataFormat::kNHWC);
  Tensor out =
      slot >= 0 ? ThreadScratch(slot, nhwc) : Tensor(DType::kFloat32, nhwc);
  TransposeImages(ctx, t32.data<float>(), out.data<float>(), d.n, d.c,
                  d.h * d.w);
  return out;
}

absl::StatusOr<Tensor*> AllocateNhwcOutput(KernelContext& ctx, int i,
                                           const Dims4& d, DataFormat f,
                                           Tensor* scratch) {
  if (f == DataFormat::kNHWC && ctx.output_dtype(i) == DType::kFloat32) {
    return ctx.allocate_output(i, FromNhwc(d, DataFormat::kNHWC));
  }
  if (i == 0) {
    *scratch = ThreadScratch(6, FromNhwc(d, DataFormat::kNHWC));
    return scratch;
  }
  ASSIGN_OR_RETURN(*scratch, Tensor::Allocate(DType::kFloat32,
                                              FromNhwc(d, DataFormat::kNHWC)));
  return scratch;
}

absl::Status FinishNhwcOutput(KernelContext& ctx, int i, DataFormat f,
                              const Tensor& scratch, bool exact) {
  auto store = [&](const Tensor& src, Tensor* out) {
    if (exact) {
      StoreExactOutput(ctx, src, out);
    } else {
      StoreOutput(ctx, i, src, out);
    }
  };
  const bool half = ctx.output_dtype(i) == DType::kFloat16;
  if (f == DataFormat::kNHWC && !half) return absl::OkStatus();
  const Dims4 d = ToNhwc(scratch.shape(), DataFormat::kNHWC);
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(i, FromNhwc(d, f)));
  if (f == DataFormat::kNHWC) {
    store(scratch, out);
    return absl::OkStatus();
  }
  if (!half) {
    TransposeImages(ctx, scratch.data<float>(), out->data<float>(), d.n,
                    d.h * d.w, d.c);
    return absl::OkStatus();
  }
  Tensor nchw = ThreadScratch(7, out->shape());
  TransposeImages(ctx, scratch.data<float>(), nchw.data<float>(), d.n,
                  d.h * d.w, d.c);
  store(nchw, out);
  return absl::OkStatus();
}

}  // namespace ipuflow::ops
