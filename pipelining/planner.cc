#include "pipelining/planner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "pipelining/stash.h"

namespace ipuflow::pipelining {
namespace {

absl::Status CheckCosts(const std::vector<double>& costs, int num_stages,
                        const char* which) {
  if (static_cast<int>(costs.size()) != num_stages) {
    return absl::InvalidArgumentError(
        absl::StrFormat("PlanSchedule: %s costs have %d entries for %d stages",
                        which, costs.size(), num_stages));
  }
  for (int s = 0; s < num_stages; ++s) {
    if (!std::isfinite(costs[s]) || costs[s] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "PlanSchedule: %s cost of stage %d is %g; costs are seconds >= 0",
          which, s, costs[s]));
    }
  }
  return absl::OkStatus();
}

bool AllEqual(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; });
}

bool IsGraphcoreSchedule(PipelineSchedule kind) {
  return kind == PipelineSchedule::kGrouped ||
         kind == PipelineSchedule::kInterleaved ||
         kind == PipelineSchedule::kSequential;
}

// Key of an item for dependency look-ups.
std::tuple<int, int, int> Key(const WorkItem& item) {
  return {item.pass == Pass::kForward ? 0 : 1, item.stage, item.micro_batch};
}

// Fills plan->items with start/end times (see planner.h for both models).
void TimeItems(Plan* plan) {
  const ScheduleTable& t = plan->table;
  std::map<std::tuple<int, int, int>, double> end_of;
  std::vector<double> ipu_free(t.num_ipus, 0);
  double step_start = 0;
  for (const std::vector<WorkItem>& step : t.steps) {
    double step_end = step_start;
    if (plan->timing == PlanTiming::kLockstep) {
      std::fill(ipu_free.begin(), ipu_free.end(), step_start);
    }
    for (const WorkItem& item : step) {
      const int ipu = t.ipu_of(item);
      double start = ipu_free[ipu];
      auto after = [&](const WorkItem& dep) {
        start = std::max(start, end_of.at(Key(dep)));
      };
      if (item.pass == Pass::kForward && item.stage > 0) {
        after({item.stage - 1, Pass::kForward, item.micro_batch});
      }
      if (item.pass == Pass::kBackward) {
        after({item.stage, Pass::kForward, item.micro_batch});
        if (item.stage + 1 < t.num_stages) {
          after({item.stage + 1, Pass::kBackward, item.micro_batch});
        }
      }
      const double cost = item.pass == Pass::kForward
                              ? plan->costs.forward[item.stage]
                              : plan->costs.backward[item.stage];
      const double end = start + cost;
      plan->items.push_back(
          {ipu, item.stage, item.pass, item.micro_batch, start, end});
      end_of[Key(item)] = end;
      ipu_free[ipu] = end;
      step_end = std::max(step_end, end);
    }
    step_start = step_end;
  }
}

// Utilisation, bubble and theory (see planner.h).
void Summarise(Plan* plan) {
  const ScheduleTable& t = plan->table;
  plan->ipu_busy.assign(t.num_ipus, 0);
  for (const TimedItem& item : plan->items) {
    plan->makespan = std::max(plan->makespan, item.end);
    plan->ipu_busy[item.ipu] += item.duration();
  }
  const std::set<int> used(t.stage_ipu.begin(), t.stage_ipu.end());
  double busy = 0;
  plan->ipu_utilisation.assign(t.num_ipus, 0);
  for (int ipu = 0; ipu < t.num_ipus; ++ipu) {
    busy += plan->ipu_busy[ipu];
    if (plan->makespan > 0) {
      plan->ipu_utilisation[ipu] = plan->ipu_busy[ipu] / plan->makespan;
    }
  }
  const double total = plan->makespan * used.size();
  plan->bubble = total > 0 ? 1 - busy / total : 0;

  const int n = t.num_stages;
  const bool sequential = t.kind == PipelineSchedule::kSequential;
  plan->theoretical_bubble = TheoreticalBubble(t);
  const bool balanced = AllEqual(plan->costs.forward) &&
                        (!t.training || AllEqual(plan->costs.backward));
  if (IsGraphcoreSchedule(t.kind)) {
    plan->theory_applies =
        static_cast<int>(used.size()) == n && balanced &&
        (sequential || plan->timing == PlanTiming::kDataflow);
  } else {
    // torch's: F = B, and M a multiple of p for the looped ones (above).
    const int p = static_cast<int>(used.size());
    plan->theory_applies =
        t.kind != PipelineSchedule::kCustom && balanced &&
        plan->timing == PlanTiming::kDataflow &&
        (!t.training || plan->costs.forward[0] == plan->costs.backward[0]) &&
        (!IsLoopedSchedule(t.kind) || t.micro_batches % p == 0);
  }
}

std::string Percent(double fraction) {
  return absl::StrFormat("%.1f%%", 100 * fraction);
}

}  // namespace

double TheoreticalBubble(int num_stages, int micro_batches) {
  return (num_stages - 1.0) / (micro_batches + num_stages - 1.0);
}

double TheoreticalBubble(const ScheduleTable& table) {
  const int n = table.num_stages, m = table.micro_batches;
  if (table.kind == PipelineSchedule::kSequential) return (n - 1.0) / n;
  if (IsGraphcoreSchedule(table.kind)) return TheoreticalBubble(n, m);
  const double p =
      std::set<int>(table.stage_ipu.begin(), table.stage_ipu.end()).size();
  return (p - 1) / (static_cast<double>(n) * m / p + p - 1);
}

