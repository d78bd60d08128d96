#include "core/testing/op_test.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/gradients.h"
#include "core/half.h"

namespace ipuflow::testing {

absl::StatusOr<std::vector<Tensor>> RunGraph(
    const Scope& scope, const FeedList& feeds,
    const std::vector<Output>& fetches) {
  RETURN_IF_ERROR(scope.status());
  Session session(scope.graph());
  RETURN_IF_ERROR(session.Initialize());
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session.Run(feeds, fetches, &out));
  return out;
}

Tensor RunOne(const Scope& scope, const FeedList& feeds, Output fetch) {
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(scope, feeds, {fetch});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return Tensor();
  return (*out)[0];
}

Tensor RandomTensor(const TensorShape& shape, float lo, float hi, uint32_t seed,
                    DType dtype) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const float v = dist(rng);
    IPUFLOW_SWITCH_ALL(dtype, t.data<T>()[i] = static_cast<T>(v), break);
  }
  return t;
}

::testing::AssertionResult TensorNear(const Tensor& actual,
                                      const Tensor& expected, double atol,
                                      double rtol) {
  if (!actual.valid()) return ::testing::AssertionFailure() << "invalid tensor";
  if (actual.dtype() != expected.dtype() ||
      actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "got " << DTypeName(actual.dtype())
           << actual.shape().DebugString() << ", expected "
           << DTypeName(expected.dtype()) << expected.shape().DebugString();
  }
  for (int64_t i = 0; i < actual.NumElements(); ++i) {
    const double a = actual.ElementAsDouble(i), e = expected.ElementAsDouble(i);
    if (!(std::abs(a - e) <= atol + rtol * std::abs(e))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << a << ", expected " << e
             << "\n  actual:   " << actual.DebugString(16)
             << "\n  expected: " << expected.DebugString(16);
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult TensorNear(const Tensor& actual,
                                      const std::vector<float>& expected,
                                      const TensorShape& shape, double atol,
                                      double rtol) {
  Tensor e(actual.valid() ? actual.dtype() : DType::kFloat32, shape);
  if (e.NumElements() != static_cast<int64_t>(expected.size())) {
    return ::testing::AssertionFailure()
           << "expected values do not fill " << shape.DebugString();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    IPUFLOW_SWITCH_ALL(e.dtype(), e.data<T>()[i] = static_cast<T>(expected[i]),
                       break);
  }
  return TensorNear(actual, e, atol, rtol);
}

namespace {

// sum(r * y) in double.
double Project(const Tensor& y, const Tensor& r) {
  double sum = 0;
  for (int64_t i = 0; i < y.NumElements(); ++i) {
    sum += y.ElementAsDouble(i) * r.ElementAsDouble(i);
  }
  return sum;
}

void AddToElement(const Tensor& t, int64_t i, double delta) {
  IPUFLOW_SWITCH_FLOAT(t.dtype(),
                       t.data<T>()[i] = static_cast<T>(
                           static_cast<double>(t.data<T>()[i]) + delta),
                       break);
}

}  // namespace

absl::StatusOr<double> MaxGradientError(const Scope& scope,
                                        const std::vector<Output>& xs,
                                        const std::vector<Tensor>& x_values,
                                        Output y,
                                        GradientCheckOptions options) {
  RETURN_IF_ERROR(scope.status());
  if (xs.size() != x_values.size()) {
    return absl::InvalidArgumentError("one value per x is required");
  }
  FeedList feeds;
  std::vector<Tensor> values;
  for (size_t i = 0; i < xs.size(); ++i) {
    values.push_back(x_values[i].Copy());
    feeds.push_back({xs[i], values.back()});
  }
  Session session(scope.graph());
  RETURN_IF_ERROR(session.Initialize());
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session.Run(feeds, {y}, &out));
  const Tensor r = RandomTensor(out[0].shape(), -1, 1, options.seed, y.dtype());

  Scope gs = scope.NewSubScope("gradient_check");
  Node* r_node = gs.AddNode("Placeholder", {},
                            {{"dtype", y.dtype()}, {"shape", y.shape()}});
  std::vector<Output> grads;
  RETURN_IF_ERROR(AddGradients(gs, {y}, xs, {Output(r_node)}, &grads));
  FeedList grad_feeds = feeds;
  grad_feeds.push_back({Output(r_node), r});
  std::vector<Tensor> analytic;
  RETURN_IF_ERROR(session.Run(grad_feeds, grads, &analytic));

  double max_error = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    if (analytic[k].shape() != values[k].shape()) {
      return absl::InternalError(
          absl::StrCat("gradient for x ", k, " has shape ",
                       analytic[k].shape().DebugString(), " but x has ",
                       values[k].shape().DebugString()));
    }
    for (int64_t i = 0; i < values[k].NumElements(); ++i) {
      const double orig = values[k].ElementAsDouble(i);
      AddToElement(values[k], i, options.delta);
      const double actual_plus = values[k].ElementAsDouble(i) - orig;
      RETURN_IF_ERROR(session.Run(feeds, {y}, &out));
      const double plus = Project(out[0], r);
      AddToElement(values[k], i, -options.delta - actual_plus);
      const double actual_minus = orig - values[k].ElementAsDouble(i);
      RETURN_IF_ERROR(session.Run(feeds, {y}, &out));
      const double minus = Project(out[0], r);
      AddToElement(values[k], i, orig - values[k].ElementAsDouble(i));
      const double numeric = (plus - minus) / (actual_plus + actual_minus);
      const double a = analytic[k].ElementAsDouble(i);
      const double err =
          std::abs(a - numeric) / std::max(1.0, std::abs(numeric));
      max_error = std::max(max_error, err);
    }
  }
  return max_error;
}

}  // namespace ipuflow::testing
