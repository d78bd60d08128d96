// KernelContext: what an op's kernel sees when it runs, and RunEnv, the
// device a program runs on (its threads, its variables, its services).
//
//   absl::Status SquareKernel(KernelContext& ctx) {
//     const Tensor& x = ctx.input(0);
//     ASSIGN_OR_RETURN(Tensor* y, ctx.allocate_output(0, x.shape()));
//     y->flat<float>() = x.flat<float>().square();
//     return absl::OkStatus();
//   }
//
// Kernels report bad input with ctx.InvalidArgument(...), which names the
// node and op. allocate_output returns memory planned by the compiler
// (core/program.h) when the shape is the one planned, else fresh memory
// (ResourceExhausted, naming the node, when it cannot be had).
//
// Thread safety: one KernelContext per kernel invocation, used by one
// thread. Kernels may run concurrently with other kernels of the same program
// (inter-op parallelism), so they must not keep mutable static state.
#ifndef IPUFLOW_CORE_KERNEL_H_
#define IPUFLOW_CORE_KERNEL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/floating_point.h"
#include "core/graph.h"
#include "core/resource.h"
#include "core/taken_elements.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace ipuflow {

class CancellationManager;
class CollectiveGroup;
class IPUDevice;

// Where a program runs: the host, or one emulated IPU of one replica.
// Not owned by programs; must outlive every run that uses it.
struct RunEnv {
  ThreadPool* intra_op = nullptr;  // Required: kernels' ParallelFor.
  ThreadPool* inter_op = nullptr;  // Optional: independent nodes in parallel.
  ResourceMgr* resources = nullptr;
  int replica = 0;  // This process's: indexes feeds and local collectives.
  int num_replicas = 1;
  // Global index of this process's replica 0 (docs/DISTRIBUTED.md); 0 in
  // one process. KernelContext::global_replica() adds `replica`.
  int first_replica = 0;
  int ipu = 0;  // Index of the IPU this program runs on (within its system).
  // Cancels runs in progress; blocking kernels register with it. May be null.
  CancellationManager* cancellation = nullptr;
  // Inside a device loop's iteration: where InfeedDequeue records the
  // elements it delivers, given back if the iteration does not complete
  // (core/taken_elements.h). Null elsewhere.
  TakenElements* taken = nullptr;
  // The replica group for cross-replica collectives; null outside an IPU.
  CollectiveGroup* collectives = nullptr;
  // The emulated IPU running the program; null on the host.
  IPUDevice* device = nullptr;
  // Bytes the IPU holds (no output may be larger); 0 on the host.
  int64_t memory_budget = 0;
  // Rounding and traps of the IPU (IPUConfig.floating_point_behaviour);
  // null on the host: IEEE round-to-nearest-even, no traps.
  const FloatingPointBehaviour* floating_point = nullptr;
  // Set for a program sharded over several IPUs: runs `work` on shard k's
  // IPU thread with that shard's env, and returns when it is done. Shard 0
  // runs on the calling thread.
  std::function<void(int shard, const std::function<void(RunEnv&)>& work)>
      on_shard;
  // Set instead of on_shard when the shards are IPUs that may work at the
  // same time (a pipeline's weight update: each IPU updates its own
  // variables, TensorFlow IPU guide 6.5 "Pipelining"): queues `work` on
  // shard k's IPU thread, after what was queued there before, then `done`
  // on that thread, and returns (both inline when called on that thread).
  // The executor starts each run of one shard's nodes once the runs it
  // depends on have finished, and waits for all of them.
  std::function<void(int shard, std::function<void(RunEnv&)> work,
                     std::function<void()> done)>
      post_to_shard;
};

// Where the compiler placed one output of a node: `offset` into the
// program's arena, or -1 when the output gets memory of its own (fetched,
// or its shape was not known at compile time).
struct OutputPlan {
  TensorShape shape;
  int64_t offset = -1;
};

// Per-node state a kernel may keep between runs of one program (e.g. a
// compiled loop body). Owned by the program.
class KernelState {
 public:
  virtual ~KernelState() = default;
};

// The state of a kernel that draws a new random stream on each run
// (dropout, random ops): how many times its node has run in its program.
// One type, so that checkpoints find and restore it (Program::RunCounters).
struct NodeRunCount : KernelState {
  uint64_t runs = 0;
};

// The nodes a fused node runs (core/compiler/fusion.h), producer first, with
// what each one's own kernel needs when the fused kernel calls it
// (KernelContext::RunChainKernel). Owned by the program.
struct FusedChain {
  std::vector<const Node*> nodes;
  std::vector<int> values;  // By node: its output 0's value id.
  std::vector<std::vector<OutputPlan>> plans;  // By node, by output.
  std::vector<std::unique_ptr<KernelState>> states;
  Tensor scratch;  // An intermediate of another shape, during one run.
};

