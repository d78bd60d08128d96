#include "ops/nn/ctc_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)); two -inf give -inf, not the NaN of -inf - -inf; a
// NaN gives NaN (std::max and std::min would drop a NaN second argument).
double LogAdd(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return a + b;
  const double m = std::max(a, b);
  if (m == -kInf) return -kInf;
  return m + std::log1p(std::exp(std::min(a, b) - m));
}

const char* ReductionName(LossReduction r) {
  switch (r) {
    case LossReduction::kNone:
      return "none";
    case LossReduction::kSum:
      return "sum";
    case LossReduction::kMean:
      return "mean";
  }
  return "?";
}

absl::StatusOr<LossReduction> ParseReduction(const std::string& s) {
  for (LossReduction r :
       {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean}) {
    if (s == ReductionName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "attribute 'reduction' must be \"none\", \"sum\" or \"mean\", got \"", s,
      "\""));
}

// Inputs shared by CTCLoss and CTCLossGrad.
enum Input { kLogProbs, kTargets, kInputLengths, kTargetLengths, kDLoss };

// Build-time checks of the inputs and attributes; returns N (-1 if unknown).
absl::StatusOr<int64_t> CheckInputs(const ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(kLogProbs));
  RETURN_IF_ERROR(c.ExpectRank(kLogProbs, 3));
  for (int i : {kTargets, kInputLengths, kTargetLengths}) {
    if (!IsInteger(c.input_dtype(i))) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.InputName(i), " must be int32 or int64, got ",
                       DTypeName(c.input_dtype(i))));
    }
  }
  const TensorShape& lp = c.input_shape(kLogProbs);
  const TensorShape& targets = c.input_shape(kTargets);
  if (targets.rank() != 1 && targets.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(kTargets),
        " must be [N, S] (padded) or 1-D (concatenated), got shape ",
        targets.DebugString()));
  }
  RETURN_IF_ERROR(c.ExpectRank(kInputLengths, 1));
  RETURN_IF_ERROR(c.ExpectRank(kTargetLengths, 1));
  // N is log_probs' dim 1 and the lengths' (and padded targets') dim 0.
  int64_t n = lp.dim(1);
  for (int i : {kTargets, kInputLengths, kTargetLengths}) {
    if (i == kTargets && targets.rank() == 1) continue;
    const int64_t d = c.input_shape(i).dim(0);
    if (d >= 0 && n >= 0 && d != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.InputName(kLogProbs), " has shape ", lp.DebugString(), " but ",
          c.InputName(i), " has shape ", c.input_shape(i).DebugString(),
          "; the batch sizes (log_probs' dim 1, its dim 0) must match"));
    }
    if (n < 0) n = d;
  }
  ASSIGN_OR_RETURN(int64_t blank, c.attr<int64_t>("blank"));
  if (blank < 0 || (lp.dim(2) >= 0 && blank >= lp.dim(2))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blank ", blank, " must be a class in [0, C) with C = ", lp.dim(2),
        " (", c.InputName(kLogProbs), " has shape ", lp.DebugString(), ")"));
  }
  ASSIGN_OR_RETURN(std::string reduction, c.attr<std::string>("reduction"));
  RETURN_IF_ERROR(ParseReduction(reduction).status());
  return n;
}

TensorShape LossShape(LossReduction reduction, int64_t n) {
  return reduction == LossReduction::kNone ? TensorShape({n}) : TensorShape();
}

int64_t IntAt(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[i]
                                    : t.data<int64_t>()[i];
}

// One sample's alignment lattice: its log-probabilities and its label
// sequence with blanks, l'_s = blank for even s and labels[s / 2] for odd s.
struct Sample {
  const float* log_probs;  // y_t(c) = log_probs[t * stride + c].
  int64_t stride;          // N * C.
  int64_t time;            // The input length.
  const int64_t* labels;
  int64_t num_labels;
  int64_t blank;
  int64_t classes;

