#include "ops/nn/conv2d_backprop.h"

#include <algorithm>
#include <map>

#include "core/mutex.h"
#include "core/op_registry.h"
#include "ops/math/half_io.h"
#include "ops/math/partials_type.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/conv_half_partials.h"
#include "ops/nn/conv_small.h"
#include "ops/nn/conv_sparse_grad.h"
#include "ops/nn/conv_util.h"
#include "ops/nn/onednn_conv_choice.h"

namespace ipuflow::ops {
namespace {

// dx = col2im(dy * w^T), one image per task (col2im scatters within an
// image), one GEMM per chunk of output rows; oneDNN's backward-data
// primitive where it measures faster (onednn_conv_choice.h); the sparse
// kernel when most of dy is zero (after max pooling: conv_sparse_grad.h).
void ConvBackpropInput(const KernelContext& ctx, const float* dy,
                       const float* w, float* dx, const Window2D& g,
                       int64_t oc) {
  if (UseSparseConvGrad(dy, g, oc)) {
    SparseConvBackpropInput(ctx, dy, w, dx, g, oc);
    return;
  }
  if (UseOnednnConvBackpropInput(g, oc) &&
      onednn::ConvBackwardData(ctx.intra_op(), dy, w, dx, OnednnDims(g, oc))
          .ok()) {
    return;
  }
  const int64_t k = PatchSize(g);
  const ConstMatrixMap wm(w, k, oc);
  if (IsPointwise(g)) {
    ctx.ParallelFor(g.n * g.oh, 2.0 * g.ow * k * oc, [&](int64_t b, int64_t e) {
      const int64_t m = (e - b) * g.ow;
      MatrixMap(dx + b * g.ow * k, m, k).noalias() =
          ConstMatrixMap(dy + b * g.ow * oc, m, oc) * wm.transpose();
    });
    return;
  }
  ConvBackpropInputByBlocks(
      ctx, dy, w, dx, g, oc,
      [](const auto& dy_block, const auto& wt, auto&& patches) {
        patches.noalias() = dy_block * wt;
      },
      [](float*, int64_t) {});
}

// dw = sum over chunks of patches^T * dy. Each shard sums its rows; the
// partial sums are added in shard order so results do not depend on timing.
// oneDNN's backward-weights primitive takes most shapes, conv_small.h's
// direct kernel those it does better (onednn_conv_choice.h); the sparse
// kernel when most of dy is zero (conv_sparse_grad.h).
void ConvBackpropFilter(const KernelContext& ctx, const float* x,
                        const float* dy, float* dw, const Window2D& g,
                        int64_t oc) {
  if (UseSparseConvGrad(dy, g, oc)) {
    SparseConvBackpropFilter(ctx, x, dy, dw, g, oc);
    return;
  }
  if (UseOnednnConvBackpropFilter(g, oc) &&
      onednn::ConvBackwardWeights(ctx.intra_op(), x, dy, dw, OnednnDims(g, oc))
          .ok()) {
    return;
  }
  if (UseSmallConv(g, oc)) {
    SmallConvBackpropFilter(ctx, x, dy, dw, g, oc);
    return;
  }
  ConvBackpropFilterByBlocks(
      ctx, x, dy, dw, g, oc,
      [](const auto& patches_t, const auto& dy_block, RowMajorMatrix& sum) {
        sum.noalias() += patches_t * dy_block;
      },
      [](MatrixMap& dw, const RowMajorMatrix& sum) { dw += sum; });
}

// Shape function of both backprops: output = the shape of input `like`,
// of the inputs' dtype.
absl::Status BackpropShape(ShapeContext& c, int like) {
  RETURN_IF_ERROR(c.ExpectFloat(2));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 2));
  RETURN_IF_ERROR(c.ExpectRank(2, 4));
  WindowAttrs a;
  int64_t oc;
  ASSIGN_OR_RETURN(Window2D g, ConvShapeWindow(c, &a, &oc));
  RETURN_IF_ERROR(CheckDyShape(c.input_shape(2), ConvOutputShape(g, oc, a)));
  c.set_output(0, c.input_dtype(2), c.input_shape(like));
  return absl::OkStatus();
}

// The window, after checking dy against it at run time.
absl::StatusOr<Window2D> BackpropWindow(const KernelContext& ctx,
                                        WindowAttrs* a, int64_t* oc) {
  ASSIGN_OR_RETURN(Window2D g, ConvKernelWindow(ctx, a, oc));
  absl::Status s =
      CheckDyShape(ctx.input(2).shape(), ConvOutputShape(g, *oc, *a));
  if (!s.ok()) return ctx.InvalidArgument(s.message());
  return g;
}

absl::Status BackpropInputKernel(KernelContext& ctx) {
  WindowAttrs a;
  int64_t oc;
  ASSIGN_OR_RETURN(Window2D g, BackpropWindow(ctx, &a, &oc));
  const Tensor dy = ToNhwcTensor(ctx, ctx.input(2), a.format, /*slot=*/0);
  const Tensor w = AsFloat32(ctx, ctx.input(1), /*slot=*/1);
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * dx, AllocateNhwcOutput(ctx, 0, {g.n, g.h, g.w, g.c},
                                                   a.format, &scratch));
  if (HalfPartials(ctx.node())) {
    ConvBackpropInputHalfPartials(ctx, dy.data<float>(), w.data<float>(),
                                  dx->data<float>(), g, oc);
  } else {
    ConvBackpropInput(ctx, dy.data<float>(), w.data<float>(), dx->data<float>(),
                      g, oc);
  }
  RETURN_IF_ERROR(FinishNhwcOutput(ctx, 0, a.format, scratch));
  return absl::OkStatus();
}

