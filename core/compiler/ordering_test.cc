// Ordering: a value reusing another's bytes is produced after every reader
// of the old one.
#include "core/compiler/ordering.h"

#include "gtest/gtest.h"

namespace ipuflow::compiler {
namespace {

TEST(OrderingTest, ReuseWaitsForEveryReaderOfTheOldValue) {
  // Positions 0..4, one output each (value = position). Value 0 is read at
  // 1 and 2 and its bytes are reused by value 3. Values 1 and 2 share bytes
  // while both live (offsets never places them so): their lifetimes meet,
  // so no edge is added for them.
  Values values;
  values.producer = {0, 1, 2, 3, 4};
  Liveness live;
  live.consumers = {{1, 2}, {4}, {3}, {4}, {}};
  live.intervals = {
      Interval{0, 0, 0, 2, 64, 0, 0},
      Interval{1, 0, 1, 4, 64, 64, 64},
      Interval{2, 0, 2, 3, 128, 64, 64},
      Interval{3, 0, 3, 4, 64, 0, 0},
  };
  EXPECT_EQ(ReuseEdges(live, values),
            (std::set<std::pair<int, int>>{{1, 3}, {2, 3}}));
}

TEST(OrderingTest, NoEdgeForDisjointBytesOrFromALaterPosition) {
  Values values;
  values.producer = {0, 1, 2};
  Liveness live;
  // Value 0 is read at 1 and (through an alias) at 2; value 2 is produced
  // at 2 after 0's interval ends at 1: the reader at 2 needs no edge to
  // itself, and value 1's bytes are disjoint from 0's.
  live.consumers = {{1, 2}, {2}, {}};
  live.intervals = {Interval{0, 0, 0, 1, 64, 0, 0},
                    Interval{1, 0, 1, 2, 64, 64, 64},
                    Interval{2, 0, 2, 2, 64, 0, 0}};
  EXPECT_EQ(ReuseEdges(live, values), (std::set<std::pair<int, int>>{{1, 2}}));
}

// An output nobody reads (TopK's values when only its indices are used)
// ends where it is produced; a later value in its bytes waits for its
// producer, or the two can run in parallel and the dead write lands last.
TEST(OrderingTest, ReuseOfAnUnreadValueWaitsForItsProducer) {
  Values values;
  values.producer = {0, 1, 2};
  Liveness live;
  live.consumers = {{}, {2}, {}};
  live.intervals = {Interval{0, 0, 0, 0, 64, 0, 0},
                    Interval{1, 0, 1, 2, 64, 0, 0},
                    Interval{2, 0, 2, 2, 64, 64, 64}};
  EXPECT_EQ(ReuseEdges(live, values), (std::set<std::pair<int, int>>{{0, 1}}));
}

}  // namespace
}  // namespace ipuflow::compiler
