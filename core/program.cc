// Program::Compile: the phases in core/compiler/, then the node table the
// run (program_run.cc) walks.
#include "core/program.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/compiler/always_live.h"
#include "core/compiler/dependencies.h"
#include "core/compiler/fusion.h"
#include "core/compiler/liveness.h"
#include "core/compiler/memory_report.h"
#include "core/compiler/node_order.h"
#include "core/compiler/offsets.h"
#include "core/compiler/ordering.h"
#include "core/compiler/prune.h"
#include "core/compiler/replica_identical.h"
#include "core/compiler/shapes.h"
#include "core/compiler/spec_check.h"
#include "core/compiler/sub_programs.h"
#include "core/compiler/values.h"
#include "core/floating_point_traps.h"
#include "core/hash_mix.h"
#include "core/mutex.h"
#include "core/op_registry.h"
#include "core/program_internal.h"

namespace ipuflow {

absl::StatusOr<ProgramSpec> MakeProgramSpec(const FeedList& feeds,
                                            const std::vector<Output>& fetches,
                                            const std::vector<Node*>& targets,
                                            std::string* signature) {
  ProgramSpec spec;
  std::string key;
  for (const auto& [out, value] : feeds) {
    if (!out.valid())
      return absl::InvalidArgumentError("a feed key is an invalid Output");
    if (value.dtype() != out.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value fed to '", out.name(), "' is ", DTypeName(value.dtype()),
          " but ", out.node->DebugName(), " is ", DTypeName(out.dtype())));
    }
    absl::StrAppend(&key, out.name(), value.shape().DebugString(), ";");
    spec.feeds.push_back(out);
    spec.feed_shapes.push_back(value.shape());
  }
  absl::StrAppend(&key, "|");
  for (const Output& f : fetches) {
    if (!f.valid()) {
      return absl::InvalidArgumentError(
          "a fetch is an invalid Output (built from a failed op?)");
    }
    absl::StrAppend(&key, f.name(), ";");
  }
  absl::StrAppend(&key, "|");
  for (Node* t : targets) {
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          "a target is null (built from a failed op?)");
    }
    absl::StrAppend(&key, t->name(), ";");
  }
  spec.fetches = fetches;
  spec.targets = targets;
  if (signature != nullptr) *signature = std::move(key);
  return spec;
}

Program::~Program() = default;

SubPrograms::~SubPrograms() = default;

Program* SubPrograms::Find(const std::string& role) const {
  for (const auto& [r, p] : programs_) {
    if (r == role) return p.get();
  }
  return nullptr;
}

void SubPrograms::Add(std::string role, std::unique_ptr<Program> program) {
  programs_.emplace_back(std::move(role), std::move(program));
}

const Program* Program::sub_program(const Node* node,
                                    const std::string& role) const {
  for (const auto& en : nodes_) {
    if (en->node != node) continue;
    const auto* subs = dynamic_cast<const SubPrograms*>(en->state.get());
    return subs == nullptr ? nullptr : subs->Find(role);
  }
  return nullptr;
}

void Program::CollectPrograms(
    const std::string& prefix,
    std::vector<std::pair<std::string, Program*>>* out) {
  out->push_back({prefix, this});
  for (const auto& en : nodes_) {
    const auto* subs = dynamic_cast<const SubPrograms*>(en->state.get());
    if (subs == nullptr) continue;
    for (const auto& [role, sub] : subs->programs()) {
      sub->CollectPrograms(absl::StrCat(prefix, prefix.empty() ? "" : "/",
                                        en->node->name(), ":", role),
                           out);
    }
  }
}

namespace {

// The NodeRunCount slot of node `name` in `p`'s nodes (or a fused chain's),
// or null when `p` has no such node.
std::unique_ptr<KernelState>* CounterSlot(
    std::vector<std::pair<const Node*, std::unique_ptr<KernelState>*>>& slots,
    const std::string& name) {
  for (auto& [node, slot] : slots) {
    if (node->name() == name) return slot;
  }
  return nullptr;
}

}  // namespace

std::vector<std::pair<const Node*, std::unique_ptr<KernelState>*>>
Program::StateSlots() {
  std::vector<std::pair<const Node*, std::unique_ptr<KernelState>*>> out;
  for (auto& en : nodes_) {
    if (en->fused != nullptr) {
      for (size_t i = 0; i < en->fused->nodes.size(); ++i) {
        out.push_back({en->fused->nodes[i], &en->fused->states[i]});
      }
    } else {
      out.push_back({en->node, &en->state});
    }
  }
  return out;
}