absl::Status BackpropFilterKernel(KernelContext& ctx) {
  WindowAttrs a;
  int64_t oc;
  ASSIGN_OR_RETURN(Window2D g, BackpropWindow(ctx, &a, &oc));
  const Tensor x = ToNhwcTensor(ctx, ctx.input(0), a.format, /*slot=*/0);
  const Tensor dy = ToNhwcTensor(ctx, ctx.input(2), a.format, /*slot=*/1);
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * dw,
                   AllocateFloat32Output(ctx, 0, ctx.input(1).shape(), &scratch,
                                         /*slot=*/6));
  if (HalfPartials(ctx.node())) {
    ConvBackpropFilterHalfPartials(ctx, x.data<float>(), dy.data<float>(),
                                   dw->data<float>(), g, oc);
  } else {
    ConvBackpropFilter(ctx, x.data<float>(), dy.data<float>(),
                       dw->data<float>(), g, oc);
  }
  if (dw == &scratch) StoreOutput(ctx, 0, scratch, ctx.mutable_output(0));
  return absl::OkStatus();
}

// What a gradient passes on: all of the node's attributes.
struct ConvAttrs {
  explicit ConvAttrs(const Node& op)
      : strides(op.attr<std::vector<int64_t>>("strides")),
        padding(op.attr<std::string>("padding")),
        options(ConvOptionsOf(op)) {}
  const std::vector<int64_t>& strides;
  const std::string& padding;
  const ConvOptions options;
};

REGISTER_OP("Conv2DBackpropInput")
    .Input("input")
    .Input("filter")
    .Input("dy")
    .RequiredAttr("strides", AttrType::kIntList)
    .RequiredAttr("padding", AttrType::kString)
    .Attr("data_format", "NHWC")
    .Attr(kPartialsTypeAttr, kPartialsFloat)
    .SetShapeFn([](ShapeContext& c) { return BackpropShape(c, 0); })
    .SetKernel(BackpropInputKernel)
    // dx = conv^T(dy, w), so <g, dx> = <conv(g, w), dy>:
    //   d/d(dy) = conv(g, w);  d/dw = Conv2DBackpropFilter(g, w, dy);
    //   input only gives the shape.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const ConvAttrs a(op);
      dx->push_back(Output());
      dx->push_back(Conv2DBackpropFilter(s, g[0], op.input(1), op.input(2),
                                         a.strides, a.padding, a.options));
      dx->push_back(
          Conv2D(s, g[0], op.input(1), a.strides, a.padding, a.options));
      return absl::OkStatus();
    });

REGISTER_OP("Conv2DBackpropFilter")
    .Input("input")
    .Input("filter")
    .Input("dy")
    .RequiredAttr("strides", AttrType::kIntList)
    .RequiredAttr("padding", AttrType::kString)
    .Attr("data_format", "NHWC")
    .Attr(kPartialsTypeAttr, kPartialsFloat)
    .SetShapeFn([](ShapeContext& c) { return BackpropShape(c, 1); })
    .SetKernel(BackpropFilterKernel)
    // dw = patches(x)^T dy, so <g, dw> = <conv(x, g), dy>:
    //   d/dx = Conv2DBackpropInput(x, g, dy);  d/d(dy) = conv(x, g);
    //   filter only gives the shape.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const ConvAttrs a(op);
      dx->push_back(Conv2DBackpropInput(s, op.input(0), g[0], op.input(2),
                                        a.strides, a.padding, a.options));
      dx->push_back(Output());
      dx->push_back(
          Conv2D(s, op.input(0), g[0], a.strides, a.padding, a.options));
      return absl::OkStatus();
    });

Output AddBackprop(const Scope& scope, const std::string& op, Output input,
                   Output filter, Output dy,
                   const std::vector<int64_t>& strides,
                   const std::string& padding, const ConvOptions& options) {
  return scope.AddNode(op, {input, filter, dy},
                       {{"strides", strides},
                        {"padding", padding},
                        {"data_format", options.data_format},
                        {kPartialsTypeAttr, options.partials_type}});
}

}  // namespace

Output Conv2DBackpropInput(const Scope& scope, Output input, Output filter,
                           Output dy, const std::vector<int64_t>& strides,
                           const std::string& padding,
                           const ConvOptions& options) {
  return AddBackprop(scope, "Conv2DBackpropInput", input, filter, dy, strides,
                     padding, options);
}

Output Conv2DBackpropInput(const Scope& scope, Output input, Output filter,
                           Output dy, const std::vector<int64_t>& strides,
                           const std::string& padding,
                           const std::string& data_format) {
  return Conv2DBackpropInput(scope, input, filter, dy, strides, padding,
                             ConvOptions{data_format});
}

Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter,
                            Output dy, const std::vector<int64_t>& strides,
                            const std::string& padding,
                            const ConvOptions& options) {
  return AddBackprop(scope, "Conv2DBackpropFilter", input, filter, dy, strides,
                     padding, options);
}

Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter,
                            Output dy, const std::vector<int64_t>& strides,
                            const std::string& padding,
                            const std::string& data_format) {
  return Conv2DBackpropFilter(scope, input, filter, dy, strides, padding,
                              ConvOptions{data_format});
}

}  // namespace ipuflow::ops
