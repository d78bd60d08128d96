#include "ops/nn/conv2d.h"

#include <algorithm>

#include "core/op_registry.h"
#include "ops/math/half_io.h"
#include "ops/math/partials_type.h"
#include "ops/nn/conv2d_backprop.h"
#include "ops/nn/conv_half_partials.h"
#include "ops/nn/conv_small.h"
#include "ops/nn/conv_util.h"
#include "ops/nn/onednn_conv_choice.h"

namespace ipuflow::ops {
namespace {

// y[n*OH*OW, OC] = patches(x) * w, one GEMM per chunk of output rows, the
// rows shared out over the intra-op pool; few output channels take the
// direct kernel of conv_small.h instead, and most other shapes oneDNN's
// primitive (onednn_conv_choice.h; float partials only).
void ConvForward(const KernelContext& ctx, const float* x, const float* w,
                 float* y, const Window2D& g, int64_t oc, bool half_partials) {
  if (half_partials) {
    ConvForwardHalfPartials(ctx, x, w, y, g, oc);
    return;
  }
  if (UseOnednnConvForward(g, oc) &&
      onednn::ConvForward(ctx.intra_op(), x, w, y, OnednnDims(g, oc)).ok()) {
    return;
  }
  if (UseSmallConv(g, oc)) {
    SmallConvForward(ctx, x, w, y, g, oc);
    return;
  }
  const int64_t k = PatchSize(g);
  const ConstMatrixMap wm(w, k, oc);
  const double cost = 2.0 * g.ow * k * oc;
  if (IsPointwise(g)) {
    ctx.ParallelFor(g.n * g.oh, cost, [&](int64_t b, int64_t e) {
      const int64_t m = (e - b) * g.ow;
      MatrixMap(y + b * g.ow * oc, m, oc).noalias() =
          ConstMatrixMap(x + b * g.ow * k, m, k) * wm;
    });
    return;
  }
  ConvForwardByBlocks(ctx, x, w, y, g, oc,
                      [](const auto& patches, const auto& filter, auto&& out) {
                        out.noalias() = patches * filter;
                      });
}

absl::Status Conv2DKernel(KernelContext& ctx) {
  WindowAttrs a;
  int64_t oc;
  ASSIGN_OR_RETURN(Window2D g, ConvKernelWindow(ctx, &a, &oc));
  // float32 inputs are used in place; float16 ones widened once.
  const Tensor x = ToNhwcTensor(ctx, ctx.input(0), a.format, /*slot=*/0);
  const Tensor w = AsFloat32(ctx, ctx.input(1), /*slot=*/1);
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * y, AllocateNhwcOutput(ctx, 0, {g.n, g.oh, g.ow, oc},
                                                  a.format, &scratch));
  ConvForward(ctx, x.data<float>(), w.data<float>(), y->data<float>(), g, oc,
              HalfPartials(ctx.node()));
  RETURN_IF_ERROR(FinishNhwcOutput(ctx, 0, a.format, scratch));
  return absl::OkStatus();
}

REGISTER_OP("Conv2D")
    .Input("input")
    .Input("filter")
    .RequiredAttr("strides", AttrType::kIntList)
    .RequiredAttr("padding", AttrType::kString)
    .Attr("data_format", "NHWC")
    .Attr(kPartialsTypeAttr, kPartialsFloat)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      WindowAttrs a;
      int64_t oc;
      ASSIGN_OR_RETURN(Window2D g, ConvShapeWindow(c, &a, &oc));
      c.set_output(0, c.input_dtype(0), ConvOutputShape(g, oc, a));
      return absl::OkStatus();
    })
    .SetKernel(Conv2DKernel)
    // y = conv(x, w), linear in each:
    //   dx = conv^T(dy, w) (Conv2DBackpropInput);
    //   dw = sum over pixels of patch(x)^T dy (Conv2DBackpropFilter)
    // both with the forward op's data_format and partials_type.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const auto& strides = op.attr<std::vector<int64_t>>("strides");
      const auto& padding = op.attr<std::string>("padding");
      const ConvOptions o = ConvOptionsOf(op);
      dx->push_back(Conv2DBackpropInput(s, op.input(0), op.input(1), dy[0],
                                        strides, padding, o));
      dx->push_back(Conv2DBackpropFilter(s, op.input(0), op.input(1), dy[0],
                                         strides, padding, o));
      return absl::OkStatus();
    });

}  // namespace

ConvOptions ConvOptionsOf(const Node& op) {
  return {op.attr<std::string>("data_format"),
          op.attr<std::string>(kPartialsTypeAttr)};
}

Output Conv2D(const Scope& scope, Output input, Output filter,
              const std::vector<int64_t>& strides, const std::string& padding,
              const ConvOptions& options) {
  return scope.AddNode("Conv2D", {input, filter},
                       {{"strides", strides},
                        {"padding", padding},
                        {"data_format", options.data_format},
                        {kPartialsTypeAttr, options.partials_type}});
}

Output Conv2D(const Scope& scope, Output input, Output filter,
              const std::vector<int64_t>& strides, const std::string& padding,
              const std::string& data_format) {
  return Conv2D(scope, input, filter, strides, padding,
                ConvOptions{data_format});
}

}  // namespace ipuflow::ops