std::vector<std::pair<std::string, uint64_t>> Program::RunCounters(
    uint64_t seed_epoch) const {
  std::vector<std::pair<std::string, Program*>> all;
  const_cast<Program*>(this)->CollectPrograms("", &all);
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [key, p] : all) {
    out.push_back({key, p->seed_epoch_ == seed_epoch ? p->runs_ : 0});
    for (const auto& [node, slot] : p->StateSlots()) {
      if (const auto* c = dynamic_cast<const NodeRunCount*>(slot->get())) {
        out.push_back({absl::StrCat(key, "#", node->name()), c->runs});
      }
    }
  }
  return out;
}

absl::Status Program::RestoreRunCounters(
    const std::vector<std::pair<std::string, uint64_t>>& counters,
    uint64_t seed_epoch, bool check_only) {
  std::vector<std::pair<std::string, Program*>> all;
  CollectPrograms("", &all);
  std::map<std::string, Program*> by_key(all.begin(), all.end());
  std::map<std::string,
           std::vector<std::pair<const Node*, std::unique_ptr<KernelState>*>>>
      slots;
  for (const auto& [key, p] : all) slots[key] = p->StateSlots();
  // Checked first: nothing changes unless every counter has its place.
  std::map<std::string, uint64_t> programs;
  std::vector<std::pair<std::unique_ptr<KernelState>*, uint64_t>> nodes;
  for (const auto& [key, runs] : counters) {
    const size_t hash = key.find('#');
    const std::string program = key.substr(0, hash);
    if (by_key.count(program) == 0) {
      return absl::NotFoundError(absl::StrCat(
          "run counter '", key, "': no program '", program, "' here"));
    }
    if (hash == std::string::npos) {
      programs[key] = runs;
      continue;
    }
    std::unique_ptr<KernelState>* slot =
        CounterSlot(slots[program], key.substr(hash + 1));
    if (slot == nullptr || (*slot != nullptr && dynamic_cast<NodeRunCount*>(
                                                    slot->get()) == nullptr)) {
      return absl::NotFoundError(
          absl::StrCat("run counter '", key,
                       "': no such random node in program '", program, "'"));
    }
    nodes.push_back({slot, runs});
  }
  for (const auto& [key, p] : by_key) {
    if (programs.count(key) == 0) {
      return absl::NotFoundError(
          absl::StrCat("run counter of program '", key, "' is not given"));
    }
  }
  if (check_only) return absl::OkStatus();
  for (const auto& [key, p] : by_key) {
    p->runs_ = programs[key];
    p->seed_epoch_ = seed_epoch;
    // Nodes that drew in this program but not in the saved one start over.
    for (auto& [node, slot] : slots[key]) {
      if (auto* c = dynamic_cast<NodeRunCount*>(slot->get())) c->runs = 0;
    }
  }
  for (auto& [slot, runs] : nodes) {
    if (*slot == nullptr) *slot = std::make_unique<NodeRunCount>();
    static_cast<NodeRunCount*>(slot->get())->runs = runs;
  }
  return absl::OkStatus();
}

namespace {

thread_local int compile_depth = 0;
std::atomic<int64_t> compile_count{0};

}  // namespace

using program_internal::NestingGuard;