  int64_t width() const { return 2 * num_labels + 1; }
  int64_t Label(int64_t s) const { return s % 2 == 0 ? blank : labels[s / 2]; }
  double Y(int64_t t, int64_t c) const { return log_probs[t * stride + c]; }
  // A path may go from s-2 straight to s (over a blank) unless l'_s is a
  // blank or repeats l'_{s-2}: repeated labels need a blank between them.
  bool CanSkipTo(int64_t s) const {
    return s % 2 == 1 && s >= 2 && Label(s) != Label(s - 2);
  }
  // A NaN among the log-probabilities the sample reads (t < its input
  // length) makes its loss and gradient NaN, as in PyTorch; zero_infinity
  // does not apply (it zeroes infinite losses only).
  bool HasNaN() const {
    for (int64_t t = 0; t < time; ++t) {
      for (int64_t c = 0; c < classes; ++c) {
        if (std::isnan(log_probs[t * stride + c])) return true;
      }
    }
    return false;
  }
};

// The batch's lengths and labels as int64, checked against the shapes.
struct Batch {
  int64_t time = 0, size = 0, classes = 0, blank = 0;
  std::vector<int64_t> input_lengths, target_lengths;
  std::vector<int64_t> label_offsets;  // Sample n's labels start here.
  std::vector<int64_t> labels;

  Sample Get(const float* log_probs, int64_t n) const {
    Sample x;
    x.log_probs = log_probs + n * classes;
    x.stride = size * classes;
    x.time = input_lengths[n];
    x.labels = labels.data() + label_offsets[n];
    x.num_labels = target_lengths[n];
    x.blank = blank;
    x.classes = classes;
    return x;
  }
};

absl::StatusOr<Batch> ReadBatch(const KernelContext& ctx) {
  const Tensor& lp = ctx.input(kLogProbs);
  const Tensor& targets = ctx.input(kTargets);
  const Tensor& il = ctx.input(kInputLengths);
  const Tensor& tl = ctx.input(kTargetLengths);
  Batch b;
  b.time = lp.dim(0);
  b.size = lp.dim(1);
  b.classes = lp.dim(2);
  b.blank = ctx.attr<int64_t>("blank");
  const std::string lp_shape = lp.shape().DebugString();
  // C may have been unknown while building.
  if (b.blank >= b.classes) {
    return ctx.InvalidArgument("blank ", b.blank, " must be a class in [0, ",
                               b.classes, ") (log_probs have shape ", lp_shape,
                               ")");
  }
  const bool padded = targets.rank() == 2;
  auto check_batch = [&](const Tensor& t, const char* name) {
    if (t.dim(0) == b.size) return absl::OkStatus();
    return ctx.InvalidArgument(name, " have shape ", t.shape().DebugString(),
                               " but log_probs have shape ", lp_shape,
                               "; the batch sizes must match");
  };
  RETURN_IF_ERROR(check_batch(il, "input_lengths"));
  RETURN_IF_ERROR(check_batch(tl, "target_lengths"));
  if (padded) RETURN_IF_ERROR(check_batch(targets, "targets"));
  const int64_t max_labels = padded ? targets.dim(1) : targets.NumElements();
  int64_t total = 0;
  for (int64_t n = 0; n < b.size; ++n) {
    const int64_t in_len = IntAt(il, n), target_len = IntAt(tl, n);
    if (in_len < 0 || in_len > b.time) {
      return ctx.InvalidArgument("sample ", n, ": input length ", in_len,
                                 " is out of range [0, T=", b.time,
                                 "] (log_probs have shape ", lp_shape, ")");
    }
    if (target_len < 0 || target_len > max_labels) {
      return ctx.InvalidArgument(
          "sample ", n, ": target length ", target_len, " is out of range [0, ",
          max_labels, "] (", padded ? "padded" : "1-D", " targets have shape ",
          targets.shape().DebugString(), ")");
    }
    b.input_lengths.push_back(in_len);
    b.target_lengths.push_back(target_len);
    b.label_offsets.push_back(padded ? n * max_labels : total);
    total += target_len;
  }
  if (!padded && total != targets.NumElements()) {
    return ctx.InvalidArgument(
        "the target lengths sum to ", total, " but the 1-D targets have ",
        targets.NumElements(),
        " elements; they must be equal (1-D targets are the samples' targets "
        "concatenated)");
  }
  b.labels.resize(targets.NumElements());
  for (int64_t i = 0; i < targets.NumElements(); ++i) {
    b.labels[i] = IntAt(targets, i);
  }
  for (int64_t n = 0; n < b.size; ++n) {
    for (int64_t j = 0; j < b.target_lengths[n]; ++j) {
      const int64_t v = b.labels[b.label_offsets[n] + j];
      if (v < 0 || v >= b.classes) {
        return ctx.InvalidArgument("sample ", n, ": label ", j, " is ", v,
                                   ", out of the classes' range [0, ",
                                   b.classes, ")");
      }
      if (v == b.blank) {
        return ctx.InvalidArgument("sample ", n, ": label ", j, " is ", v,
                                   ", the blank; targets cannot contain it");
      }
    }
  }
  return b;
}

