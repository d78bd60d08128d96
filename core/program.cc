#include "core/program.h"

#include <algorithm>
#include <atomic>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/mutex.h"
#include "core/op_registry.h"

namespace ipuflow {

const TensorShape& KernelContext::planned_shape(int i) const {
  return (*plans_)[i].shape;
}

Tensor* KernelContext::allocate_output(int i, const TensorShape& shape) {
  const OutputPlan& plan = (*plans_)[i];
  if (plan.offset >= 0 && shape == plan.shape) {
    outputs_[i] = Tensor(output_dtype(i), shape, *arena_, plan.offset);
  } else {
    outputs_[i] = Tensor(output_dtype(i), shape);
  }
  return &outputs_[i];
}

void KernelContext::set_output(int i, Tensor t) { outputs_[i] = std::move(t); }

absl::StatusOr<ProgramSpec> MakeProgramSpec(const FeedList& feeds,
                                            const std::vector<Output>& fetches,
                                            const std::vector<Node*>& targets,
                                            std::string* signature) {
  ProgramSpec spec;
  std::string key;
  for (const auto& [out, value] : feeds) {
    if (!out.valid()) return absl::InvalidArgumentError("a feed key is an invalid Output");
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
      return absl::InvalidArgumentError("a target is null (built from a failed op?)");
    }
    absl::StrAppend(&key, t->name(), ";");
  }
  spec.fetches = fetches;
  spec.targets = targets;
  if (signature != nullptr) *signature = std::move(key);
  return spec;
}

std::string MemoryPlan::DebugString() const {
  std::string out = absl::StrFormat(
      "always-live %d B (constants %d B, variables %d B); not-always-live "
      "peak %d B (%d values, %d B without reuse); fetched %d B",
      always_live_bytes, constant_bytes, variable_bytes, peak_bytes,
      num_planned_values, unplanned_bytes, fetch_bytes);
  if (!largest_loop_body.empty()) {
    absl::StrAppendFormat(&out, "; loop bodies %d B peak ('%s'), %d B always-live",
                          loop_body_peak_bytes, largest_loop_body,
                          loop_body_always_live_bytes);
  }
  return out;
}

struct Program::ExecNode {
  const Node* node = nullptr;
  const KernelFn* kernel = nullptr;
  int shard = 0;
  std::vector<int> inputs;   // Value ids.
  int first_output = 0;      // Outputs are values [first_output, +n).
  std::vector<OutputPlan> plans;
  std::vector<int> successors;  // Positions in nodes_.
  int num_predecessors = 0;
  std::unique_ptr<KernelState> state;
};

Program::~Program() = default;

