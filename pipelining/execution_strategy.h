// PopTorch's execution strategies (poptorch.Block, Stage, Phase,
// PipelinedExecution, ShardedExecution, SerialPhasedExecution, AutoStage) on
// top of the pipeline operator: a model is an ordered list of named blocks,
// a strategy groups them into stages placed on IPUs, and ApplyStrategy
// turns that into PipelineOptions for Pipeline::Create().
//
//   BlockModel model;
//   RETURN_IF_ERROR(model.Add("B1", layer1));   // with poptorch.Block("B1"):
//   RETURN_IF_ERROR(model.Add("B2", layer2));
//   RETURN_IF_ERROR(model.Add("B3", layer3));
//   PipelineOptions o;
//   RETURN_IF_ERROR(ApplyStrategy(
//       model,
//       PipelinedExecution(Stage("B1", "B2").Ipu(0), Stage("B3").Ipu(1)), &o));
//   o.gradient_accumulation_count = 8;  // then as for Pipeline::Create()
//   o.infeed_queue = infeed.get();
//   o.outfeed_queue = outfeed.get();
//   ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(scope, o));
//
// Model. Block i + 1 receives the outputs of block i (block 0: the
// pipeline's inputs then the infeed element). AddParallel appends a block
// that runs *parallel* to the previous one: it receives the same arguments,
// and the block after the parallel group receives the concatenation of the
// group's outputs, in block order. In PopTorch the traced dataflow says
// which blocks are independent; a C++ function has no traced dataflow, so
// the model says it, and the meaning of a model never depends on the
// strategy (BlockModel::Apply computes it on the host). Every node a block
// builds is in a sub-scope named after the block and carries the block name
// (Node::block()).
//
// Stages. A stage is a run of consecutive blocks on one IPU; each stage
// becomes one computational stage composing its blocks. Stages of the
// blocks of one parallel group become one computational stage of
// concurrent functions (Graphcore's concurrent pipeline stages), one per
// stage and IPU. A stage's IPU is Stage::Ipu (or Phase::Ipus) if given,
// overriding the blocks' ipu_id as in PopTorch; else the ipu_id its blocks
// were added with (they must agree); else its index: the stage's number for
// the pipelined strategies, its position in its phase for phases. (The IPUs
// a program uses, max index + 1, must divide the system's IPU count: a
// 4-IPU system runs stages on IPUs {0, 1} or {0, 3}, not {0, 2}.)
//
// Strategies -> PipelineOptions:
//  - PipelinedExecution: one computational stage per stage (or concurrent
//    group), pipeline_schedule Grouped (set Interleaved afterwards if
//    wanted). With no stages, AutoStage decides: kSameAsIpu (default) needs
//    an ipu_id on every block and makes a stage of each run of blocks on
//    one IPU, whose id is the IPU's (so no IPU may come back later);
//    kAutoIncrement starts a new stage at each change of ipu_id and at every
//    block without one (on the IPU numbered like its stage).
//  - ShardedExecution: the same stages, pipeline_schedule Sequential: one
//    micro-batch and one IPU at a time (for debugging, single samples).
//  - SerialPhasedExecution: phases run one after another (Sequential); each
//    phase is one computational stage whose stages run in parallel, each on
//    its IPU, so a phase with several stages must hold one parallel group.
//    Not modelled: PopTorch's streaming of weights between phases (ipuflow
//    keeps a stage's variables on its IPU), ParallelPhasedExecution,
//    separate backward phases. Training differentiates each phase as a
//    pipeline stage.
//
// Errors: PlanStrategy / ApplyStrategy return InvalidArgument listing every
// violation at once, one line each, with PopTorch's wording where it has one
// ("Unknown Block 'X'; list of expected Blocks: [...]", "Block 'X' is
// associated with more than one stage", "AutoStage.SameAsIpu was selected
// but no IPU was specified for block 'X'", "Phase 1 contains 2 stages but you
// provided 3 IPUs"). What Pipeline::Create() itself checks (at least two
// stages, gradient_accumulation_count, IPU sharing rules) it reports itself.
//
// Thread safety: plain values; build and read them from one thread at a
// time. The stage functions ApplyStrategy returns hold copies of the blocks'
// functions: the model may be destroyed afterwards.
#ifndef IPUFLOW_PIPELINING_EXECUTION_STRATEGY_H_
#define IPUFLOW_PIPELINING_EXECUTION_STRATEGY_H_

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/scope.h"
#include "pipelining/pipeline.h"
#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

