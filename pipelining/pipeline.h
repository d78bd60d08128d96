// pipelining::Pipeline: the pipeline operator of Graphcore's TensorFlow port
// (ipu.pipelining_ops.pipeline), in C++. A model split into computational
// stages runs over several emulated IPUs: each stage on its IPU's thread,
// activations crossing IPUs through bounded FIFOs, micro-batches streaming
// in from an infeed; in training the backward of each stage runs on the same
// IPU and gradients are accumulated over gradient_accumulation_count
// micro-batches, then applied once.
//
//   pipelining::PipelineOptions o;
//   o.computational_stages = {stage1, stage2, stage3, stage4};
//   o.device_mapping = {0, 1, 2, 3};
//   o.gradient_accumulation_count = 16;
//   o.repeat_count = 10;
//   o.infeed_queue = infeed.get();
//   o.outfeed_queue = outfeed.get();
//   o.optimizer_function = [](const Scope& s, const std::vector<Output>& out) {
//     return OptimizerFunctionOutput{
//         std::make_shared<optimizers::AdamWOptimizer>(1e-3f), out[0]};
//   };
//   ASSIGN_OR_RETURN(auto pipeline, pipelining::Pipeline::Create(scope, o));
//   RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));  // variables, slots
//   ASSIGN_OR_RETURN(
//       DeviceProgram* exe,
//       strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
//   std::vector<std::vector<Tensor>> results;  // Empty: results leave by
//   RETURN_IF_ERROR(exe->Execute({{}}, &results));  // the outfeed.
//   std::cout << pipeline->last_report()->Summary();
//
// A stage is a function (scope, arguments) -> outputs. Stage 0 receives
// `inputs` followed by the infeed element; stage s+1 receives exactly the
// outputs of stage s (the concatenation of their outputs, for concurrent
// stages). Stages are built in the caller's graph, each in a sub-scope
// "<name>/stage<s>" placed on its IPU; they may create and read variables
// (on their own IPU; several stages on one IPU may read one, as an
// embedding and its tied output head: docs/PIPELINING.md, "Tied weights")
// but may capture no other value from outside.
// Inference pipelines enqueue the last stage's outputs to the outfeed;
// training pipelines pass them to optimizer_function, whose loss is
// differentiated stage by stage.
//
// Everything is validated before anything runs and all violations are
// reported at once (InvalidArgument, one line each): see Pipeline::Create()
// below and validation.h for the gradient_accumulation_count rule.
//
// Ownership: the Pipeline keeps the optimizer alive and must outlive the
// programs compiled from its frame (they then fail with
// FailedPrecondition); the system is the caller's. The queues are used while
// building only: stage 0 dequeues and the last stage enqueues through ordinary
// InfeedDequeue / OutfeedEnqueue nodes, which reach them through the graph
// as a device loop's do (a run after a queue is gone: FailedPrecondition).
// Thread safety: building is single-threaded; a program runs one Execute
// at a time, on the IPUs' worker threads.
#ifndef IPUFLOW_PIPELINING_PIPELINE_H_
#define IPUFLOW_PIPELINING_PIPELINE_H_

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/device_program.h"
#include "core/ipu/ipu_strategy.h"
#include "core/ipu/ipu_system.h"
#include "core/program.h"
#include "core/scope.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/optimizer.h"
#include "pipelining/pipeline_report.h"
#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

// As Graphcore's RecomputationMode. Recomputation itself is switched on by
// IPUConfig.allow_recompute (as in the original); this picks how, and the
// combinations Graphcore rejects are rejected here too. ipuflow runs both
// modes the same way: the stash keeps each stage's arguments (and stateful
// values), and the backward program recomputes the forward from them; the
// executor interleaves recomputed and gradient ops by dataflow, which is
// what RecomputeAndBackpropagateInterleaved asks for.
enum class RecomputationMode {
  kAuto,  // RecomputeThenBackpropagate; Sequential: ...Interleaved.
  kRecomputeThenBackpropagate,
  kRecomputeAndBackpropagateInterleaved,
};
const char* RecomputationModeName(RecomputationMode mode);

