// PipelineRuntime, lowering: one Program per stage part and pass, the
// weight update, the IPUs' work lists and their channels, the memory check.
// Running is in pipeline_runtime.cc.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/ipu/ipu_device.h"
#include "ops/state/handle.h"
#include "ops/state/variable.h"
#include "optimizers/cross_replica.h"
#include "pipelining/pipeline_runtime.h"

namespace ipuflow::pipelining {
namespace internal {

int64_t Bytes(const Output& o) {
  return o.shape().num_elements() * static_cast<int64_t>(DTypeSize(o.dtype()));
}

std::string Key(const char* kind, int a, int b, int c) {
  return absl::StrCat(kind, "/", a, "/", b, "/", c);
}

}  // namespace internal

using internal::Bytes;
using internal::Key;

namespace {

// ZeRO-1: which weights' updates run sharded. A weight's state is the
// variables its shard's users (the update ops) read besides the weight;
// the update is sharded when all of the weight's size is sharded (a
// tensor kept whole would go stale outside the chunk; Adam's step is
// another size), as RemoteState::Plan decides for device loops. `shards`
// gets the value fed to each shard placeholder, `chunked` the state loaded
// as this replica's chunk.
absl::Status PlanWeightShards(const Program& update, const BuiltPipeline& b,
                              const PipelineRuntime::Replica& replica,
                              const std::map<std::string, TensorShape>& sharded,
                              std::vector<Tensor>* shards,
                              std::set<std::string>* chunked) {
  shards->clear();
  chunked->clear();
  for (const BuiltPipeline::WeightShard& w : b.weight_shards) {
    const int64_t n = w.variable->attr<TensorShape>("shape").num_elements();
    std::set<std::string> state;
    bool all = true;
    for (const Node* user : update.nodes_in_order()) {
      const auto& in = user->inputs();
      if (std::find(in.begin(), in.end(), w.shard) == in.end()) continue;
      for (const Output& x : in) {
        if (x.node == w.variable || !ops::IsVariable(x.node) ||
            x.node->attr<TensorShape>("shape").num_elements() != n) {
          continue;
        }
        ASSIGN_OR_RETURN(ops::VariableInfo info, ops::GetVariableInfo(x));
        state.insert(info.name);
        all &= sharded.count(info.name) > 0;
      }
    }
    const bool on = replica.count > 1 && !state.empty() && all;
    Tensor t(DType::kInt32, TensorShape({2}));
    t.data<int32_t>()[0] = on ? replica.index : 0;
    t.data<int32_t>()[1] = on ? replica.count : 1;
    shards->push_back(std::move(t));
    if (on) chunked->insert(state.begin(), state.end());
  }
  return absl::OkStatus();
}

}  // namespace

PipelineRuntime::~PipelineRuntime() = default;

absl::StatusOr<std::unique_ptr<PipelineRuntime>> PipelineRuntime::Create(
    const BuiltPipeline* built, IPUSystem* system, Replica replica) {
  std::unique_ptr<PipelineRuntime> rt(new PipelineRuntime());
  rt->b_ = built;
  rt->system_ = system;
  rt->replica_ = replica;
  rt->generation_ = system->generation();
  RETURN_IF_ERROR(rt->Compile());
  return rt;
}

absl::Status PipelineRuntime::CompilePart(Part& part) {
  const PartDef& d = *part.def;
  const bool training = b_->training;
  const bool last = d.stage + 1 == static_cast<int>(b_->stages.size());
  ProgramSpec fwd;
  for (size_t i = 0; i < d.args.size(); ++i) {
    const bool dequeued =
        d.dequeued_from >= 0 && static_cast<int>(i) >= d.dequeued_from;
    if (!d.arg_used[i] || dequeued) continue;
    part.fed_args.push_back(static_cast<int>(i));
    fwd.feeds.push_back(d.args[i]);
    fwd.feed_shapes.push_back(d.args[i].shape());
  }
  fwd.fetches = d.outputs;
  for (const Output& o : d.outputs) part.output_bytes += Bytes(o);
  for (const Output& o : d.outputs) {
    if (IsDifferentiable(o.dtype())) part.grad_bytes += Bytes(o);
  }
  if (training) {
    part.stash = recompute_ ? d.stash_recompute : d.stash;
    fwd.fetches.insert(fwd.fetches.end(), part.stash.begin(), part.stash.end());
    for (int i : part.fed_args) part.stash_bytes += Bytes(d.args[i]);
    for (const Output& o : part.stash) part.stash_bytes += Bytes(o);
    if (last) fwd.fetches.push_back(b_->loss);
  }
  if (d.dequeued_from >= 0) {
    // The element its InfeedDequeue node took: for the stage's other parts
    // and, should the run stop before its results are out, the infeed.
    part.element_fetch = static_cast<int>(fwd.fetches.size());
    fwd.fetches.insert(fwd.fetches.end(), d.args.begin() + d.dequeued_from,
                       d.args.end());
  }
  part.enqueues =
      b_->outfeed_enqueue != nullptr && last &&
      d.part + 1 == static_cast<int>(b_->stages.back().parts.size());
  if (part.enqueues) {
    for (const Output& o : d.outfeed_feeds) {
      fwd.feeds.push_back(o);
      fwd.feed_shapes.push_back(o.shape());
    }
    fwd.targets.push_back(b_->outfeed_enqueue);
  }
  auto named = [&](const char* pass, absl::Status s) {
    return absl::Status(
        s.code(), absl::StrCat("compiling ", d.name, " ", pass, " (IPU ", d.ipu,
                               "): ", s.message()));
  };
  auto f = Program::Compile(*b_->graph, fwd);
  if (!f.ok()) return named("forward", f.status());
  part.forward = std::move(*f);
  if (!training || !d.has_backward) return absl::OkStatus();
  ProgramSpec bwd;
  for (int i : part.fed_args) {
    bwd.feeds.push_back(d.args[i]);
    bwd.feed_shapes.push_back(d.args[i].shape());
  }
  for (const Output& o : part.stash) {
    bwd.feeds.push_back(o);
    bwd.feed_shapes.push_back(o.shape());
  }
  for (size_t j = 0; j < d.grad_outputs.size(); ++j) {
    if (!d.grad_outputs[j].valid()) continue;
    part.dy_outputs.push_back(static_cast<int>(j));
    bwd.feeds.push_back(d.grad_outputs[j]);
    bwd.feed_shapes.push_back(d.grad_outputs[j].shape());
  }
  if (!d.accumulate.empty()) {
    bwd.feeds.push_back(d.micro_batch);
    bwd.feed_shapes.push_back(TensorShape());
  }
  for (size_t i = 0; i < d.grad_args.size(); ++i) {
    if (!d.grad_args[i].valid()) continue;
    part.grad_args.push_back(static_cast<int>(i));
    bwd.fetches.push_back(d.grad_args[i]);
  }
  bwd.targets = d.accumulate;
  auto bp = Program::Compile(*b_->graph, bwd);
  if (!bp.ok()) return named("backward", bp.status());
  part.backward = std::move(*bp);
  return absl::OkStatus();
}

absl::Status PipelineRuntime::Compile() {
  for (const StageDef& s : b_->stages) {
    for (const PartDef& p : s.parts) num_ipus_ = std::max(num_ipus_, p.ipu + 1);
  }
  if (system_->num_ipus() < (replica_.index + 1) * num_ipus_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pipeline '", b_->options.name, "' maps stages to ", num_ipus_,
        " IPUs but the system has ", system_->num_ipus(),
        ": configure auto_select_ipus >= ", num_ipus_));
  }
  // Sharding assumes every replica holds the same optimizer state, which
  // only replica-identical updates guarantee.
  if (b_->training && replica_.global_count() > 1 &&
      b_->options.replicated_optimizer_state_sharding &&
      dynamic_cast<const optimizers::CrossReplicaOptimizer*>(
          b_->optimizer.get()) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline '", b_->options.name,
        "': replicated_optimizer_state_sharding over ", replica_.global_count(),
        " replicas needs replica-identical optimizer state: wrap the "
        "optimizer '",
        b_->optimizer->name(), "' in optimizers::CrossReplicaOptimizer"));
  }
  recompute_ = b_->training && system_->config().allow_recompute();
  envs_.resize(num_ipus_);
  for (int k = 0; k < num_ipus_; ++k) {
    IPUDevice& device = Device(k);
    RunEnv& env = envs_[k];
    env.intra_op = device.intra_op();
    env.resources = device.resources();
    env.ipu = device.id();
    env.replica = replica_.index;
    env.num_replicas = replica_.count;
    env.collectives = replica_.group;
    env.device = &device;
    env.memory_budget = device.memory_budget_bytes();
    env.floating_point = &system_->floating_point();
    env.cancellation = system_->cancellation();
  }
  // Only the weight update spans IPUs (a stage's nodes are all on its IPU:
  // its env needs no hook): each IPU updates its own variables, at the same
  // time as the others where the update's edges allow. Its per-IPU CPU
  // time feeds the virtual clocks.
  update_env_ = envs_[0];
  update_env_.post_to_shard = [this](int shard,
                                     std::function<void(RunEnv&)> work,
                                     std::function<void()> done) {
    RunEnv& target = envs_[shard];
    if (IPUDevice::Current() == target.device) {
      work(target);
      done();
      return;
    }
    target.device->Submit(
        [this, shard, &target, work = std::move(work), done = std::move(done)] {
          const double c0 = ThreadCpuSeconds();
          work(target);
          update_hop_cpu_[shard] += ThreadCpuSeconds() - c0;
          done();
        });
  };
  update_hop_cpu_.assign(num_ipus_, 0);
  parts_.resize(b_->stages.size());
  for (size_t s = 0; s < b_->stages.size(); ++s) {
    for (const PartDef& d : b_->stages[s].parts) {
      auto part = std::make_unique<Part>();
      part->def = &d;
      RETURN_IF_ERROR(CompilePart(*part));
      parts_[s].push_back(std::move(part));
    }
  }
  if (b_->training) {
    ProgramSpec wu;
    wu.targets = b_->weight_update;
    for (const BuiltPipeline::WeightShard& w : b_->weight_shards) {
      wu.feeds.push_back(w.shard);
      wu.feed_shapes.push_back(TensorShape({2}));
    }
    auto p = Program::Compile(*b_->graph, wu);
    if (!p.ok()) {
      return absl::Status(
          p.status().code(),
          absl::StrCat("compiling the weight update: ", p.status().message()));
    }
    weight_update_ = std::move(*p);
  }
  LowerToWorkLists();
  RETURN_IF_ERROR(AccountMemory());
  if (weight_update_) {
    RETURN_IF_ERROR(PlanWeightShards(*weight_update_, *b_, replica_, sharded_,
                                     &weight_shards_, &chunked_));
  }
  // The queues' host sides start here, on the host, rather than on a device
  // thread (as a device program prepares its loops' queues); an error
  // (another replica count) is reported again by the kernels.
  for (const std::string& id : {b_->infeed_id, b_->outfeed_id}) {
    if (id.empty()) continue;
    if (std::shared_ptr<HostResource> q = b_->graph->FindHostResource(id)) {
      q->Prepare(replica_.count, b_->training).IgnoreError();
    }
  }
  return absl::OkStatus();
}

