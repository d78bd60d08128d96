// Offsets: largest first, lowest free offset; values live at once never
// share bytes, values that are not may; shard regions follow one another.
#include "core/compiler/offsets.h"

#include "gtest/gtest.h"

namespace ipuflow::compiler {
namespace {

Interval Iv(int value, int shard, int def, int last, int64_t bytes) {
  return Interval{value, shard, def, last, bytes};
}

void ExpectNoOverlapWhileLive(const std::vector<Interval>& ivs) {
  for (const Interval& a : ivs) {
    for (const Interval& b : ivs) {
      if (a.value == b.value || a.last < b.def || b.last < a.def) continue;
      EXPECT_TRUE(a.offset + a.bytes <= b.offset ||
                  b.offset + b.bytes <= a.offset)
          << "values " << a.value << " and " << b.value << " overlap";
    }
  }
}

TEST(OffsetsTest, ReusesBytesOfValuesNotLiveAtOnce) {
  // A [0,1] 128 B, B [1,2] 64 B, C [2,3] 128 B, D [3,4] 64 B. Placed in
  // the order A, C, B, D: A at 0; C at 0 (A is dead by then); B overlaps
  // both in time: 128; D overlaps only C: 128. Peak 192, not 384.
  std::vector<Interval> ivs = {Iv(0, 0, 0, 1, 128), Iv(1, 0, 1, 2, 64),
                               Iv(2, 0, 2, 3, 128), Iv(3, 0, 3, 4, 64)};
  const ArenaLayout layout = AssignOffsets(1, &ivs);
  EXPECT_EQ(ivs[0].offset, 0);
  EXPECT_EQ(ivs[1].offset, 128);
  EXPECT_EQ(ivs[2].offset, 0);
  EXPECT_EQ(ivs[3].offset, 128);
  EXPECT_EQ(layout.shard_bytes, (std::vector<int64_t>{192}));
  EXPECT_EQ(layout.arena_bytes, 192);
  ExpectNoOverlapWhileLive(ivs);
}

TEST(OffsetsTest, FillsTheLowestGapThatFits) {
  // X [0,9] 128 B at 0; Y [0,1] at 128; W [1,2] overlaps X and Y: 192;
  // Z [2,3] overlaps X and W, not Y: Y's bytes at 128 fit.
  std::vector<Interval> ivs = {Iv(0, 0, 0, 9, 128), Iv(1, 0, 0, 1, 64),
                               Iv(2, 0, 2, 3, 64), Iv(3, 0, 1, 2, 64)};
  const ArenaLayout layout = AssignOffsets(1, &ivs);
  EXPECT_EQ(ivs[0].offset, 0);
  EXPECT_EQ(ivs[1].offset, 128);
  EXPECT_EQ(ivs[3].offset, 192);
  EXPECT_EQ(ivs[2].offset, 128);
  EXPECT_EQ(layout.arena_bytes, 256);
  ExpectNoOverlapWhileLive(ivs);
}

TEST(OffsetsTest, EachShardHasItsOwnRegion) {
  // Shard 0: two values live at once (128 B); shard 1: none; shard 2: one
  // value, live at the same positions as shard 0's, after shard 0's region.
  std::vector<Interval> ivs = {Iv(0, 0, 0, 1, 64), Iv(1, 2, 0, 1, 64),
                               Iv(2, 0, 1, 2, 64)};
  const ArenaLayout layout = AssignOffsets(3, &ivs);
  EXPECT_EQ(layout.shard_bytes, (std::vector<int64_t>{128, 0, 64}));
  EXPECT_EQ(layout.shard_base, (std::vector<int64_t>{0, 128, 128}));
  EXPECT_EQ(layout.arena_bytes, 192);
  EXPECT_EQ(ivs[1].shard_offset, 0);
  EXPECT_EQ(ivs[1].offset, 128);
  EXPECT_EQ(ivs[2].shard_offset, 64);
  EXPECT_EQ(ivs[2].offset, 64);
  ExpectNoOverlapWhileLive(ivs);
}

}  // namespace
}  // namespace ipuflow::compiler
