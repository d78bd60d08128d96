// Helpers shared by the files of the schedule library (schedule.cc,
// schedule_orders.cc, schedule_check.cc). Not part of the API.
//
// Thread safety: pure functions.
#ifndef IPUFLOW_PIPELINING_SCHEDULE_INTERNAL_H_
#define IPUFLOW_PIPELINING_SCHEDULE_INTERNAL_H_

#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipelining/schedule.h"

namespace ipuflow::pipelining::internal {

// Dense index of an item: forwards first, then backwards. REQUIRES: the item
// is in range.
inline int ItemIndex(const WorkItem& item, int num_stages, int micro_batches) {
  const int pass = item.pass == Pass::kForward ? 0 : 1;
  return (pass * num_stages + item.stage) * micro_batches + item.micro_batch;
}

inline bool ItemInRange(const WorkItem& item, int num_stages, int micro_batches,
                        bool training) {
  return item.stage >= 0 && item.stage < num_stages && item.micro_batch >= 0 &&
         item.micro_batch < micro_batches &&
         (item.pass == Pass::kForward || training);
}

// Sort key of an item inside a step: forwards by ascending stage, then
// backwards by descending stage (the dataflow order of Graphcore's pipeline
// stages [F0..F(N-1), B(N-1)..B0]); micro-batch breaks ties.
inline std::tuple<int, int, int> StepOrderKey(const WorkItem& item) {
  if (item.pass == Pass::kForward) return {0, item.stage, item.micro_batch};
  return {1, -item.stage, item.micro_batch};
}

// The items `item` depends on (schedule.h): F(s-1,m) for F(s,m); F(s,m) and
// B(s+1,m) for B(s,m).
inline std::vector<WorkItem> Dependencies(const WorkItem& item,
                                          int num_stages) {
  std::vector<WorkItem> deps;
  const int s = item.stage, m = item.micro_batch;
  if (item.pass == Pass::kForward) {
    if (s > 0) deps.push_back({s - 1, Pass::kForward, m});
  } else {
    deps.push_back({s, Pass::kForward, m});
    if (s + 1 < num_stages) deps.push_back({s + 1, Pass::kBackward, m});
  }
  return deps;
}

// The items of one micro-batch in dependency order: F(0..N-1), then
// B(N-1..0) in training.
std::vector<WorkItem> MicroBatchItems(int num_stages, int m, bool training);

// Ranges, the enum and the table's size in checked arithmetic, errors
// prefixed with `who` ("MakeSchedule").
absl::Status CheckScheduleArguments(const char* who, PipelineSchedule schedule,
                                    int num_stages, int micro_batches,
                                    bool training);

// device_mapping resolved (empty = identity), each entry checked.
absl::StatusOr<std::vector<int>> ResolveMapping(
    const char* who, int num_stages, const std::vector<int>& device_mapping);

// The rules of a torch.distributed.pipelining schedule on a resolved
// mapping (see MakeSchedule): one stage per IPU (GPipe, 1F1B), the looped
// placement (Interleaved1F1B, LoopedBFS), micro_batches a multiple of the
// rounds (Interleaved1F1B). InvalidArgument naming the mapping or count,
// with a valid nearby setting. REQUIRES: stage_ipu non-empty, entries >= 0.
absl::Status CheckTorchSchedule(PipelineSchedule schedule,
                                const std::vector<int>& stage_ipu,
                                int micro_batches);

// The per-IPU orders of a torch.distributed.pipelining schedule (GPipe,
// 1F1B, Interleaved1F1B, LoopedBFS) for the resolved `stage_ipu`.
// InvalidArgument naming the mapping or the count when the schedule cannot
// use them (see MakeSchedule).
absl::StatusOr<std::vector<std::vector<WorkItem>>> TorchIpuOrders(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& stage_ipu, int micro_batches, bool training);

// The grid of ScheduleTableToString; cells whose marked[ipu][step] is true
// are drawn in brackets. `marked` may be empty (nothing marked).
std::string DrawScheduleGrid(const ScheduleTable& table,
                             const std::vector<std::vector<bool>>& marked);

}  // namespace ipuflow::pipelining::internal

#endif  // IPUFLOW_PIPELINING_SCHEDULE_INTERNAL_H_
