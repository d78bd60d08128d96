// Graph building: naming, placement, shape inference at build time, errors.
#include "core/graph.h"

#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/array/gather.h"
#include "ops/array/pad.h"
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
  Output bad =
      ops::Add(root.WithOpName("bad"), ops::Const<float>(root, {1, 2}, {2}),
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
  Output y = ops::Add(root, x,
                      ops::Const<float>(root, std::vector<float>(10, 1), {10}));
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

// No shape whose element count wraps int64 (or exceeds 2^48) gets past a
// builder: the errors name the node and the shape (issue 9).
TEST(GraphTest, ShapesThatWrapAreRefusedByBuilders) {
  const int64_t big = (int64_t{1} << 62) + 1;
  {
    Scope root = Scope::NewRootScope();
    Output f = ops::Fill(root.WithOpName("f"), TensorShape({big, 4}), 1.0);
    Output g =
        ops::Gather(root, f, ops::Const(root, Tensor::Scalar<int32_t>(3)), 0);
    EXPECT_FALSE(g.valid());
    EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(root.status().message().find("Fill 'f'"), std::string::npos)
        << root.status();
    EXPECT_NE(root.status().message().find("[4611686018427387905,4]"),
              std::string::npos)
        << root.status();
  }
  {
    Scope root = Scope::NewRootScope();
    Output x = ops::Const(root, std::vector<float>{1, 2, 3, 4}, {4});
    ops::Reshape(root.WithOpName("r"), x,
                 TensorShape({big, 4, int64_t{1} << 62, 0, 1}));
    // A zero dimension makes the count 0, so only the bound on the known
    // part can refuse it: 0 elements != 4.
    EXPECT_FALSE(root.status().ok());
    Scope root2 = Scope::NewRootScope();
    Output y = ops::Const(root2, std::vector<float>{1, 2, 3, 4}, {4});
    ops::Reshape(root2.WithOpName("r"), y, TensorShape({-1, big, 4}));
    EXPECT_EQ(root2.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(root2.status().message().find("Reshape 'r'"), std::string::npos)
        << root2.status();
  }
  {
    Scope root = Scope::NewRootScope();
    Output x = ops::Const(root, std::vector<float>{1, 2}, {2});
    ops::Pad(root.WithOpName("p"), x, {INT64_MAX - 1, 5});
    EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(root.status().message().find("Pad 'p'"), std::string::npos)
        << root.status();
    EXPECT_NE(root.status().message().find("padded by"), std::string::npos)
        << root.status();
  }
}

TEST(GraphTest, AttributesAreCheckedAgainstTheirDeclaredTypes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, 1.0f);
  root.WithOpName("r").AddNode("Reshape", {x}, {{"shape", int64_t{1}}});
  EXPECT_NE(root.status().message().find(
                "Reshape 'r': attribute 'shape' is int 1, expected shape"),
            std::string::npos)
      << root.status();
  Scope root2 = Scope::NewRootScope();
  Output y = ops::Const(root2, 1.0f);
  root2.WithOpName("i").AddNode("Identity", {y}, {{"_note", "kept"}});
  EXPECT_TRUE(root2.status().ok()) << root2.status();
  root2.WithOpName("j").AddNode("Identity", {y}, {{"note", "refused"}});
  EXPECT_NE(root2.status().message().find("unknown attribute 'note'"),
            std::string::npos)
      << root2.status();
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