// alpha[t * W + s]: log of the summed probability of the paths over times
// 0..t that end in l'_s (y_t(l'_s) included). Returns -log p(labels | x),
// +inf when no path fits in the input, NaN if x.HasNaN() (Graves 2006 eqs.
// 6-8, in log space).
double Forward(const Sample& x, std::vector<double>* alpha) {
  if (x.HasNaN()) return std::numeric_limits<double>::quiet_NaN();
  const int64_t w = x.width(), t_end = x.time;
  if (t_end == 0) return x.num_labels == 0 ? 0.0 : kInf;
  alpha->assign(t_end * w, -kInf);
  double* a = alpha->data();
  a[0] = x.Y(0, x.blank);
  if (w > 1) a[1] = x.Y(0, x.Label(1));
  for (int64_t t = 1; t < t_end; ++t) {
    const double* prev = a + (t - 1) * w;
    double* cur = a + t * w;
    for (int64_t s = 0; s < w; ++s) {
      double v = prev[s];
      if (s >= 1) v = LogAdd(v, prev[s - 1]);
      if (x.CanSkipTo(s)) v = LogAdd(v, prev[s - 2]);
      cur[s] = v == -kInf ? -kInf : v + x.Y(t, x.Label(s));
    }
  }
  const double* last = a + (t_end - 1) * w;
  const double log_p = w > 1 ? LogAdd(last[w - 1], last[w - 2]) : last[0];
  return -log_p;
}

// beta[t * W + s]: log of the summed probability of the path suffixes over
// times t+1.. given l'_s at t. Unlike Graves' beta it leaves y_t out, so that
// alpha + beta counts each path through (t, s) once. REQUIRES: x.time > 0.
void Backward(const Sample& x, std::vector<double>* beta,
              std::vector<double>* scratch) {
  const int64_t w = x.width(), t_end = x.time;
  beta->assign(t_end * w, -kInf);
  scratch->resize(w);
  double* b = beta->data();
  double* step = scratch->data();  // beta_{t+1}(s) + y_{t+1}(l'_s).
  b[(t_end - 1) * w + w - 1] = 0;
  if (w > 1) b[(t_end - 1) * w + w - 2] = 0;
  for (int64_t t = t_end - 2; t >= 0; --t) {
    const double* next = b + (t + 1) * w;
    for (int64_t s = 0; s < w; ++s) {
      step[s] = next[s] == -kInf ? -kInf : next[s] + x.Y(t + 1, x.Label(s));
    }
    double* cur = b + t * w;
    for (int64_t s = 0; s < w; ++s) {
      double v = step[s];
      if (s + 1 < w) v = LogAdd(v, step[s + 1]);
      if (s + 2 < w && x.CanSkipTo(s + 2)) v = LogAdd(v, step[s + 2]);
      cur[s] = v;
    }
  }
}

// Rough cost of one sample's forward pass, for ParallelFor.
double SampleCost(const Batch& b) {
  int64_t labels = 0;
  for (int64_t l : b.target_lengths) labels = std::max(labels, l);
  return 40.0 * b.time * (2 * labels + 1);
}

