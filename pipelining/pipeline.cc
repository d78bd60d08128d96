// Pipeline: the built pipeline users hold (pipeline.h). Pipeline::Create()
// validates the options and builds every stage part in the graph
// (internal::Builder, pipeline_builder.h); the device frame
// (pipeline_frame.h) compiles and runs what is built.
#include "pipelining/pipeline.h"

#include <algorithm>
#include <memory>

#include "pipelining/pipeline_builder.h"
#include "pipelining/pipeline_frame.h"
#include "pipelining/pipeline_internal.h"

namespace ipuflow::pipelining {

const char* RecomputationModeName(RecomputationMode mode) {
  switch (mode) {
    case RecomputationMode::kAuto:
      return "Auto";
    case RecomputationMode::kRecomputeThenBackpropagate:
      return "RecomputeThenBackpropagate";
    case RecomputationMode::kRecomputeAndBackpropagateInterleaved:
      return "RecomputeAndBackpropagateInterleaved";
  }
  return "?";
}

Pipeline::Pipeline() = default;
Pipeline::~Pipeline() = default;

bool Pipeline::training() const { return built_->training; }
int Pipeline::num_stages() const {
  return static_cast<int>(built_->stages.size());
}
const ScheduleTable& Pipeline::table() const { return built_->table; }
int Pipeline::num_ipus() const {
  int n = 0;
  for (const StageDef& s : built_->stages) {
    for (const PartDef& p : s.parts) n = std::max(n, p.ipu + 1);
  }
  return n;
}

Node* Pipeline::frame() const { return built_->frame; }

std::optional<PipelineReport> Pipeline::last_report() const {
  return frame_->LastReport();
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    const Scope& scope, PipelineOptions options) {
  auto op = std::unique_ptr<Pipeline>(new Pipeline());
  op->built_ = std::make_unique<BuiltPipeline>();
  op->built_->options = std::move(options);
  internal::Builder builder(scope, op->built_.get());
  RETURN_IF_ERROR(builder.Build());
  // From here on the queues are reached through the graph only.
  op->built_->options.infeed_queue = nullptr;
  op->built_->options.outfeed_queue = nullptr;
  // The frame node that runs the pipeline, beside Repeat: a graph holding it
  // compiles like any loop (strategy.Compile(graph, {}, {op->frame()})).
  op->frame_ = std::make_shared<PipelineDeviceFrame>(op->built_.get());
  ASSIGN_OR_RETURN(op->built_->frame, builder.BuildFrame(op->frame_));
  return op;
}

}  // namespace ipuflow::pipelining
