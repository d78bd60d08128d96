// PipelineDeviceFrame: a built pipeline as the device layer's DeviceFrame
// (core/ipu/device_frame.h), the host resource behind the PipelineFrame
// node (ops/control/pipeline_frame.h) that Pipeline::Create() adds to the
// graph. Its stage parts and weight update are the node's sub-programs
// (SubProgramSpecs, pipeline_programs.h): every program that runs the node
// compiles them, plans their memory (stash and FIFOs included) and owns
// them, as it owns a loop's body. Lowering the frame for a device program
// gives the device layer one WorkListProgram per replica (the layout's
// work lists as data, core/ipu/work_list_program.h), on IPUs
// [r*S, r*S + S) (its offloaded optimizer state is a RemoteState the
// program plans, as a loop's); its kernel then runs replica r's from IPU
// r*S's thread with that replica's programs, and the frame reads replica
// 0's record as the run's PipelineReport. Internal to pipelining/: users
// hold a Pipeline, which owns the frame.
//
// Thread safety: SubProgramSpecs / Lower / Release / LastReport from host
// threads, RunReplica from the replicas' IPU threads (one per replica at a
// time).
#ifndef IPUFLOW_PIPELINING_PIPELINE_FRAME_H_
#define IPUFLOW_PIPELINING_PIPELINE_FRAME_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ipu/device_frame.h"
#include "core/mutex.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/pipeline_programs.h"
#include "pipelining/pipeline_report.h"

namespace ipuflow::pipelining {

class PipelineDeviceFrame : public DeviceFrame {
 public:
  // `built` must outlive the frame.
  explicit PipelineDeviceFrame(const BuiltPipeline* built);
  ~PipelineDeviceFrame() override;

  std::string name() const override;
  int ipus_per_replica() const override { return ipus_per_replica_; }
  // InvalidArgument for a stage placed outside [0, kMaxIpus).
  absl::StatusOr<std::vector<SubProgramSpec>> SubProgramSpecs(
      const ProgramSpec& enclosing) const override;
  // The device program has checked the system's IPUs against the
  // replicas (ReplicationFactor, core/ipu/executable.h).
  absl::Status Lower(IPUSystem* system, int replicas, CollectiveGroup* group,
                     std::vector<IpuMemory>* ipus) override;
  void Release(CollectiveGroup* group) override;
  absl::Status RunReplica(const RunEnv& env, const std::vector<Tensor>& inputs,
                          SubPrograms& programs) override;

  // Replica 0's report of the last run that completed, of any lowering.
  std::optional<PipelineReport> LastReport() const;

 private:
  // The layout for `recompute` (computed once each).
  absl::StatusOr<std::shared_ptr<const PipelineLayout>> Layout(
      bool recompute) const;
  struct Lowering {
    std::shared_ptr<const PipelineLayout> layout;
    std::vector<IpuMemory> memory;  // Per IPU of a replica, for the report.
    std::vector<std::unique_ptr<WorkListProgram>> replicas;
  };
  const BuiltPipeline* b_;
  int ipus_per_replica_ = 0;
  mutable Mutex mu_;
  mutable std::shared_ptr<const PipelineLayout> layouts_[2] ABSL_GUARDED_BY(
      mu_);
  std::map<CollectiveGroup*, std::shared_ptr<Lowering>> lowerings_
      ABSL_GUARDED_BY(mu_);
  std::optional<PipelineReport> last_report_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_FRAME_H_
