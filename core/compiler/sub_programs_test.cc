// Sub-programs: a loop node's bodies, planned for its input shapes; their
// always-live bytes join this program's, their peak is kept per node.
#include "core/compiler/sub_programs.h"

#include "core/compiler/always_live.h"
#include "core/compiler/test_graph.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::compiler {
namespace {

// A loop-like op: a "body" fetching its first input and a "cond" fetching
// nothing. Its output's shape is unknown, so a loop reading it is skipped.
REGISTER_OP("_SubProgramsTestLoop")
    .VariadicInput("inputs")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      c.set_output(0, DType::kFloat32, TensorShape({-1}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext&) { return absl::OkStatus(); })
    .SetSubPrograms(
        [](const Node& n, absl::Span<const TensorShape>,
           const ProgramSpec&) -> absl::StatusOr<std::vector<SubProgramSpec>> {
          std::vector<SubProgramSpec> subs(2);
          subs[0].role = "body";
          subs[0].spec.fetches = {n.input(0)};
          subs[1].role = "cond";
          return subs;
        })
    .NotDifferentiable("a test op");

TEST(SubProgramsTest, BodiesAddTheirAlwaysLiveBytesAndKeepTheirPeak) {
  Scope s = Scope::NewRootScope();
  Output v = ops::Variable(s.WithOpName("v"), DType::kFloat32, {6});  // 24 B
  Output u = ops::Variable(s.WithOpName("u"), DType::kFloat32, {2});  // 8 B
  Output x = ops::Placeholder(s, DType::kFloat32, {-1});
  Output loop = s.AddNode("_SubProgramsTestLoop", {x, ops::ReadVariable(s, v)},
                          {}, "loop");
  Output unknown = s.AddNode("_SubProgramsTestLoop", {loop}, {}, "unknown");
  const FrontPhases f =
      RunFrontPhases(*s.graph(), Spec({x}, {TensorShape({4})}, {unknown}));
  std::vector<MemoryPlan> shards = CountAlwaysLive(f.order);
  ASSERT_EQ(shards.size(), 1u);
  ASSERT_EQ(shards[0].variable_bytes, 24);

  // The body uses v (already counted) and u, and two shards; this program
  // has one, so the body's shard 1 counts on the loop's shard (0).
  std::vector<std::pair<int, std::string>> compiled;
  CompileSubProgramFn plan =
      [&](int pos,
          const SubProgramSpec& sp) -> absl::StatusOr<std::vector<MemoryPlan>> {
    compiled.push_back({pos, sp.role});
    const ProgramSpec& sub = sp.spec;
    std::vector<MemoryPlan> m(sub.fetches.empty() ? 1 : 2);
    if (sub.fetches.empty()) {  // cond
      m[0].peak_bytes = 150;
      m[0].constant_bytes = 4;
    } else {  // body
      EXPECT_EQ(sub.fetches[0], x);
      m[0].peak_bytes = 100;
      m[0].constant_bytes = 8;
      m[0].variables = {{v.node, 24}, {u.node, 8}};
      m[1].peak_bytes = 40;
    }
    return m;
  };
  absl::StatusOr<std::vector<SubProgramNeed>> needs =
      PlanSubPrograms(f.order, f.values, f.types, ProgramSpec(), plan, &shards);
  ASSERT_TRUE(needs.ok()) << needs.status();
  // Only "loop": "unknown"'s input shape is not known.
  ASSERT_EQ(needs->size(), 1u);
  const int pos = f.order.position[loop.node->id()];
  EXPECT_EQ((*needs)[0].pos, pos);
  // Each sub-program compiled once, for its node, in role order.
  using Compiled = std::vector<std::pair<int, std::string>>;
  EXPECT_EQ(compiled, (Compiled{{pos, "body"}, {pos, "cond"}}));
  EXPECT_EQ((*needs)[0].peak,
            (std::vector<int64_t>{150}));  // max(100, 40, 150)
  EXPECT_EQ((*needs)[0].uses, (std::vector<bool>{true}));
  EXPECT_EQ(shards[0].constant_bytes, 8 + 4);
  EXPECT_EQ(shards[0].variable_bytes, 24 + 8);
  EXPECT_EQ(shards[0].loop_body_always_live_bytes, 8 + 4 + 8);
  using Var = std::pair<const Node*, int64_t>;
  EXPECT_EQ(shards[0].variables, (std::vector<Var>{{v.node, 24}, {u.node, 8}}));
}

TEST(SubProgramsTest, ABodyErrorNamesTheNodeAndTheRole) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {-1});
  Output loop = s.AddNode("_SubProgramsTestLoop", {x}, {}, "loop");
  const FrontPhases f =
      RunFrontPhases(*s.graph(), Spec({x}, {TensorShape({4})}, {loop}));
  std::vector<MemoryPlan> shards = CountAlwaysLive(f.order);
  CompileSubProgramFn plan =
      [](int,
         const SubProgramSpec& sub) -> absl::StatusOr<std::vector<MemoryPlan>> {
    if (sub.spec.fetches.empty())
      return absl::ResourceExhaustedError("too big");
    return std::vector<MemoryPlan>(1);
  };
  absl::StatusOr<std::vector<SubProgramNeed>> needs =
      PlanSubPrograms(f.order, f.values, f.types, ProgramSpec(), plan, &shards);
  EXPECT_EQ(needs.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(needs.status().message(),
            "_SubProgramsTestLoop 'loop' cond: too big");
}

}  // namespace
}  // namespace ipuflow::compiler
