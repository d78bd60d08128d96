// Values: node outputs first, consecutive in node order, then feeds.
#include "core/compiler/values.h"

#include "core/compiler/test_graph.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/split.h"
#include "ops/math/add.h"

namespace ipuflow::compiler {
namespace {

TEST(ValuesTest, OutputsThenFeeds) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});  // Fed: not scheduled.
  Output a = ops::Const(s, 1.f);                         // Position 0.
  Output b = ops::Add(s, a, x);                          // Position 1.
  Output y = ops::Placeholder(s, DType::kFloat32, {2});  // Fed.
  Output c = ops::Add(s, b, y);                          // Position 2.
  const FrontPhases f = RunFrontPhases(
      *s.graph(), Spec({y, x}, {TensorShape({2}), TensorShape({2})}, {c, x}));
  const Values& v = f.values;
  ASSERT_EQ(f.order.size(), 3);
  // a:0 b:1 c:2, then y:3 x:4 (feed order).
  EXPECT_EQ(v.num_values, 5);
  EXPECT_EQ(v.first_output, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(v.feed_values, (std::vector<int>{3, 4}));
  EXPECT_EQ(v.inputs, (std::vector<std::vector<int>>{{}, {0, 4}, {1, 3}}));
  EXPECT_EQ(v.producer, (std::vector<int>{0, 1, 2, -1, -1}));
  EXPECT_EQ(v.fetch_values, (std::vector<int>{2, 4}));
}

TEST(ValuesTest, ANodesOutputsAreConsecutive) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const<float>(s, {1, 2, 3, 4}, {4});
  std::vector<Output> parts = ops::Split(s, a, 2, 0);
  Output b = ops::Add(s, parts[1], parts[0]);
  const FrontPhases f = RunFrontPhases(*s.graph(), Spec({}, {}, {b}));
  // a:0, split:1-2, b:3.
  EXPECT_EQ(f.values.first_output, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(f.values.inputs[2], (std::vector<int>{2, 1}));
  EXPECT_EQ(f.values.producer, (std::vector<int>{0, 1, 1, 2}));
}

}  // namespace
}  // namespace ipuflow::compiler
