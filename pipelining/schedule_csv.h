// torch.distributed.pipelining's CSV schedule format, both ways, for
// ScheduleTables (schedule.h): a schedule drawn elsewhere runs here, and
// ours can be loaded by torch (_PipelineScheduleRuntime._load_csv).
//
//   std::string csv = ScheduleTableToCsv(table);
//   // 0F0,0F1,,0B0,0F2,0B1,0F3,0B2,,0B3
//   // ,1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3,
//   ASSIGN_OR_RETURN(ScheduleTable back, ScheduleTableFromCsv(csv));
//
// The format: row r lists the actions of rank r, here IPU r, one cell per
// time step; an action is [stage][type][micro-batch] ("1B3": backward of
// stage 1 on micro-batch 3), an empty cell an idle step. Rows and columns
// count from 0 in every message.
//  - Compute-only form: F (forward) and B (full backward) actions.
//  - Compute + communication form: also SEND_F / RECV_F (stage s's output
//    to stage s+1) and SEND_B / RECV_B (stage s's input gradient to stage
//    s-1), as torch's _add_send_recv writes them: "0SEND_F0" on stage 0's
//    row after 0F0, "1RECV_F0" on stage 1's row before 1F0. Each is checked
//    (on its stage's row, after the action it sends / before the one that
//    needs it, matched by exactly one partner, every exchange between two
//    IPUs present) and then dropped: ipuflow's channels carry the values.
//  - A stage's forwards, and its backwards, must run in ascending
//    micro-batch order (schedule.h: the stash and channels are FIFOs);
//    torch's LoopedBFS CSVs, whose backwards descend, are refused.
//  - Not supported: the split backward (I, W: issue 31's zero-bubble
//    schedules) and torch's UNSHARD / RESHARD / REDUCE_GRAD; refused with
//    the row, column and action.
// Reading infers the pipeline from the actions (stages and micro-batches:
// the largest numbers + 1; training iff there is a backward; stage s on the
// IPU of the row it appears on) and places each action at the earliest step
// after its dependencies and its row's previous action
// (ScheduleFromIpuOrders): the columns give each IPU's order, not its
// timing. The table's kind is kCustom.
//
// Reading treats its input as hostile: at most kMaxScheduleCsvBytes,
// kMaxPipelineIpus rows, cells of at most 32 characters, stage and
// micro-batch numbers and their product bounded by kMaxScheduleItems
// (checked before anything is allocated for them); every error is listed
// (up to 50), each with its row and column.
//
// Thread safety: pure functions.
#ifndef IPUFLOW_PIPELINING_SCHEDULE_CSV_H_
#define IPUFLOW_PIPELINING_SCHEDULE_CSV_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

// At most 16 Mi actions of 4 bytes ("0F0,"), 256 MiB parsed: a bound on what
// a hostile file costs, far above any schedule a person draws.
inline constexpr int64_t kMaxScheduleCsvBytes = int64_t{1} << 26;

// The compute-only CSV of `table`: one row per IPU (also idle ones), one
// column per step; a step in which an IPU runs k > 1 items (Grouped) takes
// k columns on every row, so the columns stay a common timeline. Rows end
// with "\n". REQUIRES: VerifyScheduleTable(table).ok().
std::string ScheduleTableToCsv(const ScheduleTable& table);

// The table of a CSV in either form (see above). InvalidArgument listing
// every error with its row and column: a malformed or unsupported action,
// a number out of range, a stage on two rows, a communication action
// unmatched or out of order, an item missing or listed twice, rows that
// deadlock (naming the stuck actions).
absl::StatusOr<ScheduleTable> ScheduleTableFromCsv(absl::string_view csv);

// ScheduleTableFromCsv of a file's contents; NotFound / InvalidArgument
// naming the path if it cannot be read or is larger than
// kMaxScheduleCsvBytes.
absl::StatusOr<ScheduleTable> ScheduleTableFromCsvFile(const std::string& path);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_SCHEDULE_CSV_H_