// One work-list item per part of each table item, on its IPU's list in
// table order, with the channels it pops and pushes; the work lists replay
// the table in that order to size every channel to its peak
// (core/ipu/work_lists.h says why that cannot deadlock).
void PipelineRuntime::LowerToWorkLists() {
  const ScheduleTable& table = b_->table;
  const int n = static_cast<int>(parts_.size());
  std::vector<std::vector<WorkListItem>> lists(num_ipus_);
  entries_.clear();
  for (int t = 0; t < table.num_steps(); ++t) {
    for (const WorkItem& item : table.steps[t]) {
      const int s = item.stage;
      for (size_t p = 0; p < parts_[s].size(); ++p) {
        const Part& part = *parts_[s][p];
        Entry e{item, part.def->part, t, part.def->ipu};
        WorkListItem w;
        w.ipu = e.ipu;
        w.step = t;
        w.tag = static_cast<int>(entries_.size());
        w.order = w.tag;
        if (item.pass == Pass::kForward) {
          // Stage 0's first part reads the infeed and hands the element on.
          if (s == 0 && !b_->infeed_id.empty()) {
            if (p == 0) {
              for (size_t q = 1; q < parts_[0].size(); ++q) {
                w.pushes.push_back(Key("infeed", 0, q));
              }
            } else {
              w.pops.push_back(Key("infeed", 0, p));
            }
          }
          for (size_t q = 0; s > 0 && q < parts_[s - 1].size(); ++q) {
            w.pops.push_back(Key("act", s - 1, q, p));
          }
          for (size_t q = 0; s + 1 < n && q < parts_[s + 1].size(); ++q) {
            w.pushes.push_back(Key("act", s, p, q));
          }
          if (b_->training) w.pushes.push_back(Key("stash", s, p));
          // The last stage's other parts send their outputs to the part
          // that enqueues.
          const int parts = static_cast<int>(parts_[s].size());
          if (s + 1 == n && b_->outfeed_enqueue != nullptr && parts > 1) {
            if (part.enqueues) {
              for (int q = 0; q + 1 < parts; ++q) {
                w.pops.push_back(Key("out", s, q));
              }
            } else {
              w.pushes.push_back(Key("out", s, static_cast<int>(p)));
            }
          }
        } else {
          w.pops.push_back(Key("stash", s, p));
          for (size_t q = 0; s + 1 < n && q < parts_[s + 1].size(); ++q) {
            w.pops.push_back(Key("grad", s, q, p));
          }
          for (size_t q = 0; s > 0 && q < parts_[s - 1].size(); ++q) {
            w.pushes.push_back(Key("grad", s - 1, p, q));
          }
        }
        entries_.push_back(e);
        lists[e.ipu].push_back(std::move(w));
      }
    }
  }
  for (auto& list : lists) {
    for (size_t i = 0; i < list.size(); ++i) {
      entries_[list[i].tag].ends_step =
          i + 1 == list.size() || list[i + 1].step != list[i].step;
    }
  }
  std::vector<IPUDevice*> devices;
  for (int k = 0; k < num_ipus_; ++k) devices.push_back(&Device(k));
  lists_ = std::make_unique<WorkLists>(
      std::move(devices), std::move(lists),
      /*lockstep=*/table.kind == PipelineSchedule::kSequential);
  lists_->SizeChannels();
  for (auto& stage : parts_) {
    for (auto& p : stage) {
      if (b_->training) {
        p->stash_fifo = Fifo(Key("stash", p->def->stage, p->def->part));
      }
    }
  }
}

