// Dry-run planner: predicts when every item of a ScheduleTable runs, given
// per-stage forward/backward costs, without executing anything. Reports the
// makespan, each IPU's utilisation, the bubble (idle fraction) next to the
// textbook value, the stash depths, and a timeline.
//
//   ASSIGN_OR_RETURN(ScheduleTable t,
//                    MakeSchedule(PipelineSchedule::kInterleaved, 4, {}, 8,
//                                 /*training=*/true));
//   ASSIGN_OR_RETURN(Plan plan, PlanSchedule(t, StageCosts::Uniform(4, 1, 2)));
//   std::cout << PlanDebugString(plan);   // bubble 27.3% = 3/11, ...
//   WriteFile("plan.json", ToChromeTraceJson(plan.items));   // trace.h
//
// Timing models (PlanTiming):
//  - kDataflow (default): each IPU runs its items in table order; an item
//    starts when its IPU is free and its inputs (the dependencies listed in
//    schedule.h) have finished. Steps are not barriers.
//  - kLockstep: steps are barriers, like the IPU's BSP time slices: step t
//    starts when every item of step t-1 has finished; an IPU runs its items
//    of a step back to back. A step lasts as long as its busiest IPU.
// Sequential tables are always timed in lockstep (their steps are barriers
// by definition; in dataflow an inference table would pipeline).
//
// Bubble = idle / (makespan x IPUs that host a stage). torch's schedules
// (GPipe, 1F1B, Interleaved1F1B, LoopedBFS) meet their textbook value
// (p-1)/(vM+p-1) of wall time (idle / ideal = (p-1)/(vM), p IPUs, v stages
// each) exactly under kDataflow timing with balanced stages and F = B, for
// M a multiple of p (planner_test checks p = 2, 4, M = p, 2p, 4p). The
// textbook value
// TheoreticalBubble(N, M) = (N-1)/(M+N-1) (GPipe, 1F1B) is exact here for
// Grouped and Interleaved tables under kDataflow timing when the stages are
// balanced (all forwards cost the same, all backwards cost the same, forward
// and backward may differ) and each stage has an IPU of its own: the unit is
// one micro-batch's forward+backward on one stage, and ramp-up plus ramp-down
// cost N-1 units per IPU. It is (N-1)/N for Sequential (one IPU busy at a
// time). It does not apply to lockstep timing, where a step in which one IPU
// runs a forward and another a backward lasts max(F, B): Interleaved then
// loses time when B > F while Grouped (F and B in every steady step) does
// not, which is Graphcore's "Grouped is usually faster".
//
// Thread safety: pure functions; a Plan is a plain value.
#ifndef IPUFLOW_PIPELINING_PLANNER_H_
#define IPUFLOW_PIPELINING_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipelining/schedule.h"
#include "pipelining/trace.h"

namespace ipuflow::pipelining {

// Seconds per micro-batch, indexed by stage.
struct StageCosts {
  std::vector<double> forward;
  std::vector<double> backward;  // May be empty for inference tables.
  // Optional (training): bytes one micro-batch leaves in stage s's stash;
  // given, the plan predicts each IPU's stash memory.
  std::vector<int64_t> stash_bytes;

  static StageCosts Uniform(int num_stages, double forward, double backward) {
    return {std::vector<double>(num_stages, forward),
            std::vector<double>(num_stages, backward)};
  }
};

enum class PlanTiming { kDataflow, kLockstep };

struct Plan {
  ScheduleTable table;
  StageCosts costs;
  PlanTiming timing = PlanTiming::kDataflow;  // The one actually used.
  // One per work item, in table order (steps, then position in the step).
  std::vector<TimedItem> items;
  double makespan = 0;                  // Seconds.
  std::vector<double> ipu_busy;         // Seconds, per IPU.
  std::vector<double> ipu_utilisation;  // busy / makespan, per IPU.
  double bubble = 0;                    // Measured idle fraction.
  double theoretical_bubble = 0;        // TheoreticalBubble(table).
  bool theory_applies = false;          // The conditions above hold.
  std::vector<int> stash_depths;        // StashDepths (training), else 0s.
  std::vector<int> stash_occupancy;     // MeasureStashOccupancy(table).
  std::vector<int> stash_peak_entries;  // PeakStashEntries(table).
  // torch's schedules: PredictedPeakStashPerIpu and the measured
  // PeakStashEntriesPerIpu (empty for the others).
  std::vector<int> predicted_ipu_stash_peak;
  std::vector<int> ipu_stash_peak;
  // Per IPU: peak entries x costs.stash_bytes (empty without stash_bytes).
  std::vector<int64_t> ipu_stash_bytes;
};

// Times `table` with `costs`. InvalidArgument if the table fails
// VerifyScheduleTable, or if the cost vectors do not have one finite,
// non-negative entry per stage (backward: only needed when training).
absl::StatusOr<Plan> PlanSchedule(const ScheduleTable& table,
                                  const StageCosts& costs,
                                  PlanTiming timing = PlanTiming::kDataflow);

// (N - 1) / (M + N - 1). REQUIRES: num_stages >= 1, micro_batches >= 1.
double TheoreticalBubble(int num_stages, int micro_batches);

// The textbook bubble of `table`'s schedule as a fraction of wall time:
// Graphcore's Grouped and Interleaved (N-1)/(M+N-1), Sequential (N-1)/N;
// torch's schedules and Custom tables (p-1)/(vM+p-1), p the IPUs that host
// a stage and v = N/p (for one stage per IPU, (N-1)/(M+N-1)).
// REQUIRES: VerifyScheduleTable(table).ok().
double TheoreticalBubble(const ScheduleTable& table);

// The plan's timeline as text (ToTextTimeline of plan.items).
std::string PlanTimelineString(const Plan& plan);

// Multi-line summary: schedule, makespan, per-IPU utilisation, bubble
// (measured vs theory), stash depths and measured occupancy, the timeline.
std::string PlanDebugString(const Plan& plan);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PLANNER_H_
