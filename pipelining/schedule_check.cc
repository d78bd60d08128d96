// ValidateScheduleTable (every violated invariant of schedule.h, each with
// its cell), its report on the step x IPU grid, VerifyScheduleTable, and the
// grid ScheduleTableToString draws.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "pipelining/schedule.h"
#include "pipelining/schedule_internal.h"

namespace ipuflow::pipelining {
namespace {

using internal::ItemIndex;
using internal::StepOrderKey;

// Grids larger than this are not drawn in a report (the lines still name
// step and IPU).
constexpr int kMaxDrawnSteps = 256;
constexpr int kMaxDrawnIpus = 64;

bool IsExclusive(PipelineSchedule kind) {
  return kind != PipelineSchedule::kGrouped;
}

// The shape checks; true if the table may be scanned.
bool CheckShape(const ScheduleTable& table,
                std::vector<ScheduleViolation>& out) {
  const int n = table.num_stages, mb = table.micro_batches;
  auto fail = [&](std::string message) {
    out.push_back({ScheduleRule::kShape, -1, -1, std::move(message)});
    return false;
  };
  if (n < 1 || mb < 1) {
    return fail(absl::StrFormat(
        "num_stages %d and micro_batches %d must be >= 1", n, mb));
  }
  if (2 * static_cast<int64_t>(n) * mb > kMaxScheduleItems) {
    return fail(absl::StrFormat(
        "2 x num_stages x micro_batches = 2 x %d x %d is more than %d items", n,
        mb, kMaxScheduleItems));
  }
  if (table.num_ipus < 1 || table.num_ipus > kMaxPipelineIpus) {
    return fail(absl::StrFormat("num_ipus %d is not between 1 and %d",
                                table.num_ipus, kMaxPipelineIpus));
  }
  if (static_cast<int>(table.stage_ipu.size()) != n) {
    return fail(absl::StrFormat("stage_ipu has %d entries for %d stages",
                                table.stage_ipu.size(), n));
  }
  bool ok = true;
  for (int s = 0; s < n; ++s) {
    if (table.stage_ipu[s] < 0 || table.stage_ipu[s] >= table.num_ipus) {
      ok = fail(absl::StrFormat("stage_ipu[%d] = %d is not in [0, %d)", s,
                                table.stage_ipu[s], table.num_ipus));
    }
  }
  return ok;
}

// Unknown items, duplicates, the in-step order and exclusivity of step `t`,
// recording each item's step in `step_of`.
void CheckStep(const ScheduleTable& table, int t, std::vector<int>& step_of,
               std::vector<int>& last_mb, std::vector<ScheduleViolation>& out) {
  const int n = table.num_stages, mb = table.micro_batches;
  const std::vector<WorkItem>& step = table.steps[t];
  const bool sequential = table.kind == PipelineSchedule::kSequential;
  if (sequential && step.size() > 1) {
    out.push_back({ScheduleRule::kSequential, t, -1,
                   absl::StrFormat("step %d runs %d items; Sequential runs "
                                   "one at a time",
                                   t, step.size())});
  }
  std::vector<int> per_ipu(table.num_ipus, 0);
  for (size_t i = 0; i < step.size(); ++i) {
    const WorkItem& item = step[i];
    const std::string name = WorkItemName(item);
    if (!internal::ItemInRange(item, n, mb, table.training)) {
      const bool stage_ok = item.stage >= 0 && item.stage < n;
      out.push_back(
          {ScheduleRule::kUnknownItem, t, stage_ok ? table.ipu_of(item) : -1,
           absl::StrFormat("step %d: %s is not an item of a %s pipeline with "
                           "%d stages and %d micro-batches",
                           t, name, table.training ? "training" : "inference",
                           n, mb)});
      continue;
    }
    const int ipu = table.ipu_of(item);
    int& seen = step_of[ItemIndex(item, n, mb)];
    const bool duplicate = seen >= 0;
    if (duplicate) {
      out.push_back(
          {ScheduleRule::kDuplicate, t, ipu,
           absl::StrFormat("%s appears in steps %d and %d", name, seen, t)});
    } else {
      seen = t;
    }
    if (i > 0 && StepOrderKey(item) < StepOrderKey(step[i - 1])) {
      out.push_back({ScheduleRule::kStepOrder, t, ipu,
                     absl::StrFormat("step %d: %s listed after %s (forwards "
                                     "by ascending stage, then backwards by "
                                     "descending stage)",
                                     t, name, WorkItemName(step[i - 1]))});
    }
    int& last = last_mb[ItemIndex({item.stage, item.pass, 0}, n, 1)];
    if (!duplicate && item.micro_batch < last) {
      out.push_back({ScheduleRule::kMicroBatchOrder, t, ipu,
                     absl::StrFormat("step %d: %s comes after micro-batch %d "
                                     "of its stage and pass: a stage runs its "
                                     "micro-batches in ascending order (its "
                                     "stash and the channels between IPUs "
                                     "are FIFOs)",
                                     t, name, last)});
    }
    last = std::max(last, item.micro_batch);
    if (++per_ipu[ipu] > 1 && IsExclusive(table.kind) && !sequential) {
      out.push_back(
          {ScheduleRule::kExclusive, t, ipu,
           absl::StrFormat("step %d: IPU %d runs more than one item "
                           "(%s is the second); %s allows one per "
                           "IPU per step",
                           t, ipu, name, PipelineScheduleName(table.kind))});
    }
  }
}

}  // namespace

namespace internal {

std::string DrawScheduleGrid(const ScheduleTable& table,
                             const std::vector<std::vector<bool>>& marked) {
  // cells[ipu][step]
  std::vector<std::vector<std::string>> cells(
      table.num_ipus, std::vector<std::string>(table.num_steps()));
  // An IPU with several stages labels its cells with the stage, as torch's
  // actions ("2F0").
  std::vector<int> stages_on(table.num_ipus, 0);
  for (int ipu : table.stage_ipu) {
    if (ipu >= 0 && ipu < table.num_ipus) ++stages_on[ipu];
  }
  for (int t = 0; t < table.num_steps(); ++t) {
    for (const WorkItem& item : table.steps[t]) {
      if (item.stage < 0 || item.stage >= table.num_stages) continue;
      const int ipu = table.ipu_of(item);
      if (ipu < 0 || ipu >= table.num_ipus) continue;
      if (stages_on[ipu] > 1) absl::StrAppend(&cells[ipu][t], item.stage);
      absl::StrAppend(&cells[ipu][t], PassLetter(item.pass), item.micro_batch);
    }
  }
  size_t width = 1;
  for (int ipu = 0; ipu < table.num_ipus; ++ipu) {
    for (int t = 0; t < table.num_steps(); ++t) {
      std::string& cell = cells[ipu][t];
      if (cell.empty()) cell = ".";
      if (!marked.empty() && marked[ipu][t])
        cell = absl::StrCat("[", cell, "]");
      width = std::max(width, cell.size());
    }
  }
  const std::string last_ipu = absl::StrCat("IPU", table.num_ipus - 1);
  std::string out;
  for (int ipu = 0; ipu < table.num_ipus; ++ipu) {
    std::string line =
        absl::StrFormat("%-*s |", last_ipu.size(), absl::StrCat("IPU", ipu));
    for (const std::string& cell : cells[ipu]) {
      absl::StrAppendFormat(&line, " %-*s", width, cell);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace internal

const char* ScheduleRuleName(ScheduleRule rule) {
  switch (rule) {
    case ScheduleRule::kShape:
      return "shape";
    case ScheduleRule::kUnknownItem:
      return "unknown item";
    case ScheduleRule::kDuplicate:
      return "duplicate";
    case ScheduleRule::kStepOrder:
      return "step order";
    case ScheduleRule::kExclusive:
      return "one item per IPU per step";
    case ScheduleRule::kSequential:
      return "one item per step";
    case ScheduleRule::kMissing:
      return "missing item";
    case ScheduleRule::kDependency:
      return "dependency";
    case ScheduleRule::kMicroBatchOrder:
      return "micro-batch order";
  }
  return "?";
}

std::vector<ScheduleViolation> ValidateScheduleTable(
    const ScheduleTable& table) {
  std::vector<ScheduleViolation> out;
  if (!CheckShape(table, out)) return out;
  const int n = table.num_stages, mb = table.micro_batches;
  std::vector<int> step_of(2 * n * mb, -1);
  std::vector<int> last_mb(2 * n, -1);  // Per stage and pass.
  for (int t = 0; t < table.num_steps(); ++t) {
    CheckStep(table, t, step_of, last_mb, out);
  }
  for (int m = 0; m < mb; ++m) {
    for (const WorkItem& item :
         internal::MicroBatchItems(n, m, table.training)) {
      const int at = step_of[ItemIndex(item, n, mb)];
      if (at < 0) {
        out.push_back({ScheduleRule::kMissing, -1, table.ipu_of(item),
                       absl::StrCat(WorkItemName(item), " is missing")});
        continue;
      }
      for (const WorkItem& dep : internal::Dependencies(item, n)) {
        const int dep_at = step_of[ItemIndex(dep, n, mb)];
        if (dep_at >= 0 && dep_at >= at) {
          out.push_back(
              {ScheduleRule::kDependency, at, table.ipu_of(item),
               absl::StrFormat("%s in step %d must come after %s, which is in "
                               "step %d",
                               WorkItemName(item), at, WorkItemName(dep),
                               dep_at)});
        }
      }
    }
  }
  return out;
}

std::string ScheduleViolationsToString(
    const ScheduleTable& table,
    const std::vector<ScheduleViolation>& violations) {
  if (violations.empty()) return "";
  std::string out = absl::StrFormat(
      "%d violation(s) of the %s schedule table (%d stages, %d micro-batches, "
      "%s):\n",
      violations.size(), PipelineScheduleName(table.kind), table.num_stages,
      table.micro_batches, table.training ? "training" : "inference");
  const bool shaped = std::none_of(violations.begin(), violations.end(),
                                   [](const ScheduleViolation& v) {
                                     return v.rule == ScheduleRule::kShape;
                                   });
  if (shaped && table.num_steps() <= kMaxDrawnSteps &&
      table.num_ipus <= kMaxDrawnIpus) {
    std::vector<std::vector<bool>> marked(
        table.num_ipus, std::vector<bool>(table.num_steps(), false));
    for (const ScheduleViolation& v : violations) {
      if (v.step < 0 || v.step >= table.num_steps()) continue;
      if (v.ipu >= 0) {
        marked[v.ipu][v.step] = true;
      } else {  // A whole step (Sequential): every busy cell of it.
        for (const WorkItem& item : table.steps[v.step]) {
          if (item.stage >= 0 && item.stage < table.num_stages) {
            marked[table.ipu_of(item)][v.step] = true;
          }
        }
      }
    }
    absl::StrAppend(&out, internal::DrawScheduleGrid(table, marked));
  } else if (shaped) {
    absl::StrAppendFormat(&out, "(%d steps x %d IPUs: too large to draw)\n",
                          table.num_steps(), table.num_ipus);
  }
  for (size_t i = 0; i < violations.size(); ++i) {
    const ScheduleViolation& v = violations[i];
    std::string where;
    if (v.step >= 0) absl::StrAppend(&where, "step ", v.step, ", ");
    if (v.ipu >= 0) absl::StrAppend(&where, "IPU ", v.ipu, ", ");
    absl::StrAppendFormat(&out, "%d. %s%s: %s\n", i + 1, where,
                          ScheduleRuleName(v.rule), v.message);
  }
  return out;
}

absl::Status VerifyScheduleTable(const ScheduleTable& table) {
  const std::vector<ScheduleViolation> violations =
      ValidateScheduleTable(table);
  if (violations.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("VerifyScheduleTable: ", violations.front().message));
}

}  // namespace ipuflow::pipelining
