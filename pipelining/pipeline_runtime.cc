// PipelineRuntime, running: what each work-list item does between the
// pops and pushes the device layer makes (forward, backward, outfeed
// delivery), the
// weight update and the report. Lowering is in pipeline_compile.cc; the
// work lists themselves run in the device layer (core/ipu/work_lists.h).
#include "pipelining/pipeline_runtime.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cancellation.h"
#include "core/dtype.h"
#include "core/ipu/ipu_device.h"
#include "pipelining/planner.h"

namespace ipuflow::pipelining {

using internal::Bytes;
using internal::Key;

namespace {

int64_t Bytes(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.valid() ? t.TotalBytes() : 0;
  return n;
}

// What an item adds to its IPU's virtual clock: the modelled cost when the
// options give one (PipelineOptions::virtual_costs), else `measured`.
double VirtualCost(const PipelineOptions& o, const WorkItem& item,
                   double measured) {
  if (!o.virtual_costs.has_value()) return measured;
  return item.pass == Pass::kForward ? o.virtual_costs->forward[item.stage]
                                     : o.virtual_costs->backward[item.stage];
}

}  // namespace

void PipelineRuntime::SentToIpu(RunState& rs, int from, int64_t bytes) {
  rs.ipu_to_ipu.fetch_add(bytes, std::memory_order_relaxed);
  Device(from).counters().ipu_to_ipu.fetch_add(bytes,
                                               std::memory_order_relaxed);
}

absl::Status PipelineRuntime::Forward(RunState& rs, const Entry& e,
                                      std::vector<ChannelMessage>& popped,
                                      std::vector<ItemPush>* pushes,
                                      ItemClock* clock) {
  Part& part = parts_[e.item.stage][e.part];
  const PartDef& d = *part.def;
  const int s = d.stage;
  const int n = static_cast<int>(parts_.size());
  // Pops, in LowerToWorkLists' order: the element stage 0's first part
  // took (its other parts), or the previous stage's parts' outputs; then
  // the other last-stage parts' outputs (the part that enqueues).
  size_t next = 0;
  std::vector<Tensor> args(d.args.size());
  if (s == 0) {
    std::copy(rs.input_values.begin(), rs.input_values.end(), args.begin());
    if (!b_->infeed_id.empty() && part.element_fetch < 0) {
      std::vector<Tensor>& element = popped[next++].values;
      std::move(element.begin(), element.end(),
                args.begin() + rs.input_values.size());
    }
  } else {
    const StageDef& prev = b_->stages[s - 1];
    for (size_t q = 0; q < parts_[s - 1].size(); ++q) {
      std::vector<Tensor>& values = popped[next++].values;
      std::move(values.begin(), values.end(),
                args.begin() + prev.output_offset[q]);
    }
  }
  std::vector<Tensor> feeds;
  for (int i : part.fed_args) feeds.push_back(args[i]);
  const int parts = static_cast<int>(parts_[s].size());
  if (part.enqueues) {
    // The other last-stage parts' outputs, for the OutfeedEnqueue node.
    for (int q = 0; q + 1 < parts; ++q) {
      std::vector<Tensor>& values = popped[next++].values;
      std::move(values.begin(), values.end(), std::back_inserter(feeds));
    }
  }
  std::vector<Tensor> out;
  const double c0 = ThreadCpuSeconds();
  if (part.element_fetch >= 0) {
    // The InfeedDequeue node records the element in the micro-batch's
    // TakenElements (given back if the micro-batch does not complete).
    RunEnv env = envs_[d.ipu];
    env.taken = rs.taken[e.item.micro_batch].get();
    RETURN_IF_ERROR(part.forward->Run(env, feeds, &out));
  } else {
    RETURN_IF_ERROR(part.forward->Run(envs_[d.ipu], feeds, &out));
  }
  clock->cpu = VirtualCost(b_->options, e.item, ThreadCpuSeconds() - c0);
  // Pushes, in LowerToWorkLists' order.
  const size_t num_out = d.outputs.size();
  std::vector<Tensor> outputs(out.begin(), out.begin() + num_out);
  if (part.element_fetch >= 0) {
    // What the InfeedDequeue node took, for the stage's other parts (a
    // hand-over: it does not hold them back on the virtual clock).
    std::vector<Tensor> element(out.begin() + part.element_fetch, out.end());
    const int64_t bytes = Bytes(element);
    rs.host_to_device += bytes * static_cast<int64_t>(parts);
    for (int q = 1; q < parts; ++q) {
      Device(parts_[0][q].def->ipu)
          .counters()
          .host_to_device.fetch_add(bytes, std::memory_order_relaxed);
      pushes->push_back({element, /*timed=*/false});
    }
  }
  if (s + 1 < n) {
    for (size_t q = 0; q < parts_[s + 1].size(); ++q) {
      if (parts_[s + 1][q].def->ipu != d.ipu) {
        SentToIpu(rs, d.ipu, Bytes(outputs));
      }
      pushes->push_back({outputs});
    }
  }
  if (b_->training) {
    std::vector<Tensor> stash;
    for (int i : part.fed_args) stash.push_back(args[i]);
    stash.insert(stash.end(), out.begin() + num_out,
                 out.begin() + num_out + part.stash.size());
    pushes->push_back({std::move(stash)});
  }
  if (s + 1 == n && b_->outfeed_enqueue != nullptr) {
    if (!part.enqueues) {
      pushes->push_back({std::move(outputs)});
    } else if (!b_->options.accumulate_outfeed) {
      rs.delivered.fetch_add(1, std::memory_order_relaxed);
    } else if (e.item.micro_batch + 1 == b_->table.micro_batches) {
      rs.delivered = b_->table.micro_batches;  // The sum went out.
    }
  }
  return absl::OkStatus();
}

absl::Status PipelineRuntime::Backward(RunState& rs, const Entry& e,
                                       std::vector<ChannelMessage>& popped,
                                       std::vector<ItemPush>* pushes,
                                       ItemClock* clock) {
  Part& part = parts_[e.item.stage][e.part];
  const PartDef& d = *part.def;
  const int s = d.stage;
  const int n = static_cast<int>(parts_.size());
  const int m = e.item.micro_batch;
  // Pops: the stash, then each next-stage part's gradients (summed).
  std::vector<Tensor>& stash = popped[0].values;
  std::vector<Tensor> dy(d.outputs.size());
  for (size_t q = 0; s + 1 < n && q < parts_[s + 1].size(); ++q) {
    const std::vector<Tensor>& g = popped[1 + q].values;
    for (size_t j = 0; j < dy.size(); ++j) {
      if (g[j].valid()) RETURN_IF_ERROR(AddInto(&dy[j], g[j]));
    }
  }
  std::vector<Tensor> grads(d.args.size());
  if (part.backward != nullptr) {
    std::vector<Tensor> feeds = std::move(stash);
    for (int j : part.dy_outputs) {
      feeds.push_back(dy[j].valid() ? dy[j]
                                    : Tensor::Filled(d.outputs[j].dtype(),
                                                     d.outputs[j].shape(), 0));
    }
    if (!d.accumulate.empty()) {
      // The accumulation's scales are computed from it in the program.
      feeds.push_back(Tensor::Scalar<int32_t>(m));
    }
    std::vector<Tensor> out;
    const double c0 = ThreadCpuSeconds();
    RETURN_IF_ERROR(part.backward->Run(envs_[d.ipu], feeds, &out));
    clock->cpu = ThreadCpuSeconds() - c0;
    for (size_t k = 0; k < part.grad_args.size(); ++k) {
      grads[part.grad_args[k]] = std::move(out[k]);
    }
  }
  clock->cpu = VirtualCost(b_->options, e.item, clock->cpu);
  // Pushes: each previous-stage part's share of the argument gradients.
  if (s > 0) {
    const StageDef& prev = b_->stages[s - 1];
    for (size_t q = 0; q < parts_[s - 1].size(); ++q) {
      const int off = prev.output_offset[q];
      const int cnt = static_cast<int>(parts_[s - 1][q].def->outputs.size());
      std::vector<Tensor> g(grads.begin() + off, grads.begin() + off + cnt);
      if (parts_[s - 1][q].def->ipu != d.ipu) SentToIpu(rs, d.ipu, Bytes(g));
      pushes->push_back({std::move(g)});
    }
  }
  return absl::OkStatus();
}

absl::Status PipelineRuntime::RunItem(RunState& rs, int repeat,
                                      const WorkListItem& item,
                                      std::vector<ChannelMessage>& popped,
                                      std::vector<ItemPush>* pushes,
                                      WorkItemClock* clock) {
  const Entry& e = (*entries_)[item.tag];
  absl::Status s = e.item.pass == Pass::kForward
                       ? Forward(rs, e, popped, pushes, clock)
                       : Backward(rs, e, popped, pushes, clock);
  if (!s.ok()) {
    const PartDef& d = *parts_[e.item.stage][e.part].def;
    s = absl::Status(
        s.code(),
        absl::StrCat(d.name, " (IPU ", e.ipu, ") ",
                     e.item.pass == Pass::kForward ? "forward" : "backward",
                     ", micro-batch ", e.item.micro_batch, " of run ", repeat,
                     ": ", s.message()));
    MutexLock l(&rs.mu);
    // The failing micro-batch is not given back to the infeed.
    if (rs.status.ok() || absl::IsCancelled(rs.status)) {
      if (!absl::IsCancelled(s)) rs.failed_micro_batch = e.item.micro_batch;
    }
    return s;
  }
  // Stash occupancy at this IPU's step boundary (stash.h's convention),
  // as it is once this item's pushes are in: only this IPU's items push
  // and pop its parts' stashes, and this item pushes its own (forward).
  if (b_->training && e.ends_step) {
    for (const auto& stage : parts_) {
      for (const Part& p : stage) {
        if (p.def->ipu != e.ipu) continue;
        const bool pushing = e.item.pass == Pass::kForward &&
                             p.def->stage == e.item.stage &&
                             p.def->part == e.part;
        const int occ = static_cast<int>(p.stash_fifo->size()) + pushing;
        int& peak = rs.stash_occupancy[e.ipu][p.def->stage];
        peak = std::max(peak, occ);
      }
    }
  }
  return absl::OkStatus();
}

int64_t PipelineRuntime::RemoteBytes() const {
  int64_t n = 0;
  for (int k = 0; k < num_ipus_; ++k) {
    n += Device(k).counters().remote_memory.load(std::memory_order_relaxed);
  }
  return n;
}

absl::Status PipelineRuntime::WeightUpdate(RunState& rs) {
  std::fill(update_hop_cpu_.begin(), update_hop_cpu_.end(), 0.0);
  const int64_t remote0 = RemoteBytes();
  absl::Status status;
  double cpu0 = 0;
  RunOnDevice(Device(0), [&] {
    const double c0 = ThreadCpuSeconds();
    // Offloaded state comes in before the update and goes out after it;
    // the load hands the update its ZeRO-1 shards.
    std::vector<Tensor> shards, none;
    if (load_state_ != nullptr) {
      status = load_state_->Run(update_env_, {}, &shards);
    }
    if (status.ok()) {
      status = weight_update_->Run(update_env_, shards, &none);
    }
    if (status.ok() && store_state_ != nullptr) {
      status = store_state_->Run(update_env_, {}, &none);
    }
    cpu0 = ThreadCpuSeconds() - c0;
  });
  RETURN_IF_ERROR(status);
  rs.streamed += RemoteBytes() - remote0;
  // IPUs update their own variables in parallel after the last backward.
  update_hop_cpu_[0] += cpu0;
  if (b_->options.virtual_costs.has_value()) {  // Modelled: no update cost.
    std::fill(update_hop_cpu_.begin(), update_hop_cpu_.end(), 0.0);
  }
  rs.weight_update_seconds += rs.Meet(update_hop_cpu_);
  return absl::OkStatus();
}

absl::Status PipelineRuntime::RunOnce(RunState& rs, int repeat) {
  if (rs.cancel->cancelled()) return rs.cancel->reason();
  {
    MutexLock l(&rs.mu);
    rs.failed_micro_batch = -1;
  }
  rs.taken.clear();
  for (int m = 0; m < b_->table.micro_batches; ++m) {
    rs.taken.push_back(std::make_unique<TakenElements>(rs.parent_taken));
  }
  rs.delivered = 0;
  rs.updating = false;
  // A run starts when every IPU has finished the previous one (the pipeline
  // drains between runs; in training the weight update already waited).
  rs.Meet();
  std::vector<size_t> before(num_ipus_);
  for (int k = 0; k < num_ipus_; ++k) before[k] = rs.timings[k].size();
  const absl::Status run = lists_->Run(
      rs,
      [&rs, this, repeat](const WorkListItem& item,
                          std::vector<ChannelMessage>& popped,
                          std::vector<ItemPush>* pushes, WorkItemClock* clock) {
        return RunItem(rs, repeat, item, popped, pushes, clock);
      },
      absl::StrCat("replica ", replica_.index));
  RETURN_IF_ERROR(run);
  RETURN_IF_ERROR(rs.Status());
  // This repeat's items, for the report and the timelines.
  const int M = b_->table.micro_batches;
  double lo = 1e300, hi = 0;
  for (int k = 0; k < num_ipus_; ++k) {
    for (size_t i = before[k]; i < rs.timings[k].size(); ++i) {
      const WorkItemTiming& t = rs.timings[k][i];
      const Entry& e = (*entries_)[lists_->lists()[k][t.index].tag];
      const int mb = repeat * M + e.item.micro_batch;
      rs.items[k].push_back({k, e.item.stage, e.item.pass, mb, t.start, t.end});
      rs.wall_items[k].push_back(
          {k, e.item.stage, e.item.pass, mb, t.wall_start, t.wall_end});
      const int slot = e.item.stage * 2 + (e.item.pass == Pass::kBackward);
      rs.cpu_sum[slot][e.part] += t.end - t.start;
      rs.cpu_count[slot][e.part] += 1;
      lo = std::min(lo, t.start);
      hi = std::max(hi, t.end);
    }
  }
  rs.spans.push_back({std::min(lo, hi), hi});
  if (b_->training) {
    rs.updating = true;
    RETURN_IF_ERROR(WeightUpdate(rs));
  }
  return absl::OkStatus();
}

void PipelineRuntime::SettleTaken(RunState& rs, bool stopped) {
  int failed;
  {
    MutexLock l(&rs.mu);
    failed = rs.failed_micro_batch;
  }
  const int n = static_cast<int>(rs.taken.size());
  const int done = !stopped || rs.updating ? n : rs.delivered.load();
  // Consumed, or handed to the enclosing loop iteration, oldest first.
  for (int m = 0; m < done && m < n; ++m) rs.taken[m]->Commit();
  // Back to the front of the stream, newest first: the order is kept.
  for (int m = n - 1; m >= done; --m) {
    if (m == failed) {
      rs.taken[m]->Forget();
    } else {
      rs.taken[m]->GiveBack();
    }
  }
  rs.taken.clear();
}

absl::StatusOr<PipelineReport> PipelineRuntime::Run(
    SubPrograms& programs, const std::vector<Tensor>& inputs,
    std::shared_ptr<CancellationManager> cancel_run, TakenElements* taken) {
  RETURN_IF_ERROR(BindPrograms(programs));
  RunState rs(std::move(cancel_run), num_ipus_);
  rs.parent_taken = taken;
  rs.items.assign(num_ipus_, {});
  rs.wall_items.assign(num_ipus_, {});
  rs.cpu_sum.assign(parts_.size() * 2, std::vector<double>(8, 0));
  rs.cpu_count.assign(parts_.size() * 2, std::vector<int>(8, 0));
  for (size_t s = 0; s < parts_.size(); ++s) {
    rs.cpu_sum[2 * s].resize(parts_[s].size());
    rs.cpu_sum[2 * s + 1].resize(parts_[s].size());
    rs.cpu_count[2 * s].resize(parts_[s].size());
    rs.cpu_count[2 * s + 1].resize(parts_[s].size());
  }
  rs.stash_occupancy.assign(num_ipus_, std::vector<int>(parts_.size(), 0));
  lists_->ResetChannels();
  if (inputs.size() != b_->options.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline '", b_->options.name, "': ", inputs.size(),
        " argument(s) given for its ", b_->options.inputs.size(), " inputs"));
  }
  rs.input_values = inputs;
  // The feed kernels' waits (infeed, outfeed) and the channels end with the
  // run (the device program's: the system's cancellation cancels it).
  for (RunEnv& env : envs_) env.cancellation = rs.cancel.get();
  update_env_.cancellation = rs.cancel.get();
  std::shared_ptr<CancellationManager> cancel = rs.cancel;
  const std::vector<int> fifo_tokens = lists_->CancelChannelsWith(cancel);
  absl::Status status;
  for (int r = 0; r < b_->options.repeat_count && status.ok(); ++r) {
    status = RunOnce(rs, r);
    SettleTaken(rs, /*stopped=*/!status.ok());
  }
  for (RunEnv& env : envs_) env.cancellation = system_->cancellation();
  update_env_.cancellation = system_->cancellation();
  for (int t : fifo_tokens) cancel->Unregister(t);
  RETURN_IF_ERROR(status);
  return MakeReport(rs);
}

}  // namespace ipuflow::pipelining
