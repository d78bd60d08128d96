#include "optimizers/test_util.h"

#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"

namespace ipuflow::optimizers::testing {

LinearLoss::LinearLoss(const Scope& scope, const std::string& name,
                       const std::vector<float>& w0) {
  w = ops::Variable(
      scope.WithOpName(name),
      ops::Const<float>(scope, w0, {static_cast<int64_t>(w0.size())}));
  c = ops::Placeholder(scope.WithOpName(name + "_c"), DType::kFloat32,
                       {static_cast<int64_t>(w0.size())});
  loss = ops::ReduceSum(scope, ops::Mul(scope, w.value, c));
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

}  // namespace ipuflow::optimizers::testing
