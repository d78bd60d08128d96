// A pipeline schedule as data: which work item (stage, forward/backward,
// micro-batch) each IPU runs in each time step. Graphcore's three schedules
// (Grouped, Interleaved, Sequential), torch.distributed.pipelining's GPipe,
// 1F1B, Interleaved 1F1B and Looped BFS, and tables given by the user
// (Custom: hand-written, or read from torch's CSV, schedule_csv.h) are all
// the same ScheduleTable, so the runtime, the dry-run planner, the stash
// rules and the trace writers are written once.
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
// the same IPU (as in Graphcore's port and PopTorch). p = IPUs, v = N / p
// stages per IPU.
//
// Graphcore's schedules, in time steps (Graphcore's "time slices" of
// pipeline_visitor.cc, where every pipeline stage [F0..F(N-1), B(N-1)..B0]
// runs once per slice, stages that are not valid yet in ramp-up/ramp-down
// being left empty):
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
// torch.distributed.pipelining's schedules (schedules.py) are per-IPU
// orders of items (torch's per-rank action lists); the table places each
// item at the earliest step after its dependencies and after its IPU's
// previous item (ScheduleFromIpuOrders: a dataflow replay, one item per IPU
// per step). Inference keeps the forwards of the training order.
//  - kGPipe (ScheduleGPipe): one stage per IPU; every IPU runs F(s, 0..M-1),
//    then B(s, 0..M-1). F(s,m) in step m+s, B(s,m) in step M+2N-2-s+m;
//    2M + 2N - 2 steps. Stage s stashes all M micro-batches.
//  - k1F1B (Schedule1F1B, PipeDream-Flush): one stage per IPU; stage s warms
//    up with min(M, N-s) forwards, then alternates one backward and one
//    forward until the forwards are done, then cools down with the rest of
//    the backwards. 2M + 2N - 2 steps for M >= N; stage s stashes at most
//    min(M, N-s) micro-batches.
//  - kInterleaved1F1B (ScheduleInterleaved1F1B, Megatron-LM's interleaved
//    schedule): v stages per IPU in the looped placement, stage s on IPU
//    s mod p (device_mapping must say so; empty = identity, v = 1). With
//    rounds = max(1, M / p) and R = M / rounds micro-batches per round (M
//    must be a multiple of rounds), IPU r warms up with
//    w(r) = min(vM, (v-1)R + 2(p-1-r)) forwards, its k-th forward being of
//    its local stage (k / R) mod v; then forward, backward pairs (backwards
//    from the last local stage down), then the remaining backwards.
//  - kLoopedBFS (ScheduleLoopedBFS): the looped placement; every IPU runs
//    the forwards of its stages by ascending stage (all micro-batches of one
//    stage before the next), then the backwards by descending stage (in
//    ascending micro-batch order, see the invariants below).
//  - kCustom: a table given as data (PipelineOptions::schedule_table);
//    MakeSchedule has no generator for it.
//
// Invariants of every table MakeSchedule returns (VerifyScheduleTable checks
// them, ValidateScheduleTable lists every violation, e.g. for hand-written
// tables):
//  - each of F(s,m) (and B(s,m) in training) appears exactly once;
//  - every dependency lies in a strictly earlier step: F(s-1,m) before F(s,m);
//    F(s,m) and B(s+1,m) before B(s,m) (F(N-1,m) before B(N-1,m));
//  - steps[t] lists forwards by ascending stage, then backwards by descending
//    stage; an IPU runs its items of a step in that order, one at a time;
//  - every schedule but Grouped: at most one item per IPU per step;
//  - every stage runs its forwards, and its backwards, in ascending
//    micro-batch order: the stash of a stage and the channels between IPUs
//    are FIFOs (the micro-batch of a backward is the one its stash pops).
//    This is why LoopedBFS runs the backwards of a stage in ascending order,
//    where torch's ScheduleLoopedBFS runs them in descending order (same
//    bubble and stash).
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
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ipuflow::pipelining {

// Graphcore's three keep the values of its PipelineSchedule IntEnum
// (Grouped = 0, ...); torch.distributed.pipelining's follow.
enum class PipelineSchedule {
  kGrouped = 0,
  kInterleaved = 1,
  kSequential = 2,
  kGPipe = 3,
  k1F1B = 4,
  kInterleaved1F1B = 5,
  kLoopedBFS = 6,
  kCustom = 7,
};
inline constexpr int kNumPipelineSchedules = 8;

enum class Pass { kForward, kBackward };

// The largest table MakeSchedule builds: (training ? 2 : 1) x num_stages x
// micro_batches work items (each a step of a run, materialised, ~16 bytes),
// and the IPU indices a mapping may name (IPUConfig's kMaxIpus).
inline constexpr int64_t kMaxScheduleItems = int64_t{1} << 24;
inline constexpr int kMaxPipelineIpus = 1024;

// "Grouped", "Interleaved", "Sequential", "GPipe", "1F1B",
// "Interleaved1F1B", "LoopedBFS", "Custom"; "?" for other values.
const char* PipelineScheduleName(PipelineSchedule schedule);
// Every value with its name, for OptionChecker::EnumValue.
std::vector<std::pair<int64_t, const char*>> PipelineScheduleEnumValues();
// The schedule named `name` (PipelineScheduleName's, any case; "-" and "_"
// ignored: "interleaved-1f1b", "looped_bfs"); InvalidArgument listing the
// names otherwise.
absl::StatusOr<PipelineSchedule> PipelineScheduleFromName(
    absl::string_view name);
// True for the torch.distributed.pipelining schedules that place v stages
// per IPU in the looped placement (Interleaved1F1B, LoopedBFS).
bool IsLoopedSchedule(PipelineSchedule schedule);
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
// multiple of the overlap length and torch's that 1F1B have M >= N are
// ValidatePipeline's business (validation.h), so the planner can also show
// what other counts would cost.
// REQUIRES nothing; returns InvalidArgument (naming the field, the value
// and the limit) if num_stages or micro_batches is < 1, the work items
// (training ? 2 : 1) x num_stages x micro_batches exceed kMaxScheduleItems,
// `schedule` is not a PipelineSchedule or is kCustom, device_mapping's
// length is neither 0 nor num_stages, an IPU index is outside
// [0, kMaxPipelineIpus) (with an empty mapping: num_stages above it), GPipe or 1F1B is given two stages on one IPU,
// Interleaved1F1B or LoopedBFS a mapping that is not looped (stage s on IPU
// s mod p), or Interleaved1F1B a micro_batches that is not a multiple of its
// rounds (torch's rule: the table cannot be built otherwise).
absl::StatusOr<ScheduleTable> MakeSchedule(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& device_mapping, int micro_batches, bool training);

// The table of per-IPU orders: orders[ipu] lists the items IPU `ipu` runs,
// in order (torch's per-rank action lists without idle slots). Each item is
// placed at the earliest step after its dependencies' steps and after the
// step of its IPU's previous item: a dataflow replay with one item per IPU
// per step and unit durations. `stage_ipu` (one IPU per stage) must agree
// with the orders. InvalidArgument if the arguments are out of range (as
// MakeSchedule), an item is out of range, on another IPU than its stage's,
// listed twice or missing (each named, with its IPU and position), or if the
// orders deadlock (every IPU's next item waits for one that cannot run: each
// stuck item is named with what it waits for).
absl::StatusOr<ScheduleTable> ScheduleFromIpuOrders(
    PipelineSchedule kind, int num_stages, const std::vector<int>& stage_ipu,
    int micro_batches, bool training,
    const std::vector<std::vector<WorkItem>>& orders);

// A violated rule of a table (ValidateScheduleTable).
enum class ScheduleRule {
  kShape,            // num_stages, micro_batches, stage_ipu, num_ipus.
  kUnknownItem,      // Not an item of this pipeline.
  kDuplicate,        // An item in two places.
  kStepOrder,        // Forwards by ascending stage, then backwards descending.
  kExclusive,        // Two items of one IPU in a step (all but Grouped).
  kSequential,       // Two items in a Sequential step.
  kMissing,          // An item that appears nowhere.
  kDependency,       // A dependency not in an earlier step.
  kMicroBatchOrder,  // A stage's forwards or backwards out of order.
};
// "shape", "unknown item", "duplicate", "step order", "one item per IPU per
// step", "one item per step", "missing item", "dependency", "micro-batch
// order".
const char* ScheduleRuleName(ScheduleRule rule);

struct ScheduleViolation {
  ScheduleRule rule = ScheduleRule::kShape;
  // The offending cell; -1 when there is none (a missing item, a shape).
  int step = -1;
  int ipu = -1;
  std::string message;  // Names the items and steps involved.
};

// Every violated invariant of `table` (see above), in table order: the
// steps' checks (unknown items, duplicates, step order, exclusivity) step by
// step, then per micro-batch the missing items and the dependencies. Empty
// iff the table is valid. Bounded: a table that is not even shaped right
// (kShape) gets no other check.
std::vector<ScheduleViolation> ValidateScheduleTable(
    const ScheduleTable& table);

// The report of ValidateScheduleTable: "<n> violation(s) of the schedule
// table", the grid of ScheduleTableToString with every offending cell in
// brackets ("[B0]"), then one numbered line per violation ("1. step 4, IPU
// 1, dependency: ..."). The grid is left out for tables wider than 256 steps
// or 64 IPUs (the lines still name step and IPU). "" if `violations` is
// empty.
std::string ScheduleViolationsToString(
    const ScheduleTable& table,
    const std::vector<ScheduleViolation>& violations);

// OK iff ValidateScheduleTable(table) is empty; otherwise InvalidArgument
// "VerifyScheduleTable: <the first violation>".
absl::Status VerifyScheduleTable(const ScheduleTable& table);

// The items IPU `ipu` runs, in order (the table filtered by IPU).
std::vector<WorkItem> ItemsOnIpu(const ScheduleTable& table, int ipu);

// One row per IPU, one column per step; a cell lists the IPU's items of the
// step ("F3", "F3B0" for Grouped, "." when idle) labelled by micro-batch,
// and by stage first on an IPU with several stages ("2F3", as torch's
// actions).
std::string ScheduleTableToString(const ScheduleTable& table);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_SCHEDULE_H_