absl::StatusOr<Plan> PlanSchedule(const ScheduleTable& table,
                                  const StageCosts& costs, PlanTiming timing) {
  RETURN_IF_ERROR(VerifyScheduleTable(table));
  RETURN_IF_ERROR(CheckCosts(costs.forward, table.num_stages, "forward"));
  Plan plan;
  plan.table = table;
  plan.costs = costs;
  if (table.training) {
    RETURN_IF_ERROR(CheckCosts(costs.backward, table.num_stages, "backward"));
  } else {
    plan.costs.backward.assign(table.num_stages, 0);
  }
  plan.timing = table.kind == PipelineSchedule::kSequential
                    ? PlanTiming::kLockstep
                    : timing;
  TimeItems(&plan);
  Summarise(&plan);
  plan.stash_depths = table.training ? StashDepths(table.kind, table.num_stages)
                                     : std::vector<int>(table.num_stages, 0);
  plan.stash_occupancy = MeasureStashOccupancy(table);
  plan.stash_peak_entries = PeakStashEntries(table);
  plan.predicted_ipu_stash_peak = PredictedPeakStashPerIpu(table);
  if (!plan.predicted_ipu_stash_peak.empty()) {
    plan.ipu_stash_peak = PeakStashEntriesPerIpu(table);
  }
  if (!costs.stash_bytes.empty()) {
    if (static_cast<int>(costs.stash_bytes.size()) != table.num_stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("stash_bytes has ", costs.stash_bytes.size(),
                       " entries for ", table.num_stages, " stages"));
    }
    plan.ipu_stash_bytes.assign(table.num_ipus, 0);
    for (int s = 0; s < table.num_stages; ++s) {
      plan.ipu_stash_bytes[table.stage_ipu[s]] +=
          plan.stash_peak_entries[s] * costs.stash_bytes[s];
    }
  }
  return plan;
}

std::string PlanTimelineString(const Plan& plan) {
  return ToTextTimeline(plan.items);
}

std::string PlanDebugString(const Plan& plan) {
  const ScheduleTable& t = plan.table;
  const int n = t.num_stages, m = t.micro_batches;
  std::string out = absl::StrFormat(
      "Pipeline plan: %s %s, %d stages on %d IPUs (device_mapping [%s]), %d "
      "micro-batches, %s timing\n",
      PipelineScheduleName(t.kind), t.training ? "training" : "inference", n,
      t.num_ipus, absl::StrJoin(t.stage_ipu, ", "), m,
      plan.timing == PlanTiming::kDataflow ? "dataflow" : "lockstep");
  absl::StrAppendFormat(
      &out, "  costs per micro-batch: forward [%s]",
      absl::StrJoin(plan.costs.forward, ", ", [](std::string* o, double c) {
        o->append(HumanSeconds(c));
      }));
  if (t.training) {
    absl::StrAppendFormat(
        &out, ", backward [%s]",
        absl::StrJoin(plan.costs.backward, ", ", [](std::string* o, double c) {
          o->append(HumanSeconds(c));
        }));
  }
  absl::StrAppendFormat(&out, "\n  makespan %s, %d steps\n",
                        HumanSeconds(plan.makespan), t.num_steps());
  for (int ipu = 0; ipu < t.num_ipus; ++ipu) {
    absl::StrAppendFormat(&out, "  IPU%d: busy %s, utilisation %s\n", ipu,
                          HumanSeconds(plan.ipu_busy[ipu]),
                          Percent(plan.ipu_utilisation[ipu]));
  }
  const bool sequential = t.kind == PipelineSchedule::kSequential;
  const int p = static_cast<int>(
      std::set<int>(t.stage_ipu.begin(), t.stage_ipu.end()).size());
  std::string formula =
      sequential ? absl::StrFormat("(N-1)/N = %d/%d", n - 1, n)
                 : absl::StrFormat("(N-1)/(M+N-1) = %d/%d", n - 1, m + n - 1);
  if (!IsGraphcoreSchedule(t.kind)) {
    formula = absl::StrFormat("(p-1)/(vM+p-1) = %d/%g", p - 1,
                              static_cast<double>(n) * m / p + p - 1);
  }
  absl::StrAppendFormat(
      &out, "  bubble: %s measured, %s theory %s%s\n", Percent(plan.bubble),
      Percent(plan.theoretical_bubble), formula,
      plan.theory_applies
          ? ""
          : " (theory assumes balanced stages, one IPU per stage (torch's "
            "schedules: the looped placement, F = B, M a multiple of p) and "
            "dataflow timing: not the case here)");
  if (IsGraphcoreSchedule(t.kind)) {
    absl::StrAppendFormat(
        &out,
        "  stash per stage: FIFO depths [%s], measured peak live [%s] "
        "(= depth + 1 in training, see stash.h)\n",
        absl::StrJoin(plan.stash_depths, ", "),
        absl::StrJoin(plan.stash_occupancy, ", "));
  } else if (!plan.predicted_ipu_stash_peak.empty()) {
    absl::StrAppendFormat(
        &out,
        "  stash per IPU: predicted peak [%s] (torch.distributed.pipelining's "
        "orders, see stash.h), measured peak [%s]\n",
        absl::StrJoin(plan.predicted_ipu_stash_peak, ", "),
        absl::StrJoin(plan.ipu_stash_peak, ", "));
  } else {
    absl::StrAppendFormat(&out, "  stash per stage: measured peak [%s]\n",
                          absl::StrJoin(plan.stash_peak_entries, ", "));
  }
  if (!plan.ipu_stash_bytes.empty()) {
    absl::StrAppendFormat(
        &out, "  stash memory per IPU (peak entries [%s] x bytes): [%s] B\n",
        absl::StrJoin(plan.stash_peak_entries, ", "),
        absl::StrJoin(plan.ipu_stash_bytes, ", "));
  }
  absl::StrAppend(&out, PlanTimelineString(plan));
  return out;
}

}  // namespace ipuflow::pipelining