absl::Status CTCLossKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Batch batch, ReadBatch(ctx));
  ASSIGN_OR_RETURN(const LossReduction reduction,
                   ParseReduction(ctx.attr<std::string>("reduction")));
  const bool zero_infinity = ctx.attr<bool>("zero_infinity");
  const Tensor lp32 = AsFloat32(ctx, ctx.input(kLogProbs));
  const float* lp = lp32.data<float>();
  std::vector<double> nll(batch.size);
  ctx.ParallelFor(batch.size, SampleCost(batch),
                  [&](int64_t begin, int64_t end) {
                    std::vector<double> alpha;
                    for (int64_t n = begin; n < end; ++n) {
                      nll[n] = Forward(batch.Get(lp, n), &alpha);
                      if (zero_infinity && std::isinf(nll[n])) nll[n] = 0;
                    }
                  });
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * out,
                   AllocateFloat32Output(
                       ctx, 0, LossShape(reduction, batch.size), &scratch));
  float* loss = out->data<float>();
  if (reduction == LossReduction::kNone) {
    std::copy(nll.begin(), nll.end(), loss);
    if (out == &scratch) StoreOutput(ctx, 0, scratch, ctx.mutable_output(0));
    return absl::OkStatus();
  }
  double sum = 0;
  for (int64_t n = 0; n < batch.size; ++n) {
    sum += reduction == LossReduction::kSum
               ? nll[n]
               : nll[n] / std::max<int64_t>(batch.target_lengths[n], 1);
  }
  // The mean of an empty batch is 0 rather than 0/0.
  if (reduction == LossReduction::kMean && batch.size > 0) sum /= batch.size;
  loss[0] = static_cast<float>(sum);
  if (out == &scratch) StoreOutput(ctx, 0, scratch, ctx.mutable_output(0));
  return absl::OkStatus();
}

absl::Status CTCLossGradKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Batch batch, ReadBatch(ctx));
  ASSIGN_OR_RETURN(const LossReduction reduction,
                   ParseReduction(ctx.attr<std::string>("reduction")));
  const bool zero_infinity = ctx.attr<bool>("zero_infinity");
  const Tensor& dloss = ctx.input(kDLoss);
  const TensorShape dloss_shape = LossShape(reduction, batch.size);
  if (dloss.shape() != dloss_shape) {
    return ctx.InvalidArgument("dloss has shape ", dloss.shape().DebugString(),
                               " but reduction \"", ReductionName(reduction),
                               "\" of a batch of ", batch.size, " needs ",
                               dloss_shape.DebugString());
  }
  const Tensor lp_t = AsFloat32(ctx, ctx.input(kLogProbs));
  const Tensor dloss32 = AsFloat32(ctx, dloss);
  Tensor scratch;
  ASSIGN_OR_RETURN(Tensor * out,
                   AllocateFloat32Output(ctx, 0, lp_t.shape(), &scratch));
  float* grad = out->data<float>();
  std::fill(grad, grad + out->NumElements(), 0.0f);  // t >= input length.
  const float* lp = lp_t.data<float>();
  const float* pd = dloss32.data<float>();
  const int64_t c_end = batch.classes;
  ctx.ParallelFor(
      batch.size, 3 * SampleCost(batch), [&](int64_t begin, int64_t end) {
        std::vector<double> alpha, beta, scratch, occupancy(c_end);
        for (int64_t n = begin; n < end; ++n) {
          const Sample x = batch.Get(lp, n);
          float* g = grad + n * c_end;  // g[t * x.stride + c].
          const double nll = Forward(x, &alpha);
          if (std::isnan(nll)) {
            for (int64_t t = 0; t < x.time; ++t) {
              std::fill(g + t * x.stride, g + t * x.stride + c_end,
                        std::numeric_limits<float>::quiet_NaN());
            }
            continue;
          }
          if (std::isinf(nll)) {
            // Like PyTorch: the loss is +inf, so its gradient is NaN.
            if (zero_infinity) continue;
            for (int64_t t = 0; t < x.time; ++t) {
              std::fill(g + t * x.stride, g + t * x.stride + c_end,
                        std::numeric_limits<float>::quiet_NaN());
            }
            continue;
          }
          if (x.time == 0) continue;
          Backward(x, &beta, &scratch);
          double scale = reduction == LossReduction::kNone ? pd[n] : pd[0];
          if (reduction == LossReduction::kMean) {
            scale /= static_cast<double>(batch.size) *
                     std::max<int64_t>(x.num_labels, 1);
          }
          const int64_t w = x.width();
          for (int64_t t = 0; t < x.time; ++t) {
            // occupancy[c] = log of the summed probability of the paths with c
            // at t, so d nll / d y_t(c) = -exp(occupancy[c] + nll).
            std::fill(occupancy.begin(), occupancy.end(), -kInf);
            for (int64_t s = 0; s < w; ++s) {
              double& o = occupancy[x.Label(s)];
              o = LogAdd(o, alpha[t * w + s] + beta[t * w + s]);
            }
            for (int64_t c = 0; c < c_end; ++c) {
              g[t * x.stride + c] =
                  static_cast<float>(-scale * std::exp(occupancy[c] + nll));
            }
          }
        }
      });
  if (out == &scratch) StoreOutput(ctx, 0, scratch, ctx.mutable_output(0));
  return absl::OkStatus();
}