using ReductionMethod = optimizers::GradientAccumulationReductionMethod;

using StageBody = std::function<std::vector<Output>(
    const Scope&, const std::vector<Output>&)>;

// One stage function. `num_inputs` (optional, -1 = any) declares how many
// arguments it takes, so a mismatch with the previous stage's outputs is a
// validation error instead of an out-of-range access.
struct StageFunction {
  template <typename F,
            std::enable_if_t<
                std::is_invocable_r_v<std::vector<Output>, F, const Scope&,
                                      const std::vector<Output>&>,
                int> = 0>
  StageFunction(F f, int num_inputs = -1)  // NOLINT: implicit from a lambda.
      : body(std::move(f)), num_inputs(num_inputs) {}
  StageBody body;
  int num_inputs = -1;
};

// An element of computational_stages: one stage, or concurrent stages (a
// list) that receive the same arguments and whose outputs are concatenated.
struct ComputationalStage {
  template <typename F,
            std::enable_if_t<
                std::is_invocable_r_v<std::vector<Output>, F, const Scope&,
                                      const std::vector<Output>&>,
                int> = 0>
  ComputationalStage(F f)  // NOLINT: implicit.
      : functions{StageFunction(std::move(f))} {}
  ComputationalStage(StageFunction f)  // NOLINT: implicit.
      : functions{std::move(f)} {}
  ComputationalStage(std::initializer_list<StageFunction> concurrent)
      : functions(concurrent) {}
  std::vector<StageFunction> functions;
};

// An element of device_mapping: one IPU, or one per concurrent stage.
struct StageDevices {
  StageDevices(int ipu) : ipus{ipu} {}  // NOLINT: implicit.
  StageDevices(std::initializer_list<int> concurrent) : ipus(concurrent) {}
  std::vector<int> ipus;
};

struct OptimizerFunctionOutput {
  std::shared_ptr<optimizers::Optimizer> opt;
  Output loss;  // A float scalar.
};
using OptimizerFunction = std::function<OptimizerFunctionOutput(
    const Scope&, const std::vector<Output>&)>;

// The arguments of Graphcore's pipeline(), with its defaults.
struct PipelineOptions {
  std::vector<ComputationalStage> computational_stages;
  // Empty: stage s on IPU s.
  std::vector<StageDevices> device_mapping;
  int gradient_accumulation_count = 0;  // Required.
  int repeat_count = 1;
  // Values given to the first stage before the infeed element (a learning
  // rate, say), computed once per Run from the graph (feeds allowed).
  std::vector<Output> inputs;
  feeds::IPUInfeedQueue* infeed_queue = nullptr;
  feeds::IPUOutfeedQueue* outfeed_queue = nullptr;
  // Empty: an inference pipeline.
  OptimizerFunction optimizer_function;
  PipelineSchedule pipeline_schedule = PipelineSchedule::kGrouped;
  // A table to run instead of MakeSchedule's (schedule.h): hand-written,
  // edited, or read from torch.distributed.pipelining's CSV
  // (schedule_csv.h, whose tables are kCustom). pipeline_schedule must equal
  // its kind (kCustom needs a table); it must have one stage per
  // computational stage on device_mapping's IPUs (each stage's first),
  // gradient_accumulation_count micro-batches, backwards iff training, and
  // pass ValidateScheduleTable. Violations are listed with the others, each
  // naming the field; an invalid table with its grid, offending cells
  // marked.
  std::optional<ScheduleTable> schedule_table;
  RecomputationMode recomputation_mode = RecomputationMode::kAuto;
  // Keep optimizer state (slots) in emulated remote memory between weight
  // updates, streaming it in for each update.
  bool offload_weight_update_variables = false;
  // Replicated optimizer-state sharding (TensorFlow IPU guide 6.9,
  // "Replicated tensor sharding"): each of R replicas keeps 1/R of the
  // offloaded optimizer state in its remote memory. With an elementwise
  // optimizer (SGD, Momentum, Adam, AdamW in a CrossReplicaOptimizer) the
  // update is sharded (ZeRO-1): the accumulated gradient is reduce-scattered,
  // each replica updates its chunk of a weight and of its state, and the weight
  // is all-gathered; otherwise the state is all-gathered for a whole
  // update. Each replica stores back its own shard. Requires offloading.
  bool replicated_optimizer_state_sharding = false;
  // Training: enqueue the loss instead of the last stage's outputs.
  bool outfeed_loss = false;
  // Enqueue the sum over the micro-batches once per pipeline run.
  bool accumulate_outfeed = false;
  ReductionMethod reduction_method = ReductionMethod::kSum;
  // Accumulator dtype (float32 or float16); default: the variable's.
  // A dtype, or a function of the variable (as the original's callable).
  optimizers::AccumulationDType gradient_accumulation_dtype;
  std::string name = "pipeline";
  // Virtual-clock costs, seconds per micro-batch of each stage's forward /
  // backward: each item then advances its IPU's virtual clock by this cost
  // instead of the CPU time it used, and the weight update by none. The
  // timeline is the dry-run planner's for these costs (planner.h) on any
  // host, however loaded: for tests and what-if studies. Unset: measured.
  std::optional<StageCosts> virtual_costs;
};

