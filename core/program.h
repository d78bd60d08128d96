// Program: a graph compiled for one set of feeds and fetches. Compiling
// prunes what the fetches do not need, fuses chains of ops that have a
// fused kernel (core/compiler/fusion.h; ProgramSpec::fuse), orders accesses to
// each variable as they were built (reads before a later write, as TF2's
// automatic control dependencies do), infers every shape from the feed shapes,
// and plans memory: each intermediate value gets an offset in one arena chosen
// by liveness, so peak memory is known before the first run and no run
// allocates for planned values. Running it again does not re-plan. Each
// compiler phase has its own file in core/compiler/. Compiling allocates
// nothing: the first Run allocates the arena (ResourceExhausted if the
// machine cannot hold it), so callers check the plan against a budget
// first.
//
//   ProgramSpec spec;
//   spec.feeds = {x};  spec.feed_shapes = {TensorShape({40, 784})};
//   spec.fetches = {loss};  spec.targets = {train_op};
//   ASSIGN_OR_RETURN(auto program, Program::Compile(*graph, spec));
//   std::vector<Tensor> out;
//   RETURN_IF_ERROR(program->Run(env, {batch}, &out));
//   program->memory().peak_bytes;
//
// The executor runs a node as soon as its inputs are ready; with an
// inter-op pool in the RunEnv, independent nodes run in parallel (the memory
// plan adds the ordering edges that make arena reuse safe under any order).
//
// A node whose kernel runs programs of its own (a device loop's body and
// condition; ops registered with SetSubPrograms) gets them compiled here,
// once, by the sub-programs phase: the memory plan counts exactly the
// programs its kernel then runs (SubPrograms, in the node's KernelState).
//
// Thread safety: Compile is a pure function of the graph. A Program owns one
// arena, so Run must not be called concurrently on the same Program; compile
// one Program per thread (one per emulated IPU and replica) instead.
#ifndef IPUFLOW_CORE_PROGRAM_H_
#define IPUFLOW_CORE_PROGRAM_H_

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/graph.h"
#include "core/kernel.h"
#include "core/memory_plan.h"
#include "core/program_spec.h"
#include "core/tensor.h"

namespace ipuflow {

namespace compiler {
struct Fusion;
struct Interval;
struct NodeOrder;
struct Values;
}  // namespace compiler

// Values to feed, by the output they replace.
using FeedList = std::vector<std::pair<Output, Tensor>>;

// The spec for running `fetches` and `targets` with `feeds`, checking that
// every handle is valid and every fed value has its output's dtype (errors
// name the output). `signature` receives a key naming the feeds (with
// their shapes), fetches and targets, for compile caches.
absl::StatusOr<ProgramSpec> MakeProgramSpec(const FeedList& feeds,
                                            const std::vector<Output>& fetches,
                                            const std::vector<Node*>& targets,
                                            std::string* signature);

class Program;

// The programs one node's kernel runs (a device loop's "cond" and "body"),
// by role, kept in that node's KernelState slot and so owned by the
// enclosing Program. Program::Compile fills it in its sub-programs phase
// for the node's planned input shapes, so what runs is what the memory
// plan counted. Where those shapes were not known at compile time the
// compiler leaves it empty and the kernel compiles the programs on its
// first run (and they are not in the plan). Not thread-safe: used by the
// node's kernel, during the enclosing program's runs.
class SubPrograms : public KernelState {
 public:
  explicit SubPrograms(bool fuse) : fuse_(fuse) {}
  ~SubPrograms() override;

  // The enclosing program's ProgramSpec::fuse, for late compiles.
  bool fuse() const { return fuse_; }
  bool empty() const { return programs_.empty(); }
  // The program for `role`, or null.
  Program* Find(const std::string& role) const;
  void Add(std::string role, std::unique_ptr<Program> program);
  // Every program, with its role.
  const std::vector<std::pair<std::string, std::unique_ptr<Program>>>&
  programs() const {
    return programs_;
  }

 private:
  bool fuse_;
  std::vector<std::pair<std::string, std::unique_ptr<Program>>> programs_;
};

class Program {
 public:
  ~Program();
  static absl::StatusOr<std::unique_ptr<Program>> Compile(
      const Graph& graph, const ProgramSpec& spec);

  // Programs compiled by this process so far (sub-programs included): a
  // counter for tests and benchmarks that a loop body compiles once.
  static int64_t CompileCount();

  // Feeds in spec order; fetches are returned in spec order and own their
  // memory (they stay valid after the next run). REQUIRES: not concurrent
  // with another Run of this Program.
  absl::Status Run(RunEnv& env, absl::Span<const Tensor> feeds,
                   std::vector<Tensor>* fetches);

