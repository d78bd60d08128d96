#include "ops/testing/half_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/gradients.h"
#include "core/tensor_eigen.h"
#include "core/testing/op_test.h"
#include "ops/array/const.h"

namespace ipuflow::testing {
namespace {

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> out(t.NumElements());
  IPUFLOW_SWITCH_ALL(t.dtype(),
                     for (int64_t i = 0; i < t.NumElements(); ++i) out[i] =
                         static_cast<double>(t.data<T>()[i]),
                     break);
  return out;
}

// max |a - e| / max |e|.
double ScaledError(const Tensor& actual, const Tensor& expected) {
  const std::vector<double> a = ToDoubles(actual), e = ToDoubles(expected);
  if (a.size() != e.size()) return INFINITY;
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - e[i]));
    if (std::isnan(a[i]) != std::isnan(e[i])) return INFINITY;
    scale = std::max(scale, std::abs(e[i]));
  }
  return scale == 0 ? err : err / scale;
}

struct Results {
  DType dtype;
  std::vector<Tensor> values;  // y, then the gradients.
};

absl::StatusOr<Results> Run(const HalfCheckBuilder& build,
                            const std::vector<Tensor>& values, bool half,
                            bool gradients) {
  Scope s = Scope::NewRootScope();
  std::vector<Output> xs, float_xs;
  FeedList feeds;
  for (size_t i = 0; i < values.size(); ++i) {
    const bool is_float = values[i].dtype() == DType::kFloat32;
    const Tensor v =
        is_float ? (half ? ToHalf(values[i]) : ToFloat(ToHalf(values[i])))
                 : values[i];
    xs.push_back(ops::Placeholder(s.WithOpName(absl::StrCat("x", i)), v.dtype(),
                                  v.shape()));
    if (is_float) float_xs.push_back(xs.back());
    feeds.push_back({xs.back(), v});
  }
  Output y = build(s, xs);
  if (!s.ok()) return s.status();
  std::vector<Output> fetches = {y};
  if (gradients) {
    Tensor r = RandomTensor(y.shape(), -1, 1, /*seed=*/17);
    r = half ? ToHalf(r) : ToFloat(ToHalf(r));
    std::vector<Output> grads;
    RETURN_IF_ERROR(AddGradients(s, {y}, float_xs, {ops::Const(s, r)}, &grads));
    fetches.insert(fetches.end(), grads.begin(), grads.end());
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> out, RunGraph(s, feeds, fetches));
  return Results{y.dtype(), std::move(out)};
}

}  // namespace

Tensor ToHalf(const Tensor& t) {
  if (t.dtype() == DType::kFloat16) return t;
  Tensor out(DType::kFloat16, t.shape());
  out.flat<half>() = t.flat<float>().cast<half>();
  return out;
}

Tensor ToFloat(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) return t;
  Tensor out(DType::kFloat32, t.shape());
  out.flat<float>() = t.flat<half>().cast<float>();
  return out;
}

absl::StatusOr<HalfCheck> CompareHalfToFloat(const HalfCheckBuilder& build,
                                             const std::vector<Tensor>& values,
                                             bool gradients) {
  ASSIGN_OR_RETURN(Results f32, Run(build, values, false, gradients));
  ASSIGN_OR_RETURN(Results f16, Run(build, values, true, gradients));
  HalfCheck c;
  c.dtype = f16.dtype;
  c.forward_error = ScaledError(f16.values[0], f32.values[0]);
  for (size_t i = 1; i < f16.values.size(); ++i) {
    if (f16.values[i].dtype() != DType::kFloat16) {
      return absl::InternalError(
          absl::StrCat("gradient ", i - 1, " of the float16 build is ",
                       DTypeName(f16.values[i].dtype()), ", not float16"));
    }
    c.gradient_error =
        std::max(c.gradient_error, ScaledError(f16.values[i], f32.values[i]));
  }
  return c;
}

}  // namespace ipuflow::testing