class PipelineDeviceFrame;
struct BuiltPipeline;

// A built pipeline: its stages are in the graph, and so is the frame node
// that runs them (frame(), the PipelineFrame op beside Repeat). A graph
// holding it compiles and runs like any loop, the one way to start
// anything: strategy.Compile(graph, {}, {pipeline->frame()}, feeds) is a
// DeviceProgram whose kernel runs the stages' per-IPU work lists, replicated
// like any executable; options.inputs are computed by that program (feeds
// allowed). Execute runs repeat_count x gradient_accumulation_count
// micro-batches on every replica; last_report() then holds replica 0's
// report.
//
// Errors (Compile): FailedPrecondition if the system has fewer IPUs than
// the mapping uses; InvalidArgument if replicas x IPUs do not fit the
// system; ResourceExhausted (with a per-IPU report) if a stage does not fit
// its IPU. Execute: any error of a stage, naming the stage, micro-batch and
// op; an error on one IPU cancels the others, nothing is left blocked.
// Variables (and optimizer slots, accumulators) must have been initialised,
// e.g. by IPUStrategy::Initialize.
class Pipeline {
 public:
  // Builds the pipeline's stages (forward, and backward + gradient
  // accumulation + weight update when training) in `scope`'s graph.
  // InvalidArgument listing every violation: fewer than two stages; a
  // device_mapping of the wrong length (or a concurrent entry whose IPU list
  // does not match its functions); a gradient_accumulation_count the schedule
  // cannot run (validation.h); Interleaved training with two stages on one IPU;
  // a placement torch's schedules cannot use; a schedule_table that does not
  // fit these options or is invalid (its grid with the cells marked);
  // a stage whose declared num_inputs differs from what it receives; a stage
  // capturing a non-variable value from outside, or a variable on another IPU;
  // a gradient-accumulation optimizer; an inference pipeline whose last stage
  // has outputs but no outfeed; outfeed_loss without optimizer_function;
  // a recomputation mode the schedule does not support.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(
      const Scope& scope, PipelineOptions options);

  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  bool training() const;
  int num_stages() const;
  // The schedule table of one pipeline run (one repeat).
  const ScheduleTable& table() const;
  // The IPUs one replica uses (max device index + 1).
  int num_ipus() const;
  // The frame node: the target for IPUStrategy::Compile / Run.
  Node* frame() const;
  // Replica 0's report of the last run that completed, of any program
  // compiled from the frame; nullopt before the first.
  std::optional<PipelineReport> last_report() const;

 private:
  Pipeline();
  std::unique_ptr<BuiltPipeline> built_;
  // The frame's owner (the graph holds a weak reference).
  std::shared_ptr<PipelineDeviceFrame> frame_;
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_H_
