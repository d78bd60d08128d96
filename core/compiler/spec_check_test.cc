// Spec check: every handle belongs to the graph, feed shapes are concrete.
#include "core/compiler/spec_check.h"

#include "core/compiler/test_graph.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"

namespace ipuflow::compiler {
namespace {

TEST(SpecCheckTest, IndexesTheFeeds) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {-1});
  Output y = ops::Placeholder(s, DType::kFloat32, {2});
  Output z = ops::Add(s, x, y);
  absl::StatusOr<FeedIndex> feeds = CheckSpec(
      *s.graph(), Spec({y, x}, {TensorShape({2}), TensorShape({2})}, {z}));
  ASSERT_TRUE(feeds.ok()) << feeds.status();
  EXPECT_EQ(feeds->size(), 2u);
  EXPECT_EQ(feeds->at(y), 0);
  EXPECT_EQ(feeds->at(x), 1);
}

TEST(SpecCheckTest, NamesWhatIsWrong) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("x"), DType::kFloat32, {-1, 4});
  Scope other = Scope::NewRootScope();
  Output elsewhere = ops::Const(other, 1.f);
  const Graph& g = *s.graph();

  EXPECT_EQ(CheckSpec(g, Spec({x}, {}, {})).status().message(),
            "ProgramSpec has 1 feeds but 0 feed shapes");
  EXPECT_EQ(
      CheckSpec(g, Spec({elsewhere}, {TensorShape()}, {})).status().message(),
      "feed 0 is not an output of this graph");
  EXPECT_EQ(
      CheckSpec(g, Spec({x}, {TensorShape({2, 3})}, {})).status().message(),
      "value fed to 'x:0' has shape [2,3] but Placeholder 'x' expects [?,4]");
  // A feed shape must be concrete: it sizes the arena.
  EXPECT_FALSE(CheckSpec(g, Spec({x}, {TensorShape({-1, 4})}, {})).ok());
  EXPECT_FALSE(CheckSpec(g, Spec({}, {}, {elsewhere})).ok());
  EXPECT_FALSE(CheckSpec(g, Spec({}, {}, {}, {nullptr})).ok());
  EXPECT_FALSE(CheckSpec(g, Spec({}, {}, {}, {elsewhere.node})).ok());
}

}  // namespace
}  // namespace ipuflow::compiler
