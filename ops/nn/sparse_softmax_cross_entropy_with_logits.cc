#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/gradients.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/vector_math.h"
#include "ops/nn/softmax.h"

namespace ipuflow::ops {
namespace {

// Checks the batch sizes of [N, C] `rows` and [N] `per_row` agree.
absl::StatusOr<int64_t> BatchSize(const ShapeContext& c, int rows,
                                  int per_row) {
  const int64_t a = c.input_shape(rows).dim(0);
  const int64_t b = c.input_shape(per_row).dim(0);
  if (a >= 0 && b >= 0 && a != b) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(rows), " has shape ", c.input_shape(rows).DebugString(),
        " but ", c.InputName(per_row), " has shape ",
        c.input_shape(per_row).DebugString(), "; the batch sizes must match"));
  }
  return a >= 0 ? a : b;
}

// Outputs of the logits' dtype (float32, or float16 computed in float32).
absl::Status XentShape(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectRank(0, 2));
  RETURN_IF_ERROR(c.ExpectRank(1, 1));
  if (!IsInteger(c.input_dtype(1))) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.InputName(1), " must be int32 or int64, got ",
                     DTypeName(c.input_dtype(1))));
  }
  ASSIGN_OR_RETURN(int64_t n, BatchSize(c, 0, 1));
  c.set_output(0, c.input_dtype(0), TensorShape({n}));
  c.set_output(1, c.input_dtype(0), TensorShape({n, c.input_shape(0).dim(1)}));
  return absl::OkStatus();
}

// One row of the loss:
//   m = max(x);  e = exp(x - m);  s = sum(e);
//   loss = log(s) - (x[label] - m);  g = e / s - onehot(label).
// The exp is VecExp's (ops/math/vector_math.h): a logit's result does not
// depend on where it sits in the row, and a -inf logit gives exactly 0.
float XentRow(const float* x, int64_t c, int64_t label, float* g) {
  const ConstArrayMap<float> xr(x, c);
  ArrayMap<float> gr(g, c);
  const float m = xr.maxCoeff();
  gr = xr - m;
  VecExp(g, g, c);
  const float s = gr.sum();
  gr /= s;
  g[label] -= 1.0f;
  return std::log(s) - (x[label] - m);
}

template <typename L>
absl::Status XentKernel(KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  const Tensor& labels = ctx.input(1);
  if (labels.dim(0) != logits.dim(0)) {
    return ctx.InvalidArgument(
        "logits have shape ", logits.shape().DebugString(),
        " but labels have shape ", labels.shape().DebugString(),
        "; the batch sizes must match");
  }
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const L* pl = labels.data<L>();
  for (int64_t i = 0; i < n; ++i) {
    if (pl[i] < 0 || pl[i] >= c) {
      return ctx.InvalidArgument(
          "label ", pl[i], " at row ", i, " is out of range [0, ", c,
          ") (logits have shape ", logits.shape().DebugString(), ")");
    }
  }
  Tensor loss_scratch, bp_scratch;
  ASSIGN_OR_RETURN(
      Tensor * loss_t,
      AllocateFloat32Output(ctx, 0, TensorShape({n}), &loss_scratch));
  float* loss = loss_t->data<float>();
  ASSIGN_OR_RETURN(Tensor * bp_t,
                   AllocateFloat32Output(ctx, 1, logits.shape(), &bp_scratch));
  float* bp = bp_t->data<float>();
  const Tensor logits32 = AsFloat32(ctx, logits);
  const float* px = logits32.data<float>();
  ctx.ParallelFor(n, 20.0 * c, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      loss[r] = XentRow(px + r * c, c, pl[r], bp + r * c);
    }
  });
  if (loss_t == &loss_scratch) {
    StoreOutput(ctx, 0, loss_scratch, ctx.mutable_output(0));
    StoreOutput(ctx, 1, bp_scratch, ctx.mutable_output(1));
  }
  return absl::OkStatus();
}

