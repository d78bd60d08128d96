// Liveness: uses, aliases, lifetimes, and which values the arena holds.
#include "core/compiler/liveness.h"

#include "core/compiler/test_graph.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/array/reshape.h"
#include "ops/math/add.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::compiler {

// Offsets are not set yet; found by ADL from std::vector's ==.
bool operator==(const Interval& a, const Interval& b) {
  return a.value == b.value && a.shard == b.shard && a.def == b.def &&
         a.last == b.last && a.bytes == b.bytes;
}
void PrintTo(const Interval& iv, std::ostream* os) {
  *os << "{value " << iv.value << " shard " << iv.shard << " [" << iv.def << ","
      << iv.last << "] " << iv.bytes << " B}";
}

namespace {

TEST(LivenessTest, AliasesExtendLifetimesAndFetchesAreNotPlanned) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {16});  // Fed: value 5.
  Output a = ops::Add(s, x, x);           // Position 0, value 0.
  Output b = ops::Add(s, a, x);           // 1, value 1.
  Output r = ops::Reshape(s, b, {4, 4});  // 2, value 2: aliases b.
  Output c = ops::Add(s, r, r);           // 3, value 3.
  Output out = ops::Identity(s, c);       // 4, value 4: aliases c.
  const FrontPhases f =
      RunFrontPhases(*s.graph(), Spec({x}, {TensorShape({16})}, {out}));
  const Liveness live = ComputeLiveness(f.order, f.values, f.types, 1);
  EXPECT_EQ(live.uses, (std::vector<int>{1, 1, 2, 1, 1, 3}));
  EXPECT_EQ(live.root, (std::vector<int>{0, 1, 1, 3, 3, 5}));
  EXPECT_EQ(live.consumers, (std::vector<std::vector<int>>{
                                {1}, {2, 3, 3}, {}, {4}, {}, {0, 0, 1}}));
  // a lives from 0 to 1; b (through r) from 1 to 3; c is fetched through
  // its alias, x is fed: neither is in the arena.
  EXPECT_EQ(live.intervals,
            (std::vector<Interval>{{0, 0, 0, 1, 64}, {1, 0, 1, 3, 64}}));
  EXPECT_EQ(live.fetch_bytes, 64);
  EXPECT_EQ(live.shard_fetch_bytes, (std::vector<int64_t>{64}));
  EXPECT_EQ(live.cross_shard_bytes, 0);
}

TEST(LivenessTest, AlwaysLiveResourceAndEmptyValuesAreNotPlannedAndSizesAlign) {
  Scope s = Scope::NewRootScope();
  Output c = ops::Const<float>(s, {1, 2, 3}, {3});       // 0: constant
  Output v = ops::Variable(s, DType::kFloat32, {3});     // 1: resource
  Output read = ops::ReadVariable(s, v);                 // 2: 12 B -> 64
  Output sum = ops::Add(s, c, read);                     // 3: fetched
  Output e = ops::Placeholder(s, DType::kFloat32, {0});  // fed: value 6
  Output empty = ops::Add(s, e, e);                      // 4: 0 B
  Output also_empty = ops::Add(s, empty, empty);         // 5: fetched
  const FrontPhases f = RunFrontPhases(
      *s.graph(), Spec({e}, {TensorShape({0})}, {sum, also_empty}));
  const Liveness live = ComputeLiveness(f.order, f.values, f.types, 1);
  EXPECT_EQ(live.intervals, (std::vector<Interval>{{2, 0, 2, 3, 64}}));
  EXPECT_EQ(live.fetch_bytes, 12);
}

TEST(LivenessTest, ValuesReadOnAnotherShardAreCounted) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {8});
  Output a = ops::Add(s.WithIpu(0), x, x);  // 0, on shard 0.
  Output b = ops::Add(s.WithIpu(1), a, a);  // 1, reads a twice.
  Output c = ops::Add(s.WithIpu(1), b, b);  // 2.
  const FrontPhases f =
      RunFrontPhases(*s.graph(), Spec({x}, {TensorShape({8})}, {c}));
  const Liveness live = ComputeLiveness(f.order, f.values, f.types, 2);
  EXPECT_EQ(live.cross_shard_bytes, 2 * 32);
  EXPECT_EQ(live.shard_fetch_bytes, (std::vector<int64_t>{0, 32}));
  EXPECT_EQ(live.intervals,
            (std::vector<Interval>{{0, 0, 0, 1, 64}, {1, 1, 1, 2, 64}}));
}

}  // namespace
}  // namespace ipuflow::compiler
