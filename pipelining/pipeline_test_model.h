// A small four-stage classifier for the pipeline tests, and the same model
// trained without pipelining (a host Session accumulating gradients over the
// same micro-batches) as the reference the pipelined runs must equal.
#ifndef IPUFLOW_PIPELINING_PIPELINE_TEST_MODEL_H_
#define IPUFLOW_PIPELINING_PIPELINE_TEST_MODEL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/ipu_strategy.h"
#include "core/ipu/ipu_system.h"
#include "core/scope.h"
#include "core/session.h"
#include "core/tensor.h"
#include "feeds/dataset.h"
#include "optimizers/optimizer.h"
#include "pipelining/pipeline.h"

namespace ipuflow::pipelining::testing {

inline constexpr int kBatch = 4;
inline constexpr int kFeatures = 6;
inline constexpr int kClasses = 3;

// Stage s of the model: (h, labels) -> (h', labels). Variables "w<s>" (and
// "b<s>") are created in `scope` with the values of `init` (by name).
// Stage 3 returns (logits, labels).
std::vector<Output> ModelStage(int s, const Scope& scope,
                               const std::vector<Output>& args,
                               const std::map<std::string, Tensor>& init);

// The four stages as pipeline stages (each declares its 2 inputs); `init`
// must outlive the Pipeline::Create() call that builds them.
std::vector<ComputationalStage> ModelStages(
    const std::map<std::string, Tensor>& init);

// SGD(learning_rate) on the mean softmax cross-entropy of the last stage's
// (logits, labels).
OptimizerFunction SgdCrossEntropy(float learning_rate);

// Deterministic initial values for every variable of the model.
std::map<std::string, Tensor> InitialValues(uint64_t seed);

// `n` micro-batches: x float32 [kBatch, kFeatures], labels int32 [kBatch];
// the same data TrainReference uses.
feeds::DatasetPtr MicroBatches(int n);

// What a reference run needs to know about the optimizer and reduction.
using OptimizerFactory =
    std::function<std::shared_ptr<optimizers::Optimizer>()>;

// Trains the model without pipelining: for each of `runs` runs, the
// gradients of `micro_batches` consecutive micro-batches are accumulated
// (summed; divided by micro_batches when `mean`) and applied once.
// Returns the final variable values by name.
std::map<std::string, Tensor> TrainReference(
    const std::map<std::string, Tensor>& init, int micro_batches, int runs,
    bool mean, const OptimizerFactory& make_optimizer);

// The variable values on the IPUs after a pipelined run, by the model's
// names ("w0", ...): variables "<pipeline>/stage<s>/<name>" on any IPU.
std::map<std::string, Tensor> ReadPipelineVariables(IPUSystem* system,
                                                    int num_ipus);

std::unique_ptr<IPUSystem> MakeSystem(int ipus, bool allow_recompute = false);

// One pipelined call the one way (strategy.Compile(graph, {}, {frame},
// feeds) then Execute, the values of `feeds` to every replica); returns
// the pipeline's last report. Keep `strategy` across calls: its program's
// lowering holds offloaded state between runs.
absl::StatusOr<PipelineReport> RunPipeline(IPUStrategy& strategy,
                                           const Pipeline& pipeline,
                                           const FeedList& feeds = {});

// Max |a - b| over all variables (fails the test if names differ).
float MaxDifference(const std::map<std::string, Tensor>& a,
                    const std::map<std::string, Tensor>& b);

}  // namespace ipuflow::pipelining::testing

#endif  // IPUFLOW_PIPELINING_PIPELINE_TEST_MODEL_H_