absl::StatusOr<std::unique_ptr<Program>> Program::Compile(
    const Graph& graph, const ProgramSpec& spec) {
  using namespace compiler;  // NOLINT: the phases, in order.
  const NestingGuard nesting(&compile_depth);
  RETURN_IF_ERROR(nesting.Check("compiling"));
  compile_count.fetch_add(1, std::memory_order_relaxed);
  ASSIGN_OR_RETURN(const FeedIndex feeds, CheckSpec(graph, spec));
  const std::vector<bool> needed = Prune(graph, spec, feeds);
  ASSIGN_OR_RETURN(NodeOrder order, OrderNodes(graph, spec, needed));
  Values values = AssignValues(order, spec, feeds);
  ASSIGN_OR_RETURN(ValueTypes types, InferShapes(graph, spec, order, values));
  Fusion fusion = FuseChains(spec, types, &order, &values);
  Dependencies deps = FindDependencies(order, values);
  std::vector<MemoryPlan> always_live = CountAlwaysLive(order);
  // Each sub-program (a loop's body) is compiled once, here, with this
  // program's fusion setting; the plan counts it and the node's kernel
  // runs it (SubPrograms, handed over in the node's state below).
  std::vector<std::unique_ptr<SubPrograms>> subs(order.size());
  for (int pos = 0; pos < order.size(); ++pos) {
    if (order.nodes[pos]->op_def().sub_programs()) {
      subs[pos] = std::make_unique<SubPrograms>(spec.fuse);
    }
  }
  auto compile_sub_program = [&](int pos, const SubProgramSpec& sub)
      -> absl::StatusOr<std::vector<MemoryPlan>> {
    ProgramSpec sub_spec = sub.spec;
    sub_spec.fuse = spec.fuse;
    sub_spec.recompute = spec.recompute;
    ASSIGN_OR_RETURN(std::unique_ptr<Program> p, Compile(graph, sub_spec));
    std::vector<MemoryPlan> plans = p->shard_memory();
    subs[pos]->Add(sub.role, std::move(p));
    return plans;
  };
  ASSIGN_OR_RETURN(const std::vector<SubProgramNeed> sub_programs,
                   PlanSubPrograms(order, values, types, spec,
                                   compile_sub_program, &always_live));
  const int num_shards = static_cast<int>(always_live.size());
  Liveness live = ComputeLiveness(order, values, types, num_shards);
  const ArenaLayout layout = AssignOffsets(num_shards, &live.intervals);
  MemoryReport memory =
      ReportMemory(order, std::move(always_live), sub_programs, live, layout);
  for (const auto& [from, to] : ReuseEdges(live, values))
    deps.preds[to].insert(from);

  std::unique_ptr<Program> p(new Program());
  p->spec_ = spec;
  p->num_values_ = values.num_values;
  p->feed_values_ = values.feed_values;
  p->fetch_values_ = values.fetch_values;
  p->value_uses_ = std::move(live.uses);
  p->value_dtypes_ = std::move(types.dtypes);
  p->value_shapes_ = std::move(types.shapes);
  p->memory_ = std::move(memory.total);
  p->shards_ = std::move(memory.shards);
  p->cross_shard_bytes_ = live.cross_shard_bytes;
  p->variables_ = std::move(deps.variables);
  p->BuildExecNodes(order, values, fusion, deps.preds, live.intervals);
  for (int pos = 0; pos < order.size(); ++pos) {
    if (subs[pos] != nullptr) p->nodes_[pos]->state = std::move(subs[pos]);
  }
  const std::vector<bool> identical = FindReplicaIdentical(order);
  for (int pos = 0; pos < order.size(); ++pos) {
    p->nodes_[pos]->replica_identical = identical[pos];
  }
  // Stochastic rounding tells this program's runs from another program's
  // runs of the same nodes (an eval step beside a training step).
  std::string key;
  for (const Output& f : spec.feeds) absl::StrAppend(&key, f.name(), ";");
  absl::StrAppend(&key, "|");
  for (const Output& f : spec.fetches) absl::StrAppend(&key, f.name(), ";");
  absl::StrAppend(&key, "|");
  for (const Node* t : spec.targets) absl::StrAppend(&key, t->name(), ";");
  p->stream_salt_ = HashString(key);
  // The arena is allocated by the first Run, not here: callers check the
  // plan against a budget first (DeviceProgram), and planning a loop body
  // must not allocate it.
  p->arena_bytes_ = layout.arena_bytes;
  return p;
}

int64_t Program::CompileCount() {
  return compile_count.load(std::memory_order_relaxed);
}

absl::Status Program::AllocateArena() {
  if (arena_ != nullptr || arena_bytes_ <= 0) return absl::OkStatus();
  const int64_t limit = PhysicalMemoryBytes();
  void* data = nullptr;
  if (arena_bytes_ <= limit) {
    // aligned_alloc needs a multiple of the alignment.
    const size_t rounded =
        (static_cast<size_t>(arena_bytes_) + kTensorAlignment - 1) /
        kTensorAlignment * kTensorAlignment;
    data = std::aligned_alloc(kTensorAlignment, rounded);
  }
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate the program's memory: ", arena_bytes_,
        " bytes of intermediates (the machine has ", limit, " bytes)"));
  }
  arena_ = std::make_shared<TensorBuffer>(
      data, static_cast<size_t>(arena_bytes_),
      std::shared_ptr<void>(data, [](void* d) { std::free(d); }));
  return absl::OkStatus();
}

