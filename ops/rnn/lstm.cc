#include "ops/rnn/lstm.h"

#include <vector>

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

// The cache's per-step blocks, each `units` wide: gates after their
// activations, then the new cell and hidden states.
enum LstmCacheBlock { kI, kF, kG, kO, kC, kLstmH, kLstmCacheBlocks };

absl::StatusOr<RnnDims> LstmDims(const TensorShape& input,
                                 const TensorShape& h0, const TensorShape& c0,
                                 const TensorShape& kernel,
                                 const TensorShape& recurrent,
                                 const TensorShape& bias, bool time_major) {
  return rnn::CheckRnnShapes(4, time_major, input, {h0, c0}, kernel, recurrent,
                             bias, 0);
}

REGISTER_OP("PopnnLSTM")
    .Input("input")
    .Input("initial_h")
    .Input("initial_c")
    .Input("kernel")
    .Input("recurrent_kernel")
    .Input("bias")
    .Attr("time_major", false)
    .Attr("go_backwards", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      for (int i = 1; i < 6; ++i) RETURN_IF_ERROR(c.ExpectSameDType(0, i));
      ASSIGN_OR_RETURN(bool time_major, c.attr<bool>("time_major"));
      ASSIGN_OR_RETURN(
          RnnDims d, LstmDims(c.input_shape(0), c.input_shape(1),
                              c.input_shape(2), c.input_shape(3),
                              c.input_shape(4), c.input_shape(5), time_major));
      ASSIGN_OR_RETURN(TensorShape cache, rnn::CacheShape(d, kLstmCacheBlocks));
      c.set_output(0, c.input_dtype(0), d.Sequence(d.units));
      c.set_output(1, c.input_dtype(0), TensorShape({d.batch, d.units}));
      c.set_output(2, c.input_dtype(0), TensorShape({d.batch, d.units}));
      c.set_output(3, DType::kFloat32, cache);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      TensorShape cache_shape;
      ASSIGN_OR_RETURN(
          const RnnDims d,
          rnn::KernelDims(ctx,
                          LstmDims(ctx.input(0).shape(), ctx.input(1).shape(),
                                   ctx.input(2).shape(), ctx.input(3).shape(),
                                   ctx.input(4).shape(), ctx.input(5).shape(),
                                   ctx.attr<bool>("time_major")),
                          kLstmCacheBlocks, &cache_shape));
      const int64_t u = d.units, b = d.batch, w = 4 * u;
      const Tensor x32 = AsFloat32(ctx, ctx.input(0));
      const Tensor h032 = AsFloat32(ctx, ctx.input(1));
      const Tensor c032 = AsFloat32(ctx, ctx.input(2));
      const Tensor k32 = AsFloat32(ctx, ctx.input(3));
      const Tensor r32 = AsFloat32(ctx, ctx.input(4));
      const Tensor b32 = AsFloat32(ctx, ctx.input(5));
      Float32Output y, h_out, c_out;
      RETURN_IF_ERROR(y.Allocate(ctx, 0, d.Sequence(u)));
      RETURN_IF_ERROR(h_out.Allocate(ctx, 1, TensorShape({b, u})));
      RETURN_IF_ERROR(c_out.Allocate(ctx, 2, TensorShape({b, u})));
      ASSIGN_OR_RETURN(Tensor * cache, ctx.allocate_output(3, cache_shape));
      const int64_t rows = d.time * b;
      ConstMat kernel(k32.data<float>(), d.input_size, w);
      ConstMat recurrent(r32.data<float>(), u, w);
      Eigen::Map<const Eigen::RowVectorXf> bias(b32.data<float>(), w);
      // Every step's input projection at once, rows in the input's order.
      RowMat xw = ConstMat(x32.data<float>(), rows, d.input_size) * kernel;
      RowMat h = ConstMat(h032.data<float>(), b, u);
      RowMat c = ConstMat(c032.data<float>(), b, u);
      RowMat z(b, w);
      float* out = y.data();
      for (int64_t t = 0; t < d.time; ++t) {
        z.noalias() = h * recurrent;
        float* step = cache->data<float>() + t * b * kLstmCacheBlocks * u;
        for (int64_t n = 0; n < b; ++n) {
          const float* zx = xw.data() + d.SourceRow(t, n) * w;
          const float* zh = z.data() + n * w;
          float* s = step + n * kLstmCacheBlocks * u;
          float* yr = out + d.Row(t, n) * u;
          // The pre-activations into the cache's gate blocks (i, f, g, o,
          // the kernel's order), the activations over whole blocks at once
          // (ops/math/vector_math.h), tanh(c_t) through the h block.
          for (int64_t q = 0; q < w; ++q) s[q] = zx[q] + zh[q] + bias(q);
          VecSigmoid(s + kI * u, s + kI * u, 2 * u);  // i and f.
          VecTanh(s + kG * u, s + kG * u, u);
          VecSigmoid(s + kO * u, s + kO * u, u);
          for (int64_t j = 0; j < u; ++j) {
            s[kC * u + j] =
                s[kF * u + j] * c(n, j) + s[kI * u + j] * s[kG * u + j];
          }
          VecTanh(s + kC * u, s + kLstmH * u, u);
          for (int64_t j = 0; j < u; ++j) {
            const float hn = s[kO * u + j] * s[kLstmH * u + j];
            s[kLstmH * u + j] = hn;
            c(n, j) = s[kC * u + j];
            h(n, j) = hn;
            yr[j] = hn;
          }
        }
      }
      Mat(h_out.data(), b, u) = h;
      Mat(c_out.data(), b, u) = c;
      y.Finish(ctx);
      h_out.Finish(ctx);
      c_out.Finish(ctx);
      return absl::OkStatus();
    })
    // Back-propagation through time over the cached gates (PopnnLSTMGrad);
    // an output nothing depends on contributes zeros.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      return rnn::AddRnnGradient(s, op, dy, /*state_outputs=*/3,
                                 /*skipped_inputs=*/1, "PopnnLSTMGrad",
                                 {"time_major", "go_backwards"}, dx);
    });

