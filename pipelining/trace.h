// A pipeline timeline (items with start/end times per IPU) and three writers:
// fixed-width text, Chrome trace / Perfetto JSON, and an SVG picture like the
// schedule figures of Graphcore's documentation (a row per IPU, forward boxes
// green, backward boxes red, labelled with the micro-batch).
//
// The planner produces predicted timelines; the runtime's measured ones use
// the same TimedItem, so both go through the same writers.
//
//   std::vector<TimedItem> items = plan.items;
//   WriteFile("pipeline.json", ToChromeTraceJson(items));  // ui.perfetto.dev
//   WriteFile("pipeline.svg", ToSvgTimeline(items));
//   std::cout << ToTextTimeline(items);
//   // (1 column = 1 s)
//   // IPU0 | F0 F1 .  B0 F2 B1 F3 B2 .  B3
//   // IPU1 | .  F0 B0 F1 B1 F2 B2 F3 B3 .
//
// Times are in seconds from any common origin (the writers do not shift
// them). The writers accept items in any order; rows are IPUs 0..max ipu.
//
// Thread safety: pure functions.
#ifndef IPUFLOW_PIPELINING_TRACE_H_
#define IPUFLOW_PIPELINING_TRACE_H_

#include <string>
#include <vector>

#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

struct TimedItem {
  int ipu = 0;
  int stage = 0;
  Pass pass = Pass::kForward;
  int micro_batch = 0;
  double start = 0;  // Seconds.
  double end = 0;    // Seconds; >= start.

  double duration() const { return end - start; }
  WorkItem work_item() const { return {stage, pass, micro_batch}; }
};

// "1 s", "2.5 ms", "40 us": three significant digits.
std::string HumanSeconds(double seconds);

// One row per IPU, one column per `column_seconds` of time (0 = the shortest
// item's duration, widened so there are at most 400 columns). A column shows
// the item running at its midpoint ("F3" = forward of micro-batch 3, the
// stage being the IPU's) or "." when the IPU is idle; an item spanning
// several columns repeats its label. The first line gives the column width.
std::string ToTextTimeline(const std::vector<TimedItem>& items,
                           double column_seconds = 0);

// Chrome trace event format, loadable by ui.perfetto.dev and
// chrome://tracing: {"traceEvents":[...], "displayTimeUnit":"ms"} with
//  - metadata ("ph":"M"): process_name `process_name`, and per IPU k a
//    thread_name "IPU k" (tid k) and thread_sort_index k;
//  - one complete event ("ph":"X") per item: name "F s2 mb5" / "B s2 mb5",
//    cat "forward" / "backward", ts and dur in microseconds, pid 0, tid = IPU,
//    args {"stage":2, "micro_batch":5}, cname "good" (green) / "terrible"
//    (red) for the legacy Chrome viewer.
std::string ToChromeTraceJson(
    const std::vector<TimedItem>& items,
    const std::string& process_name = "ipuflow pipeline");

struct SvgOptions {
  std::string title = "Pipeline timeline";
  int timeline_width = 960;  // Pixels for the whole time span.
  int row_height = 28;       // Pixels per IPU row.
};

// A self-contained SVG document: IPU labels, one <rect class="item ..."> per
// item (with a <title> tooltip and, when it fits, the micro-batch number as
// label), a time axis with ticks, and a legend (<rect class="legend">).
std::string ToSvgTimeline(const std::vector<TimedItem>& items,
                          const SvgOptions& options = {});

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_TRACE_H_