AttrMap CTCAttrs(const CTCLossOptions& options) {
  return {{"blank", options.blank},
          {"reduction", ReductionName(options.reduction)},
          {"zero_infinity", options.zero_infinity}};
}

REGISTER_OP("CTCLoss")
    .Input("log_probs")
    .Input("targets")
    .Input("input_lengths")
    .Input("target_lengths")
    .Attr("blank", int64_t{0})
    .Attr("reduction", "mean")
    .Attr("zero_infinity", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(int64_t n, CheckInputs(c));
      ASSIGN_OR_RETURN(std::string r, c.attr<std::string>("reduction"));
      c.set_output(0, c.input_dtype(kLogProbs),
                   LossShape(*ParseReduction(r), n));
      return absl::OkStatus();
    })
    .SetKernel(CTCLossKernel)
    // nll_n = -log sum over alignments pi of exp(sum_t y_t(pi_t)), so
    //   d nll_n / d y_t(c) = -(paths with c at t) / (all paths)
    //                      = -exp(logsumexp_{s: l'_s = c}(alpha_t(s) +
    //                                                     beta_t(s)) + nll_n)
    // with no softmax assumed; the reduction multiplies it by 1 (none, sum)
    // or 1 / (N max(L_n, 1)) (mean). Lengths and targets are integers.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Output(
          s.AddNode("CTCLossGrad",
                    {op.input(0), op.input(1), op.input(2), op.input(3), dy[0]},
                    op.attrs())));
      dx->resize(4);
      return absl::OkStatus();
    });

REGISTER_OP("CTCLossGrad")
    .Input("log_probs")
    .Input("targets")
    .Input("input_lengths")
    .Input("target_lengths")
    .Input("dloss")
    .Attr("blank", int64_t{0})
    .Attr("reduction", "mean")
    .Attr("zero_infinity", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckInputs(c).status());
      ASSIGN_OR_RETURN(std::string r, c.attr<std::string>("reduction"));
      RETURN_IF_ERROR(c.ExpectSameDType(kLogProbs, kDLoss));
      const LossReduction reduction = *ParseReduction(r);
      RETURN_IF_ERROR(
          c.ExpectRank(kDLoss, reduction == LossReduction::kNone ? 1 : 0));
      c.set_output(0, c.input_dtype(kLogProbs), c.input_shape(kLogProbs));
      return absl::OkStatus();
    })
    .SetKernel(CTCLossGradKernel)
    // Differentiating it again needs the second derivatives of the lattice;
    // an error is better than the silent zero of NotDifferentiable.
    .SetGradient([](const Scope&, const Node& op, absl::Span<const Output>,
                    std::vector<Output>*) {
      return absl::UnimplementedError(absl::StrCat(
          op.DebugName(),
          ": the second derivative of CTCLoss is not implemented"));
    });

}  // namespace

Output CTCLoss(const Scope& scope, Output log_probs, Output targets,
               Output input_lengths, Output target_lengths,
               CTCLossOptions options) {
  return scope.AddNode("CTCLoss",
                       {log_probs, targets, input_lengths, target_lengths},
                       CTCAttrs(options));
}

Output CTCLossGrad(const Scope& scope, Output log_probs, Output targets,
                   Output input_lengths, Output target_lengths, Output dloss,
                   CTCLossOptions options) {
  return scope.AddNode(
      "CTCLossGrad", {log_probs, targets, input_lengths, target_lengths, dloss},
      CTCAttrs(options));
}

}  // namespace ipuflow::ops
