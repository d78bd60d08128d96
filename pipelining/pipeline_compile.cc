// PipelineRuntime, lowering: the layout's work lists on the replica's
// IPUs, the IPUs' run environments, the offloaded optimizer state and the
// ZeRO-1 shards of the weight update. Running is in pipeline_runtime.cc;
// the programs are the frame node's sub-programs (pipeline_programs.h).
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_device.h"
#include "ops/state/handle.h"
#include "ops/state/variable.h"
#include "optimizers/cross_replica.h"
#include "pipelining/pipeline_runtime.h"

namespace ipuflow::pipelining {

using internal::Key;

namespace {

// The nodes the weight update runs (its targets and what they read), in
// node id order.
std::vector<const Node*> UpdateNodes(const BuiltPipeline& b) {
  std::set<const Node*> reached;
  std::vector<const Node*> stack(b.weight_update.begin(),
                                 b.weight_update.end());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!reached.insert(n).second) continue;
    for (const Output& in : n->inputs()) stack.push_back(in.node);
    for (const Node* c : n->control_inputs()) stack.push_back(c);
  }
  std::vector<const Node*> nodes(reached.begin(), reached.end());
  std::sort(nodes.begin(), nodes.end(),
            [](const Node* x, const Node* y) { return x->id() < y->id(); });
  return nodes;
}