// poptorch.Block: a named part of the model.
struct Block {
  std::string name;
  StageBody body;
  std::optional<int> ipu_id;
  bool parallel = false;  // Receives the previous block's arguments.
};

// The model: blocks in execution order.
class BlockModel {
 public:
  // Appends a block that receives the previous block's outputs. An empty
  // name takes the next automatic id ("0", "1", ...: poptorch.Block with
  // useAutoId). AlreadyExists if the name is taken; InvalidArgument for an
  // empty body or a negative ipu_id.
  absl::Status Add(std::string name, StageBody body,
                   std::optional<int> ipu_id = std::nullopt);
  // Appends a block parallel to the previous one (see the file comment).
  // InvalidArgument, besides Add's errors, on an empty model.
  absl::Status AddParallel(std::string name, StageBody body,
                           std::optional<int> ipu_id = std::nullopt);

  const std::vector<Block>& blocks() const { return blocks_; }
  int size() const { return static_cast<int>(blocks_.size()); }
  // The index of block `name`, or -1.
  int Find(std::string_view name) const;

  // Builds every block in `scope`, as the model defines: the reference a
  // pipelined run must equal, or the whole model on one device.
  std::vector<Output> Apply(const Scope& scope,
                            const std::vector<Output>& args) const;

 private:
  absl::Status Append(std::string name, StageBody body,
                      std::optional<int> ipu_id, bool parallel);

  std::vector<Block> blocks_;
  int next_auto_id_ = 0;
};

// poptorch.AutoStage.
enum class AutoStage { kSameAsIpu, kAutoIncrement };

// poptorch.Stage("B1", "B2").ipu(0): consecutive blocks on one IPU.
class Stage {
 public:
  template <typename... Ids,
            std::enable_if_t<(std::is_convertible_v<Ids, std::string> && ...),
                             int> = 0>
  explicit Stage(Ids&&... block_ids)
      : blocks_{std::string(std::forward<Ids>(block_ids))...} {}
  explicit Stage(std::vector<std::string> block_ids)
      : blocks_(std::move(block_ids)) {}

  Stage& Ipu(int ipu) {
    ipu_ = ipu;
    return *this;
  }
  const std::vector<std::string>& blocks() const { return blocks_; }
  std::optional<int> ipu() const { return ipu_; }

 private:
  std::vector<std::string> blocks_;
  std::optional<int> ipu_;
};

// poptorch.Phase(Stage("A").ipu(0), Stage("B").ipu(1)): stages that run in
// parallel. (PopTorch's Phase("A", "B"), one stage of two blocks, is
// Phase(Stage("A", "B")) here.)
class Phase {
 public:
  template <typename... Stages,
            std::enable_if_t<
                (std::is_same_v<std::decay_t<Stages>, Stage> && ...), int> = 0>
  explicit Phase(Stages&&... stages)
      : stages_{std::forward<Stages>(stages)...} {}
  explicit Phase(std::vector<Stage> stages) : stages_(std::move(stages)) {}

  // One IPU per stage (checked by PlanStrategy).
  Phase& Ipus(std::vector<int> ipus) {
    ipus_ = std::move(ipus);
    return *this;
  }
  const std::vector<Stage>& stages() const { return stages_; }
  std::vector<Stage>& stages() { return stages_; }
  const std::optional<std::vector<int>>& ipus() const { return ipus_; }

 private:
  std::vector<Stage> stages_;
  std::optional<std::vector<int>> ipus_;
};

class ExecutionStrategy {
 public:
  enum class Kind { kPipelined, kSharded, kSerialPhased };

