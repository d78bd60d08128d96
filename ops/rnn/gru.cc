#include "ops/rnn/gru.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"
#include "ops/math/vector_math.h"
#include "ops/rnn/rnn_graph.h"
#include "ops/rnn/rnn_kernel.h"
#include "ops/rnn/rnn_shapes.h"

namespace ipuflow::ops {
namespace {

using rnn::ConstMat;
using rnn::Mat;
using rnn::RnnDims;
using rnn::RowMat;

// The cache's per-step blocks, each `units` wide. kQ is what the candidate's
// recurrent weights multiplied: hr_n + b_h,n (reset_after) or r * h_{t-1}.
enum CacheBlock { kZ, kR, kN, kH, kQ, kCacheBlocks };

absl::StatusOr<RnnDims> GruDims(const TensorShape& input, const TensorShape& h0,
                                const TensorShape& kernel,
                                const TensorShape& recurrent,
                                const TensorShape& bias, bool time_major,
                                bool reset_after) {
  return rnn::CheckRnnShapes(3, time_major, input, {h0}, kernel, recurrent,
                             bias, reset_after ? 2 : 0);
}

// A GRU kernel's dims from its five forward inputs from `first` on
// (rnn::KernelDims).
absl::StatusOr<RnnDims> GruKernelDims(KernelContext& ctx, int first,
                                      TensorShape* cache) {
  return rnn::KernelDims(
      ctx,
      GruDims(ctx.input(first).shape(), ctx.input(first + 1).shape(),
              ctx.input(first + 2).shape(), ctx.input(first + 3).shape(),
              ctx.input(first + 4).shape(), ctx.attr<bool>("time_major"),
              ctx.attr<bool>("reset_after")),
      kCacheBlocks, cache);
}

REGISTER_OP("PopnnGRU")
    .Input("input")
    .Input("initial_h")
    .Input("kernel")
    .Input("recurrent_kernel")
    .Input("bias")
    .Attr("time_major", false)
    .Attr("reset_after", true)
    .Attr("go_backwards", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      for (int i = 1; i < 5; ++i) RETURN_IF_ERROR(c.ExpectSameDType(0, i));
      ASSIGN_OR_RETURN(bool time_major, c.attr<bool>("time_major"));
      ASSIGN_OR_RETURN(bool reset_after, c.attr<bool>("reset_after"));
      ASSIGN_OR_RETURN(
          RnnDims d,
          GruDims(c.input_shape(0), c.input_shape(1), c.input_shape(2),
                  c.input_shape(3), c.input_shape(4), time_major, reset_after));
      ASSIGN_OR_RETURN(TensorShape cache, rnn::CacheShape(d, kCacheBlocks));
      c.set_output(0, c.input_dtype(0), d.Sequence(d.units));
      c.set_output(1, c.input_dtype(0), TensorShape({d.batch, d.units}));
      c.set_output(2, DType::kFloat32, cache);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const bool reset_after = ctx.attr<bool>("reset_after");
      TensorShape cache_shape;
      ASSIGN_OR_RETURN(const RnnDims d,
                       GruKernelDims(ctx, /*first=*/0, &cache_shape));
      const int64_t u = d.units, b = d.batch, w = 3 * u;
      const Tensor x32 = AsFloat32(ctx, ctx.input(0));
      const Tensor h032 = AsFloat32(ctx, ctx.input(1));
      const Tensor k32 = AsFloat32(ctx, ctx.input(2));
      const Tensor r32 = AsFloat32(ctx, ctx.input(3));
      const Tensor b32 = AsFloat32(ctx, ctx.input(4));
      Float32Output y, h_out;
      RETURN_IF_ERROR(y.Allocate(ctx, 0, d.Sequence(u)));
      RETURN_IF_ERROR(h_out.Allocate(ctx, 1, TensorShape({b, u})));
      ASSIGN_OR_RETURN(Tensor * cache, ctx.allocate_output(2, cache_shape));
      const int64_t rows = d.time * b;
      ConstMat kernel(k32.data<float>(), d.input_size, w);
      ConstMat recurrent(r32.data<float>(), u, w);
      const float* bias_x = b32.data<float>();
      const float* bias_h = reset_after ? bias_x + w : nullptr;
      RowMat xw = ConstMat(x32.data<float>(), rows, d.input_size) * kernel;
      RowMat h = ConstMat(h032.data<float>(), b, u);
      RowMat hr(b, w), rh(b, u), rhw(b, u);
      float* out = y.data();
      for (int64_t t = 0; t < d.time; ++t) {
        hr.noalias() = h * recurrent;
        float* step = cache->data<float>() + t * b * kCacheBlocks * u;
        // z and r, and for reset_after = false the reset state r * h.
        for (int64_t n = 0; n < b; ++n) {
          const float* zx = xw.data() + d.SourceRow(t, n) * w;
          float* s = step + n * kCacheBlocks * u;
          // z's and r's pre-activations into their cache blocks, the
          // sigmoid over both at once.
          for (int64_t q = 0; q < 2 * u; ++q) {
            s[kZ * u + q] = zx[q] + hr(n, q) + bias_x[q];
            if (reset_after) s[kZ * u + q] += bias_h[q];
          }
          VecSigmoid(s + kZ * u, s + kZ * u, 2 * u);
          for (int64_t j = 0; j < u; ++j) rh(n, j) = s[kR * u + j] * h(n, j);
        }
        if (!reset_after) rhw.noalias() = rh * recurrent.rightCols(u);
        for (int64_t n = 0; n < b; ++n) {
          const float* zx = xw.data() + d.SourceRow(t, n) * w;
          float* s = step + n * kCacheBlocks * u;
          float* yr = out + d.Row(t, n) * u;
          // The candidate's pre-activation into its cache block, tanh
          // over the block at once (ops/math/vector_math.h).
          for (int64_t j = 0; j < u; ++j) {
            const float r = s[kR * u + j];
            float q, an;
            if (reset_after) {
              q = hr(n, 2 * u + j) + bias_h[2 * u + j];
              an = zx[2 * u + j] + bias_x[2 * u + j] + r * q;
            } else {
              q = rh(n, j);
              an = zx[2 * u + j] + rhw(n, j) + bias_x[2 * u + j];
            }
            s[kN * u + j] = an;
            s[kQ * u + j] = q;
          }
          VecTanh(s + kN * u, s + kN * u, u);
          for (int64_t j = 0; j < u; ++j) {
            const float z = s[kZ * u + j], nn = s[kN * u + j];
            const float hn = z * h(n, j) + (1 - z) * nn;
            s[kH * u + j] = hn;
            h(n, j) = hn;
            yr[j] = hn;
          }
        }
      }
      Mat(h_out.data(), b, u) = h;
      y.Finish(ctx);
      h_out.Finish(ctx);
      return absl::OkStatus();
    })
    // Back-propagation through time over the cached gates (PopnnGRUGrad);
    // an output nothing depends on contributes zeros.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      return rnn::AddRnnGradient(s, op, dy, /*state_outputs=*/2,
                                 /*skipped_inputs=*/0, "PopnnGRUGrad",
                                 {"time_major", "reset_after", "go_backwards"},
                                 dx);
    });

