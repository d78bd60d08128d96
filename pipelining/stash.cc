#include "pipelining/stash.h"

#include <algorithm>
#include <vector>

namespace ipuflow::pipelining {

std::vector<int> StashDepths(PipelineSchedule schedule, int num_stages) {
  int multiplier = 0;
  switch (schedule) {
    case PipelineSchedule::kGrouped:
      multiplier = 2;
      break;
    case PipelineSchedule::kInterleaved:
      multiplier = 1;
      break;
    case PipelineSchedule::kSequential:
    case PipelineSchedule::kGPipe:
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kInterleaved1F1B:
    case PipelineSchedule::kLoopedBFS:
    case PipelineSchedule::kCustom:
      multiplier = 0;
      break;
  }
  std::vector<int> depths(num_stages);
  for (int s = 0; s < num_stages; ++s) {
    depths[s] = multiplier * (num_stages - 1 - s);
  }
  return depths;
}

std::vector<int> MeasureStashOccupancy(const ScheduleTable& table) {
  const int n = table.num_stages;
  std::vector<int> live(n, 0), peak(n, 0);
  for (const std::vector<WorkItem>& step : table.steps) {
    // A forward adds a stashed micro-batch, its backward removes it; only
    // the state at the end of the step is sampled.
    for (const WorkItem& item : step) {
      live[item.stage] += item.pass == Pass::kForward ? 1 : -1;
    }
    if (!table.training) continue;
    for (int s = 0; s < n; ++s) peak[s] = std::max(peak[s], live[s]);
  }
  return peak;
}

std::vector<int> PeakStashEntries(const ScheduleTable& table) {
  const int n = table.num_stages;
  std::vector<int> live(n, 0), peak(n, 0);
  if (!table.training) return peak;
  for (const std::vector<WorkItem>& step : table.steps) {
    for (const WorkItem& item : step) {
      int& l = live[item.stage];
      l += item.pass == Pass::kForward ? 1 : -1;
      peak[item.stage] = std::max(peak[item.stage], l);
    }
  }
  return peak;
}

std::vector<int> PeakStashEntriesPerIpu(const ScheduleTable& table) {
  std::vector<int> live(table.num_ipus, 0), peak(table.num_ipus, 0);
  if (!table.training) return peak;
  for (const std::vector<WorkItem>& step : table.steps) {
    for (const WorkItem& item : step) {
      const int ipu = table.ipu_of(item);
      live[ipu] += item.pass == Pass::kForward ? 1 : -1;
      peak[ipu] = std::max(peak[ipu], live[ipu]);
    }
  }
  return peak;
}

std::vector<int> PredictedPeakStashPerIpu(const ScheduleTable& table) {
  const int n = table.num_stages, m = table.micro_batches;
  const int p = table.num_ipus, v = n / p;
  std::vector<int> peak(p, 0);
  if (!table.training) return {};
  switch (table.kind) {
    case PipelineSchedule::kGPipe:
      for (int s = 0; s < n; ++s) peak[table.stage_ipu[s]] = m;
      return peak;
    case PipelineSchedule::k1F1B:
      for (int s = 0; s < n; ++s) {
        peak[table.stage_ipu[s]] = std::min(m, n - s);
      }
      return peak;
    case PipelineSchedule::kInterleaved1F1B: {
      const int per_round = m / std::max(1, m / p);
      for (int r = 0; r < p; ++r) {
        const int warmup =
            std::min(v * m, (v - 1) * per_round + 2 * (p - 1 - r));
        peak[r] = warmup + (warmup < v * m ? 1 : 0);
      }
      return peak;
    }
    case PipelineSchedule::kLoopedBFS:
      std::fill(peak.begin(), peak.end(), v * m);
      return peak;
    case PipelineSchedule::kGrouped:
    case PipelineSchedule::kInterleaved:
    case PipelineSchedule::kSequential:
    case PipelineSchedule::kCustom:
      break;
  }
  return {};
}

}  // namespace ipuflow::pipelining
