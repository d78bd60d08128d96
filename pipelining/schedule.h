// A pipeline schedule as data: which work item (stage, forward/backward,
// micro-batch) each IPU runs in each time step. Grouped, Interleaved and
// Sequential are three generators of the same ScheduleTable, so the runtime,
// the dry-run planner, the stash rules and the trace writers are written once.
//
//   ASSIGN_OR_RETURN(ScheduleTable table,
//                    MakeSchedule(PipelineSchedule::kInterleaved,
//                                 /*num_stages=*/2, /*device_mapping=*/{},
//                                 /*micro_batches=*/4, /*training=*/true));
//   std::cout << ScheduleTableToString(table);
//   // IPU0 | F0 .  F1 B0 F2 B1 F3 B2 .  B3
//   // IPU1 | .  F0 B0 F1 B1 F2 B2 F3 B3 .
//
// Notation: N stages, M micro-batches (Graphcore's
// gradient_accumulation_count), F(s,m) / B(s,m) = forward / backward of stage
// s on micro-batch m. Stage s runs on IPU stage_ipu[s]; its backward runs on
// the same IPU (as in Graphcore's port and PopTorch).
//
// Time steps (Graphcore's "time slices" of pipeline_visitor.cc, where every
// pipeline stage [F0..F(N-1), B(N-1)..B0] runs once per slice, stages that
// are not valid yet in ramp-up/ramp-down being left empty):
//  - kGrouped (default): step t runs, on every IPU, the forward of its stage
//    then the backward of its stage: F(s, t-s) and B(s, t-(2N-1-s)) when those
//    micro-batches exist. Forwards of all IPUs run together, then backwards
//    (Graphcore's "AllUnion" offsets: overlap length N inference, 2N
//    training). M + 2N - 1 steps in training, M + N - 1 in inference.
//  - kInterleaved: every IPU alternates a forward slot and a backward slot
//    (1F1B): F(s,m) in step 2m+s, B(s,m) in step 2m+2N-1-s, at most one item
//    per IPU per step (Graphcore's "CircularUnion": overlap N). 2M + 2N - 2
//    steps in training; in inference F(s,m) in step m+s, as Grouped.
//  - kSequential: one item per step, like a sharded model: for each m,
//    F(0..N-1, m) then B(N-1..0, m). N*M (inference) or 2*N*M steps. The
//    steps of a Sequential table are barriers: a runtime must not start step
//    t+1 before step t has finished on every IPU.
// When several stages share an IPU, Grouped runs all of them in one step
// (forwards by ascending stage, then backwards by descending stage);
// Interleaved and Sequential move a clashing item to the first later step
// where its IPU is free and its inputs are ready.
//
// Invariants of every table MakeSchedule returns (VerifyScheduleTable checks
// them, e.g. for hand-written tables):
//  - each of F(s,m) (and B(s,m) in training) appears exactly once;
//  - every dependency lies in a strictly earlier step: F(s-1,m) before F(s,m);
//    F(s,m) and B(s+1,m) before B(s,m) (F(N-1,m) before B(N-1,m));
//  - steps[t] lists forwards by ascending stage, then backwards by descending
//    stage; an IPU runs its items of a step in that order, one at a time;
//  - Interleaved and Sequential: at most one item per IPU per step.
// Hence a runtime may execute steps in lockstep (a barrier per step, as
// Graphcore's BSP time slices) or let each IPU run its items in table order
// and wait only for dependencies (what the planner's dataflow timing does):
// both are deadlock-free.
//
// Thread safety: plain values and pure functions; a ScheduleTable may be read
// from any number of threads.
#ifndef IPUFLOW_PIPELINING_SCHEDULE_H_
#define IPUFLOW_PIPELINING_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ipuflow::pipelining {

// Values as Graphcore's PipelineSchedule IntEnum (Grouped = 0, ...).
enum class PipelineSchedule { kGrouped = 0, kInterleaved = 1, kSequential = 2 };

enum class Pass { kForward, kBackward };

// The largest table MakeSchedule builds: (training ? 2 : 1) x num_stages x
// micro_batches work items (each a step of a run, materialised, ~16 bytes),
// and the IPU indices a mapping may name (IPUConfig's kMaxIpus).
inline constexpr int64_t kMaxScheduleItems = int64_t{1} << 24;
inline constexpr int kMaxPipelineIpus = 1024;

// "Grouped", "Interleaved", "Sequential".
const char* PipelineScheduleName(PipelineSchedule schedule);
// "F" or "B".
const char* PassLetter(Pass pass);

struct WorkItem {
  int stage = 0;
  Pass pass = Pass::kForward;
  int micro_batch = 0;

  friend bool operator==(const WorkItem& a, const WorkItem& b) {
    return a.stage == b.stage && a.pass == b.pass &&
           a.micro_batch == b.micro_batch;
  }
  friend bool operator!=(const WorkItem& a, const WorkItem& b) {
    return !(a == b);
  }
};

// "F s2 mb5" / "B s2 mb5".
std::string WorkItemName(const WorkItem& item);

struct ScheduleTable {
  int num_stages = 0;
  // Max IPU index in stage_ipu + 1 (an index nobody uses is an idle IPU).
  int num_ipus = 0;
  int micro_batches = 0;
  bool training = false;
  PipelineSchedule kind = PipelineSchedule::kGrouped;
  // stage -> IPU (the resolved device_mapping).
  std::vector<int> stage_ipu;
  // steps[t] = the items of time step t, in execution order (see above).
  std::vector<std::vector<WorkItem>> steps;

  int num_steps() const { return static_cast<int>(steps.size()); }
  int ipu_of(const WorkItem& item) const { return stage_ipu[item.stage]; }
};

// Builds the table for `schedule`. `device_mapping[s]` is the IPU of stage s
// (empty = identity); `micro_batches` is the gradient_accumulation_count.
// Any micro_batches >= 1 gives a valid table: Graphcore's rule that it be a
// multiple of the overlap length is ValidatePipeline's business
// (validation.h), so the planner can also show what other counts would cost.
// REQUIRES nothing; returns InvalidArgument (naming the field, the value
// and the limit) if num_stages or micro_batches is < 1, the work items
// (training ? 2 : 1) x num_stages x micro_batches exceed kMaxScheduleItems,
// `schedule` is not a PipelineSchedule, device_mapping's length is neither
// 0 nor num_stages, or an IPU index is outside [0, kMaxPipelineIpus).
absl::StatusOr<ScheduleTable> MakeSchedule(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& device_mapping, int micro_batches, bool training);

// OK iff `table` satisfies the invariants listed above (completeness,
// dependencies in earlier steps, step order, per-IPU exclusivity); otherwise
// InvalidArgument naming the first offending item and step.
absl::Status VerifyScheduleTable(const ScheduleTable& table);

// The items IPU `ipu` runs, in order (the table filtered by IPU).
std::vector<WorkItem> ItemsOnIpu(const ScheduleTable& table, int ipu);

// One row per IPU, one column per step; a cell lists the IPU's items of the
// step ("F3", "F3B0" for Grouped, "." when idle) labelled by micro-batch.
std::string ScheduleTableToString(const ScheduleTable& table);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_SCHEDULE_H_
