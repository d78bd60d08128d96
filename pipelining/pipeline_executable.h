// PipelineExecutable: a pipeline compiled for an IPU system, the Executable
// kind (core/ipu/executable.h) of pipelines. It runs R replicas of the
// pipeline, each a PipelineRuntime on its own S IPUs (R x S IPUs in all;
// R from ReplicationFactor: IPUConfig.replication_factor, or the system's
// IPUs / S). Each replica reads its own infeed elements and pushes its own
// outfeed ring, so outfeed steps are [R, ...] as for loops; gradients are
// accumulated per replica and, with a CrossReplicaOptimizer from
// optimizer_function, all-reduced once per weight update (TensorFlow IPU
// guide 6.4 "Replicated graphs", 6.7.2 "Pipelining").
//
// Execute's arguments are the values of PipelineOptions::inputs (empty:
// computed from the graph); its results are empty lists (results leave by
// the outfeed). last_report() is replica 0's report of the last Execute.
//
// Errors: as Executable: a replica's error names it and the failing part
// ("replica 1 (IPU 2): stage1 (IPU 0) forward, micro-batch 3 of run 0:
// ..."); the other replicas' FIFOs, feeds and collectives are woken with
// Cancelled ("run cancelled: replica 1 failed: ...").
//
// Thread safety: as Executable (a concurrent Execute is refused, the
// destructor cancels a run in progress and waits for it).
#ifndef IPUFLOW_PIPELINING_PIPELINE_EXECUTABLE_H_
#define IPUFLOW_PIPELINING_PIPELINE_EXECUTABLE_H_

#include <memory>
#include <string>
#include <vector>

#include "core/ipu/collective_group.h"
#include "core/ipu/executable.h"
#include "core/mutex.h"
#include "core/session.h"
#include "pipelining/pipeline_report.h"

namespace ipuflow::pipelining {

struct BuiltPipeline;
class PipelineRuntime;

class PipelineExecutable : public Executable {
 public:
  // `built` and `system` are not owned and must outlive the executable.
  static absl::StatusOr<std::unique_ptr<PipelineExecutable>> Compile(
      const BuiltPipeline* built, IPUSystem* system);
  ~PipelineExecutable() override;

  IPUSystem* system() const override { return system_; }
  int num_replicas() const override {
    return static_cast<int>(replicas_.size());
  }
  int ipus_per_replica() const override { return ipus_per_replica_; }
  uint64_t generation() const { return generation_; }
  absl::Status Execute(const std::vector<std::vector<Tensor>>& args,
                       std::vector<std::vector<Tensor>>* results) override;
  // One replica's per-IPU memory (every replica holds the same).
  std::string MemoryReport() const override;

  // As Execute, computing the inputs from the graph with `feeds`; returns
  // replica 0's report.
  absl::StatusOr<PipelineReport> Run(const FeedList& feeds);
  const PipelineReport& last_report() const { return last_report_; }

 protected:
  // Offloaded optimizer state from remote memory; a sharded tensor is
  // reassembled from every replica's shard.
  std::optional<Tensor> OffloadedValue(int replica,
                                       const std::string& name) const override;

 private:
  PipelineExecutable() = default;
  // Runs every replica (args: per replica, or null for computed inputs).
  absl::Status RunReplicas(const FeedList& feeds,
                           const std::vector<std::vector<Tensor>>* args);
  absl::Status RunReplicasWith(const FeedList& feeds,
                               const std::vector<std::vector<Tensor>>* args,
                               const std::shared_ptr<CancellationManager>& cancel);

  const BuiltPipeline* built_ = nullptr;
  IPUSystem* system_ = nullptr;
  uint64_t generation_ = 0;
  int ipus_per_replica_ = 0;
  std::unique_ptr<CollectiveGroup> group_;
  std::vector<std::unique_ptr<PipelineRuntime>> replicas_;
  PipelineReport last_report_;
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_EXECUTABLE_H_
