// PipelineDeviceFrame: a built pipeline as the device layer's DeviceFrame
// (core/ipu/device_frame.h), the host resource behind the PipelineFrame
// node (ops/control/pipeline_frame.h) that Pipeline::Create() adds to the
// graph. A device program that runs the node lowers the frame when it compiles:
// one PipelineRuntime (the pipeline's work lists, pipeline_runtime.h) per
// replica, on IPUs [r*S, r*S + S); its kernel then runs replica r's
// lowering from IPU r*S's thread. Internal to pipelining/: users hold a
// Pipeline, which owns the frame.
//
// Thread safety: Lower / Release / LastReport from host threads,
// RunReplica from the replicas' IPU threads (one per replica at a time).
#ifndef IPUFLOW_PIPELINING_PIPELINE_FRAME_H_
#define IPUFLOW_PIPELINING_PIPELINE_FRAME_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fed_resource.h"
#include "core/ipu/device_frame.h"
#include "core/mutex.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/pipeline_report.h"

namespace ipuflow::pipelining {

class PipelineRuntime;

class PipelineDeviceFrame : public DeviceFrame, public FedResource {
 public:
  // `built` must outlive the frame.
  explicit PipelineDeviceFrame(const BuiltPipeline* built);
  ~PipelineDeviceFrame() override;

  std::string name() const override;
  int ipus_per_replica() const override { return ipus_per_replica_; }
  // InvalidArgument for a stage placed outside [0, kMaxIpus);
  // FailedPrecondition when the system has fewer IPUs than one replica
  // uses; a stage program's compile error naming the stage and pass.
  absl::Status Lower(IPUSystem* system, int replicas, CollectiveGroup* group,
                     std::vector<IpuMemory>* memory) override;
  void Release(CollectiveGroup* group) override;
  absl::Status RunReplica(const RunEnv& env,
                          const std::vector<Tensor>& inputs) override;
  std::optional<Tensor> OffloadedValue(CollectiveGroup* group, int replica,
                                       const std::string& name) const override;
  // The outfeed's output modes that hold values send them at the run's end;
  // a stopped run tells the outfeed's readers why.
  absl::Status RunFinished() override;
  void RunStopped(const absl::Status& status) override;
  // The executables that run the frame feed its outfeed.
  void AddProducer() override;
  void RemoveProducer(const absl::Status& why) override;

  // Replica 0's report of the last run that completed, of any lowering.
  std::optional<PipelineReport> LastReport() const;

 private:
  // The outfeed its last stage enqueues to (the graph's), if any.
  std::shared_ptr<HostResource> Outfeed() const;
  struct Lowering {
    std::vector<std::unique_ptr<PipelineRuntime>> replicas;
  };
  const BuiltPipeline* b_;
  int ipus_per_replica_ = 0;
  mutable Mutex mu_;
  std::map<CollectiveGroup*, std::shared_ptr<Lowering>> lowerings_
      ABSL_GUARDED_BY(mu_);
  std::optional<PipelineReport> last_report_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_FRAME_H_