REGISTER_OP("PopnnGRUGrad")
    .Input("doutput")
    .Input("dh")
    .Input("input")
    .Input("initial_h")
    .Input("kernel")
    .Input("recurrent_kernel")
    .Input("bias")
    .Input("cache")
    .Attr("time_major", false)
    .Attr("reset_after", true)
    .Attr("go_backwards", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(2));
      for (int i : {0, 1, 3, 4, 5, 6}) {
        RETURN_IF_ERROR(c.ExpectSameDType(2, i));
      }
      RETURN_IF_ERROR(c.ExpectDType(7, DType::kFloat32));
      ASSIGN_OR_RETURN(bool time_major, c.attr<bool>("time_major"));
      ASSIGN_OR_RETURN(bool reset_after, c.attr<bool>("reset_after"));
      RETURN_IF_ERROR(GruDims(c.input_shape(2), c.input_shape(3),
                              c.input_shape(4), c.input_shape(5),
                              c.input_shape(6), time_major, reset_after)
                          .status());
      for (int i = 0; i < 5; ++i) {
        c.set_output(i, c.input_dtype(2), c.input_shape(2 + i));
      }
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const bool reset_after = ctx.attr<bool>("reset_after");
      TensorShape cache_shape;
      ASSIGN_OR_RETURN(const RnnDims d,
                       GruKernelDims(ctx, /*first=*/2, &cache_shape));
      RETURN_IF_ERROR(rnn::CheckIncomingGradients(
          ctx, d, /*states=*/1, /*input=*/2, /*cache=*/7, cache_shape));
      const int64_t u = d.units, b = d.batch, w = 3 * u, rows = d.time * b;
      const Tensor dy32 = AsFloat32(ctx, ctx.input(0));
      const Tensor dh32 = AsFloat32(ctx, ctx.input(1));
      const Tensor x32 = AsFloat32(ctx, ctx.input(2));
      const Tensor h032 = AsFloat32(ctx, ctx.input(3));
      const Tensor k32 = AsFloat32(ctx, ctx.input(4));
      const Tensor r32 = AsFloat32(ctx, ctx.input(5));
      const float* cache = ctx.input(7).data<float>();
      const float* gy = dy32.data<float>();
      const float* h0 = h032.data<float>();
      ConstMat recurrent(r32.data<float>(), u, w);
      // Per step, rows in the input's order: da = the pre-activations'
      // gradients on the input side (z, r, n), dq the gradient of what the
      // candidate's recurrent weights produced, and what they multiplied.
      RowMat da(rows, w), dq(rows, u), h_prev(rows, u), q_in(rows, u);
      RowMat dh = ConstMat(dh32.data<float>(), b, u);
      RowMat da_h(b, w), dan(b, u), drh(b, u), direct(b, u);
      for (int64_t t = d.time - 1; t >= 0; --t) {
        const float* step = cache + t * b * kCacheBlocks * u;
        for (int64_t n = 0; n < b; ++n) {
          const float* s = step + n * kCacheBlocks * u;
          const float* prev = t > 0 ? s - b * kCacheBlocks * u : nullptr;
          const int64_t row = d.SourceRow(t, n);
          const float* gr = gy + d.Row(t, n) * u;
          for (int64_t j = 0; j < u; ++j) {
            const float z = s[kZ * u + j], nn = s[kN * u + j];
            const float hp = prev ? prev[kH * u + j] : h0[n * u + j];
            h_prev(row, j) = hp;
            const float dhv = dh(n, j) + gr[j];
            direct(n, j) = dhv * z;
            da(row, j) = dhv * (hp - nn) * z * (1 - z);
            dan(n, j) = dhv * (1 - z) * (1 - nn * nn);
            da(row, 2 * u + j) = dan(n, j);
          }
        }
        if (!reset_after) {
          drh.noalias() = dan * recurrent.rightCols(u).transpose();
        }
        for (int64_t n = 0; n < b; ++n) {
          const float* s = step + n * kCacheBlocks * u;
          const int64_t row = d.SourceRow(t, n);
          for (int64_t j = 0; j < u; ++j) {
            const float r = s[kR * u + j], q = s[kQ * u + j];
            float dr;
            if (reset_after) {
              dq(row, j) = dan(n, j) * r;
              dr = dan(n, j) * q;
            } else {
              dq(row, j) = dan(n, j);
              dr = drh(n, j) * h_prev(row, j);
              direct(n, j) += drh(n, j) * r;
            }
            q_in(row, j) = reset_after ? h_prev(row, j) : q;
            da(row, u + j) = dr * r * (1 - r);
            da_h(n, j) = da(row, j);
            da_h(n, u + j) = da(row, u + j);
            da_h(n, 2 * u + j) = reset_after ? dq(row, j) : 0.0f;
          }
        }
        dh.noalias() = direct + da_h * recurrent.transpose();
      }
      Float32Output dx, dh0, dk, dr, db;
      RETURN_IF_ERROR(dx.Allocate(ctx, 0, ctx.input(2).shape()));
      RETURN_IF_ERROR(dh0.Allocate(ctx, 1, TensorShape({b, u})));
      RETURN_IF_ERROR(dk.Allocate(ctx, 2, ctx.input(4).shape()));
      RETURN_IF_ERROR(dr.Allocate(ctx, 3, ctx.input(5).shape()));
      RETURN_IF_ERROR(db.Allocate(ctx, 4, ctx.input(6).shape()));
      rnn::InputAndKernelGradients(d, da, x32, k32, dx.data(), dk.data());
      Mat(dh0.data(), b, u) = dh;
      Mat drm(dr.data(), u, w);
      drm.leftCols(2 * u).noalias() = h_prev.transpose() * da.leftCols(2 * u);
      drm.rightCols(u).noalias() = q_in.transpose() * dq;
      Eigen::Map<Eigen::RowVectorXf> db_x(db.data(), w);
      db_x = da.colwise().sum();
      if (reset_after) {
        Eigen::Map<Eigen::RowVectorXf> db_h(db.data() + w, w);
        db_h.head(2 * u) = db_x.head(2 * u);
        db_h.tail(u) = dq.colwise().sum();
      }
      for (Float32Output* o : {&dx, &dh0, &dk, &dr, &db}) o->Finish(ctx);
      return absl::OkStatus();
    })
    .SetGradient([](const Scope&, const Node& op, absl::Span<const Output>,
                    std::vector<Output>*) {
      return rnn::NoSecondDerivative("PopnnGRU", op);
    });

}  // namespace

GruOutputs PopnnGRU(const Scope& scope, Output input, Output kernel,
                    Output recurrent_kernel, Output bias,
                    const GruOptions& options) {
  if (!input.valid() || !recurrent_kernel.valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        "PopnnGRU: input and recurrent_kernel must be valid outputs"));
    return {};
  }
  const Output h0 =
      options.initial_h.has_value()
          ? *options.initial_h
          : rnn::ZeroState(scope, "PopnnGRU", input, recurrent_kernel,
                           options.time_major, "initial_h");
  if (!h0.valid()) return {};
  Node* n =
      scope.AddNode("PopnnGRU", {input, h0, kernel, recurrent_kernel, bias},
                    {{"time_major", options.time_major},
                     {"reset_after", options.reset_after},
                     {"go_backwards", options.go_backwards}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2)};
}

}  // namespace ipuflow::ops
