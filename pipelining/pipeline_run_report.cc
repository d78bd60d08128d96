// MeasuredReport: what one run measured (timelines, bubble, utilisation,
// stash and FIFO occupancy, per-IPU memory, traffic) beside the dry-run
// planner's prediction.
#include "pipelining/pipeline_run_report.h"

#include <algorithm>

#include "pipelining/planner.h"

namespace ipuflow::pipelining {

using internal::Key;

namespace {

// The record's items as the report's: on the virtual and the wall clock,
// with each repeat's span and each part's summed cost per pass.
struct Items {
  std::vector<TimedItem> items, wall_items;
  std::vector<std::pair<double, double>> spans;  // Per repeat.
  std::vector<std::vector<double>> cpu_sum;      // [stage*2+pass][part]
  std::vector<std::vector<int>> cpu_count;
};

Items ReadItems(const BuiltPipeline& b, const PipelineLayout& l,
                const WorkListRecord& record) {
  Items r;
  const int M = b.table.micro_batches;
  const int repeats = b.options.repeat_count;
  for (const auto& stage : l.parts) {
    for (int pass = 0; pass < 2; ++pass) {
      r.cpu_sum.emplace_back(stage.size(), 0.0);
      r.cpu_count.emplace_back(stage.size(), 0);
    }
  }
  r.spans.assign(repeats, {1e300, 0});
  for (size_t k = 0; k < record.timings.size(); ++k) {
    const std::vector<WorkListItem>& list = l.work->lists[k];
    for (size_t i = 0; i < record.timings[k].size(); ++i) {
      const WorkItemTiming& t = record.timings[k][i];
      const PartItem& e = l.items[list[t.index].tag];
      const int repeat = static_cast<int>(i / list.size());
      const int mb = repeat * M + e.item.micro_batch;
      const int ipu = static_cast<int>(k);
      r.items.push_back({ipu, e.item.stage, e.item.pass, mb, t.start, t.end});
      r.wall_items.push_back(
          {ipu, e.item.stage, e.item.pass, mb, t.wall_start, t.wall_end});
      const int slot = e.item.stage * 2 + (e.item.pass == Pass::kBackward);
      r.cpu_sum[slot][e.part] += t.end - t.start;
      r.cpu_count[slot][e.part] += 1;
      auto& [lo, hi] = r.spans[repeat];
      lo = std::min(lo, t.start);
      hi = std::max(hi, t.end);
    }
  }
  for (auto& [lo, hi] : r.spans) lo = std::min(lo, hi);
  return r;
}

// Stash and FIFO capacities and peaks, and each IPU's peak bytes: the
// plan's always-live and arena, the buffers as run.
void Buffers(const BuiltPipeline& b, const PipelineLayout& layout,
             const WorkListProgram& program, const WorkListRecord& record,
             const std::vector<IpuMemory>& memory, PipelineReport* report) {
  PipelineReport& r = *report;
  const auto& parts = layout.parts;
  const int n = static_cast<int>(parts.size());
  const int num_ipus = layout.num_ipus;
  r.stash_capacity.assign(n, 0);
  r.stash_bytes_per_micro_batch.assign(n, 0);
  r.ipu_stash_bytes.assign(num_ipus, 0);
  r.activation_fifo_capacity.assign(n, 0);
  r.activation_fifo_occupancy.assign(n, 0);
  r.stash_occupancy.assign(n, 0);
  r.ipu_peak_bytes.assign(num_ipus, 0);
  r.ipu_remote_bytes.assign(num_ipus, 0);
  for (int k = 0; k < num_ipus; ++k) {
    r.ipu_peak_bytes[k] = memory[k].always_live() + memory[k].arena;
    r.ipu_remote_bytes[k] = memory[k].remote_shards;
  }
  const WorkLists& lists = program.lists();
  for (int s = 0; s < n; ++s) {
    for (const PartProgram& p : parts[s]) {
      const int q = p.def->part, k = p.def->ipu;
      if (b.training) {
        Channel* st = lists.channel(Key("stash", s, q));
        r.stash_capacity[s] =
            std::max(r.stash_capacity[s], static_cast<int>(st->capacity()));
        r.stash_bytes_per_micro_batch[s] += p.stash_bytes;
        r.ipu_stash_bytes[k] +=
            static_cast<int64_t>(st->peak()) * p.stash_bytes;
        // At the IPU's step boundaries (the items observed it).
        auto seen = record.observed.find(st->name());
        if (seen != record.observed.end()) {
          r.stash_occupancy[s] = std::max(r.stash_occupancy[s], seen->second);
        }
      }
      if (s + 1 < n) {
        for (const PartProgram& next : parts[s + 1]) {
          Channel* f = lists.channel(Key("act", s, q, next.def->part));
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
  for (int k = 0; k < num_ipus; ++k) {
    r.ipu_peak_bytes[k] += r.ipu_stash_bytes[k];
    r.ipu_budget_bytes.push_back(program.device(k).memory_budget_bytes());
  }
}

}  // namespace

PipelineReport MeasuredReport(const BuiltPipeline& b,
                              const PipelineLayout& layout,
                              const WorkListProgram& program,
                              const WorkListRecord& record,
                              const std::vector<IpuMemory>& memory) {
  const auto& parts = layout.parts;
  const int num_ipus = layout.num_ipus;
  Items rs = ReadItems(b, layout, record);
  PipelineReport r;
  r.table = b.table;
  r.repeats = b.options.repeat_count;
  r.recompute = layout.recompute;
  const int n = static_cast<int>(parts.size());
  const int M = b.table.micro_batches;
  r.micro_batches = static_cast<int64_t>(r.repeats) * M;
  // Per IPU, in list order, runs in order.
  r.items = std::move(rs.items);
  r.wall_items = std::move(rs.wall_items);
  for (double c : record.vclock) {
    r.virtual_seconds = std::max(r.virtual_seconds, c);
  }
  r.wall_seconds = record.wall_seconds;
  r.weight_update_seconds = record.epilogue_seconds;
  double total_span = 0;
  for (const auto& [lo, hi] : rs.spans) total_span += hi - lo;
  r.measured_seconds_per_run =
      rs.spans.empty() ? 0 : total_span / rs.spans.size();
  r.ipu_busy_seconds.assign(num_ipus, 0);
  for (const TimedItem& it : r.items) {
    r.ipu_busy_seconds[it.ipu] += it.duration();
  }
  int used = 0;
  double busy = 0;
  r.ipu_utilisation.assign(num_ipus, 0);
  for (int k = 0; k < num_ipus; ++k) {
    if (layout.work->lists[k].empty()) continue;
    ++used;
    busy += r.ipu_busy_seconds[k];
    r.ipu_utilisation[k] =
        total_span > 0 ? r.ipu_busy_seconds[k] / total_span : 0;
  }
  r.bubble = total_span > 0 && used > 0 ? 1 - busy / (total_span * used) : 0;
  r.theoretical_bubble = TheoreticalBubble(b.table);
  r.stage_costs.forward.assign(n, 0);
  if (b.training) r.stage_costs.backward.assign(n, 0);
  for (int s = 0; s < n; ++s) {
    for (int pass = 0; pass < (b.training ? 2 : 1); ++pass) {
      double worst = 0;
      for (size_t p = 0; p < parts[s].size(); ++p) {
        const int c = rs.cpu_count[2 * s + pass][p];
        if (c > 0) worst = std::max(worst, rs.cpu_sum[2 * s + pass][p] / c);
      }
      (pass == 0 ? r.stage_costs.forward : r.stage_costs.backward)[s] = worst;
    }
  }
  Buffers(b, layout, program, record, memory, &r);
  // The dry-run planner on what was measured, for comparison.
  if (b.training && parts.size() == static_cast<size_t>(b.table.num_stages)) {
    r.stage_costs.stash_bytes = r.stash_bytes_per_micro_batch;
  }
  absl::StatusOr<Plan> plan = PlanSchedule(b.table, r.stage_costs);
  if (plan.ok()) {
    r.planned_bubble = plan->bubble;
    r.planned_seconds_per_run = plan->makespan;
    r.planned_ipu_stash_bytes = plan->ipu_stash_bytes;
  }
  r.ipu_to_ipu_bytes = record.ipu_to_ipu_bytes;
  r.host_to_device_bytes = record.host_to_device_bytes;
  r.offloaded_bytes_streamed = record.remote_bytes;
  return r;
}

}  // namespace ipuflow::pipelining
