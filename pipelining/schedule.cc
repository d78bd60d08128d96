#include "pipelining/schedule.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/option_checks.h"
#include "core/status.h"

namespace ipuflow::pipelining {
namespace {

// Dense index of an item: forwards first, then backwards.
int ItemIndex(const WorkItem& item, int num_stages, int micro_batches) {
  const int pass = item.pass == Pass::kForward ? 0 : 1;
  return (pass * num_stages + item.stage) * micro_batches + item.micro_batch;
}

// Sort key of an item inside a step: forwards by ascending stage, then
// backwards by descending stage (the dataflow order of Graphcore's pipeline
// stages [F0..F(N-1), B(N-1)..B0]); micro-batch breaks ties.
std::tuple<int, int, int> StepOrderKey(const WorkItem& item) {
  if (item.pass == Pass::kForward) return {0, item.stage, item.micro_batch};
  return {1, -item.stage, item.micro_batch};
}

absl::StatusOr<std::vector<int>> ResolveMapping(
    int num_stages, const std::vector<int>& device_mapping) {
  if (device_mapping.empty()) {
    std::vector<int> identity(num_stages);
    for (int s = 0; s < num_stages; ++s) identity[s] = s;
    return identity;
  }
  if (static_cast<int>(device_mapping.size()) != num_stages) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MakeSchedule: device_mapping [%s] has %d entries for %d stages",
        absl::StrJoin(device_mapping, ", "), device_mapping.size(),
        num_stages));
  }
  for (int s = 0; s < num_stages; ++s) {
    if (device_mapping[s] < 0 || device_mapping[s] >= kMaxPipelineIpus) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "MakeSchedule: device_mapping[%d] = %d is not an IPU index (it "
          "must be between 0 and %d)",
          s, device_mapping[s], kMaxPipelineIpus - 1));
    }
  }
  return device_mapping;
}

// Ranges, the enum and the table's size in checked arithmetic: 2 x N x M
// in `int` overflowed for M = 2^29 + 1 and wrote past the step vector.
absl::Status CheckScheduleArguments(PipelineSchedule schedule, int num_stages,
                                    int micro_batches, bool training) {
  OptionChecker check("MakeSchedule");
  check.Enum("schedule", "PipelineSchedule", schedule,
             {{PipelineSchedule::kGrouped, "Grouped"},
              {PipelineSchedule::kInterleaved, "Interleaved"},
              {PipelineSchedule::kSequential, "Sequential"}});
  check.Range("num_stages", num_stages, 1, kMaxScheduleItems);
  check.Range("micro_batches (gradient_accumulation_count)", micro_batches, 1,
              kMaxScheduleItems);
  if (check.ok()) {
    check.Product(
        {{"passes", training ? 2 : 1},
         {"num_stages", num_stages},
         {"micro_batches (gradient_accumulation_count)", micro_batches}},
        kMaxScheduleItems, " work items in one run's table");
  }
  return check.status();
}

// The items of one micro-batch in dependency order: F(0..N-1), then
// B(N-1..0) in training.
std::vector<WorkItem> MicroBatchItems(int num_stages, int m, bool training) {
  std::vector<WorkItem> items;
  for (int s = 0; s < num_stages; ++s) items.push_back({s, Pass::kForward, m});
  if (training) {
    for (int s = num_stages - 1; s >= 0; --s) {
      items.push_back({s, Pass::kBackward, m});
    }
  }
  return items;
}

// The step each generator wants an item in (before clash resolution).
int DesiredStep(PipelineSchedule kind, const WorkItem& item, int num_stages,
                bool training) {
  const int n = num_stages, m = item.micro_batch, s = item.stage;
  const bool fwd = item.pass == Pass::kForward;
  switch (kind) {
    case PipelineSchedule::kGrouped:
      return fwd ? m + s : m + 2 * n - 1 - s;
    case PipelineSchedule::kInterleaved:
      if (!training) return m + s;
      return fwd ? 2 * m + s : 2 * m + 2 * n - 1 - s;
    case PipelineSchedule::kSequential:
      return 0;  // Placed by a running counter instead.
  }
  return 0;
}