// Variables by kind and program arenas, per IPU; records the optimizer
// state to offload.
absl::Status PipelineRuntime::AccountPrograms(std::vector<IpuMemory>* mem) {
  const bool offload =
      b_->training && b_->options.offload_weight_update_variables;
  // Sharded over every process's replicas.
  const int replicas = replica_.global_count();
  const bool rts = offload && replicas > 1 &&
                   b_->options.replicated_optimizer_state_sharding;
  const int64_t min_remote = system_->config().minimum_remote_tensor_size();
  std::set<Node*> accumulators(b_->accumulators.begin(),
                               b_->accumulators.end());
  std::set<Node*> weights;
  std::vector<std::pair<const Program*, std::string>> programs;
  for (const auto& stage : parts_) {
    for (const auto& p : stage) {
      weights.insert(p->def->variables.begin(), p->def->variables.end());
      programs.push_back({p->forward.get(), p->def->name + " forward"});
      if (p->backward) {
        programs.push_back({p->backward.get(), p->def->name + " backward"});
      }
    }
  }
  if (weight_update_) programs.push_back({weight_update_.get(), ""});
  std::set<const Node*> seen;
  for (const auto& [prog, name] : programs) {
    for (const Node* n : prog->nodes_in_order()) {
      const int k = std::max(0, n->ipu());
      if (!ops::IsVariable(n) || k >= num_ipus_ || !seen.insert(n).second) {
        continue;
      }
      Node* var = const_cast<Node*>(n);  // For the set lookups.
      const int64_t bytes =
          n->attr<TensorShape>("shape").num_elements() *
          static_cast<int64_t>(DTypeSize(n->attr<DType>("dtype")));
      (*mem)[k].variables.push_back({n, bytes});
      if (accumulators.count(var)) {
        (*mem)[k].accumulators += bytes;
      } else if (weights.count(var)) {
        (*mem)[k].weights += bytes;
      } else {
        // The rule device loops' offloading shares (core/memory_plan.h).
        const StatePlacement p = PlaceOptimizerState(
            n->attr<TensorShape>("shape").num_elements(),
            n->attr<DType>("dtype"), offload, rts, replicas, min_remote);
        if (p.remote) {
          // Not always-live on the IPU: out of the report's "largest" list
          // (it stayed there at full size, issue 22).
          (*mem)[k].variables.pop_back();
          ASSIGN_OR_RETURN(ops::VariableInfo info,
                           ops::GetVariableInfo(Output(var)));
          offloaded_[k].push_back(info.name);
          if (p.sharded) sharded_[info.name] = info.shape;
        }
        CountOptimizerState(p, replicas, &(*mem)[k]);
      }
    }
    for (int k = 0; k < std::min(num_ipus_, prog->num_shards()); ++k) {
      const MemoryPlan& m = prog->shard_memory()[k];
      IpuMemory& ipu = (*mem)[k];
      ipu.constants = std::max(ipu.constants, m.constant_bytes);
      if (name.empty()) {
        ipu.update_arena = m.peak_bytes;
      } else if (m.peak_bytes > ipu.arena || ipu.arena_owner.empty()) {
        ipu.arena = m.peak_bytes;
        ipu.arena_owner = name;
        ipu.num_planned_values = m.num_planned_values;
        ipu.unplanned_bytes = m.unplanned_bytes;
      }
    }
  }
  return absl::OkStatus();
}

