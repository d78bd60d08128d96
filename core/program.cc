#include "core/program.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/compiler/always_live.h"
#include "core/compiler/dependencies.h"
#include "core/compiler/fusion.h"
#include "core/compiler/liveness.h"
#include "core/compiler/memory_report.h"
#include "core/compiler/offsets.h"
#include "core/compiler/ordering.h"
#include "core/compiler/prune.h"
#include "core/compiler/replica_identical.h"
#include "core/compiler/schedule.h"
#include "core/compiler/shapes.h"
#include "core/compiler/spec_check.h"
#include "core/compiler/sub_programs.h"
#include "core/compiler/values.h"
#include "core/floating_point_traps.h"
#include "core/hash_mix.h"
#include "core/mutex.h"
#include "core/op_registry.h"

namespace ipuflow {

const TensorShape& KernelContext::planned_shape(int i) const {
  return (*plans_)[i].shape;
}

absl::StatusOr<Tensor*> KernelContext::allocate_output(
    int i, const TensorShape& shape) {
  const OutputPlan& plan = (*plans_)[i];
  if (plan.offset >= 0 && shape == plan.shape) {
    outputs_[i] = Tensor(output_dtype(i), shape, *arena_, plan.offset);
    return &outputs_[i];
  }
  // A shape known only now: checked before anything is allocated.
  const DType dtype = output_dtype(i);
  absl::StatusOr<int64_t> n = shape.CheckedNumElements();
  absl::StatusOr<int64_t> bytes =
      n.ok() ? CheckedByteSize(*n, DTypeSize(dtype), "") : n.status();
  const bool on_ipu = env_->memory_budget > 0;
  const int64_t limit = on_ipu ? env_->memory_budget : PhysicalMemoryBytes();
  if (bytes.ok() && *bytes > limit) {
    return Error(absl::StatusCode::kResourceExhausted, "output ", i, " ",
                 DTypeName(dtype), shape.DebugString(), " needs ", *bytes,
                 " bytes, more than ",
                 on_ipu ? absl::StrCat("IPU ", env_->ipu, " holds (")
                        : std::string("the host's physical memory ("),
                 limit, " bytes)");
  }
  absl::StatusOr<Tensor> t = Tensor::Allocate(dtype, shape);
  if (!t.ok()) {
    return Error(t.status().code(), "output ", i, ": ", t.status().message());
  }
  outputs_[i] = *std::move(t);
  return &outputs_[i];
}

void KernelContext::set_output(int i, Tensor t) { outputs_[i] = std::move(t); }

absl::StatusOr<Tensor*> KernelContext::RunChainKernel(
    int i, absl::Span<const Tensor* const> inputs) {
  const int size =
      fused_ == nullptr ? 0 : static_cast<int>(fused_->nodes.size());
  if (i < 0 || i >= size) {
    return Error(absl::StatusCode::kInternal, "RunChainKernel(", i,
                 ") outside the fused chain");
  }
  const Node* n = fused_->nodes[i];
  const bool last = i == size - 1;  // Writes this node's outputs.
  Tensor out[1];  // Chain nodes but the last have one output (fusion.h).
  KernelContext sub(n, Inputs(inputs.begin(), inputs.end()),
                    last ? outputs_ : out, env_, &fused_->states[i],
                    last ? plans_ : &fused_->plans[i], arena_);
  sub.replica_identical_ = replica_identical_;
  sub.run_stream_ = run_stream_;
  absl::Status s = n->op_def().kernel()(sub);
  half_overflow_.fetch_or(sub.half_overflow_.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
  if (!s.ok()) {
    if (absl::StrContains(s.message(), n->name())) return s;
    return absl::Status(s.code(),
                        absl::StrCat(n->DebugName(), ": ", s.message()));
  }
  Tensor& t = last ? outputs_[0] : out[0];
  if (!t.valid()) {
    return Error(absl::StatusCode::kInternal, n->DebugName(),
                 " did not produce output 0");
  }
  if (last) return &outputs_[0];
  // Same shape as this node's output 0: it is that output, to be finished
  // in place; else a scratch value the fused kernel consumes.
  if (t.shape() == (*plans_)[0].shape && t.dtype() == output_dtype(0)) {
    outputs_[0] = std::move(t);
    return &outputs_[0];
  }
  fused_->scratch = std::move(t);
  return &fused_->scratch;
}

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

struct Program::ExecNode {
  const Node* node = nullptr;
  const KernelFn* kernel = nullptr;
  int shard = 0;
  std::vector<int> inputs;  // Value ids.
  int first_output = 0;     // Outputs are values [first_output, +n).
  std::vector<OutputPlan> plans;
  std::vector<int> successors;  // Positions in nodes_.
  int num_predecessors = 0;
  std::unique_ptr<KernelState> state;
  bool replica_identical = false;     // compiler/replica_identical.h
  std::unique_ptr<FusedChain> fused;  // compiler/fusion.h; null if unfused.
};

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

namespace {

// Loop bodies are programs compiled from inside the enclosing program's
// compile and run from inside its run, on the same thread: a GraphDef nesting
// loops thousands deep would overflow that thread's stack.
constexpr int kMaxNesting = 64;
thread_local int compile_depth = 0;
std::atomic<int64_t> compile_count{0};
thread_local int run_depth = 0;

class NestingGuard {
 public:
  explicit NestingGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~NestingGuard() { --*depth_; }
  absl::Status Check(const char* what) const {
    if (*depth_ <= kMaxNesting) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "programs nested more than ", kMaxNesting, " deep while ", what,
        " (a device loop in a loop body in a loop body ...): flatten the "
        "loops"));
  }

 private:
  int* depth_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Program>> Program::Compile(
    const Graph& graph, const ProgramSpec& spec) {
  using namespace compiler;  // NOLINT: the phases, in order.
  const NestingGuard nesting(&compile_depth);
  RETURN_IF_ERROR(nesting.Check("compiling"));
  compile_count.fetch_add(1, std::memory_order_relaxed);
  ASSIGN_OR_RETURN(const FeedIndex feeds, CheckSpec(graph, spec));
  const std::vector<bool> needed = Prune(graph, spec, feeds);
  ASSIGN_OR_RETURN(Schedule schedule, MakeSchedule(graph, spec, needed));
  Values values = AssignValues(schedule, spec, feeds);
  ASSIGN_OR_RETURN(ValueTypes types,
                   InferShapes(graph, spec, schedule, values));
  Fusion fusion = FuseChains(spec, types, &schedule, &values);
  Dependencies deps = FindDependencies(schedule, values);
  std::vector<MemoryPlan> always_live = CountAlwaysLive(schedule);
  // Each sub-program (a loop's body) is compiled once, here, with this
  // program's fusion setting; the plan counts it and the node's kernel
  // runs it (SubPrograms, handed over in the node's state below).
  std::vector<std::unique_ptr<SubPrograms>> subs(schedule.size());
  for (int pos = 0; pos < schedule.size(); ++pos) {
    if (schedule.nodes[pos]->op_def().sub_programs()) {
      subs[pos] = std::make_unique<SubPrograms>(spec.fuse);
    }
  }
  auto compile_sub_program = [&](int pos, const SubProgramSpec& sub)
      -> absl::StatusOr<std::vector<MemoryPlan>> {
    ProgramSpec sub_spec = sub.spec;
    sub_spec.fuse = spec.fuse;
    ASSIGN_OR_RETURN(std::unique_ptr<Program> p, Compile(graph, sub_spec));
    std::vector<MemoryPlan> plans = p->shard_memory();
    subs[pos]->Add(sub.role, std::move(p));
    return plans;
  };
  ASSIGN_OR_RETURN(const std::vector<SubProgramNeed> sub_programs,
                   PlanSubPrograms(schedule, values, types, compile_sub_program,
                                   &always_live));
  const int num_shards = static_cast<int>(always_live.size());
  Liveness live = ComputeLiveness(schedule, values, types, num_shards);
  const ArenaLayout layout = AssignOffsets(num_shards, &live.intervals);
  MemoryReport memory = ReportMemory(schedule, std::move(always_live),
                                     sub_programs, live, layout);
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
  p->BuildExecNodes(schedule, values, fusion, deps.preds, live.intervals);
  for (int pos = 0; pos < schedule.size(); ++pos) {
    if (subs[pos] != nullptr) p->nodes_[pos]->state = std::move(subs[pos]);
  }
  const std::vector<bool> identical = FindReplicaIdentical(schedule);
  for (int pos = 0; pos < schedule.size(); ++pos) {
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

void Program::BuildExecNodes(const compiler::Schedule& schedule,
                             const compiler::Values& values,
                             compiler::Fusion& fusion,
                             const std::vector<std::set<int>>& preds,
                             const std::vector<compiler::Interval>& planned) {
  const int num_nodes = schedule.size();
  for (int pos = 0; pos < num_nodes; ++pos) {
    const Node* n = schedule.nodes[pos];
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

std::vector<std::string> Program::ScheduleNames() const {
  std::vector<std::string> out;
  for (const auto& en : nodes_) out.push_back(en->node->name());
  return out;
}

std::vector<const Node*> Program::schedule() const {
  std::vector<const Node*> out;
  for (const auto& en : nodes_) out.push_back(en->node);
  return out;
}

// One run's state. Values are written by their producer before any consumer
// starts (ordered by the pending counters' acquire/release) and released by
// their last consumer.
class Program::Executor {
 public:
  // Uses the program's run buffers: runs are never concurrent, and reusing
  // them keeps a run (a loop iteration) free of allocations.
  Executor(Program* p, RunEnv* env, uint64_t run_stream)
      : p_(p),
        env_(env),
        run_stream_(run_stream),
        values_(p->run_values_),
        uses_(p->run_uses_.get()),
        pending_(p->run_pending_.get()) {
    for (int v = 0; v < p->num_values_; ++v) {
      uses_[v].store(p->value_uses_[v], std::memory_order_relaxed);
    }
    for (size_t i = 0; i < p->nodes_.size(); ++i) {
      pending_[i].store(p->nodes_[i]->num_predecessors,
                        std::memory_order_relaxed);
    }
  }

  std::vector<Tensor>& values() { return values_; }

  // In schedule order. With env.on_shard set (a sharded device program),
  // each run of consecutive nodes of one shard executes on that shard's
  // IPU, with its env; one IPU is busy at a time, as in sharded execution.
  absl::Status RunSequential() {
    const int n = static_cast<int>(p_->nodes_.size());
    for (int pos = 0; pos < n;) {
      const int shard = p_->nodes_[pos]->shard;
      int end = pos + 1;
      while (end < n && p_->nodes_[end]->shard == shard) ++end;
      absl::Status s;
      auto run = [&](RunEnv& env) {
        for (int i = pos; i < end && s.ok(); ++i) s = RunNode(i, &env);
      };
      if (env_->on_shard && shard != 0) {
        env_->on_shard(shard, run);
      } else {
        run(*env_);
      }
      RETURN_IF_ERROR(s);
      pos = end;
    }
    return absl::OkStatus();
  }

  // With env.post_to_shard: each of the program's shard runs on its IPU
  // (shard 0 on the calling thread) as soon as the runs it waits for are
  // done, so IPUs with independent work run at once. Runs start in
  // schedule order; after an error no further run starts, and the error of
  // the earliest failing run is returned once every started run has ended.
  absl::Status RunShards() {
    const std::vector<ShardRun>& runs = p_->shard_runs_;
    std::vector<char> done(runs.size(), 0);
    int in_flight = 0;
    int failed = -1;
    absl::Status status;
    for (int r = 0; r < static_cast<int>(runs.size()); ++r) {
      {
        MutexLock l(&mu_);
        done_cv_.Await(&mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          if (failed >= 0) return true;
          for (int a : runs[r].after) {
            if (!done[a]) return false;
          }
          return true;
        });
        if (failed >= 0) break;
        ++in_flight;
      }
      auto s = std::make_shared<absl::Status>();
      auto work = [this, r, s, &runs](RunEnv& env) {
        for (int i = runs[r].begin; i < runs[r].end && s->ok(); ++i) {
          *s = RunNode(i, &env);
        }
      };
      auto finish = [this, r, s, &done, &in_flight, &failed, &status] {
        MutexLock l(&mu_);
        if (!s->ok() && (failed < 0 || r < failed)) {
          failed = r;
          status = *s;
        }
        done[r] = 1;
        --in_flight;
        done_cv_.SignalAll();
      };
      if (runs[r].shard == 0) {
        work(*env_);
        finish();
      } else {
        env_->post_to_shard(runs[r].shard, work, finish);
      }
    }
    MutexLock l(&mu_);
    done_cv_.Await(
        &mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return in_flight == 0; });
    return status;
  }

  absl::Status RunParallel() {
    remaining_.store(static_cast<int>(p_->nodes_.size()));
    if (p_->nodes_.empty()) return absl::OkStatus();
    std::vector<int> ready = p_->initial_ready_;
    for (size_t i = 1; i < ready.size(); ++i) {
      const int pos = ready[i];
      env_->inter_op->Schedule([this, pos] { Process(pos); });
    }
    Process(ready[0]);
    MutexLock l(&mu_);
    done_cv_.Await(
        &mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return finished_; });
    return status_;
  }

 private:
  absl::Status RunNode(int pos, RunEnv* env) {
    ExecNode& en = *p_->nodes_[pos];
    KernelContext::Inputs inputs;
    for (int v : en.inputs) inputs.push_back(&values_[v]);
    // data() + offset, not &values_[offset]: a node without outputs may
    // have first_output == values_.size().
    KernelContext ctx(en.node, std::move(inputs),
                      values_.data() + en.first_output, env, &en.state,
                      &en.plans, &p_->arena_);
    ctx.replica_identical_ = en.replica_identical;
    ctx.run_stream_ = run_stream_;
    ctx.fused_ = en.fused.get();
    absl::Status s;
    if (p_->profiling_) {
      const auto start = std::chrono::steady_clock::now();
      s = (*en.kernel)(ctx);
      const std::chrono::duration<double> d =
          std::chrono::steady_clock::now() - start;
      if (en.fused != nullptr && p_->profile_[pos].runs == 0) {
        std::string ops;
        for (const Node* c : en.fused->nodes) {
          absl::StrAppend(&ops, ops.empty() ? "" : "+", c->op());
        }
        p_->profile_[pos].op = ops;
      }
      ++p_->profile_[pos].runs;
      p_->profile_[pos].seconds += d.count();
      p_->profile_[pos].samples.push_back(static_cast<float>(d.count()));
    } else {
      s = (*en.kernel)(ctx);
    }
    // Traps look at the inputs too: before they are released. Zero cost
    // when every trap is off.
    const FloatingPointBehaviour* fp = env->floating_point;
    if (s.ok() && fp != nullptr && fp->any_trap()) {
      s = CheckFloatingPointTraps(*fp, ctx);
    }
    for (int v : en.inputs) {
      if (uses_[v].fetch_sub(1, std::memory_order_acq_rel) == 1)
        values_[v] = Tensor();
    }
    if (!s.ok()) {
      // Errors name the node that failed (kernels that report through
      // ctx.InvalidArgument already do).
      if (absl::StrContains(s.message(), en.node->name())) return s;
      return absl::Status(
          s.code(), absl::StrCat(en.node->DebugName(), ": ", s.message()));
    }
    for (int k = 0; k < en.node->num_outputs(); ++k) {
      if (!values_[en.first_output + k].valid()) {
        return absl::InternalError(absl::StrCat(
            en.node->DebugName(), ": kernel did not produce output ", k));
      }
      if (uses_[en.first_output + k].load(std::memory_order_relaxed) == 0) {
        values_[en.first_output + k] = Tensor();  // Nobody reads it.
      }
    }
    return absl::OkStatus();
  }

  // Runs `pos`, then the successors it makes ready: the first inline, the
  // rest on the inter-op pool.
  void Process(int pos) {
    while (pos >= 0) {
      if (!aborted_.load(std::memory_order_acquire)) {
        absl::Status s = RunNode(pos, env_);
        if (!s.ok()) {
          MutexLock l(&mu_);
          if (status_.ok()) status_ = s;
          aborted_.store(true, std::memory_order_release);
        }
      }
      int next = -1;
      for (int succ : p_->nodes_[pos]->successors) {
        if (pending_[succ].fetch_sub(1, std::memory_order_acq_rel) == 1) {
          if (next < 0) {
            next = succ;
          } else {
            env_->inter_op->Schedule([this, succ] { Process(succ); });
          }
        }
      }
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        MutexLock l(&mu_);
        finished_ = true;
        done_cv_.SignalAll();
      }
      pos = next;
    }
  }

  Program* p_;
  RunEnv* env_;
  const uint64_t run_stream_;  // KernelContext::run_stream().
  std::vector<Tensor>& values_;
  std::atomic<int>* uses_;
  std::atomic<int>* pending_;
  std::atomic<int> remaining_{0};
  std::atomic<bool> aborted_{false};
  Mutex mu_;
  CondVar done_cv_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status Program::Run(RunEnv& env, absl::Span<const Tensor> feeds,
                          std::vector<Tensor>* fetches) {
  const NestingGuard nesting(&run_depth);
  RETURN_IF_ERROR(nesting.Check("running"));
  if (env.intra_op == nullptr) {
    return absl::InvalidArgumentError("RunEnv has no intra-op thread pool");
  }
  if (feeds.size() != spec_.feeds.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program expects ", spec_.feeds.size(), " feeds, got ", feeds.size()));
  }
  RETURN_IF_ERROR(AllocateArena());
  // Every run, even one that fails, consumes a stream: a retried step
  // rounds with fresh bits, as the hardware's generator would. A reset
  // seed restarts the count.
  if (env.floating_point != nullptr &&
      env.floating_point->seed_epoch != seed_epoch_) {
    seed_epoch_ = env.floating_point->seed_epoch;
    runs_ = 0;
  }
  Executor exec(this, &env, Mix64(stream_salt_ + (runs_++ + 1) * kGoldenGamma));
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Output& f = spec_.feeds[i];
    if (feeds[i].dtype() != f.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value fed to '", f.name(), "' is ", DTypeName(feeds[i].dtype()),
          " but ", f.node->DebugName(), " is ", DTypeName(f.dtype())));
    }
    if (feeds[i].shape() != spec_.feed_shapes[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value fed to '", f.name(), "' has shape ",
          feeds[i].shape().DebugString(), " but the program was compiled for ",
          spec_.feed_shapes[i].DebugString()));
    }
    exec.values()[feed_values_[i]] = feeds[i];
  }
  absl::Status s;
  if (env.post_to_shard) {
    s = exec.RunShards();
  } else if (env.inter_op != nullptr && has_branches_ && !env.on_shard &&
             !profiling_) {
    s = exec.RunParallel();
  } else {
    s = exec.RunSequential();
  }
  if (!s.ok()) {
    for (Tensor& t : run_values_) t = Tensor();
    return s;
  }
  if (fetches != nullptr) {
    fetches->clear();
    for (int v : fetch_values_) {
      Tensor& t = exec.values()[v];
      // Results must survive the next run, which reuses the arena.
      fetches->push_back(arena_ != nullptr && t.buffer() == arena_ ? t.Copy()
                                                                   : t);
    }
  }
  // Drop what the run still references (fetches, feeds) until the next run.
  for (int v : fetch_values_) run_values_[v] = Tensor();
  for (int v : feed_values_) run_values_[v] = Tensor();
  return absl::OkStatus();
}

}  // namespace ipuflow
