#include "ops/nn/grouped_conv_2d.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/array/reshape.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"
#include "ops/nn/conv2d_backprop.h"
#include "ops/onednn/onednn_conv.h"

namespace ipuflow::ops {
namespace {

// The convolution's geometry; pt / pl the padding before (top, left).
struct Geo {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t kh = 0, kw = 0, oc = 0, groups = 1;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0, pt = 0, pl = 0;
  int64_t cg() const { return c / groups; }    // Input channels per group.
  int64_t ocg() const { return oc / groups; }  // Output channels per group.
};

// oneDNN's convolution descriptors take 32-bit sizes: larger strides,
// dilations or dilated windows fail there, at run time, as Internal.
constexpr int64_t kMaxOnednnSize = std::numeric_limits<int32_t>::max();

absl::Status Pair(const AttrMap& attrs, const char* name, int64_t* a,
                  int64_t* b) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v,
                   GetAttr<std::vector<int64_t>>(attrs, name));
  if (v.size() != 2 || v[0] < 1 || v[1] < 1 || v[0] > kMaxOnednnSize ||
      v[1] > kMaxOnednnSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " must be two integers >= 1 and at most ", kMaxOnednnSize,
        " (oneDNN's limit for a convolution), got ", v.size(),
        v.size() == 2 ? absl::StrCat(" (", v[0], ", ", v[1], ")")
                      : std::string(" values")));
  }
  *a = v[0];
  *b = v[1];
  return absl::OkStatus();
}

// The dilated window k_eff = (k - 1) d + 1 of dimension `dim`, in checked
// arithmetic, at most kMaxOnednnSize.
absl::StatusOr<int64_t> DilatedWindow(const char* dim, int64_t k, int64_t d) {
  int64_t eff = 0;
  if (!CheckedMul(k - 1, d, &eff) || !CheckedAdd(eff, 1, &eff) ||
      eff > kMaxOnednnSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("the dilated filter ", dim, " (", k, " - 1) * dilation ",
                     d, " + 1 is larger than ", kMaxOnednnSize,
                     " (oneDNN's limit for a convolution window)"));
  }
  return eff;
}

// Output size and padding before, TensorFlow's rule for the dilated
// window `eff`. VALID refuses a window larger than the input, as
// TensorFlow and PyTorch do (an empty output would hide the mistake).
absl::Status Dim(const char* dim, int64_t in, int64_t k, int64_t eff, int64_t s,
                 int64_t d, bool same, int64_t* out, int64_t* pad) {
  if (same) {
    *out = in / s + (in % s != 0);  // ceil(in / s) without overflow.
    *pad = std::max<int64_t>((*out - 1) * s + eff - in, 0) / 2;
    return absl::OkStatus();
  }
  if (eff > in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VALID padding: the dilated filter ", dim, " ", eff, " ((", k,
        " - 1) * dilation ", d, " + 1) is larger than the input ", dim, " ", in,
        " (use SAME padding, a smaller filter or a smaller dilation)"));
  }
  *out = (in - eff) / s + 1;
  *pad = 0;
  return absl::OkStatus();
}

// input [N,H,W,C] and filter [KH,KW,C/groups,OC] (unknown dims pass, taken
// as 1 for the output's known dims).
absl::StatusOr<Geo> GeometryOf(const TensorShape& x, const TensorShape& f,
                               const AttrMap& attrs) {
  if (x.rank() != 4 || f.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", x.DebugString(), " and filter ", f.DebugString(),
                     " must be [N, H, W, C] and [KH, KW, C / groups, OC]"));
  }
  Geo g;
  RETURN_IF_ERROR(Pair(attrs, "strides", &g.sh, &g.sw));
  RETURN_IF_ERROR(Pair(attrs, "dilations", &g.dh, &g.dw));
  ASSIGN_OR_RETURN(std::string padding, GetAttr<std::string>(attrs, "padding"));
  if (padding != "SAME" && padding != "VALID") {
    return absl::InvalidArgumentError(absl::StrCat(
        "padding must be \"SAME\" or \"VALID\", got \"", padding, "\""));
  }
  ASSIGN_OR_RETURN(g.groups, GetAttr<int64_t>(attrs, "groups"));
  if (g.groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups must be >= 1, got ", g.groups));
  }
  g.n = x.dim(0);
  g.h = x.dim(1);
  g.w = x.dim(2);
  g.c = x.dim(3);
  g.kh = f.dim(0);
  g.kw = f.dim(1);
  g.oc = f.dim(3);
  const bool bad_c = g.c != kUnknownDim &&
                     (g.c % g.groups != 0 ||
                      (f.dim(2) != kUnknownDim && f.dim(2) * g.groups != g.c));
  const bool bad_oc = g.oc != kUnknownDim && g.oc % g.groups != 0;
  if (bad_c || bad_oc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", x.DebugString(), " and filter ", f.DebugString(),
        " do not fit ", g.groups,
        " groups: C and OC must be multiples of groups and the filter's "
        "third dimension C / groups"));
  }
  const bool same = padding == "SAME";
  g.oh = g.ow = kUnknownDim;
  // The dilated window, then the output size, of one spatial dimension.
  auto dim = [&](const char* name, int64_t in, int64_t k, int64_t s, int64_t d,
                 int64_t* out, int64_t* pad) -> absl::Status {
    if (k == kUnknownDim) return absl::OkStatus();
    absl::StatusOr<int64_t> eff = DilatedWindow(name, k, d);
    absl::Status st = eff.status();
    if (st.ok() && in != kUnknownDim) {
      st = Dim(name, in, k, *eff, s, d, same, out, pad);
    }
    if (st.ok()) return st;
    return absl::InvalidArgumentError(absl::StrCat(st.message(), "; input ",
                                                   x.DebugString(), ", filter ",
                                                   f.DebugString()));
  };
  RETURN_IF_ERROR(dim("height", g.h, g.kh, g.sh, g.dh, &g.oh, &g.pt));
  RETURN_IF_ERROR(dim("width", g.w, g.kw, g.sw, g.dw, &g.ow, &g.pl));
  return g;
}

