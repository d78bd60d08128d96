// PipelineExecutable: the executable a PipelineOp compiles into
// (IPUStrategy::Compile(*pipeline), PipelineOp::Run): a thin wrapper over
// the one execution model. The pipeline is a frame in the graph (the
// PipelineFrame node, ops/control/pipeline_frame.h); this compiles the
// DeviceProgram that runs it (as strategy.Compile(graph, {},
// {pipeline->frame()}) does), which lowers the stages to per-IPU work lists
// and checks every IPU's memory in the one report. R replicas of an S-IPU
// pipeline use R x S IPUs (ReplicationFactor); each reads its own infeed
// elements and pushes its own outfeed ring; with a CrossReplicaOptimizer
// the gradients are all-reduced once per weight update (TensorFlow IPU
// guide 6.4 "Replicated graphs", 6.7.2 "Pipelining").
//
// Execute's arguments are the values of PipelineOptions::inputs (per
// replica, or one list; empty: computed from the graph); its results are
// empty lists (results leave by the outfeed). Run(feeds) computes the
// inputs with `feeds` and returns replica 0's report.
//
// Errors and thread safety: the DeviceProgram's (a replica's error names
// it, the stage, pass and micro-batch; the others are cancelled; one
// Execute at a time).
#ifndef IPUFLOW_PIPELINING_PIPELINE_EXECUTABLE_H_
#define IPUFLOW_PIPELINING_PIPELINE_EXECUTABLE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ipu/device_program.h"
#include "core/ipu/executable.h"
#include "core/mutex.h"
#include "core/session.h"
#include "pipelining/pipeline_report.h"

namespace ipuflow::pipelining {

struct BuiltPipeline;
class PipelineFrame;

class PipelineExecutable : public Executable {
 public:
  // `built`, `frame` and `system` are not owned and must outlive the
  // executable.
  static absl::StatusOr<std::unique_ptr<PipelineExecutable>> Compile(
      const BuiltPipeline* built, PipelineFrame* frame, IPUSystem* system);
  ~PipelineExecutable() override;

  IPUSystem* system() const override { return system_; }
  int num_replicas() const override { return program_->num_replicas(); }
  int ipus_per_replica() const override { return program_->ipus_per_replica(); }
  uint64_t generation() const { return generation_; }
  absl::Status Execute(const std::vector<std::vector<Tensor>>& args,
                       std::vector<std::vector<Tensor>>* results) override;
  // One replica's per-IPU memory (every replica holds the same).
  std::string MemoryReport() const override { return program_->MemoryReport(); }

  // As Execute, computing the inputs from the graph with `feeds`; returns
  // replica 0's report.
  absl::StatusOr<PipelineReport> Run(const FeedList& feeds);
  const PipelineReport& last_report() const { return last_report_; }
  // The device program that runs the frame.
  DeviceProgram* program() const { return program_.get(); }

 protected:
  std::optional<Tensor> OffloadedValue(int replica,
                                       const std::string& name) const override;

 private:
  PipelineExecutable() = default;
  // The program computing options.inputs from `feeds`, per replica.
  absl::StatusOr<std::vector<std::vector<Tensor>>> ComputeInputs(
      const FeedList& feeds);
  absl::Status RunWith(const std::vector<std::vector<Tensor>>& args);

  const BuiltPipeline* built_ = nullptr;
  PipelineFrame* frame_ = nullptr;
  IPUSystem* system_ = nullptr;
  uint64_t generation_ = 0;
  // The frame with options.inputs fed.
  std::unique_ptr<DeviceProgram> program_;
  std::map<std::string, std::unique_ptr<DeviceProgram>> inputs_programs_;
  PipelineReport last_report_;
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_EXECUTABLE_H_