REGISTER_OP("PopnnLSTMGrad")
    .Input("doutput")
    .Input("dh")
    .Input("dc")
    .Input("input")
    .Input("initial_h")
    .Input("initial_c")
    .Input("kernel")
    .Input("recurrent_kernel")
    .Input("cache")
    .Attr("time_major", false)
    .Attr("go_backwards", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(3));
      for (int i : {0, 1, 2, 4, 5, 6, 7}) {
        RETURN_IF_ERROR(c.ExpectSameDType(3, i));
      }
      RETURN_IF_ERROR(c.ExpectDType(8, DType::kFloat32));
      ASSIGN_OR_RETURN(bool time_major, c.attr<bool>("time_major"));
      const TensorShape& recurrent = c.input_shape(7);
      ASSIGN_OR_RETURN(
          RnnDims d,
          LstmDims(c.input_shape(3), c.input_shape(4), c.input_shape(5),
                   c.input_shape(6), recurrent,
                   TensorShape({recurrent.rank() == 2 ? recurrent.dim(1) : 0}),
                   time_major));
      for (int i = 0; i < 5; ++i) {
        c.set_output(i, c.input_dtype(3), c.input_shape(3 + i));
      }
      c.set_output(5, c.input_dtype(3), TensorShape({4 * d.units}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const TensorShape& rs = ctx.input(7).shape();
      TensorShape cache_shape;
      ASSIGN_OR_RETURN(
          const RnnDims d,
          rnn::KernelDims(
              ctx,
              LstmDims(ctx.input(3).shape(), ctx.input(4).shape(),
                       ctx.input(5).shape(), ctx.input(6).shape(), rs,
                       TensorShape({rs.rank() == 2 ? rs.dim(1) : 0}),
                       ctx.attr<bool>("time_major")),
              kLstmCacheBlocks, &cache_shape));
      RETURN_IF_ERROR(rnn::CheckIncomingGradients(
          ctx, d, /*states=*/2, /*input=*/3, /*cache=*/8, cache_shape));
      const int64_t u = d.units, b = d.batch, w = 4 * u, rows = d.time * b;
      const Tensor dy32 = AsFloat32(ctx, ctx.input(0));
      const Tensor dh32 = AsFloat32(ctx, ctx.input(1));
      const Tensor dc32 = AsFloat32(ctx, ctx.input(2));
      const Tensor x32 = AsFloat32(ctx, ctx.input(3));
      const Tensor h032 = AsFloat32(ctx, ctx.input(4));
      const Tensor c032 = AsFloat32(ctx, ctx.input(5));
      const Tensor k32 = AsFloat32(ctx, ctx.input(6));
      const Tensor r32 = AsFloat32(ctx, ctx.input(7));
      const float* cache = ctx.input(8).data<float>();
      const float* gy = dy32.data<float>();
      ConstMat recurrent(r32.data<float>(), u, w);
      // dz of every step, and the h_{t-1} it multiplied, rows in the
      // input's order: the weight gradients are then three matmuls.
      RowMat dz(rows, w), h_prev(rows, u), dz_t(b, w);
      RowMat dh = ConstMat(dh32.data<float>(), b, u);
      RowMat dc = ConstMat(dc32.data<float>(), b, u);
      const float* h0 = h032.data<float>();
      const float* c0 = c032.data<float>();
      std::vector<float> tanh_c(u);
      for (int64_t t = d.time - 1; t >= 0; --t) {
        const float* step = cache + t * b * kLstmCacheBlocks * u;
        for (int64_t n = 0; n < b; ++n) {
          const float* s = step + n * kLstmCacheBlocks * u;
          const float* prev = t > 0 ? s - b * kLstmCacheBlocks * u : nullptr;
          const int64_t row = d.SourceRow(t, n);
          const float* gr = gy + d.Row(t, n) * u;
          float* z = dz_t.data() + n * w;
          VecTanh(s + kC * u, tanh_c.data(), u);  // The forward's bits.
          for (int64_t j = 0; j < u; ++j) {
            const float i = s[kI * u + j], f = s[kF * u + j];
            const float g = s[kG * u + j], o = s[kO * u + j];
            const float tc = tanh_c[j];
            const float c_prev = prev ? prev[kC * u + j] : c0[n * u + j];
            h_prev(row, j) = prev ? prev[kLstmH * u + j] : h0[n * u + j];
            const float dhv = dh(n, j) + gr[j];
            const float dcv = dc(n, j) + dhv * o * (1 - tc * tc);
            z[0 * u + j] = dcv * g * i * (1 - i);
            z[1 * u + j] = dcv * c_prev * f * (1 - f);
            z[2 * u + j] = dcv * i * (1 - g * g);
            z[3 * u + j] = dhv * tc * o * (1 - o);
            dc(n, j) = dcv * f;
          }
          dz.row(row) = dz_t.row(n);
        }
        dh.noalias() = dz_t * recurrent.transpose();
      }
      Float32Output dx, dh0, dc0, dk, dr, db;
      RETURN_IF_ERROR(dx.Allocate(ctx, 0, ctx.input(3).shape()));
      RETURN_IF_ERROR(dh0.Allocate(ctx, 1, TensorShape({b, u})));
      RETURN_IF_ERROR(dc0.Allocate(ctx, 2, TensorShape({b, u})));
      RETURN_IF_ERROR(dk.Allocate(ctx, 3, ctx.input(6).shape()));
      RETURN_IF_ERROR(dr.Allocate(ctx, 4, rs));
      RETURN_IF_ERROR(db.Allocate(ctx, 5, TensorShape({w})));
      rnn::InputAndKernelGradients(d, dz, x32, k32, dx.data(), dk.data());
      Mat(dh0.data(), b, u) = dh;
      Mat(dc0.data(), b, u) = dc;
      Mat(dr.data(), u, w).noalias() = h_prev.transpose() * dz;
      Eigen::Map<Eigen::RowVectorXf>(db.data(), w) = dz.colwise().sum();
      for (Float32Output* o : {&dx, &dh0, &dc0, &dk, &dr, &db}) o->Finish(ctx);
      return absl::OkStatus();
    })
    .SetGradient([](const Scope&, const Node& op, absl::Span<const Output>,
                    std::vector<Output>*) {
      return rnn::NoSecondDerivative("PopnnLSTM", op);
    });

}  // namespace

LstmOutputs PopnnLSTM(const Scope& scope, Output input, Output kernel,
                      Output recurrent_kernel, Output bias,
                      const LstmOptions& options) {
  if (!input.valid() || !recurrent_kernel.valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        "PopnnLSTM: input and recurrent_kernel must be valid outputs"));
    return {};
  }
  if (options.initial_h.has_value() != options.initial_c.has_value()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        "PopnnLSTM: give both initial_h and initial_c, or neither"));
    return {};
  }
  Output h0 = options.initial_h.value_or(Output());
  Output c0 = options.initial_c.value_or(Output());
  if (!options.initial_h.has_value()) {
    h0 = rnn::ZeroState(scope, "PopnnLSTM", input, recurrent_kernel,
                        options.time_major, "initial_h and initial_c");
    if (!h0.valid()) return {};
    c0 = h0;
  }
  Node* n = scope.AddNode("PopnnLSTM",
                          {input, h0, c0, kernel, recurrent_kernel, bias},
                          {{"time_major", options.time_major},
                           {"go_backwards", options.go_backwards}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2), Output(n, 3)};
}

}  // namespace ipuflow::ops