void Program::BuildExecNodes(const compiler::NodeOrder& order,
                             const compiler::Values& values,
                             compiler::Fusion& fusion,
                             const std::vector<std::set<int>>& preds,
                             const std::vector<compiler::Interval>& planned) {
  const int num_nodes = order.size();
  for (int pos = 0; pos < num_nodes; ++pos) {
    const Node* n = order.nodes[pos];
    auto en = std::make_unique<ExecNode>();
    en->node = n;
    en->kernel = &n->op_def().kernel();
    if (fusion.defs[pos] != nullptr) {
      en->kernel = &fusion.defs[pos]->kernel;
      en->fused = std::make_unique<FusedChain>();
      en->fused->nodes = std::move(fusion.chains[pos]);
      en->fused->values = std::move(fusion.chain_values[pos]);
      en->fused->states.resize(en->fused->nodes.size());
    }
    en->shard = compiler::ShardOf(n);
    en->inputs = values.inputs[pos];
    en->first_output = values.first_output[pos];
    for (int k = 0; k < n->num_outputs(); ++k) {
      en->plans.push_back(OutputPlan{value_shapes_[en->first_output + k], -1});
    }
    nodes_.push_back(std::move(en));
  }
  for (const compiler::Interval& iv : planned) {
    ExecNode& en = *nodes_[values.producer[iv.value]];
    const int k = iv.value - en.first_output;
    if (k >= 0 && k < static_cast<int>(en.plans.size())) {
      en.plans[k].offset = iv.offset;
    }
  }
  // A chain node's own output is written into the fused node's output 0
  // where it has that dtype and shape (RunChainKernel), else into its own
  // slot of the arena (compiler/fusion.h plans it for the fused node's step).
  for (auto& en : nodes_) {
    if (en->fused == nullptr) continue;
    num_fused_away_ += static_cast<int>(en->fused->nodes.size()) - 1;
    for (int v : en->fused->values) {
      const TensorShape& shape = value_shapes_[v];
      int64_t offset = -1;
      const int final_value = en->fused->values.back();
      if (shape == en->plans[0].shape &&
          value_dtypes_[v] == value_dtypes_[final_value]) {
        offset = en->plans[0].offset;
      } else {
        for (const compiler::Interval& iv : planned) {
          if (iv.value == v) offset = iv.offset;
        }
      }
      en->fused->plans.push_back({OutputPlan{shape, offset}});
    }
  }
  for (int pos = 0; pos < num_nodes; ++pos) {
    ExecNode& en = *nodes_[pos];
    en.num_predecessors = static_cast<int>(preds[pos].size());
    for (int pred : preds[pos]) nodes_[pred]->successors.push_back(pos);
    if (en.num_predecessors == 0) initial_ready_.push_back(pos);
  }
  for (auto& en : nodes_)
    std::sort(en->successors.begin(), en->successors.end());
  std::vector<int> run_of(num_nodes);
  for (int pos = 0; pos < num_nodes; ++pos) {
    const int shard = nodes_[pos]->shard;
    if (shard_runs_.empty() || shard_runs_.back().shard != shard) {
      shard_runs_.push_back({shard, pos, pos, {}});
    }
    shard_runs_.back().end = pos + 1;
    run_of[pos] = static_cast<int>(shard_runs_.size()) - 1;
  }
  for (int pos = 0; pos < num_nodes; ++pos) {
    std::vector<int>& after = shard_runs_[run_of[pos]].after;
    for (int pred : preds[pos]) {
      if (run_of[pred] != run_of[pos]) after.push_back(run_of[pred]);
    }
  }
  for (ShardRun& r : shard_runs_) {
    std::sort(r.after.begin(), r.after.end());
    r.after.erase(std::unique(r.after.begin(), r.after.end()), r.after.end());
  }
  // Parallel execution pays off only when some node has two successors.
  has_branches_ = initial_ready_.size() > 1;
  for (const auto& en : nodes_) has_branches_ |= en->successors.size() > 1;
  run_values_.resize(num_values_);
  run_uses_.reset(new std::atomic<int>[num_values_]);
  run_pending_.reset(new std::atomic<int>[num_nodes]);
}

void Program::set_profiling(bool on) {
  profiling_ = on;
  profile_.assign(nodes_.size(), NodeTime());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    profile_[i].name = nodes_[i]->node->name();
    profile_[i].op = nodes_[i]->node->op();
  }
}

std::vector<Program::NodeTime> Program::profile() const { return profile_; }

std::vector<std::string> Program::NodeNamesInOrder() const {
  std::vector<std::string> out;
  for (const auto& en : nodes_) out.push_back(en->node->name());
  return out;
}

std::vector<const Node*> Program::nodes_in_order() const {
  std::vector<const Node*> out;
  for (const auto& en : nodes_) out.push_back(en->node);
  return out;
}

}  // namespace ipuflow
