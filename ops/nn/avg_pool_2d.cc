#include "ops/nn/avg_pool_2d.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/nn/window_2d.h"

namespace ipuflow::ops {
namespace {

// y[n, oh, ow, :] = mean over the window's valid pixels (vectorised over
// channels), output rows in parallel.
void AvgPoolForward(const KernelContext& ctx, const float* x, float* y,
                    const Window2D& g) {
  const double cost = static_cast<double>(g.ow) * g.kh * g.kw * g.c;
  ctx.ParallelFor(g.n * g.oh, cost, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* img = x + (r / g.oh) * g.h * g.w * g.c;
      int64_t h0, h1;
      ClipWindow((r % g.oh) * g.sh - g.pad_top, g.kh, g.h, &h0, &h1);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        int64_t w0, w1;
        ClipWindow(ow * g.sw - g.pad_left, g.kw, g.w, &w0, &w1);
        ArrayMap<float> out(y + (r * g.ow + ow) * g.c, g.c);
        out.setZero();
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) {
            out += ConstArrayMap<float>(img + (ih * g.w + iw) * g.c, g.c);
          }
        }
        const int64_t count =
            std::max<int64_t>(h1 - h0, 0) * std::max<int64_t>(w1 - w0, 0);
        if (count > 0) out /= static_cast<float>(count);
      }
    }
  });
}

// dx[window] += dy / count, one image per task (windows may overlap).
void AvgPoolBackward(const KernelContext& ctx, const float* dy, float* dx,
                     const Window2D& g) {
  const int64_t image = g.h * g.w * g.c;
  const double cost = 2.0 * g.oh * g.ow * g.kh * g.kw * g.c;
  ctx.ParallelFor(g.n, cost, [&](int64_t b, int64_t e) {
    ArrayX<float> share(g.c);
    for (int64_t n = b; n < e; ++n) {
      std::fill(dx + n * image, dx + (n + 1) * image, 0.0f);
      for (int64_t r = n * g.oh; r < (n + 1) * g.oh; ++r) {
        int64_t h0, h1;
        ClipWindow((r % g.oh) * g.sh - g.pad_top, g.kh, g.h, &h0, &h1);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t w0, w1;
          ClipWindow(ow * g.sw - g.pad_left, g.kw, g.w, &w0, &w1);
          if (h0 >= h1 || w0 >= w1) continue;
          share = ConstArrayMap<float>(dy + (r * g.ow + ow) * g.c, g.c) /
                  static_cast<float>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              ArrayMap<float>(dx + n * image + (ih * g.w + iw) * g.c, g.c) +=
                  share;
            }
          }
        }
      }
    }
  });
}

absl::Status AvgPoolKernel(KernelContext& ctx) {
  WindowAttrs a;
  ASSIGN_OR_RETURN(Window2D g, PoolKernelWindow(ctx, &a));
  const Tensor x = ToNhwcTensor(ctx, ctx.input(0), a.format, /*slot=*/0);
  Tensor scratch;
  ASSIGN_OR_RETURN(
      Tensor * y,
      AllocateNhwcOutput(ctx, 0, {g.n, g.oh, g.ow, g.c}, a.format, &scratch));
  AvgPoolForward(ctx, x.data<float>(), y->data<float>(), g);
  RETURN_IF_ERROR(FinishNhwcOutput(ctx, 0, a.format, scratch));
  return absl::OkStatus();
}

absl::Status AvgPoolGradKernel(KernelContext& ctx) {
  WindowAttrs a;
  ASSIGN_OR_RETURN(Window2D g, PoolKernelWindow(ctx, &a));
  const TensorShape out = FromNhwc({g.n, g.oh, g.ow, g.c}, a.format);
  if (ctx.input(1).shape() != out) {
    return ctx.InvalidArgument(
        "input 'dy' has shape ", ctx.input(1).shape().DebugString(),
        " but AvgPool2D's output has shape ", out.DebugString());
  }
  const Tensor dy = ToNhwcTensor(ctx, ctx.input(1), a.format, /*slot=*/0);
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * dx, AllocateNhwcOutput(ctx, 0, {g.n, g.h, g.w, g.c},
                                                   a.format, &scratch));
  AvgPoolBackward(ctx, dy.data<float>(), dx->data<float>(), g);
  RETURN_IF_ERROR(FinishNhwcOutput(ctx, 0, a.format, scratch));
  return absl::OkStatus();
}

// Output builders read the pooling attributes of `op`.
struct PoolAttrs {
  explicit PoolAttrs(const Node& op)
      : ksize(op.attr<std::vector<int64_t>>("ksize")),
        strides(op.attr<std::vector<int64_t>>("strides")),
        padding(op.attr<std::string>("padding")),
        format(op.attr<std::string>("data_format")) {}
  const std::vector<int64_t>& ksize;
  const std::vector<int64_t>& strides;
  const std::string& padding;
  const std::string& format;
};

REGISTER_OP("AvgPool2D")
    .Input("x")
    .RequiredAttr("ksize", AttrType::kIntList)
    .RequiredAttr("strides", AttrType::kIntList)
    .RequiredAttr("padding", AttrType::kString)
    .Attr("data_format", "NHWC")
    .SetShapeFn(PoolShape)
    .SetKernel(AvgPoolKernel)
    // y = mean over each window of x;  dx = dy / window size, spread over
    // each window (AvgPoolGrad).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const PoolAttrs a(op);
      dx->push_back(AvgPoolGrad(s, op.input(0), dy[0], a.ksize, a.strides,
                                a.padding, a.format));
      return absl::OkStatus();
    });

REGISTER_OP("AvgPoolGrad")
    .Input("x")
    .Input("dy")
    .RequiredAttr("ksize", AttrType::kIntList)
    .RequiredAttr("strides", AttrType::kIntList)
    .RequiredAttr("padding", AttrType::kString)
    .Attr("data_format", "NHWC")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      WindowAttrs a;
      ASSIGN_OR_RETURN(Window2D g, PoolShapeWindow(c, &a));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(CheckDyShape(c.input_shape(1),
                                   FromNhwc({g.n, g.oh, g.ow, g.c}, a.format)));
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel(AvgPoolGradKernel)
    // dx = AvgPool^T(dy), linear in dy:  d/d(dy) = AvgPool2D(g);  x only
    // gives the shape.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const PoolAttrs a(op);
      dx->push_back(Output());
      dx->push_back(
          AvgPool2D(s, g[0], a.ksize, a.strides, a.padding, a.format));
      return absl::OkStatus();
    });

AttrMap MakePoolAttrs(const std::vector<int64_t>& ksize,
                      const std::vector<int64_t>& strides,
                      const std::string& padding, const std::string& format) {
  return {{"ksize", ksize},
          {"strides", strides},
          {"padding", padding},
          {"data_format", format}};
}

}  // namespace

Output AvgPool2D(const Scope& scope, Output x,
                 const std::vector<int64_t>& ksize,
                 const std::vector<int64_t>& strides,
                 const std::string& padding, const std::string& data_format) {
  return scope.AddNode("AvgPool2D", {x},
                       MakePoolAttrs(ksize, strides, padding, data_format));
}

Output AvgPoolGrad(const Scope& scope, Output x, Output dy,
                   const std::vector<int64_t>& ksize,
                   const std::vector<int64_t>& strides,
                   const std::string& padding, const std::string& data_format) {
  return scope.AddNode("AvgPoolGrad", {x, dy},
                       MakePoolAttrs(ksize, strides, padding, data_format));
}

}  // namespace ipuflow::ops