// Returns the step of every item (by ItemIndex). Items are placed in
// micro-batch order, each at the first step that is >= its desired step,
// after its dependencies' steps, and (for exclusive schedules) on a free
// IPU slot. With distinct IPUs the desired steps already satisfy all of
// this, so the closed forms in schedule.h hold exactly.
std::vector<int> PlaceItems(const ScheduleTable& t) {
  const int n = t.num_stages, mb = t.micro_batches;
  const bool exclusive = t.kind != PipelineSchedule::kGrouped;
  std::vector<int> step_of(2 * n * mb, -1);
  std::vector<std::vector<bool>> busy(t.num_ipus);  // [ipu][step]
  int sequential_next = 0;
  for (int m = 0; m < mb; ++m) {
    for (const WorkItem& item : MicroBatchItems(n, m, t.training)) {
      int lo = DesiredStep(t.kind, item, n, t.training);
      if (t.kind == PipelineSchedule::kSequential) lo = sequential_next++;
      // Dependencies: the previous item of this micro-batch's chain (the
      // chain order F0..F(N-1), B(N-1)..B0 covers all three rules).
      auto dep = [&](const WorkItem& d) {
        lo = std::max(lo, step_of[ItemIndex(d, n, mb)] + 1);
      };
      if (item.pass == Pass::kForward && item.stage > 0) {
        dep({item.stage - 1, Pass::kForward, m});
      }
      if (item.pass == Pass::kBackward) {
        dep({item.stage, Pass::kForward, m});
        if (item.stage + 1 < n) dep({item.stage + 1, Pass::kBackward, m});
      }
      std::vector<bool>& row = busy[t.stage_ipu[item.stage]];
      if (exclusive) {
        while (lo < static_cast<int>(row.size()) && row[lo]) ++lo;
        if (lo >= static_cast<int>(row.size())) row.resize(lo + 1, false);
        row[lo] = true;
      }
      step_of[ItemIndex(item, n, mb)] = lo;
    }
  }
  return step_of;
}

std::string CellLabel(const WorkItem& item) {
  return absl::StrCat(PassLetter(item.pass), item.micro_batch);
}

}  // namespace

const char* PipelineScheduleName(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGrouped:
      return "Grouped";
    case PipelineSchedule::kInterleaved:
      return "Interleaved";
    case PipelineSchedule::kSequential:
      return "Sequential";
  }
  return "?";
}

const char* PassLetter(Pass pass) { return pass == Pass::kForward ? "F" : "B"; }

std::string WorkItemName(const WorkItem& item) {
  return absl::StrFormat("%s s%d mb%d", PassLetter(item.pass), item.stage,
                         item.micro_batch);
}

absl::StatusOr<ScheduleTable> MakeSchedule(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& device_mapping, int micro_batches, bool training) {
  RETURN_IF_ERROR(
      CheckScheduleArguments(schedule, num_stages, micro_batches, training));
  ScheduleTable table;
  ASSIGN_OR_RETURN(table.stage_ipu, ResolveMapping(num_stages, device_mapping));
  table.num_stages = num_stages;
  table.num_ipus =
      *std::max_element(table.stage_ipu.begin(), table.stage_ipu.end()) + 1;
  table.micro_batches = micro_batches;
  table.training = training;
  table.kind = schedule;

  const std::vector<int> step_of = PlaceItems(table);
  const int num_steps = *std::max_element(step_of.begin(), step_of.end()) + 1;
  table.steps.resize(num_steps);
  for (int m = 0; m < micro_batches; ++m) {
    for (const WorkItem& item : MicroBatchItems(num_stages, m, training)) {
      table.steps[step_of[ItemIndex(item, num_stages, micro_batches)]]
          .push_back(item);
    }
  }
  for (std::vector<WorkItem>& step : table.steps) {
    std::sort(step.begin(), step.end(),
              [](const WorkItem& a, const WorkItem& b) {
                return StepOrderKey(a) < StepOrderKey(b);
              });
  }
  return table;
}

namespace {

absl::Status TableError(const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("VerifyScheduleTable: ", what));
}

