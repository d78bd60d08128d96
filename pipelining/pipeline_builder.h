// The graph builder behind Pipeline::Create(): validates the options
// (pipeline_options_check.cc), builds each stage part's forward
// (pipeline_builder.cc) and, in training, its backward, the gradient
// accumulators and the weight update (pipeline_backward.cc), then the
// outfeed and the PipelineFrame node. What it builds is a BuiltPipeline
// (pipeline_internal.h). Internal to pipelining/; single-threaded.
#ifndef IPUFLOW_PIPELINING_PIPELINE_BUILDER_H_
#define IPUFLOW_PIPELINING_PIPELINE_BUILDER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/scope.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_frame.h"
#include "pipelining/pipeline_internal.h"

namespace ipuflow::pipelining::internal {

struct ArgSpec {
  DType dtype;
  TensorShape shape;
  std::string what;  // For errors: "output 1 of stage 0".
};

std::string ShapeStr(const ArgSpec& a);

// The value feeding the backward pass that the forward computed, when the
// backward consumes it: what the stash keeps (without recomputation).
bool Stashable(const Node* n);

// Graph building for one Pipeline::Create() call; collects violations.
class Builder {
 public:
  Builder(const Scope& scope, BuiltPipeline* b)
      : scope_(scope.NewSubScope(b->options.name)), b_(b), o_(b->options) {}

  absl::Status Build();
  // The PipelineFrame node running `frame`, named "<name>/frame".
  absl::StatusOr<Node*> BuildFrame(std::shared_ptr<PipelineDeviceFrame> frame);

 private:
  int num_stages() const {
    return static_cast<int>(o_.computational_stages.size());
  }
  // Every option, in the named checks below (pipeline_options_check.cc).
  void CheckOptions();
  // The device mapping resolved per stage part (part_ipus_,
  // logical_mapping_); a concurrent stage's IPU count checked.
  void ResolveDeviceMapping();
  // Interleaved training: no IPU holds two stages (concurrent parts too).
  void CheckInterleavedSharing();
  void CheckScheduleTable();
  // repeat_count, the enums, the micro-batch product, accumulate_outfeed.
  void CheckRanges();
  void CheckVirtualCosts();
  // Options that need or exclude others (outfeed_loss, sharding,
  // accumulation dtype, recomputation modes, the last stage).
  void CheckCombinations();
  void CheckStageFunctions();  // Every stage has a function.
  std::vector<ArgSpec> FirstStageArgs();
  void BuildStage(int s, const std::vector<ArgSpec>& args);
  void CheckCaptures(const PartDef& part, int begin, int end);
  void FindUsesAndVariables(PartDef& part, int begin, int end);
  void BuildBackward(PartDef& part, int begin, int end);
  // What a part's backward differentiates (ys) and the gradients that seed
  // it (grad_ys; none: ones).
  struct BackwardTargets {
    std::vector<Output> ys, grad_ys;
  };
  // The last stage's: its loss, seeded by the optimizer; nullopt after a
  // violation (a bad loss or optimizer).
  std::optional<BackwardTargets> LossTargets(const Scope& bs);
  // Another stage's: its float outputs, seeded by placeholders for their
  // gradients (part.grad_outputs).
  static BackwardTargets OutputTargets(const Scope& bs, PartDef& part);
  // The accumulation of the part's variables' gradients `var_grads`
  // (part.accumulate); false after a violation.
  bool BuildAccumulation(PartDef& part, const Scope& bs,
                         const std::map<Node*, std::vector<Output>>& var_grads);
  // `part`'s accumulator of `variable`: one per part reading it (tied
  // weights: an embedding and the output head), summed by the update.
  Node* Accumulator(Node* variable, const PartDef& part);
  void BuildWeightUpdate();
  // Offloaded optimizer state (b_->offloaded_state): the load and store
  // nodes of `update` on `scope`'s IPU; returns the load's shard output.
  Output OffloadUpdate(const Scope& scope, int update);
  // Lists the variables the weight update created (nodes from `first_new`
  // on) with b_->offloaded_state: a sharded weight's state under its
  // update, the rest under one update per IPU.
  void ListOffloadedState(const Scope& ws, int first_new);
  void BuildOutfeed();

  Scope scope_;
  BuiltPipeline* b_;
  const PipelineOptions& o_;
  std::vector<std::string> violations_;
  std::vector<int> logical_mapping_;
  std::vector<std::vector<int>> part_ipus_;
  bool mapping_ok_ = true;
  std::optional<Scope> accumulators_scope_;
  // Variable -> its accumulators, with the part each accumulates.
  std::map<Node*, std::vector<std::pair<std::string, Node*>>> accumulators_of_;
  // The variables with an accumulator, in the order of their first one
  // (the weight update's order).
  std::vector<Node*> accumulated_;
  std::string offloaded_state_id_;  // b_->offloaded_state's, in the graph.
};

}  // namespace ipuflow::pipelining::internal

#endif  // IPUFLOW_PIPELINING_PIPELINE_BUILDER_H_