// ZeRO-1: which weights' updates run sharded. A weight's state is the
// variables its shard's users (the update ops) read besides the weight;
// the update is sharded when all of the weight's size is sharded (a
// tensor kept whole would go stale outside the chunk; Adam's step is
// another size), as RemoteState::Plan decides for device loops. `shards`
// gets the value fed to each shard placeholder, `chunked` the state loaded
// as this replica's chunk.
absl::Status PlanWeightShards(const BuiltPipeline& b,
                              const PipelineRuntime::Replica& replica,
                              const std::map<std::string, TensorShape>& sharded,
                              std::vector<Tensor>* shards,
                              std::set<std::string>* chunked) {
  shards->clear();
  chunked->clear();
  const std::vector<const Node*> update = UpdateNodes(b);
  for (const BuiltPipeline::WeightShard& w : b.weight_shards) {
    const int64_t n = w.variable->attr<TensorShape>("shape").num_elements();
    std::set<std::string> state;
    bool all = true;
    for (const Node* user : update) {
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

absl::StatusOr<OffloadPlan> PlanOffload(const BuiltPipeline& b,
                                        const IPUSystem& system,
                                        const PipelineRuntime::Replica& first,
                                        std::vector<IpuMemory>* ipus) {
  // Sharded over every process's replicas.
  const int replicas = first.global_count();
  // Sharding assumes every replica holds the same optimizer state, which
  // only replica-identical updates guarantee.
  if (b.training && replicas > 1 &&
      b.options.replicated_optimizer_state_sharding &&
      dynamic_cast<const optimizers::CrossReplicaOptimizer*>(
          b.optimizer.get()) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline '", b.options.name,
        "': replicated_optimizer_state_sharding over ", replicas,
        " replicas needs replica-identical optimizer state: wrap the "
        "optimizer '",
        b.optimizer->name(), "' in optimizers::CrossReplicaOptimizer"));
  }
  OffloadPlan plan;
  plan.by_ipu.assign(ipus->size(), {});
  if (!b.training) return plan;
  const bool offload = b.options.offload_weight_update_variables;
  const bool rts =
      offload && replicas > 1 && b.options.replicated_optimizer_state_sharding;
  const int64_t min_remote = system.config().minimum_remote_tensor_size();
  std::set<const Node*> weights,
      accumulators(b.accumulators.begin(), b.accumulators.end());
  int num_ipus = 0;
  for (const StageDef& s : b.stages) {
    for (const PartDef& p : s.parts) {
      weights.insert(p.variables.begin(), p.variables.end());
      num_ipus = std::max(num_ipus, p.ipu + 1);
    }
  }
  for (int k = 0; k < num_ipus && k < static_cast<int>(ipus->size()); ++k) {
    (*ipus)[k].offload = offload;
  }
  for (const Node* n : UpdateNodes(b)) {
    if (!ops::IsVariable(n) || weights.count(n) || accumulators.count(n)) {
      continue;
    }
    const size_t k = std::max(0, n->ipu());
    if (k >= ipus->size()) continue;
    IpuMemory& m = (*ipus)[k];
    auto& vars = m.variables;
    auto it = std::find_if(vars.begin(), vars.end(),
                           [n](const auto& v) { return v.first == n; });
    if (it == vars.end()) continue;  // Not in the plan: not run.
    // The rule device loops' offloading shares (core/memory_plan.h).
    const StatePlacement p = PlaceOptimizerState(
        n->attr<TensorShape>("shape").num_elements(), n->attr<DType>("dtype"),
        offload, rts, replicas, min_remote);
    if (!p.remote) continue;  // Stays counted as optimizer state.
    m.optimizer_state -= p.bytes;
    CountOptimizerState(p, replicas, &m);
    // Not always-live on the IPU: out of the report's "largest" list (it
    // stayed there at full size, issue 22).
    vars.erase(it);
    ASSIGN_OR_RETURN(ops::VariableInfo info,
                     ops::GetVariableInfo(Output(const_cast<Node*>(n))));
    plan.by_ipu[k].push_back(info.name);
    if (p.sharded) plan.sharded[info.name] = info.shape;
  }
  return plan;
}

PipelineRuntime::~PipelineRuntime() = default;

absl::StatusOr<std::unique_ptr<PipelineRuntime>> PipelineRuntime::Create(
    const BuiltPipeline* built, std::shared_ptr<const PipelineLayout> layout,
    IPUSystem* system, Replica replica, OffloadPlan offload,
    std::vector<IpuMemory> memory) {
  std::unique_ptr<PipelineRuntime> rt(new PipelineRuntime());
  rt->b_ = built;
  rt->layout_ = std::move(layout);
  rt->system_ = system;
  rt->replica_ = replica;
  rt->generation_ = system->generation();
  rt->offloaded_ = std::move(offload.by_ipu);
  rt->sharded_ = std::move(offload.sharded);
  rt->memory_ = std::move(memory);
  RETURN_IF_ERROR(rt->Init());
  return rt;
}

absl::Status PipelineRuntime::Init() {
  num_ipus_ = layout_->num_ipus;
  if (system_->num_ipus() < (replica_.index + 1) * num_ipus_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pipeline '", b_->options.name, "' maps stages to ", num_ipus_,
        " IPUs but the system has ", system_->num_ipus(),
        ": configure auto_select_ipus >= ", num_ipus_));
  }
  offloaded_.resize(std::max<size_t>(offloaded_.size(), num_ipus_));
  memory_.resize(std::max<size_t>(memory_.size(), num_ipus_));
  recompute_ = layout_->recompute;
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
  parts_.clear();
  for (const auto& stage : layout_->parts) {
    parts_.emplace_back();
    for (const PartProgram& p : stage) {
      Part part;
      static_cast<PartProgram&>(part) = p;
      parts_.back().push_back(std::move(part));
    }
  }
  entries_ = &layout_->items;
  std::vector<IPUDevice*> devices;
  for (int k = 0; k < num_ipus_; ++k) devices.push_back(&Device(k));
  lists_ = std::make_unique<WorkLists>(
      std::move(devices), layout_->lists,
      /*lockstep=*/b_->table.kind == PipelineSchedule::kSequential);
  lists_->SizeChannels();
  for (auto& stage : parts_) {
    for (Part& p : stage) {
      if (b_->training) {
        p.stash_fifo = Fifo(Key("stash", p.def->stage, p.def->part));
      }
    }
  }
  if (b_->training) {
    RETURN_IF_ERROR(
        PlanWeightShards(*b_, replica_, sharded_, &weight_shards_, &chunked_));
  }
  return absl::OkStatus();
}

absl::Status PipelineRuntime::BindPrograms(SubPrograms& programs) {
  // Compiled for this layout: the spec each program was compiled from.
  auto find = [&](const std::string& role,
                  const ProgramSpec& spec) -> absl::StatusOr<Program*> {
    Program* p = programs.Find(role);
    if (p == nullptr || p->spec().fetches.size() != spec.fetches.size() ||
        p->spec().feeds.size() != spec.feeds.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pipeline '", b_->options.name, "': its ", role,
          " program was not compiled for this lowering (compile the frame "
          "with the system that runs it)"));
    }
    return p;
  };
  for (auto& stage : parts_) {
    for (Part& p : stage) {
      ASSIGN_OR_RETURN(p.forward, find(p.forward_role, p.forward_spec));
      p.backward = nullptr;
      if (!p.backward_role.empty()) {
        ASSIGN_OR_RETURN(p.backward, find(p.backward_role, p.backward_spec));
      }
    }
  }
  weight_update_ = nullptr;
  if (layout_->has_weight_update) {
    ASSIGN_OR_RETURN(weight_update_,
                     find(kWeightUpdateRole, layout_->weight_update));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::pipelining