// The stash and the incoming FIFOs (they live on the receiver) at capacity.
void PipelineRuntime::AccountBuffers(std::vector<IpuMemory>* mem) const {
  const int n = static_cast<int>(parts_.size());
  for (const auto& stage : parts_) {
    for (const auto& p : stage) {
      IpuMemory& ipu = (*mem)[p->def->ipu];
      const int s = p->def->stage, q = p->def->part;
      if (b_->training) {
        ipu.stash +=
            static_cast<int64_t>(Fifo(Key("stash", s, q))->capacity()) *
            p->stash_bytes;
      }
      for (size_t i = 0; s > 0 && i < parts_[s - 1].size(); ++i) {
        const Part& prev = *parts_[s - 1][i];
        ipu.fifos +=
            static_cast<int64_t>(
                Fifo(Key("act", s - 1, prev.def->part, q))->capacity()) *
            prev.output_bytes;
      }
      for (size_t i = 0; b_->training && s + 1 < n && i < parts_[s + 1].size();
           ++i) {
        ipu.fifos += static_cast<int64_t>(
                         Fifo(Key("grad", s, parts_[s + 1][i]->def->part, q))
                             ->capacity()) *
                     p->grad_bytes;
      }
      // The other last-stage parts' outputs, for the OutfeedEnqueue node.
      for (int i = 0; p->enqueues && i + 1 < static_cast<int>(stage.size());
           ++i) {
        ipu.fifos += static_cast<int64_t>(Fifo(Key("out", s, i))->capacity()) *
                     stage[i]->output_bytes;
      }
    }
  }
}

// What each IPU holds, by category (core/memory_plan.h's IpuMemory); the
// device program that lowered the frame checks it against the budgets and
// reports it with its own shards, in one format.
absl::Status PipelineRuntime::AccountMemory() {
  const bool offload =
      b_->training && b_->options.offload_weight_update_variables;
  always_live_.assign(num_ipus_, 0);
  peak_arena_.assign(num_ipus_, 0);
  offloaded_bytes_.assign(num_ipus_, 0);
  offloaded_.assign(num_ipus_, {});
  sharded_.clear();
  memory_.assign(num_ipus_, IpuMemory());
  RETURN_IF_ERROR(AccountPrograms(&memory_));
  AccountBuffers(&memory_);
  for (int k = 0; k < num_ipus_; ++k) {
    IpuMemory& m = memory_[k];
    m.offload = offload;
    m.sharded_over = sharded_.empty() ? 0 : replica_.global_count();
    always_live_[k] = m.always_live();
    peak_arena_[k] = m.arena;
    offloaded_bytes_[k] = m.remote_shards;
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::pipelining
