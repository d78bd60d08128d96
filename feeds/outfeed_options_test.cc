// The outfeed's options and output modes in the one validation style
// (issue 22, item 5): every field through 0, -1, its largest value
// (accepted) and past it; Kind and OutfeedMode values that name nothing;
// a period given to a mode that has none. Errors name field, value and
// limit. (Products: none of these fields multiplies another; the rings'
// memory is checked when a program sizes them.)
#include <climits>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/thread_pool.h"
#include "feeds/outfeed_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::testing::HasSubstr;

std::string Error(OutputMode output_mode, OutfeedMode mode = OutfeedMode::kAll,
                  int depth = kDefaultOutfeedBufferDepth,
                  int64_t bytes = kDefaultOutfeedHostBytes) {
  auto q = IPUOutfeedQueue::Create(output_mode, mode, depth, bytes);
  if (q.ok()) return "OK";
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(q.status().message());
}

TEST(OutfeedOptionsTest, BufferDepthAndHostBytesWholeRange) {
  const std::string depth_range = absl::StrCat(
      "; it must be between 1 and ", kMaxOutfeedBufferDepth, " (the default");
  for (int bad : {0, -1, kMaxOutfeedBufferDepth + 1, INT_MAX, INT_MIN}) {
    EXPECT_THAT(Error(OutputMode::All(), OutfeedMode::kAll, bad),
                HasSubstr(absl::StrCat("IPUOutfeedQueue: buffer_depth is ", bad,
                                       depth_range)));
  }
  EXPECT_EQ(Error(OutputMode::All(), OutfeedMode::kAll, 1), "OK");
  EXPECT_EQ(Error(OutputMode::All(), OutfeedMode::kAll, kMaxOutfeedBufferDepth),
            "OK");
  const int64_t memory = PhysicalMemoryBytes();
  for (int64_t bad : {int64_t{0}, int64_t{-1}, memory + 1,
                      std::numeric_limits<int64_t>::max()}) {
    EXPECT_THAT(Error(OutputMode::All(), OutfeedMode::kAll, 3, bad),
                HasSubstr(absl::StrCat("max_host_bytes is ", bad,
                                       "; it must be between 1 and ", memory,
                                       " (this machine's memory)")));
  }
  EXPECT_EQ(Error(OutputMode::All(), OutfeedMode::kAll, 3, 1), "OK");
  EXPECT_EQ(Error(OutputMode::All(), OutfeedMode::kAll, 3, memory), "OK");
}

TEST(OutfeedOptionsTest, OutputModesAndTheirPeriods) {
  // EveryN: the original's text below 1, the limit above.
  EXPECT_THAT(Error(OutputMode::EveryN(0)),
              HasSubstr("EveryN anchor must have output_return_period set to "
                        "valid positive integer, got 0"));
  EXPECT_THAT(Error(OutputMode::EveryN(-1)), HasSubstr("got -1"));
  EXPECT_EQ(Error(OutputMode::EveryN(1)), "OK");
  EXPECT_EQ(Error(OutputMode::EveryN(kMaxOutputPeriod)), "OK");
  for (int64_t bad :
       {kMaxOutputPeriod + 1, std::numeric_limits<int64_t>::max()}) {
    EXPECT_THAT(Error(OutputMode::EveryN(bad)),
                HasSubstr(absl::StrCat("output_mode.period is ", bad,
                                       "; it must be between 1 and ",
                                       kMaxOutputPeriod)));
  }
  // Another mode with a period: refused, not ignored.
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{7}}) {
    EXPECT_THAT(Error(OutputMode{OutputMode::Kind::kFinal, bad}),
                HasSubstr(absl::StrCat("output_mode.period is ", bad,
                                       "; it must be between 1 and 1 (only "
                                       "EveryN has a period)")));
  }
  for (int bad : {5, 9, -1}) {
    EXPECT_THAT(
        Error(OutputMode{static_cast<OutputMode::Kind>(bad), 1}),
        HasSubstr(absl::StrCat("output_mode.kind is ", bad,
                               ", not a OutputMode::Kind (0 kAll, 1 kFinal, "
                               "2 kSum, 3 kEveryN, 4 kDefault)")));
    EXPECT_THAT(Error(OutputMode::All(), static_cast<OutfeedMode>(bad)),
                HasSubstr(absl::StrCat("mode is ", bad,
                                       ", not a OutfeedMode (0 kAll, 1 "
                                       "kLast)")));
  }
  for (OutputMode ok : {OutputMode::All(), OutputMode::Final(),
                        OutputMode::Sum(), OutputMode::Default()}) {
    EXPECT_EQ(Error(ok), "OK");
    EXPECT_EQ(Error(ok, OutfeedMode::kLast), "OK");
  }
}

}  // namespace
}  // namespace ipuflow::feeds
