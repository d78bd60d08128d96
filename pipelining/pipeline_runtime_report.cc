// PipelineRuntime::MakeReport: what one Run measured (timelines, bubble,
// utilisation, stash and FIFO occupancy, per-IPU memory, traffic) beside
// the dry-run planner's prediction. Running is in pipeline_runtime.cc.
#include <algorithm>
#include <chrono>

#include "pipelining/pipeline_runtime.h"
#include "pipelining/planner.h"

namespace ipuflow::pipelining {

using internal::Key;

PipelineReport PipelineRuntime::MakeReport(RunState& rs) {
  PipelineReport r;
  r.table = b_->table;
  r.repeats = b_->options.repeat_count;
  r.recompute = recompute_;
  const int n = static_cast<int>(parts_.size());
  const int M = b_->table.micro_batches;
  r.micro_batches = static_cast<int64_t>(r.repeats) * M;
  for (int k = 0; k < num_ipus_; ++k) {
    r.items.insert(r.items.end(), rs.items[k].begin(), rs.items[k].end());
    r.wall_items.insert(r.wall_items.end(), rs.wall_items[k].begin(),
                        rs.wall_items[k].end());
  }
  for (double c : rs.vclock) r.virtual_seconds = std::max(r.virtual_seconds, c);
  r.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - rs.wall0)
          .count();
  r.weight_update_seconds = rs.weight_update_seconds;
  double total_span = 0;
  for (const auto& [lo, hi] : rs.spans) total_span += hi - lo;
  r.measured_seconds_per_run =
      rs.spans.empty() ? 0 : total_span / rs.spans.size();
  r.ipu_busy_seconds.assign(num_ipus_, 0);
  for (const TimedItem& it : r.items)
    r.ipu_busy_seconds[it.ipu] += it.duration();
  int used = 0;
  double busy = 0;
  r.ipu_utilisation.assign(num_ipus_, 0);
  for (int k = 0; k < num_ipus_; ++k) {
    if (lists_->lists()[k].empty()) continue;
    ++used;
    busy += r.ipu_busy_seconds[k];
    r.ipu_utilisation[k] =
        total_span > 0 ? r.ipu_busy_seconds[k] / total_span : 0;
  }
  r.bubble = total_span > 0 && used > 0 ? 1 - busy / (total_span * used) : 0;
  r.theoretical_bubble = b_->table.kind == PipelineSchedule::kSequential
                             ? (n - 1.0) / n
                             : TheoreticalBubble(n, M);
  r.stage_costs.forward.assign(n, 0);
  if (b_->training) r.stage_costs.backward.assign(n, 0);
  for (int s = 0; s < n; ++s) {
    for (int pass = 0; pass < (b_->training ? 2 : 1); ++pass) {
      double worst = 0;
      for (size_t p = 0; p < parts_[s].size(); ++p) {
        const int c = rs.cpu_count[2 * s + pass][p];
        if (c > 0) worst = std::max(worst, rs.cpu_sum[2 * s + pass][p] / c);
      }
      (pass == 0 ? r.stage_costs.forward : r.stage_costs.backward)[s] = worst;
    }
  }
  r.stash_capacity.assign(n, 0);
  r.stash_bytes_per_micro_batch.assign(n, 0);
  r.ipu_stash_bytes.assign(num_ipus_, 0);
  r.activation_fifo_capacity.assign(n, 0);
  r.activation_fifo_occupancy.assign(n, 0);
  r.stash_occupancy.assign(n, 0);
  for (const std::vector<int>& per_stage : rs.stash_occupancy) {
    for (int s = 0; s < n; ++s) {
      r.stash_occupancy[s] = std::max(r.stash_occupancy[s], per_stage[s]);
    }
  }
  r.ipu_peak_bytes.assign(num_ipus_, 0);
  r.ipu_remote_bytes.assign(num_ipus_, 0);
  for (int k = 0; k < num_ipus_; ++k) {
    // Always-live and the largest arena (the plan's), the buffers as run.
    r.ipu_peak_bytes[k] = memory_[k].always_live() + memory_[k].arena;
    r.ipu_remote_bytes[k] = memory_[k].remote_shards;
  }
  for (int s = 0; s < n; ++s) {
    for (const Part& p : parts_[s]) {
      const int q = p.def->part, k = p.def->ipu;
      if (b_->training) {
        Channel* st = Fifo(Key("stash", s, q));
        r.stash_capacity[s] =
            std::max(r.stash_capacity[s], static_cast<int>(st->capacity()));
        r.stash_bytes_per_micro_batch[s] += p.stash_bytes;
        r.ipu_stash_bytes[k] +=
            static_cast<int64_t>(st->peak()) * p.stash_bytes;
      }
      if (s + 1 < n) {
        for (const Part& next : parts_[s + 1]) {
          Channel* f = Fifo(Key("act", s, q, next.def->part));
          r.activation_fifo_capacity[s] = std::max(
              r.activation_fifo_capacity[s], static_cast<int>(f->capacity()));
          r.activation_fifo_occupancy[s] = std::max(
              r.activation_fifo_occupancy[s], static_cast<int>(f->peak()));
          r.ipu_peak_bytes[next.def->ipu] +=
              static_cast<int64_t>(f->peak()) * p.output_bytes;
        }
      }
    }
  }
  for (int k = 0; k < num_ipus_; ++k) {
    r.ipu_peak_bytes[k] += r.ipu_stash_bytes[k];
    r.ipu_budget_bytes.push_back(Device(k).memory_budget_bytes());
  }
  // The dry-run planner on what was measured, for comparison.
  if (b_->training &&
      parts_.size() == static_cast<size_t>(b_->table.num_stages)) {
    r.stage_costs.stash_bytes = r.stash_bytes_per_micro_batch;
  }
  absl::StatusOr<Plan> plan = PlanSchedule(b_->table, r.stage_costs);
  if (plan.ok()) {
    r.planned_bubble = plan->bubble;
    r.planned_seconds_per_run = plan->makespan;
    r.planned_ipu_stash_bytes = plan->ipu_stash_bytes;
  }
  r.ipu_to_ipu_bytes = rs.ipu_to_ipu;
  r.host_to_device_bytes = rs.host_to_device;
  r.offloaded_bytes_streamed = rs.streamed;
  return r;
}

}  // namespace ipuflow::pipelining