  // Totals over all shards, and per shard (index = node IPU; unplaced
  // nodes count as shard 0). Each shard's intermediates are planned
  // separately: on hardware they live in different IPUs' memory. Nodes that
  // run sub-programs (device loops) include those programs' needs.
  const MemoryPlan& memory() const { return memory_; }
  const std::vector<MemoryPlan>& shard_memory() const { return shards_; }
  int num_shards() const { return static_cast<int>(shards_.size()); }
  // Bytes each run moves between shards (values consumed on another IPU).
  int64_t cross_shard_bytes() const { return cross_shard_bytes_; }
  const ProgramSpec& spec() const { return spec_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  // Graph nodes that run inside a fused node (core/compiler/fusion.h).
  int num_fused_away() const { return num_fused_away_; }
  // Node names in node order (for tests and traces).
  std::vector<std::string> NodeNamesInOrder() const;
  // The nodes in the order they run one at a time.
  std::vector<const Node*> nodes_in_order() const;
  // Names of the variables the program touches.
  const std::vector<std::string>& variables() const { return variables_; }
  // The program `node`'s kernel runs as `role` ("body", "cond"): compiled
  // with this one, or by the kernel's first run if its shapes were unknown;
  // null if neither.
  const Program* sub_program(const Node* node, const std::string& role) const;
  Program* sub_program(const Node* node, const std::string& role) {
    return const_cast<Program*>(
        static_cast<const Program*>(this)->sub_program(node, role));
  }
  // Runs so far (since the last IPUSystem::ResetSeed); a loop body counts
  // its iterations.
  uint64_t runs() const { return runs_; }
  // The random-stream positions of this program and its sub-programs
  // (core/checkpoint/training_state.h saves them): {key, runs} with key "" for
  // this one and "<node>:<role>" for a sub-program ("loop:body", nested
  // "loop:body/inner:body"), and "<program key>#<node>" for each node that
  // counts its own runs (NodeRunCount: dropout, random ops). `seed_epoch`
  // is the system's current FloatingPointBehaviour::seed_epoch: a program
  // that has not run since the seed was reset counts 0 runs.
  std::vector<std::pair<std::string, uint64_t>> RunCounters(
      uint64_t seed_epoch) const;
  // Sets the counters RunCounters gave, so the runs that follow draw the
  // streams (stochastic rounding, dropout, random ops) the saved ones'
  // successors drew; node counters not given restart at 0. All or nothing:
  // NotFound naming the first key that is not a program or random node
  // here, or a program left out. `check_only`: only the checks.
  // REQUIRES: not running.
  absl::Status RestoreRunCounters(
      const std::vector<std::pair<std::string, uint64_t>>& counters,
      uint64_t seed_epoch, bool check_only = false);

  // Per-node kernel times, to see where a run spends its time (benchmarks,
  // --profile). While on, runs are sequential and each kernel is timed with
  // the steady clock; off (the default) costs one branch per node.
  struct NodeTime {
    std::string name, op;  // A fused node: its ops joined by '+'.
    int64_t runs = 0;
    double seconds = 0;          // Summed over runs.
    std::vector<float> samples;  // Seconds per run (for medians).
  };
  void set_profiling(bool on);
  std::vector<NodeTime> profile() const;

 private:
  struct ExecNode;
  class Executor;
  Program() = default;
  // Every node's kernel-state slot (a fused chain's nodes each their own).
  std::vector<std::pair<const Node*, std::unique_ptr<KernelState>*>>
  StateSlots();
  // This program and every sub-program under it, keyed as RunCounters.
  void CollectPrograms(const std::string& prefix,
                       std::vector<std::pair<std::string, Program*>>* out);
  // The executor's nodes and edges from the compiler phases' results; needs
  // value_shapes_ and num_values_ set.
  void BuildExecNodes(const compiler::NodeOrder& order,
                      const compiler::Values& values, compiler::Fusion& fusion,
                      const std::vector<std::set<int>>& preds,
                      const std::vector<compiler::Interval>& planned);

  ProgramSpec spec_;
  std::vector<std::unique_ptr<ExecNode>> nodes_;
  int num_values_ = 0;
  std::vector<int> feed_values_;   // Value id per feed.
  std::vector<int> fetch_values_;  // Value id per fetch.
  std::vector<int> value_uses_;    // Consumers per value (+1 if fetched).
  std::vector<DType> value_dtypes_;
  std::vector<TensorShape> value_shapes_;
  std::vector<int> initial_ready_;
  // The node order cut into runs of consecutive nodes of one shard, each with
  // the earlier runs it waits for (RunEnv::post_to_shard): those holding a
  // predecessor of one of its nodes (data, control, variable order and
  // arena reuse edges, core/compiler/ordering.h).
  struct ShardRun {
    int shard = 0;
    int begin = 0, end = 0;  // Positions [begin, end).
    std::vector<int> after;
  };
  std::vector<ShardRun> shard_runs_;
  // Allocates the arena (arena_bytes_) if not yet done; ResourceExhausted
  // when the machine cannot hold it.
  absl::Status AllocateArena();
  int64_t arena_bytes_ = 0;
  std::shared_ptr<TensorBuffer> arena_;  // Null until the first Run.
  bool has_branches_ = false;
  int num_fused_away_ = 0;
  // Per-run state, reused by every run (runs are never concurrent).
  std::vector<Tensor> run_values_;
  std::unique_ptr<std::atomic<int>[]> run_uses_;
  std::unique_ptr<std::atomic<int>[]> run_pending_;
  MemoryPlan memory_;
  std::vector<MemoryPlan> shards_;
  int64_t cross_shard_bytes_ = 0;
  std::vector<std::string> variables_;
  // KernelContext::run_stream(): a hash of the spec, and the runs so far.
  uint64_t stream_salt_ = 0;
  uint64_t runs_ = 0;
  uint64_t seed_epoch_ = 0;  // FloatingPointBehaviour::seed_epoch of runs_.
  bool profiling_ = false;
  std::vector<NodeTime> profile_;  // By position, while profiling_.
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_PROGRAM_H_
