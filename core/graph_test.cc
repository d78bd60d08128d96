// Graph building: naming, placement, shape inference at build time, errors.
#include "core/graph.h"

#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/reshape.h"
#include "ops/math/add.h"

namespace ipuflow {
namespace {

TEST(ScopeTest, NamesAreUniqueAndPrefixed) {
  Scope root = Scope::NewRootScope();
  Scope layer = root.NewSubScope("dense");
  Output a = ops::Const(layer, 1.0f);
  Output b = ops::Const(layer, 2.0f);
  Output c = ops::Add(layer.WithOpName("sum"), a, b);
  EXPECT_EQ(a.node->name(), "dense/Const");
  EXPECT_EQ(b.node->name(), "dense/Const_1");
  EXPECT_EQ(c.node->name(), "dense/sum");
  Scope layer2 = root.NewSubScope("dense");
  EXPECT_EQ(ops::Const(layer2, 1.0f).node->name(), "dense_1/Const");
}

TEST(ScopeTest, PlacementAndBlocks) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root.WithIpu(2).WithBlock("B1"), 1.0f);
  EXPECT_EQ(a.node->ipu(), 2);
  EXPECT_EQ(a.node->block(), "B1");
  EXPECT_EQ(ops::Const(root, 1.0f).node->ipu(), -1);
}

TEST(ScopeTest, FirstErrorIsKeptAndLaterBuildersAreNoOps) {
  Scope root = Scope::NewRootScope();
  Output bad = ops::Add(root.WithOpName("bad"), ops::Const<float>(root, {1, 2}, {2}),
                        ops::Const<float>(root, {1, 2, 3}, {3}));
  EXPECT_FALSE(bad.valid());
  Output later = ops::Add(root, bad, ops::Const(root, 1.0f));
  EXPECT_FALSE(later.valid());
  EXPECT_NE(root.status().message().find("Add 'bad'"), std::string::npos)
      << root.status();
}

TEST(GraphTest, ShapesInferredWithUnknownDims) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DType::kFloat32, {-1, 10});
  Output y = ops::Add(root, x, ops::Const<float>(root, std::vector<float>(10, 1), {10}));
  EXPECT_EQ(y.shape().DebugString(), "[?,10]");
  EXPECT_EQ(y.dtype(), DType::kFloat32);
}

TEST(GraphTest, UnknownOpIsNotFound) {
  Graph g;
  NodeSpec spec;
  spec.op = "NoSuchOp";
  spec.name = "n";
  auto n = g.AddNode(spec);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(n.status().message().find("NoSuchOp"), std::string::npos);
}

TEST(GraphTest, WrongInputCountNamesOp) {
  Scope root = Scope::NewRootScope();
  root.WithOpName("a").AddNode("Add", {ops::Const(root, 1.0f)});
  EXPECT_NE(root.status().message().find("Add 'a': expects 2 input(s), got 1"),
            std::string::npos)
      << root.status();
}

TEST(GraphTest, MissingRequiredAttr) {
  Scope root = Scope::NewRootScope();
  root.AddNode("Reshape", {ops::Const(root, 1.0f)});
  EXPECT_NE(root.status().message().find("missing required attribute 'shape'"),
            std::string::npos)
      << root.status();
}

TEST(GraphTest, FingerprintTracksContent) {
  auto build = [](float v) {
    Scope root = Scope::NewRootScope();
    ops::Add(root, ops::Const(root, v), ops::Const(root, 1.0f));
    return root.graph()->Fingerprint();
  };
  EXPECT_EQ(build(1.0f), build(1.0f));
  EXPECT_NE(build(1.0f), build(2.0f));
}

}  // namespace
}  // namespace ipuflow