// Checks ranges, duplicates, the in-step order and IPU exclusivity of step
// `t`, recording each item's step in `step_of`.
absl::Status VerifyStep(const ScheduleTable& table, int t,
                        std::vector<int>& step_of) {
  const int n = table.num_stages, mb = table.micro_batches;
  const std::vector<WorkItem>& step = table.steps[t];
  if (table.kind == PipelineSchedule::kSequential && step.size() > 1) {
    return TableError(
        absl::StrFormat("step %d runs %d items; Sequential runs one at a time",
                        t, step.size()));
  }
  std::vector<int> per_ipu(table.num_ipus, 0);
  for (size_t i = 0; i < step.size(); ++i) {
    const WorkItem& item = step[i];
    const std::string name = WorkItemName(item);
    if (item.stage < 0 || item.stage >= n || item.micro_batch < 0 ||
        item.micro_batch >= mb ||
        (item.pass == Pass::kBackward && !table.training)) {
      return TableError(absl::StrFormat(
          "step %d: %s is not an item of a %s pipeline with %d stages and %d "
          "micro-batches",
          t, name, table.training ? "training" : "inference", n, mb));
    }
    int& seen = step_of[ItemIndex(item, n, mb)];
    if (seen >= 0) {
      return TableError(
          absl::StrFormat("%s appears in steps %d and %d", name, seen, t));
    }
    seen = t;
    if (i > 0 && StepOrderKey(item) < StepOrderKey(step[i - 1])) {
      return TableError(absl::StrFormat(
          "step %d: %s listed after %s (forwards by ascending stage, then "
          "backwards by descending stage)",
          t, name, WorkItemName(step[i - 1])));
    }
    const int ipu = table.ipu_of(item);
    if (++per_ipu[ipu] > 1 && table.kind != PipelineSchedule::kGrouped) {
      return TableError(absl::StrFormat(
          "step %d: IPU %d runs more than one item (%s is the second); %s "
          "allows one per IPU per step",
          t, ipu, name, PipelineScheduleName(table.kind)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyScheduleTable(const ScheduleTable& table) {
  const int n = table.num_stages, mb = table.micro_batches;
  if (n < 1 || mb < 1) {
    return TableError(absl::StrFormat(
        "num_stages %d and micro_batches %d must be >= 1", n, mb));
  }
  if (static_cast<int>(table.stage_ipu.size()) != n) {
    return TableError(absl::StrFormat("stage_ipu has %d entries for %d stages",
                                      table.stage_ipu.size(), n));
  }
  for (int s = 0; s < n; ++s) {
    if (table.stage_ipu[s] < 0 || table.stage_ipu[s] >= table.num_ipus) {
      return TableError(absl::StrFormat("stage_ipu[%d] = %d is not in [0, %d)",
                                        s, table.stage_ipu[s], table.num_ipus));
    }
  }
  std::vector<int> step_of(2 * n * mb, -1);
  for (int t = 0; t < table.num_steps(); ++t) {
    RETURN_IF_ERROR(VerifyStep(table, t, step_of));
  }
  for (int m = 0; m < mb; ++m) {
    for (const WorkItem& item : MicroBatchItems(n, m, table.training)) {
      const int at = step_of[ItemIndex(item, n, mb)];
      if (at < 0) {
        return TableError(absl::StrCat(WorkItemName(item), " is missing"));
      }
      std::vector<WorkItem> deps;
      if (item.pass == Pass::kForward && item.stage > 0) {
        deps.push_back({item.stage - 1, Pass::kForward, m});
      }
      if (item.pass == Pass::kBackward) {
        deps.push_back({item.stage, Pass::kForward, m});
        if (item.stage + 1 < n) {
          deps.push_back({item.stage + 1, Pass::kBackward, m});
        }
      }
      for (const WorkItem& dep : deps) {
        const int dep_at = step_of[ItemIndex(dep, n, mb)];
        if (dep_at >= 0 && dep_at >= at) {
          return TableError(absl::StrFormat(
              "%s in step %d must come after %s, which is in step %d",
              WorkItemName(item), at, WorkItemName(dep), dep_at));
        }
      }
    }
  }
  return absl::OkStatus();
}

std::vector<WorkItem> ItemsOnIpu(const ScheduleTable& table, int ipu) {
  std::vector<WorkItem> items;
  for (const std::vector<WorkItem>& step : table.steps) {
    for (const WorkItem& item : step) {
      if (table.ipu_of(item) == ipu) items.push_back(item);
    }
  }
  return items;
}

std::string ScheduleTableToString(const ScheduleTable& table) {
  // cells[ipu][step]
  std::vector<std::vector<std::string>> cells(
      table.num_ipus, std::vector<std::string>(table.num_steps()));
  size_t width = 1;
  for (int t = 0; t < table.num_steps(); ++t) {
    for (const WorkItem& item : table.steps[t]) {
      std::string& cell = cells[table.ipu_of(item)][t];
      absl::StrAppend(&cell, CellLabel(item));
      width = std::max(width, cell.size());
    }
  }
  const std::string last_ipu = absl::StrCat("IPU", table.num_ipus - 1);
  std::string out;
  for (int ipu = 0; ipu < table.num_ipus; ++ipu) {
    std::string line =
        absl::StrFormat("%-*s |", last_ipu.size(), absl::StrCat("IPU", ipu));
    for (const std::string& cell : cells[ipu]) {
      absl::StrAppendFormat(&line, " %-*s", width, cell.empty() ? "." : cell);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace ipuflow::pipelining
