// Shuffle: a permutation, deterministic per seed, reshuffled per pass.
#include <algorithm>
#include <numeric>
#include <vector>

#include "feeds/dataset.h"
#include "feeds/dataset_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::feeds::testing::Ints;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ShuffleTest, IsAPermutation) {
  std::vector<int64_t> out = Ints(Range(0, 100)->Shuffle(100, 7));
  EXPECT_THAT(Sorted(out), ElementsAreArray(Iota(100)));
  EXPECT_NE(out, Iota(100));
  // A buffer smaller than the dataset still loses and duplicates nothing.
  EXPECT_THAT(Sorted(Ints(Range(0, 100)->Shuffle(10, 7))),
              ElementsAreArray(Iota(100)));
}

TEST(ShuffleTest, IsDeterministicForASeed) {
  DatasetPtr ds = Range(0, 50)->Shuffle(50, 42);
  const std::vector<int64_t> first = Ints(ds);
  EXPECT_EQ(Ints(ds), first);                             // New iterator.
  EXPECT_EQ(Ints(Range(0, 50)->Shuffle(50, 42)), first);  // New dataset.
  EXPECT_NE(Ints(Range(0, 50)->Shuffle(50, 43)), first);  // Other seed.
}

TEST(ShuffleTest, ReshufflesOnEachPassOfRepeat) {
  const std::vector<int64_t> out =
      Ints(Range(0, 50)->Shuffle(50, 3)->Repeat(3));
  ASSERT_EQ(out.size(), 150u);
  std::vector<int64_t> pass[3];
  for (int p = 0; p < 3; ++p) {
    pass[p].assign(out.begin() + 50 * p, out.begin() + 50 * (p + 1));
    EXPECT_THAT(Sorted(pass[p]), ElementsAreArray(Iota(50))) << "pass " << p;
  }
  EXPECT_NE(pass[0], pass[1]);
  EXPECT_NE(pass[1], pass[2]);
  // The first pass is the order of the shuffle alone, and the whole
  // sequence replays.
  EXPECT_EQ(pass[0], Ints(Range(0, 50)->Shuffle(50, 3)));
  EXPECT_EQ(Ints(Range(0, 50)->Shuffle(50, 3)->Repeat(3)), out);
}

TEST(ShuffleTest, SmallBufferOnlyMovesElementsALittleEarly) {
  EXPECT_THAT(Ints(Range(0, 5)->Shuffle(1, 9)), ElementsAre(0, 1, 2, 3, 4));
  const std::vector<int64_t> out = Ints(Range(0, 200)->Shuffle(4, 9));
  for (size_t p = 0; p < out.size(); ++p) {
    // When position p is filled, the buffer holds elements < p + 4.
    EXPECT_LT(out[p], static_cast<int64_t>(p) + 4) << "position " << p;
  }
}

TEST(ShuffleTest, KeepsSpecAndCardinalityAndRejectsAnEmptyBuffer) {
  DatasetPtr ds = Range(0, 10)->Shuffle(4);
  EXPECT_EQ(ds->Cardinality(), 10);
  EXPECT_EQ(ds->spec().DebugString(), "(int64[])");
  EXPECT_EQ(Range(0, 10)->Shuffle(0)->status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::feeds
