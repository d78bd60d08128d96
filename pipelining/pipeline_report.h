// PipelineReport: what one run of a pipeline's frame measured
// (Pipeline::last_report(), replica 0's). Two clocks:
//  - virtual: each IPU has a clock advanced by the CPU time its thread spent
//    on each item (CLOCK_THREAD_CPUTIME_ID) and by dependencies (an item
//    starts when its IPU is free and its inputs, stamped with their
//    producer's virtual end time, exist). This is the timeline N real IPUs
//    would show even when the host has fewer cores than emulated IPUs.
//    With PipelineOptions::virtual_costs, items cost the modelled seconds
//    instead, and the timeline is exactly the planner's (planner.h).
//  - wall: steady_clock, as the host saw it.
// Utilisation and bubble are virtual-clock figures over the forward/backward
// part of each pipeline run (the weight update is reported separately).
//
//   RETURN_IF_ERROR(program->Execute({{}}, &results));  // the frame's
//   const PipelineReport r = *pipeline->last_report();
//   std::cout << r.Summary();
//   WriteFile("trace.json", ToChromeTraceJson(r.items));   // trace.h
//   WriteFile("timeline.svg", ToSvgTimeline(r.items));
//
// Thread safety: a plain value.
#ifndef IPUFLOW_PIPELINING_PIPELINE_REPORT_H_
#define IPUFLOW_PIPELINING_PIPELINE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pipelining/planner.h"
#include "pipelining/schedule.h"
#include "pipelining/trace.h"

namespace ipuflow::pipelining {

struct PipelineReport {
  ScheduleTable table;  // One pipeline run.
  int repeats = 0;
  int replicas = 1;  // This report is replica 0's; all run the same table.
  bool recompute = false;
  // Every forward/backward item of every repeat, on the virtual clock;
  // micro_batch counts across repeats (repeat r, micro-batch m -> r*M + m).
  std::vector<TimedItem> items;
  std::vector<TimedItem> wall_items;  // The same items, wall clock.
  double virtual_seconds = 0;         // Makespan incl. weight updates.
  double wall_seconds = 0;
  double weight_update_seconds = 0;      // Virtual, summed over repeats.
  std::vector<double> ipu_busy_seconds;  // Virtual F/B time per IPU.
  std::vector<double> ipu_utilisation;   // busy / F/B span, per IPU.
  double bubble = 0;                     // Idle fraction of the F/B spans.
  double theoretical_bubble = 0;         // (N-1)/(M+N-1); Sequential (N-1)/N.
  // Mean CPU seconds per micro-batch of each stage's forward / backward
  // (the slowest part for concurrent stages): the planner's input.
  StageCosts stage_costs;
  // The dry-run planner's prediction from stage_costs, for comparison.
  double planned_bubble = 0;
  double planned_seconds_per_run = 0;
  double measured_seconds_per_run = 0;  // Mean virtual F/B span.
  // Activation stash per stage: FIFO capacity and the peak number of
  // micro-batches held at step boundaries (the convention of stash.h).
  std::vector<int> stash_capacity;
  std::vector<int> stash_occupancy;
  std::vector<int64_t> stash_bytes_per_micro_batch;
  // Per IPU: stash bytes at the measured peak, and the planner's prediction
  // (PeakStashEntries x bytes).
  std::vector<int64_t> ipu_stash_bytes;
  std::vector<int64_t> planned_ipu_stash_bytes;
  // Peak elements in each stage's outgoing activation FIFO(s).
  std::vector<int> activation_fifo_capacity;
  std::vector<int> activation_fifo_occupancy;
  // Per IPU: peak bytes (always-live + largest program arena + stash and
  // FIFO contents at their measured peaks) and the budget.
  std::vector<int64_t> ipu_peak_bytes;
  std::vector<int64_t> ipu_budget_bytes;
  int64_t ipu_to_ipu_bytes = 0;
  int64_t host_to_device_bytes = 0;
  int64_t offloaded_bytes_streamed = 0;  // Remote-memory traffic.
  // Per IPU: offloaded optimizer state in this replica's remote memory
  // (1/R of it with replicated optimizer-state sharding).
  std::vector<int64_t> ipu_remote_bytes;
  int64_t micro_batches = 0;  // repeats x M.

  // Multi-line: schedule, clocks, per-IPU utilisation and memory, bubble
  // (measured / planned / theory), stash and FIFO occupancy, the timeline.
  std::string Summary() const;
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_REPORT_H_
