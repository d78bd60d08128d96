#include "core/gradients.h"

#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/array/reshape.h"
#include "ops/math/add.h"
#include "ops/shape_fns.h"

namespace ipuflow {
namespace {

using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

// An op that forgot its gradient, to check the error.
REGISTER_OP("TestOpWithoutGradient")
    .Input("x")
    .SetShapeFn(ops::shape_fns::Unchanged)
    .SetKernel([](KernelContext& ctx) {
      ctx.set_output(0, ctx.input(0));
      return absl::OkStatus();
    });

TEST(GradientsTest, FanOutSums) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  Output y = ops::Add(s, ops::Add(s, x, x), x);  // y = 3x
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {y}, {x}, {}, &g).ok());
  auto out = RunGraph(s, {{x, Tensor::FromVector<float>({1, 2})}}, g);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {3, 3}, {2}));
}

TEST(GradientsTest, GradYsScaleTheSeed) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  Output y = ops::Reshape(s, ops::Add(s, x, x), {2, 1});
  std::vector<Output> g;
  ASSERT_TRUE(
      AddGradients(s, {y}, {x}, {ops::Const<float>(s, {5, 7}, {2, 1})}, &g)
          .ok());
  auto out = RunGraph(s, {{x, Tensor::FromVector<float>({1, 2})}}, g);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {10, 14}, {2}));
}

TEST(GradientsTest, UnconnectedXGetsZeros) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {3});
  Output z = ops::Placeholder(s, DType::kFloat32, {3});
  Output y = ops::Add(s, x, x);
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {y}, {z}, {}, &g).ok());
  auto out = RunGraph(s, {{z, Tensor::FromVector<float>({1, 2, 3})}}, g);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {0, 0, 0}, {3}));
}

TEST(GradientsTest, DeclaredNonDifferentiableOpStopsGradient) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  Output y = ops::Add(s, ops::OnesLike(s, x), x);
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {y}, {x}, {}, &g).ok());
  auto out = RunGraph(s, {{x, Tensor::FromVector<float>({4, 5})}}, g);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {1, 1}, {2}));
}

TEST(GradientsTest, MissingGradientIsAnErrorNamingTheNode) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  Output y = s.WithOpName("forgot").AddNode("TestOpWithoutGradient", {x});
  std::vector<Output> g;
  absl::Status st = AddGradients(s, {y}, {x}, {}, &g);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("TestOpWithoutGradient 'forgot'"),
            std::string::npos)
      << st;
}

TEST(GradientsTest, BackwardNodesFollowForwardPlacement) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  Output b = ops::Const<float>(s, {1}, {1});
  Output h = ops::Add(s.WithIpu(0).WithBlock("B1").WithOpName("h"), x, b);
  Output y =
      ops::Reshape(s.WithIpu(1).WithBlock("B2").WithOpName("y"), h, {1, 2});
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {y}, {x}, {}, &g).ok());
  int checked = 0;
  for (Node* n : s.graph()->nodes()) {
    if (n->name().rfind("gradients/h/", 0) == 0) {
      EXPECT_EQ(n->ipu(), 0) << n->name();
      EXPECT_EQ(n->block(), "B1") << n->name();
      ++checked;
    }
    if (n->name().rfind("gradients/y/", 0) == 0) {
      EXPECT_EQ(n->ipu(), 1) << n->name();
      EXPECT_EQ(n->block(), "B2") << n->name();
      ++checked;
    }
  }
  EXPECT_GE(checked, 2);
}

TEST(GradientsTest, IntegerXIsRejected) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kInt32, {2});
  std::vector<Output> g;
  absl::Status st = AddGradients(s, {ops::Add(s, x, x)}, {x}, {}, &g);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow
