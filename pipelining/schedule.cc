#include "pipelining/schedule.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/option_checks.h"
#include "core/status.h"
#include "pipelining/schedule_internal.h"

namespace ipuflow::pipelining {
namespace internal {

absl::StatusOr<std::vector<int>> ResolveMapping(
    const char* who, int num_stages, const std::vector<int>& device_mapping) {
  if (device_mapping.empty()) {
    // The identity puts stage s on IPU s: an index like any other.
    if (num_stages > kMaxPipelineIpus) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %d stages without a device_mapping would use IPUs 0 to %d; "
          "IPU indices must be below %d (give a device_mapping)",
          who, num_stages, num_stages - 1, kMaxPipelineIpus));
    }
    std::vector<int> identity(num_stages);
    for (int s = 0; s < num_stages; ++s) identity[s] = s;
    return identity;
  }
  if (static_cast<int>(device_mapping.size()) != num_stages) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: device_mapping [%s] has %d entries for %d stages",
                        who, absl::StrJoin(device_mapping, ", "),
                        device_mapping.size(), num_stages));
  }
  for (int s = 0; s < num_stages; ++s) {
    if (device_mapping[s] < 0 || device_mapping[s] >= kMaxPipelineIpus) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: device_mapping[%d] = %d is not an IPU index (it must be "
          "between 0 and %d)",
          who, s, device_mapping[s], kMaxPipelineIpus - 1));
    }
  }
  return device_mapping;
}

// Ranges, the enum and the table's size in checked arithmetic: 2 x N x M
// in `int` overflowed for M = 2^29 + 1 and wrote past the step vector.
absl::Status CheckScheduleArguments(const char* who, PipelineSchedule schedule,
                                    int num_stages, int micro_batches,
                                    bool training) {
  OptionChecker check(who);
  check.EnumValue("schedule", "PipelineSchedule",
                  static_cast<int64_t>(schedule), PipelineScheduleEnumValues());
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

}  // namespace internal

namespace {

using internal::ItemIndex;
using internal::MicroBatchItems;
using internal::StepOrderKey;

// The step each Graphcore generator wants an item in (before clash
// resolution).
int DesiredStep(PipelineSchedule kind, const WorkItem& item, int num_stages,
                bool training) {
  const int n = num_stages, m = item.micro_batch, s = item.stage;
  const bool fwd = item.pass == Pass::kForward;
  if (kind == PipelineSchedule::kGrouped) {
    return fwd ? m + s : m + 2 * n - 1 - s;
  }
  if (kind == PipelineSchedule::kInterleaved) {
    if (!training) return m + s;
    return fwd ? 2 * m + s : 2 * m + 2 * n - 1 - s;
  }
  return 0;  // Sequential: placed by a running counter instead.
}

// Returns the step of every item (by ItemIndex) of a Graphcore schedule.
// Items are placed in micro-batch order, each at the first step that is >=
// its desired step, after its dependencies' steps, and (for exclusive
// schedules) on a free IPU slot. With distinct IPUs the desired steps
// already satisfy all of this, so the closed forms in schedule.h hold
// exactly.
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
      for (const WorkItem& d : internal::Dependencies(item, n)) {
        lo = std::max(lo, step_of[ItemIndex(d, n, mb)] + 1);
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

// Graphcore's three schedules (the closed forms of schedule.h).
ScheduleTable MakeGraphcoreSchedule(ScheduleTable table) {
  const int n = table.num_stages, mb = table.micro_batches;
  const std::vector<int> step_of = PlaceItems(table);
  const int num_steps = *std::max_element(step_of.begin(), step_of.end()) + 1;
  table.steps.resize(num_steps);
  for (int m = 0; m < mb; ++m) {
    for (const WorkItem& item : MicroBatchItems(n, m, table.training)) {
      table.steps[step_of[ItemIndex(item, n, mb)]].push_back(item);
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

// Lower case without '-' and '_': the key PipelineScheduleFromName matches.
std::string NameKey(absl::string_view name) {
  std::string key;
  for (char c : name) {
    if (c == '-' || c == '_') continue;
    key.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  return key;
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
    case PipelineSchedule::kGPipe:
      return "GPipe";
    case PipelineSchedule::k1F1B:
      return "1F1B";
    case PipelineSchedule::kInterleaved1F1B:
      return "Interleaved1F1B";
    case PipelineSchedule::kLoopedBFS:
      return "LoopedBFS";
    case PipelineSchedule::kCustom:
      return "Custom";
  }
  return "?";
}

std::vector<std::pair<int64_t, const char*>> PipelineScheduleEnumValues() {
  std::vector<std::pair<int64_t, const char*>> values;
  for (int v = 0; v < kNumPipelineSchedules; ++v) {
    values.push_back(
        {v, PipelineScheduleName(static_cast<PipelineSchedule>(v))});
  }
  return values;
}

absl::StatusOr<PipelineSchedule> PipelineScheduleFromName(
    absl::string_view name) {
  std::vector<std::string> names;
  for (int v = 0; v < kNumPipelineSchedules; ++v) {
    const char* known = PipelineScheduleName(static_cast<PipelineSchedule>(v));
    if (NameKey(known) == NameKey(name)) {
      return static_cast<PipelineSchedule>(v);
    }
    names.push_back(known);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("'%s' is not a pipeline schedule: use one of %s",
                      absl::CHexEscape(name), absl::StrJoin(names, ", ")));
}

bool IsLoopedSchedule(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kInterleaved1F1B ||
         schedule == PipelineSchedule::kLoopedBFS;
}

const char* PassLetter(Pass pass) { return pass == Pass::kForward ? "F" : "B"; }

std::string WorkItemName(const WorkItem& item) {
  return absl::StrFormat("%s s%d mb%d", PassLetter(item.pass), item.stage,
                         item.micro_batch);
}

absl::StatusOr<ScheduleTable> MakeSchedule(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& device_mapping, int micro_batches, bool training) {
  RETURN_IF_ERROR(internal::CheckScheduleArguments(
      "MakeSchedule", schedule, num_stages, micro_batches, training));
  if (schedule == PipelineSchedule::kCustom) {
    return absl::InvalidArgumentError(
        "MakeSchedule: schedule Custom has no generator: a custom table is "
        "given as data (PipelineOptions::schedule_table, ReadScheduleCsv)");
  }
  ScheduleTable table;
  ASSIGN_OR_RETURN(
      table.stage_ipu,
      internal::ResolveMapping("MakeSchedule", num_stages, device_mapping));
  table.num_stages = num_stages;
  table.num_ipus =
      *std::max_element(table.stage_ipu.begin(), table.stage_ipu.end()) + 1;
  table.micro_batches = micro_batches;
  table.training = training;
  table.kind = schedule;
  switch (schedule) {
    case PipelineSchedule::kGrouped:
    case PipelineSchedule::kInterleaved:
    case PipelineSchedule::kSequential:
      return MakeGraphcoreSchedule(std::move(table));
    case PipelineSchedule::kGPipe:
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kInterleaved1F1B:
    case PipelineSchedule::kLoopedBFS:
    case PipelineSchedule::kCustom:
      break;
  }
  ASSIGN_OR_RETURN(
      std::vector<std::vector<WorkItem>> orders,
      internal::TorchIpuOrders(schedule, num_stages, table.stage_ipu,
                               micro_batches, training));
  return ScheduleFromIpuOrders(schedule, num_stages, table.stage_ipu,
                               micro_batches, training, orders);
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
  return internal::DrawScheduleGrid(table, {});
}

}  // namespace ipuflow::pipelining
