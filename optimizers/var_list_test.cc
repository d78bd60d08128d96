#include "optimizers/var_list.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::optimizers {
namespace {

class VarListTest : public ::testing::Test {
 protected:
  Node* Var(const std::string& name, bool trainable = true) {
    return ops::Variable(scope_.WithOpName(name), ops::Const(scope_, 1.f),
                         {"", trainable})
        .handle.node;
  }
  std::string Message(const absl::StatusOr<std::vector<Node*>>& r) {
    return std::string(r.status().message());
  }

  Scope scope_ = Scope::NewRootScope();
};

TEST_F(VarListTest, DefaultIsTheTrainableVariables) {
  Node* a = Var("a");
  Var("frozen", /*trainable=*/false);
  Node* b = Var("b");
  absl::StatusOr<std::vector<Node*>> r = VarList().Resolve(*scope_.graph());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<Node*>{a, b}));
}

TEST_F(VarListTest, ExplicitListKeepsOrderDropsDuplicates) {
  Node* a = Var("a");
  Node* frozen = Var("frozen", false);
  absl::StatusOr<std::vector<Node*>> r =
      VarList::Of({frozen, a, frozen}).Resolve(*scope_.graph());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<Node*>{frozen, a}));
}

TEST_F(VarListTest, ExplicitNonVariableIsAnError) {
  Node* c = ops::Const(scope_.WithOpName("c"), 1.f).node;
  absl::StatusOr<std::vector<Node*>> r =
      VarList::Of({c}).Resolve(*scope_.graph());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(r).find("entry 0 (Const 'c') is not a Variable"),
            std::string::npos)
      << r.status();
}

TEST_F(VarListTest, MatchingIsAFullMatchOverTrainableVariables) {
  Scope d1 = scope_.NewSubScope("dense_1");
  Scope d2 = scope_.NewSubScope("dense_2");
  Node* w1 = ops::Variable(d1.WithOpName("w"), ops::Const(d1, 1.f)).handle.node;
  ops::Variable(d1.WithOpName("frozen"), ops::Const(d1, 1.f), {"", false});
  Node* w2 = ops::Variable(d2.WithOpName("w"), ops::Const(d2, 1.f)).handle.node;
  Var("head/w");
  absl::StatusOr<std::vector<Node*>> r =
      VarList::Matching("dense_[0-9]+/.*").Resolve(*scope_.graph());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<Node*>{w1, w2}));
  // A partial match does not count.
  r = VarList::Matching("dense_1").Resolve(*scope_.graph());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VarListTest, PatternMatchingNothingNamesPatternAndVariables) {
  Var("a");
  absl::StatusOr<std::vector<Node*>> r =
      VarList::Matching("conv.*").Resolve(*scope_.graph());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(r).find("pattern 'conv.*' (full match) matches no "
                            "trainable variable; the trainable variables are "
                            "'a'"),
            std::string::npos)
      << r.status();
}

TEST_F(VarListTest, BadPatternIsAnError) {
  Var("a");
  absl::StatusOr<std::vector<Node*>> r =
      VarList::Matching("dense_[").Resolve(*scope_.graph());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(r).find("invalid pattern 'dense_['"), std::string::npos)
      << r.status();
}

TEST_F(VarListTest, NoTrainableVariablesIsAnError) {
  Var("frozen", false);
  EXPECT_EQ(VarList().Resolve(*scope_.graph()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::optimizers