namespace {

// The variable a resource op touches, for ordering accesses.
std::string ResourceKey(const Node& n) {
  const Node* src = n.input(0).node;
  if (src->op_def().always_live() == AlwaysLive::kVariable &&
      src->has_attr("shared_name") &&
      !src->attr<std::string>("shared_name").empty()) {
    return src->attr<std::string>("shared_name");
  }
  return src->name();
}

int ShardOf(const Node* n) { return n->ipu() < 0 ? 0 : n->ipu(); }

struct Interval {
  int value;
  int shard;
  int def, last;
  int64_t bytes;
  int64_t offset = -1;
};

int64_t AlignUp(int64_t n) {
  return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Program>> Program::Compile(
    const Graph& graph, const ProgramSpec& spec) {
  std::unique_ptr<Program> p(new Program());
  p->spec_ = spec;
  if (spec.feed_shapes.size() != spec.feeds.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProgramSpec has ", spec.feeds.size(), " feeds but ",
                     spec.feed_shapes.size(), " feed shapes"));
  }
  absl::flat_hash_map<Output, int> feed_index;
  for (size_t i = 0; i < spec.feeds.size(); ++i) {
    const Output& f = spec.feeds[i];
    if (!f.valid() || f.node->graph() != &graph) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed ", i, " is not an output of this graph"));
    }
    if (!spec.feed_shapes[i].IsFullyDefined() ||
        !spec.feed_shapes[i].IsCompatibleWith(f.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value fed to '", f.name(), "' has shape ",
          spec.feed_shapes[i].DebugString(), " but ", f.node->DebugName(),
          " expects ", f.shape().DebugString()));
    }
    feed_index[f] = static_cast<int>(i);
  }
  for (const Output& f : spec.fetches) {
    if (!f.valid() || f.node->graph() != &graph) {
      return absl::InvalidArgumentError(
          "a fetch is not an output of this graph (built from a failed op?)");
    }
  }

  // 1. Prune to what the fetches and targets need.
  std::vector<bool> needed(graph.num_nodes(), false);
  std::vector<const Node*> stack;
  auto need = [&](const Node* n) {
    if (!needed[n->id()]) {
      needed[n->id()] = true;
      stack.push_back(n);
    }
  };
  for (const Output& f : spec.fetches) {
    if (!feed_index.count(f)) need(f.node);
  }
  for (const Node* t : spec.targets) {
    if (t == nullptr || t->graph() != &graph) {
      return absl::InvalidArgumentError(
          "a target is not a node of this graph (built from a failed op?)");
    }
    need(t);
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Output& in : n->inputs()) {
      if (!feed_index.count(in)) need(in.node);
    }
    for (const Node* c : n->control_inputs()) need(c);
  }

  // 2. Schedule: ids are a topological order; every added edge goes from a
  // lower id to a higher one, so it stays one.
  std::vector<int> position(graph.num_nodes(), -1);
  for (int id = 0; id < graph.num_nodes(); ++id) {
    if (!needed[id]) continue;
    const Node* n = graph.node(id);
    if (n->op() == "Placeholder" || n->op() == "_Arg") {
      std::string fetch_names;
      for (const Output& f : spec.fetches) absl::StrAppend(&fetch_names, " '", f.name(), "'");
      return absl::InvalidArgumentError(absl::StrCat(
          n->DebugName(), " needs a value: feed it (fetching", fetch_names,
          ")"));
    }
    if (!n->op_def().kernel()) {
      return absl::UnimplementedError(
          absl::StrCat(n->DebugName(), ": op has no kernel"));
    }
    position[id] = static_cast<int>(p->nodes_.size());
    auto en = std::make_unique<ExecNode>();
    en->node = n;
    en->kernel = &n->op_def().kernel();
    en->shard = ShardOf(n);
    p->nodes_.push_back(std::move(en));
  }
  const int num_nodes = static_cast<int>(p->nodes_.size());

  // 3. Values: node outputs are contiguous; feeds come after.
  int next_value = 0;
  for (auto& en : p->nodes_) {
    en->first_output = next_value;
    next_value += en->node->num_outputs();
  }
  for (size_t i = 0; i < spec.feeds.size(); ++i) {
    p->feed_values_.push_back(next_value++);
  }
  p->num_values_ = next_value;
  auto value_of = [&](const Output& o) {
    auto it = feed_index.find(o);
    if (it != feed_index.end()) return p->feed_values_[it->second];
    return p->nodes_[position[o.node->id()]]->first_output + o.index;
  };
  p->value_dtypes_.assign(p->num_values_, DType::kInvalid);
  p->value_shapes_.assign(p->num_values_, TensorShape());
  std::vector<int> producer(p->num_values_, -1);
  for (size_t i = 0; i < spec.feeds.size(); ++i) {
    p->value_dtypes_[p->feed_values_[i]] = spec.feeds[i].dtype();
    p->value_shapes_[p->feed_values_[i]] = spec.feed_shapes[i];
  }

  // 4. Edges: data, control, and ordered accesses to each variable.
  std::vector<absl::flat_hash_set<int>> preds(num_nodes);
  absl::flat_hash_map<std::string, std::pair<int, std::vector<int>>> last_access;
  absl::flat_hash_set<std::string> variables;
  for (int pos = 0; pos < num_nodes; ++pos) {
    ExecNode& en = *p->nodes_[pos];
    const Node* n = en.node;
    for (const Output& in : n->inputs()) {
      const int v = value_of(in);
      en.inputs.push_back(v);
      if (!feed_index.count(in)) preds[pos].insert(position[in.node->id()]);
    }
    for (const Node* c : n->control_inputs()) preds[pos].insert(position[c->id()]);
    const ResourceAccess access = n->op_def().resource_access();
    if (access != ResourceAccess::kNone) {
      auto& [last_write, reads] = last_access.try_emplace(ResourceKey(*n), -1, std::vector<int>()).first->second;
      variables.insert(ResourceKey(*n));
      if (last_write >= 0) preds[pos].insert(last_write);
      if (access == ResourceAccess::kWrite) {
        for (int r : reads) preds[pos].insert(r);
        reads.clear();
        last_write = pos;
      } else {
        reads.push_back(pos);
      }
    }
    if (static_cast<int>(p->shards_.size()) <= ShardOf(n)) {
      p->shards_.resize(ShardOf(n) + 1);
    }
    MemoryPlan& shard = p->shards_[ShardOf(n)];
    const AlwaysLive kind = n->op_def().always_live();
    if (kind == AlwaysLive::kVariable) {
      const int64_t bytes = n->op_def().always_live_bytes()(*n);
      shard.variable_bytes += bytes;
      shard.variables.push_back({n, bytes});
    } else if (kind == AlwaysLive::kConstant) {
      shard.constant_bytes += n->op_def().always_live_bytes()(*n);
    }
  }
  if (p->shards_.empty()) p->shards_.resize(1);
  p->variables_.assign(variables.begin(), variables.end());
  std::sort(p->variables_.begin(), p->variables_.end());

  // 5. Shapes for these feed shapes.
  for (int pos = 0; pos < num_nodes; ++pos) {
    ExecNode& en = *p->nodes_[pos];
    const Node* n = en.node;
    std::vector<DType> in_dtypes;
    std::vector<TensorShape> in_shapes;
    std::vector<const Tensor*> in_constants;
    for (int i = 0; i < n->num_inputs(); ++i) {
      in_dtypes.push_back(p->value_dtypes_[en.inputs[i]]);
      in_shapes.push_back(p->value_shapes_[en.inputs[i]]);
      const Node* src = n->input(i).node;
      in_constants.push_back(src->op() == "Const" ? &src->attr<Tensor>("value")
                                                  : nullptr);
    }
    ShapeContext ctx(&n->op_def(), n->name(), &in_dtypes, &in_shapes,
                     &in_constants, &n->attrs(), &graph);
    if (n->op_def().shape_fn()) {
      absl::Status s = n->op_def().shape_fn()(ctx);
      if (!s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat(n->DebugName(), ": ", s.message()));
      }
    }
    if (static_cast<int>(ctx.output_dtypes().size()) != n->num_outputs()) {
      return absl::InternalError(absl::StrCat(
          n->DebugName(), ": shape function changed the number of outputs"));
    }
    for (int k = 0; k < n->num_outputs(); ++k) {
      p->value_dtypes_[en.first_output + k] = ctx.output_dtypes()[k];
      p->value_shapes_[en.first_output + k] = ctx.output_shapes()[k];
      producer[en.first_output + k] = pos;
      en.plans.push_back(OutputPlan{ctx.output_shapes()[k], -1});
    }
  }

  // 5b. Sub-programs (device loop bodies), planned for these input shapes:
  // their constants and variables are always-live here, their peak is live
  // while their node runs (added in step 7). Unknown shapes: the kernel
  // plans them when it runs.
  struct SubProgramNeed {
    int pos;
    std::vector<int64_t> peak;  // Per shard of this program.
    std::vector<bool> uses;     // Shards the sub-programs put anything on.
  };
  std::vector<SubProgramNeed> sub_needs;
  for (int pos = 0; pos < num_nodes; ++pos) {
    const ExecNode& en = *p->nodes_[pos];
    const Node* n = en.node;
    const SubProgramsFn& sub_programs = n->op_def().sub_programs();
    if (!sub_programs) continue;
    std::vector<TensorShape> in_shapes;
    bool known = true;
    for (int v : en.inputs) {
      in_shapes.push_back(p->value_shapes_[v]);
      known &= p->value_shapes_[v].IsFullyDefined();
    }
    if (!known) continue;
    absl::StatusOr<std::vector<SubProgramSpec>> subs = sub_programs(*n, in_shapes);
    if (!subs.ok()) {
      return absl::Status(subs.status().code(), absl::StrCat(
          n->DebugName(), ": ", subs.status().message()));
    }
    SubProgramNeed need{pos, std::vector<int64_t>(p->shards_.size(), 0),
                        std::vector<bool>(p->shards_.size(), false)};
    for (const SubProgramSpec& sub : *subs) {
      absl::StatusOr<std::unique_ptr<Program>> sp = Compile(graph, sub.spec);
      if (!sp.ok()) {
        return absl::Status(sp.status().code(), absl::StrCat(
            n->DebugName(), " ", sub.role, ": ", sp.status().message()));
      }
      for (int j = 0; j < (*sp)->num_shards(); ++j) {
        // A sub-program shard this program does not use counts on its node's.
        const int k = j < p->num_shards() ? j : en.shard;
        const MemoryPlan& m = (*sp)->shard_memory()[j];
        MemoryPlan& shard = p->shards_[k];
        for (const auto& [var, bytes] : m.variables) {
          const bool counted = std::any_of(
              shard.variables.begin(), shard.variables.end(),
              [var = var](const auto& v) { return v.first == var; });
          if (counted) continue;  // Also used outside the loop.
          shard.variables.push_back({var, bytes});
          shard.variable_bytes += bytes;
          shard.loop_body_always_live_bytes += bytes;
        }
        shard.constant_bytes += m.constant_bytes;
        shard.loop_body_always_live_bytes += m.constant_bytes;
        // Condition and body run in turn: the larger peak counts.
        need.peak[k] = std::max(need.peak[k], m.peak_bytes);
        need.uses[k] = need.uses[k] || m.peak_bytes > 0 ||
                       m.constant_bytes + m.variable_bytes > 0;
      }
    }
    sub_needs.push_back(std::move(need));
  }

  // 6. Uses, aliases (outputs that forward an input's buffer) and lifetimes.
  p->value_uses_.assign(p->num_values_, 0);
  std::vector<int> root(p->num_values_);
  for (int v = 0; v < p->num_values_; ++v) root[v] = v;
  std::vector<std::vector<int>> consumers(p->num_values_);
  std::vector<bool> fetched(p->num_values_, false);
  for (int pos = 0; pos < num_nodes; ++pos) {
    ExecNode& en = *p->nodes_[pos];
    for (int v : en.inputs) ++p->value_uses_[v];
    for (const auto& [out, in] : en.node->op_def().forwards()) {
      if (out < en.node->num_outputs() && in < static_cast<int>(en.inputs.size())) {
        root[en.first_output + out] = root[en.inputs[in]];
      }
    }
    for (int v : en.inputs) {
      consumers[root[v]].push_back(pos);
      if (producer[v] >= 0 &&
          ShardOf(p->nodes_[producer[v]]->node) != ShardOf(en.node)) {
        p->cross_shard_bytes_ += p->value_shapes_[v].num_elements() *
                                 DTypeSize(p->value_dtypes_[v]);
      }
    }
  }
  for (const Output& f : spec.fetches) {
    const int v = value_of(f);
    p->fetch_values_.push_back(v);
    ++p->value_uses_[v];
    fetched[v] = true;
    fetched[root[v]] = true;
    const int64_t bytes =
        p->value_shapes_[v].num_elements() * DTypeSize(p->value_dtypes_[v]);
    p->memory_.fetch_bytes += bytes;
    if (producer[v] >= 0) {
      p->shards_[ShardOf(p->nodes_[producer[v]]->node)].fetch_bytes += bytes;
    }
  }
  std::vector<Interval> intervals;
  for (int v = 0; v < p->num_values_; ++v) {
    if (root[v] != v || producer[v] < 0 || fetched[v]) continue;
    const Node* n = p->nodes_[producer[v]]->node;
    if (n->op_def().always_live() != AlwaysLive::kNone ||
        p->value_dtypes_[v] == DType::kResource ||
        !p->value_shapes_[v].IsFullyDefined()) {
      continue;
    }
    if (n->op_def().forwards().count(v - p->nodes_[producer[v]]->first_output)) {
      continue;  // Forwarded from an unplanned value (feed or constant).
    }
    const int64_t bytes =
        AlignUp(p->value_shapes_[v].num_elements() * DTypeSize(p->value_dtypes_[v]));
    if (bytes == 0) continue;
    int last = producer[v];
    for (int c : consumers[v]) last = std::max(last, c);
    intervals.push_back(Interval{v, ShardOf(n), producer[v], last, bytes});
    p->shards_[ShardOf(n)].unplanned_bytes += bytes;
    ++p->shards_[ShardOf(n)].num_planned_values;
  }

  // 7. Offsets, per shard: largest first, each at the lowest offset free
  // for its lifetime. Shard regions follow one another in the arena.
  std::vector<int> order(intervals.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (intervals[a].bytes != intervals[b].bytes) return intervals[a].bytes > intervals[b].bytes;
    return intervals[a].def < intervals[b].def;
  });
  std::vector<std::vector<int>> placed(p->shards_.size());
  for (int i : order) {
    Interval& iv = intervals[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed[iv.shard]) {
      const Interval& o = intervals[j];
      if (o.def <= iv.last && iv.def <= o.last) busy.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + iv.bytes <= b) break;
      offset = std::max(offset, e);
    }
    iv.offset = offset;
    MemoryPlan& shard = p->shards_[iv.shard];
    shard.peak_bytes = std::max(shard.peak_bytes, offset + iv.bytes);
    placed[iv.shard].push_back(i);
  }
  // A sub-program's arena sits on top of the values live at its node (the
  // highest one placed bounds them); it is not part of this arena.
  std::vector<int64_t> arena_bytes(p->shards_.size());
  for (size_t k = 0; k < p->shards_.size(); ++k) arena_bytes[k] = p->shards_[k].peak_bytes;
  for (const SubProgramNeed& need : sub_needs) {
    for (size_t k = 0; k < need.peak.size(); ++k) {
      if (!need.uses[k]) continue;
      int64_t top = 0;
      for (int i : placed[k]) {
        const Interval& iv = intervals[i];
        if (iv.def <= need.pos && need.pos <= iv.last) top = std::max(top, iv.offset + iv.bytes);
      }
      MemoryPlan& shard = p->shards_[k];
      shard.peak_bytes = std::max(shard.peak_bytes, top + need.peak[k]);
      if (shard.largest_loop_body.empty() ||
          need.peak[k] > shard.loop_body_peak_bytes) {
        shard.loop_body_peak_bytes = need.peak[k];
        shard.largest_loop_body = p->nodes_[need.pos]->node->name();
      }
    }
  }
  std::vector<int64_t> shard_base(p->shards_.size(), 0);
  int64_t peak = 0;
  for (size_t k = 0; k < p->shards_.size(); ++k) {
    MemoryPlan& shard = p->shards_[k];
    shard.always_live_bytes = shard.constant_bytes + shard.variable_bytes;
    shard_base[k] = peak;
    peak += arena_bytes[k];
    MemoryPlan& m = p->memory_;
    m.constant_bytes += shard.constant_bytes;
    m.variable_bytes += shard.variable_bytes;
    m.always_live_bytes += shard.always_live_bytes;
    m.peak_bytes += shard.peak_bytes;
    m.unplanned_bytes += shard.unplanned_bytes;
    m.num_planned_values += shard.num_planned_values;
    m.loop_body_always_live_bytes += shard.loop_body_always_live_bytes;
    if (shard.loop_body_peak_bytes > m.loop_body_peak_bytes) {
      m.loop_body_peak_bytes = shard.loop_body_peak_bytes;
      m.largest_loop_body = shard.largest_loop_body;
    }
    m.variables.insert(m.variables.end(), shard.variables.begin(),
                       shard.variables.end());
  }
  for (Interval& iv : intervals) iv.offset += shard_base[iv.shard];
  for (const Interval& iv : intervals) {
    ExecNode& en = *p->nodes_[producer[iv.value]];
    en.plans[iv.value - en.first_output].offset = iv.offset;
  }
  if (peak > 0) p->arena_ = std::make_shared<TensorBuffer>(peak);

  // 8. Reusing memory orders the new value's producer after every consumer
  // of the old one, so the plan holds under any parallel order.
  for (size_t a = 0; a < intervals.size(); ++a) {
    for (size_t b = 0; b < intervals.size(); ++b) {
      const Interval& A = intervals[a];
      const Interval& B = intervals[b];
      if (A.last >= B.def) continue;
      if (A.offset >= B.offset + B.bytes || B.offset >= A.offset + A.bytes) continue;
      const int dst = producer[B.value];
      for (int c : consumers[A.value]) {
        if (c < dst) preds[dst].insert(c);
      }
    }
  }
  for (int pos = 0; pos < num_nodes; ++pos) {
    ExecNode& en = *p->nodes_[pos];
    en.num_predecessors = static_cast<int>(preds[pos].size());
    for (int pred : preds[pos]) p->nodes_[pred]->successors.push_back(pos);
    if (en.num_predecessors == 0) p->initial_ready_.push_back(pos);
  }
  for (auto& en : p->nodes_) std::sort(en->successors.begin(), en->successors.end());
  // Parallel execution pays off only when some node has two successors.
  p->has_branches_ = p->initial_ready_.size() > 1;
  for (const auto& en : p->nodes_) p->has_branches_ |= en->successors.size() > 1;
  p->run_values_.resize(p->num_values_);
  p->run_uses_.reset(new std::atomic<int>[p->num_values_]);
  p->run_pending_.reset(new std::atomic<int>[num_nodes]);
  return p;
}

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
  Executor(Program* p, RunEnv* env)
      : p_(p), env_(env), values_(p->run_values_),
        uses_(p->run_uses_.get()), pending_(p->run_pending_.get()) {
    for (int v = 0; v < p->num_values_; ++v) {
      uses_[v].store(p->value_uses_[v], std::memory_order_relaxed);
    }
    for (size_t i = 0; i < p->nodes_.size(); ++i) {
      pending_[i].store(p->nodes_[i]->num_predecessors, std::memory_order_relaxed);
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
    done_cv_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return finished_;
    });
    return status_;
  }

 private:
  absl::Status RunNode(int pos, RunEnv* env) {
    ExecNode& en = *p_->nodes_[pos];
    KernelContext::Inputs inputs;
    for (int v : en.inputs) inputs.push_back(&values_[v]);
    KernelContext ctx(en.node, std::move(inputs), &values_[en.first_output],
                      env, &en.state, &en.plans, &p_->arena_);
    absl::Status s = (*en.kernel)(ctx);
    for (int v : en.inputs) {
      if (uses_[v].fetch_sub(1, std::memory_order_acq_rel) == 1) values_[v] = Tensor();
    }
    if (!s.ok()) return s;
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
  if (env.intra_op == nullptr) {
    return absl::InvalidArgumentError("RunEnv has no intra-op thread pool");
  }
  if (feeds.size() != spec_.feeds.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program expects ", spec_.feeds.size(), " feeds, got ", feeds.size()));
  }
  Executor exec(this, &env);
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
  absl::Status s = (env.inter_op != nullptr && has_branches_ && !env.on_shard)
                       ? exec.RunParallel()
                       : exec.RunSequential();
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
