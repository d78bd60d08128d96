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

}  // namespace ipuflow::pipelining