TensorShape OutShape(const Geo& g) {
  return TensorShape({g.n, g.oh, g.ow, g.oc});
}

absl::StatusOr<Geo> KernelGeometry(const KernelContext& ctx, int x, int f) {
  absl::StatusOr<Geo> g = GeometryOf(ctx.input(x).shape(), ctx.input(f).shape(),
                                     ctx.node().attrs());
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  return g;
}

// The geometry in oneDNN's terms (ops/onednn/onednn_conv.h runs all three
// passes: its grouped and depthwise kernels, dilation included).
onednn::ConvDims OnednnDims(const Geo& g) {
  onednn::ConvDims d{g.n,  g.h,  g.w,  g.c,  g.oc, g.kh, g.kw,
                     g.sh, g.sw, g.oh, g.ow, g.pt, g.pl};
  d.groups = g.groups;
  d.dil_h = g.dh;
  d.dil_w = g.dw;
  return d;
}

absl::Status ConvShape(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  ASSIGN_OR_RETURN(Geo g,
                   GeometryOf(c.input_shape(0), c.input_shape(1), c.attrs()));
  c.set_output(0, c.input_dtype(0), OutShape(g));
  return absl::OkStatus();
}

AttrMap ConvAttrs(const Node& op) {
  AttrMap a;
  for (const char* k : {"strides", "dilations", "padding", "groups"}) {
    a[k] = op.attrs().at(k);
  }
  return a;
}

REGISTER_OP("GroupedConv2D")
    .Input("input")
    .Input("filter")
    .Attr("strides", std::vector<int64_t>{1, 1})
    .Attr("dilations", std::vector<int64_t>{1, 1})
    .Attr("padding", "VALID")
    .Attr("groups", int64_t{1})
    .SetShapeFn(ConvShape)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(Geo g, KernelGeometry(ctx, 0, 1));
      const Tensor x = AsFloat32(ctx, ctx.input(0));
      const Tensor f = AsFloat32(ctx, ctx.input(1));
      Float32Output y;
      RETURN_IF_ERROR(y.Allocate(ctx, 0, OutShape(g)));
      RETURN_IF_ERROR(onednn::ConvForward(ctx.intra_op(), x.data<float>(),
                                          f.data<float>(), y.data(),
                                          OnednnDims(g)));
      y.Finish(ctx);
      return absl::OkStatus();
    })
    // y = conv(x, f), linear in each:  dx = conv^T(dy, f), df = corr(x, dy).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      Node* di = s.AddNode("GroupedConv2DBackpropInput",
                           {op.input(0), op.input(1), dy[0]}, ConvAttrs(op));
      Node* df = s.AddNode("GroupedConv2DBackpropFilter",
                           {op.input(0), op.input(1), dy[0]}, ConvAttrs(op));
      if (di == nullptr || df == nullptr) return s.status();
      *dx = {Output(di), Output(df)};
      return absl::OkStatus();
    });

// Inputs (input, filter, dy): one of the first two only for its shape.
absl::Status GroupedBackpropShape(ShapeContext& c, int out_like) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 2));
  ASSIGN_OR_RETURN(Geo g,
                   GeometryOf(c.input_shape(0), c.input_shape(1), c.attrs()));
  if (!c.input_shape(2).IsCompatibleWith(OutShape(g))) {
    return absl::InvalidArgumentError(
        absl::StrCat("dy has shape ", c.input_shape(2).DebugString(),
                     ", expected ", OutShape(g).DebugString()));
  }
  c.set_output(0, c.input_dtype(0), c.input_shape(out_like));
  return absl::OkStatus();
}

