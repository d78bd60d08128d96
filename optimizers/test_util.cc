#include "optimizers/test_util.h"

#include "core/half.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"

namespace ipuflow::optimizers::testing {

LinearLoss::LinearLoss(const Scope& scope, const std::string& name,
                       const std::vector<float>& w0, DType dtype) {
  Output init = ops::Const<float>(scope, w0, {static_cast<int64_t>(w0.size())});
  if (dtype != DType::kFloat32) init = ops::Cast(scope, init, dtype);
  w = ops::Variable(scope.WithOpName(name), init);
  c = ops::Placeholder(scope.WithOpName(name + "_c"), DType::kFloat32,
                       {static_cast<int64_t>(w0.size())});
  Output wf = w.value;
  if (dtype != DType::kFloat32) wf = ops::Cast(scope, wf, DType::kFloat32);
  loss = ops::ReduceSum(scope, ops::Mul(scope, wf, c));
}

FeedList LinearLoss::Feed(const std::vector<float>& values) const {
  return {{c, Tensor::FromVector<float>(values)}};
}

std::vector<Tensor> RunSteps(const Scope& scope, Node* train,
                             const std::vector<FeedList>& feeds, Output fetch) {
  EXPECT_TRUE(scope.ok()) << scope.status();
  if (!scope.ok()) return {};
  Session session(scope.graph());
  absl::Status s = session.Initialize();
  EXPECT_TRUE(s.ok()) << s;
  std::vector<Tensor> values, out;
  for (const FeedList& feed : feeds) {
    s = session.Run(feed, {}, {train}, nullptr);
    EXPECT_TRUE(s.ok()) << s;
    s = session.Run({}, {fetch}, &out);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return {};
    values.push_back(out[0]);
  }
  return values;
}

float At(const Tensor& t, int i) {
  return t.dtype() == DType::kFloat16 ? static_cast<float>(t.data<half>()[i])
                                      : t.data<float>()[i];
}

}  // namespace ipuflow::optimizers::testing