REGISTER_OP("SparseSoftmaxCrossEntropyWithLogits")
    .Input("logits")
    .Input("labels")
    .SetShapeFn(XentShape)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.input(1).dtype() == DType::kInt32)
        return XentKernel<int32_t>(ctx);
      return XentKernel<int64_t>(ctx);
    })
    // loss = logsumexp(x) - x[label];
    //   dloss/dx = softmax(x) - onehot = backprop
    //   dx = backprop * dloss[:, None]
    // backprop = softmax(x) - onehot;  d(backprop)/dx is softmax's Jacobian
    //   dx += SoftmaxGrad(softmax(x), dbackprop)   (only if backprop is used)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      std::vector<Output> terms;
      if (dy[0].valid()) {
        terms.push_back(SparseSoftmaxCrossEntropyWithLogitsGrad(
            s, Output(const_cast<Node*>(&op), 1), dy[0]));
      }
      if (dy[1].valid()) {
        terms.push_back(SoftmaxGrad(s, Softmax(s, op.input(0)), dy[1]));
      }
      dx->push_back(terms.empty() ? Output() : AddTerms(s, terms));
      dx->push_back(Output());  // Labels are integers.
      return absl::OkStatus();
    });

REGISTER_OP("SparseSoftmaxCrossEntropyWithLogitsGrad")
    .Input("backprop")
    .Input("dloss")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(c.ExpectRank(0, 2));
      RETURN_IF_ERROR(c.ExpectRank(1, 1));
      ASSIGN_OR_RETURN(int64_t n, BatchSize(c, 0, 1));
      c.set_output(0, c.input_dtype(0),
                   TensorShape({n, c.input_shape(0).dim(1)}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& bp = ctx.input(0);
      const Tensor& dloss = ctx.input(1);
      if (dloss.dim(0) != bp.dim(0)) {
        return ctx.InvalidArgument(
            "backprop has shape ", bp.shape().DebugString(),
            " but dloss has shape ", dloss.shape().DebugString(),
            "; the batch sizes must match");
      }
      const int64_t c = bp.dim(1);
      Tensor scratch;
      ASSIGN_OR_RETURN(Tensor * out,
                       AllocateFloat32Output(ctx, 0, bp.shape(), &scratch));
      const Tensor bp32 = AsFloat32(ctx, bp), dloss32 = AsFloat32(ctx, dloss);
      const float* pb = bp32.data<float>();
      const float* pd = dloss32.data<float>();
      float* po = out->data<float>();
      ctx.ParallelFor(bp.dim(0), kCwiseCost * c, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          ArrayMap<float>(po + r * c, c) =
              ConstArrayMap<float>(pb + r * c, c) * pd[r];
        }
      });
      if (out == &scratch) StoreOutput(ctx, 0, scratch, ctx.mutable_output(0));
      return absl::OkStatus();
    })
    // z = backprop * dloss[:, None]:
    //   dz/d(backprop) = g * dloss[:, None];
    //   dz/d(dloss) = sum(g * backprop, axis 1)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(
          SparseSoftmaxCrossEntropyWithLogitsGrad(s, g[0], op.input(1)));
      dx->push_back(ReduceSum(s, Mul(s, g[0], op.input(0)), {1}));
      return absl::OkStatus();
    });

}  // namespace

SoftmaxCrossEntropy SparseSoftmaxCrossEntropyWithLogits(const Scope& scope,
                                                        Output logits,
                                                        Output labels) {
  Node* n =
      scope.AddNode("SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

Output SparseSoftmaxCrossEntropyWithLogitsGrad(const Scope& scope,
                                               Output backprop, Output dloss) {
  return scope.AddNode("SparseSoftmaxCrossEntropyWithLogitsGrad",
                       {backprop, dloss});
}

Output SoftmaxCrossEntropyLoss(const Scope& scope, Output logits,
                               Output labels) {
  return ReduceMean(
      scope, SparseSoftmaxCrossEntropyWithLogits(scope, logits, labels).loss);
}

}  // namespace ipuflow::ops