class KernelContext {
 public:
  const Node& node() const { return *node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor& input(int i) const { return *inputs_[i]; }
  int num_outputs() const { return node_->num_outputs(); }
  DType output_dtype(int i) const { return node_->output_dtype(i); }
  // The output's shape as inferred by the compiler (fully defined when the
  // program's feeds are).
  const TensorShape& planned_shape(int i) const;

  // Allocates output i with `shape` (dtype from the graph): the planned
  // memory, or fresh memory for a shape known only now (data-dependent).
  // ResourceExhausted if the shape is larger than the IPU's memory or the
  // host cannot allocate it.
  [[nodiscard]] absl::StatusOr<Tensor*> allocate_output(
      int i, const TensorShape& shape);
  // Hands over an existing tensor (a view of an input, a constant, ...).
  void set_output(int i, Tensor t);
  Tensor* mutable_output(int i) { return &outputs_[i]; }

  template <typename T>
  const T& attr(const std::string& name) const {
    return node_->attr<T>(name);
  }

  void ParallelFor(int64_t n, double cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn) const {
    env_->intra_op->ParallelFor(n, cost_per_unit, fn);
  }
  const ThreadPool& intra_op() const { return *env_->intra_op; }
  RunEnv& env() const { return *env_; }
  // The replica's index among every process's replicas: what ReplicaIndex
  // returns, and what every per-replica random stream (dropout, stochastic
  // rounding) is keyed by, so that P processes x R replicas draw as one
  // process with P x R (issue 33).
  int global_replica() const { return env_->first_replica + env_->replica; }
  // Kernel-private state kept across runs of this program.
  std::unique_ptr<KernelState>& state() { return *state_; }

  // For a fused node: its chain's nodes, producer first (the last is
  // node()); empty for other nodes.
  absl::Span<const Node* const> fused_nodes() const {
    if (fused_ == nullptr) return {};
    return fused_->nodes;
  }
  // Runs chain node i's own kernel on `inputs` and returns its output 0.
  // Where that output has the shape of this node's output 0, it is written
  // into this node's output 0 memory (planned or allocated here), so an
  // epilogue can finish it in place while it is in cache.
  [[nodiscard]] absl::StatusOr<Tensor*> RunChainKernel(
      int i, absl::Span<const Tensor* const> inputs);

  // For stochastic rounding (core/half_rounding.h): true when the compiler
  // found the node's outputs identical on every replica
  // (core/compiler/replica_identical.h).
  bool replica_identical() const { return replica_identical_; }
  // Tells this run of the node from its other runs: a hash of the program
  // (its spec) and of how many times the program has run (Program::Run
  // counts; a loop body's program counts its iterations). Keys stochastic
  // rounding with the seed, replica, node, output and element.
  uint64_t run_stream() const { return run_stream_; }
  // RoundToHalf reports (with a trap on) that nanoo turned a float16
  // overflow of `output` into NaN, so the floating-point check calls that
  // output's NaNs oflo, not inv. Any thread.
  void NoteHalfOverflow(int output) const {
    half_overflow_.fetch_or(uint64_t{1} << (output & 63),
                            std::memory_order_relaxed);
  }
  bool half_overflowed(int output) const {
    return (half_overflow_.load(std::memory_order_relaxed) >> (output & 63)) &
           1;
  }
  bool half_overflowed_any() const {
    return half_overflow_.load(std::memory_order_relaxed) != 0;
  }

  // Errors prefixed with the node: "MatMul 'dense/matmul': ...".
  template <typename... Args>
  absl::Status InvalidArgument(const Args&... args) const {
    return absl::InvalidArgumentError(
        absl::StrCat(node_->DebugName(), ": ", args...));
  }
  template <typename... Args>
  absl::Status Error(absl::StatusCode code, const Args&... args) const {
    return absl::Status(code, absl::StrCat(node_->DebugName(), ": ", args...));
  }

 private:
  friend class Program;
  using Inputs = absl::InlinedVector<const Tensor*, 6>;
  KernelContext(const Node* node, Inputs inputs, Tensor* outputs, RunEnv* env,
                std::unique_ptr<KernelState>* state,
                const std::vector<OutputPlan>* plans,
                const std::shared_ptr<TensorBuffer>* arena)
      : node_(node),
        inputs_(std::move(inputs)),
        outputs_(outputs),
        env_(env),
        state_(state),
        plans_(plans),
        arena_(arena) {}

  const Node* node_;
  Inputs inputs_;
  Tensor* outputs_;  // num_outputs() slots.
  RunEnv* env_;
  std::unique_ptr<KernelState>* state_;
  const std::vector<OutputPlan>* plans_;        // One per output.
  const std::shared_ptr<TensorBuffer>* arena_;  // The program's arena.
  bool replica_identical_ = false;
  uint64_t run_stream_ = 0;
  FusedChain* fused_ = nullptr;
  mutable std::atomic<uint64_t> half_overflow_{0};  // Bit per output.
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_KERNEL_H_