  ExecutionStrategy(Kind kind, std::vector<Stage> stages);
  ExecutionStrategy(Kind kind, AutoStage auto_stage);
  explicit ExecutionStrategy(std::vector<Phase> phases);

  Kind kind() const { return kind_; }
  // "PipelinedExecution", "ShardedExecution", "SerialPhasedExecution".
  const char* name() const;
  AutoStage auto_stage() const { return auto_stage_; }
  // Explicit stages (pipelined strategies; empty: AutoStage) or phases.
  const std::vector<Stage>& stages() const { return stages_; }
  const std::vector<Phase>& phases() const { return phases_; }

  // strategy.stage("B1").ipu(0): the explicit stage holding `block_id`, or
  // nullptr. Valid until the strategy is changed or destroyed.
  Stage* stage(std::string_view block_id);

 private:
  Kind kind_;
  AutoStage auto_stage_ = AutoStage::kSameAsIpu;
  std::vector<Stage> stages_;
  std::vector<Phase> phases_;
};

namespace internal {
inline Stage ToStage(Stage stage) { return stage; }
inline Stage ToStage(std::string block_id) {
  return Stage(std::move(block_id));
}
inline Phase ToPhase(Phase phase) { return phase; }
inline Phase ToPhase(Stage stage) { return Phase(std::move(stage)); }
inline Phase ToPhase(std::string block_id) {
  return Phase(Stage(std::move(block_id)));
}
}  // namespace internal

// Each argument a Stage or a block id (a one-block stage); none: AutoStage
// kSameAsIpu.
template <typename... Stages>
ExecutionStrategy PipelinedExecution(Stages&&... stages) {
  return ExecutionStrategy(
      ExecutionStrategy::Kind::kPipelined,
      std::vector<Stage>{internal::ToStage(std::forward<Stages>(stages))...});
}
inline ExecutionStrategy PipelinedExecution(AutoStage auto_stage) {
  return ExecutionStrategy(ExecutionStrategy::Kind::kPipelined, auto_stage);
}
template <typename... Stages>
ExecutionStrategy ShardedExecution(Stages&&... stages) {
  return ExecutionStrategy(
      ExecutionStrategy::Kind::kSharded,
      std::vector<Stage>{internal::ToStage(std::forward<Stages>(stages))...});
}
inline ExecutionStrategy ShardedExecution(AutoStage auto_stage) {
  return ExecutionStrategy(ExecutionStrategy::Kind::kSharded, auto_stage);
}
// Each argument a Phase, a Stage (a one-stage phase) or a block id (a
// one-block phase), as poptorch.SerialPhasedExecution("B1", "B2").
template <typename... Phases>
ExecutionStrategy SerialPhasedExecution(Phases&&... phases) {
  return ExecutionStrategy(
      std::vector<Phase>{internal::ToPhase(std::forward<Phases>(phases))...});
}

// A stage as resolved: its blocks (consecutive, in model order) and IPU.
struct PlannedStage {
  std::vector<std::string> blocks;
  int ipu = 0;
};

// What ApplyStrategy builds: computational stage s runs stages[s] (several:
// concurrent functions, one per IPU).
struct StrategyPlan {
  PipelineSchedule schedule = PipelineSchedule::kGrouped;
  std::vector<std::vector<PlannedStage>> stages;

  // device_mapping's first IPU per computational stage (as table().stage_ipu).
  std::vector<int> StageIpus() const;
  // "stage 0: [B1, B2] on IPU 0\nstage 1: [B3] on IPU 1 | [B4] on IPU 2"
  std::string ToString() const;
};

// Resolves `strategy` against `model`; InvalidArgument listing every
// violation (see the file comment).
absl::StatusOr<StrategyPlan> PlanStrategy(const BlockModel& model,
                                          const ExecutionStrategy& strategy);

// PlanStrategy, then replaces options->computational_stages,
// device_mapping and pipeline_schedule; leaves every other field alone.
// REQUIRES: options != nullptr (InvalidArgument otherwise).
absl::Status ApplyStrategy(const BlockModel& model,
                           const ExecutionStrategy& strategy,
                           PipelineOptions* options);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_EXECUTION_STRATEGY_H_
