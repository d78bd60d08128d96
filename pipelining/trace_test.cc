#include "pipelining/trace.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::HasSubstr;

// Interleaved, 2 stages, 2 micro-batches, unit costs (hand-computed
// dataflow times).
std::vector<TimedItem> TwoStageTimeline() {
  const Pass F = Pass::kForward, B = Pass::kBackward;
  return {{0, 0, F, 0, 0, 1}, {0, 0, F, 1, 1, 2}, {1, 1, F, 0, 1, 2},
          {1, 1, B, 0, 2, 3}, {0, 0, B, 0, 3, 4}, {1, 1, F, 1, 3, 4},
          {1, 1, B, 1, 4, 5}, {0, 0, B, 1, 5, 6}};
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(TraceTest, HumanSeconds) {
  EXPECT_EQ(HumanSeconds(1), "1 s");
  EXPECT_EQ(HumanSeconds(0.0025), "2.5 ms");
  EXPECT_EQ(HumanSeconds(40e-6), "40 us");
  EXPECT_EQ(HumanSeconds(0), "0 s");
}

TEST(TraceTest, TextTimeline) {
  EXPECT_EQ(ToTextTimeline(TwoStageTimeline()),
            "(1 column = 1 s)\n"
            "IPU0 | F0 F1 .  B0 .  B1\n"
            "IPU1 | .  F0 B0 F1 B1 .\n");
  // Half-second columns: every label repeats.
  EXPECT_EQ(ToTextTimeline({{0, 0, Pass::kForward, 7, 0, 1},
                            {0, 0, Pass::kBackward, 7, 1.5, 2}},
                           0.5),
            "(1 column = 500 ms)\n"
            "IPU0 | F7 F7 .  B7\n");
}

TEST(TraceTest, TextTimelineUsesShortestItemAsColumn) {
  // Backward twice as long as forward.
  EXPECT_EQ(ToTextTimeline({{0, 0, Pass::kForward, 0, 0, 1},
                            {0, 0, Pass::kBackward, 0, 1, 3},
                            {1, 1, Pass::kForward, 0, 1, 2}}),
            "(1 column = 1 s)\n"
            "IPU0 | F0 B0 B0\n"
            "IPU1 | .  F0 .\n");
}

TEST(TraceTest, ChromeTraceParsesAsJson) {
  const std::string json = ToChromeTraceJson(TwoStageTimeline(), "my \"run\"");
  google::protobuf::Struct root;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &root).ok())
      << json;
  const auto& events = root.fields().at("traceEvents").list_value().values();
  int complete = 0, thread_names = 0;
  for (const google::protobuf::Value& v : events) {
    const auto& f = v.struct_value().fields();
    const std::string ph = f.at("ph").string_value();
    if (ph == "X") {
      ++complete;
      EXPECT_EQ(f.at("pid").number_value(), 0);
    } else if (f.at("name").string_value() == "thread_name") {
      const int tid = static_cast<int>(f.at("tid").number_value());
      EXPECT_EQ(f.at("args").struct_value().fields().at("name").string_value(),
                "IPU " + std::to_string(tid));
      ++thread_names;
    } else if (f.at("name").string_value() == "process_name") {
      EXPECT_EQ(f.at("args").struct_value().fields().at("name").string_value(),
                "my \"run\"");
    }
  }
  EXPECT_EQ(complete, 8);
  EXPECT_EQ(thread_names, 2);
}

TEST(TraceTest, ChromeTraceEventFields) {
  const std::string json =
      ToChromeTraceJson({{1, 2, Pass::kBackward, 5, 0.5, 0.75}});
  EXPECT_THAT(json, HasSubstr(R"({"name":"B s2 mb5","cat":"backward",)"
                              R"("ph":"X","ts":500000.000,"dur":250000.000,)"
                              R"("pid":0,"tid":1,"cname":"terrible",)"
                              R"("args":{"stage":2,"micro_batch":5}})"));
  google::protobuf::Struct root;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &root).ok());
  // process_name + 2 x (thread_name, thread_sort_index) for IPUs 0, 1 + item.
  EXPECT_EQ(root.fields().at("traceEvents").list_value().values_size(), 6);
}

TEST(TraceTest, SvgHasOneRectPerItem) {
  SvgOptions options;
  options.title = "Interleaved <N=2>";
  const std::string svg = ToSvgTimeline(TwoStageTimeline(), options);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_THAT(svg, ::testing::EndsWith("</svg>\n"));
  EXPECT_EQ(Count(svg, "<rect class=\"item "), 8);
  EXPECT_EQ(Count(svg, "<rect class=\"item forward\""), 4);
  EXPECT_EQ(Count(svg, "<rect class=\"item backward\""), 4);
  EXPECT_EQ(Count(svg, "<rect class=\"legend\""), 2);
  EXPECT_EQ(Count(svg, "<rect"), 10);
  EXPECT_EQ(Count(svg, "<title>"), 8);
  EXPECT_THAT(svg, HasSubstr(">IPU 1</text>"));
  EXPECT_THAT(svg, HasSubstr("Interleaved &lt;N=2&gt;"));
  EXPECT_THAT(svg, HasSubstr("<title>B s1 mb0 on IPU 1: 2 s to 3 s</title>"));
  // 960 px for 6 s: the first box is 160 px wide, starting at the margin.
  EXPECT_THAT(svg, HasSubstr("x=\"56.00\" y=\"36\" width=\"160.00\""));
  // Axis ticks every second, 0..6 s.
  EXPECT_THAT(svg, HasSubstr(">0 s</text>"));
  EXPECT_THAT(svg, HasSubstr(">6 s</text>"));
}

TEST(TraceTest, EmptyTimeline) {
  EXPECT_EQ(ToTextTimeline({}), "(1 column = 1 s)\n");
  google::protobuf::Struct root;
  EXPECT_TRUE(
      google::protobuf::util::JsonStringToMessage(ToChromeTraceJson({}), &root)
          .ok());
  EXPECT_THAT(ToSvgTimeline({}), HasSubstr("</svg>"));
}

}  // namespace
}  // namespace ipuflow::pipelining