absl::Status BackpropKernel(KernelContext& ctx, bool input) {
  ASSIGN_OR_RETURN(Geo g, KernelGeometry(ctx, 0, 1));
  if (ctx.input(2).shape() != OutShape(g)) {
    return ctx.InvalidArgument("dy has shape ",
                               ctx.input(2).shape().DebugString(),
                               ", expected ", OutShape(g).DebugString());
  }
  const Tensor dy = AsFloat32(ctx, ctx.input(2));
  const Tensor other = AsFloat32(ctx, ctx.input(input ? 1 : 0));
  Float32Output out;
  const TensorShape& shape = ctx.input(input ? 0 : 1).shape();
  RETURN_IF_ERROR(out.Allocate(ctx, 0, shape));
  RETURN_IF_ERROR(input ? onednn::ConvBackwardData(
                              ctx.intra_op(), dy.data<float>(),
                              other.data<float>(), out.data(), OnednnDims(g))
                        : onednn::ConvBackwardWeights(
                              ctx.intra_op(), other.data<float>(),
                              dy.data<float>(), out.data(), OnednnDims(g)));
  out.Finish(ctx);
  return absl::OkStatus();
}

REGISTER_OP("GroupedConv2DBackpropInput")
    .Input("input")
    .Input("filter")
    .Input("dy")
    .Attr("strides", std::vector<int64_t>{1, 1})
    .Attr("dilations", std::vector<int64_t>{1, 1})
    .Attr("padding", "VALID")
    .Attr("groups", int64_t{1})
    .SetShapeFn([](ShapeContext& c) { return GroupedBackpropShape(c, 0); })
    .SetKernel([](KernelContext& ctx) { return BackpropKernel(ctx, true); })
    .NotDifferentiable(
        "second-order gradients of grouped convolution are not implemented");

REGISTER_OP("GroupedConv2DBackpropFilter")
    .Input("input")
    .Input("filter")
    .Input("dy")
    .Attr("strides", std::vector<int64_t>{1, 1})
    .Attr("dilations", std::vector<int64_t>{1, 1})
    .Attr("padding", "VALID")
    .Attr("groups", int64_t{1})
    .SetShapeFn([](ShapeContext& c) { return GroupedBackpropShape(c, 1); })
    .SetKernel([](KernelContext& ctx) { return BackpropKernel(ctx, false); })
    .NotDifferentiable(
        "second-order gradients of grouped convolution are not implemented");

AttrMap OptionAttrs(const GroupedConvOptions& o) {
  return {{"strides", o.strides},
          {"dilations", o.dilations},
          {"padding", o.padding},
          {"groups", o.groups}};
}

}  // namespace

Output GroupedConv2D(const Scope& scope, Output input, Output filter,
                     const GroupedConvOptions& options) {
  return scope.AddNode("GroupedConv2D", {input, filter}, OptionAttrs(options));
}

Output DepthwiseConv2D(const Scope& scope, Output input, Output filter,
                       const GroupedConvOptions& options) {
  if (!scope.ok() || !filter.valid()) return Output();
  const TensorShape& f = filter.shape();
  if (f.rank() != 4 || !f.IsFullyDefined()) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "DepthwiseConv2D: filter must be a fully defined [KH, KW, C, "
        "multiplier], got ",
        f.DebugString())));
    return Output();
  }
  GroupedConvOptions o = options;
  o.groups = f.dim(2);
  // [KH, KW, C, M] -> [KH, KW, 1, C * M]: output channel c * M + m.
  Output w =
      Reshape(scope, filter, {f.dim(0), f.dim(1), 1, f.dim(2) * f.dim(3)});
  return GroupedConv2D(scope, input, w, o);
}

Output Conv1D(const Scope& scope, Output input, Output filter,
              const GroupedConvOptions& options) {
  if (!scope.ok() || !input.valid() || !filter.valid()) return Output();
  const TensorShape& x = input.shape();
  const TensorShape& f = filter.shape();
  if (x.rank() != 3 || f.rank() != 3 || options.strides.size() != 1 ||
      options.dilations.size() != 1) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "Conv1D: input ", x.DebugString(), " and filter ", f.DebugString(),
        " must be [N, W, C] and [KW, C / groups, OC], with one stride and "
        "one dilation")));
    return Output();
  }
  GroupedConvOptions o = options;
  o.strides = {1, options.strides[0]};
  o.dilations = {1, options.dilations[0]};
  Output x4 = Reshape(scope, input, {x.dim(0), 1, x.dim(1), x.dim(2)});
  Output f4 = Reshape(scope, filter, {1, f.dim(0), f.dim(1), f.dim(2)});
  Output y = GroupedConv2D(scope, x4, f4, o);
  if (!y.valid()) return Output();
  const TensorShape& ys = y.shape();
  return Reshape(scope, y, {ys.dim(0), ys.dim(2), ys.dim(3)});
}

Output ConvTranspose2D(const Scope& scope, Output input, Output filter,
                       const TensorShape& output_shape,
                       const std::vector<int64_t>& strides,
                       const std::string& padding) {
  if (!scope.ok() || !input.valid()) return Output();
  if (output_shape.rank() != 4 || !output_shape.IsFullyDefined()) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "ConvTranspose2D: output_shape must be a fully defined [N, H, W, C], "
        "got ",
        output_shape.DebugString())));
    return Output();
  }
  // Conv2DBackpropInput reads only its first input's shape.
  Output like = Fill(scope, output_shape, 0.0, input.dtype());
  return Conv2DBackpropInput(scope, like, filter, input, strides, padding);
}

}  // namespace ipuflow::ops
