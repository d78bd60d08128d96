// Shapes: re-inferred from the concrete feed shapes.
#include "core/compiler/shapes.h"

#include "core/compiler/test_graph.h"
#include "core/op_registry.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/gather.h"
#include "ops/math/add.h"

namespace ipuflow::compiler {
namespace {

TEST(ShapesTest, UnknownDimensionsBecomeTheFedOnes) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {-1, 3});
  Output b = ops::Const<float>(s, {1, 2, 3}, {3});
  Output y = ops::Add(s, x, b);
  ASSERT_EQ(y.shape(), TensorShape({-1, 3}));
  ProgramSpec spec = Spec({x}, {TensorShape({5, 3})}, {y});
  const FrontPhases f = RunFrontPhases(*s.graph(), spec);
  // Values: b 0, y 1, x 2.
  const ValueTypes& t = f.types;
  EXPECT_EQ(t.shapes,
            (std::vector<TensorShape>{TensorShape({3}), TensorShape({5, 3}),
                                      TensorShape({5, 3})}));
  EXPECT_EQ(t.dtypes, (std::vector<DType>{DType::kFloat32, DType::kFloat32,
                                          DType::kFloat32}));
}

TEST(ShapesTest, AShapeFunctionErrorNamesTheNode) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {-1});
  Output y = ops::Placeholder(s, DType::kFloat32, {-1});
  Output z = ops::Add(s.WithOpName("sum"), x, y);
  ProgramSpec spec = Spec({x, y}, {TensorShape({2}), TensorShape({3})}, {z});
  absl::StatusOr<FeedIndex> feeds = CheckSpec(*s.graph(), spec);
  ASSERT_TRUE(feeds.ok());
  absl::StatusOr<NodeOrder> order =
      OrderNodes(*s.graph(), spec, Prune(*s.graph(), spec, *feeds));
  ASSERT_TRUE(order.ok());
  const Values values = AssignValues(*order, spec, *feeds);
  absl::StatusOr<ValueTypes> types =
      InferShapes(*s.graph(), spec, *order, values);
  EXPECT_EQ(types.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(types.status().message().rfind("Add 'sum': ", 0), 0u)
      << types.status();
}

// Shape functions see constant inputs through the registry property
// (OpDef::constant_value), not by op name: Gather checks constant indices
// against the fed table's size.
TEST(ShapesTest, ConstantInputsReachShapeFunctions) {
  const ConstantValueFn& constant =
      (*OpRegistry::Global()->Find("Const"))->constant_value();
  ASSERT_TRUE(constant);
  EXPECT_FALSE((*OpRegistry::Global()->Find("Placeholder"))->constant_value());
  Scope s = Scope::NewRootScope();
  Output c = ops::Const<float>(s, {1, 2}, {2});
  EXPECT_EQ(&constant(*c.node), &c.node->attr<Tensor>("value"));

  Output table = ops::Placeholder(s, DType::kFloat32, {-1, 2});
  Output indices = ops::Const<int32_t>(s, {0, 4}, {2});
  Output rows = ops::Gather(s.WithOpName("rows"), table, indices);
  ProgramSpec spec = Spec({table}, {TensorShape({3, 2})}, {rows});
  absl::StatusOr<FeedIndex> feeds = CheckSpec(*s.graph(), spec);
  absl::StatusOr<NodeOrder> order =
      OrderNodes(*s.graph(), spec, Prune(*s.graph(), spec, *feeds));
  ASSERT_TRUE(order.ok());
  absl::StatusOr<ValueTypes> types =
      InferShapes(*s.graph(), spec, *order, AssignValues(*order, spec, *feeds));
  EXPECT_FALSE(types.ok());
  EXPECT_NE(types.status().message().find("Gather 'rows'"), std::string::npos)
      << types.status();
}

}  // namespace
}  // namespace ipuflow::compiler
