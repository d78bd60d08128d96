#include "pipelining/pipeline_frame.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pipelining/pipeline_run_report.h"

namespace ipuflow::pipelining {

PipelineDeviceFrame::PipelineDeviceFrame(const BuiltPipeline* built)
    : b_(built) {
  for (const StageDef& s : b_->stages) {
    for (const PartDef& p : s.parts) {
      ipus_per_replica_ = std::max(ipus_per_replica_, p.ipu + 1);
    }
  }
}

PipelineDeviceFrame::~PipelineDeviceFrame() = default;

std::string PipelineDeviceFrame::name() const {
  return absl::StrCat("pipeline '", b_->options.name, "'");
}

absl::StatusOr<std::shared_ptr<const PipelineLayout>>
PipelineDeviceFrame::Layout(bool recompute) const {
  MutexLock l(&mu_);
  std::shared_ptr<const PipelineLayout>& layout = layouts_[recompute ? 1 : 0];
  if (layout == nullptr) {
    ASSIGN_OR_RETURN(layout, LayOut(*b_, recompute));
  }
  return layout;
}

absl::StatusOr<std::vector<SubProgramSpec>>
PipelineDeviceFrame::SubProgramSpecs(const ProgramSpec& enclosing) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const PipelineLayout> layout,
                   Layout(enclosing.recompute));
  return pipelining::SubProgramSpecs(*b_, *layout);
}

absl::Status PipelineDeviceFrame::Lower(IPUSystem* system, int replicas,
                                        CollectiveGroup* group,
                                        std::vector<IpuMemory>* ipus) {
  ASSIGN_OR_RETURN(std::shared_ptr<const PipelineLayout> layout,
                   Layout(system->config().allow_recompute()));
  auto lowering = std::make_shared<Lowering>();
  lowering->layout = layout;
  lowering->memory = *ipus;
  lowering->memory.resize(std::max<size_t>(ipus->size(), layout->num_ipus));
  for (int r = 0; r < replicas; ++r) {
    // The program's collectives: they span every replica of every process
    // (one local replica of several processes still reduces across them).
    ASSIGN_OR_RETURN(
        std::unique_ptr<WorkListProgram> program,
        WorkListProgram::Create(layout->work, system, {r, replicas, group}));
    lowering->replicas.push_back(std::move(program));
  }
  MutexLock l(&mu_);
  lowerings_[group] = std::move(lowering);
  return absl::OkStatus();
}

void PipelineDeviceFrame::Release(CollectiveGroup* group) {
  std::shared_ptr<Lowering> gone;  // Destroyed after the lock is released.
  MutexLock l(&mu_);
  auto it = lowerings_.find(group);
  if (it == lowerings_.end()) return;
  gone = std::move(it->second);
  lowerings_.erase(it);
}

absl::Status PipelineDeviceFrame::RunReplica(const RunEnv& env,
                                             const std::vector<Tensor>& inputs,
                                             SubPrograms& programs) {
  std::shared_ptr<Lowering> lowering;
  {
    MutexLock l(&mu_);
    auto it = lowerings_.find(env.collectives);
    if (it != lowerings_.end()) lowering = it->second;
  }
  if (lowering == nullptr ||
      env.replica >= static_cast<int>(lowering->replicas.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(),
                     " was not lowered for this program (compile it with a "
                     "DeviceProgram / IPUStrategy)"));
  }
  // The run's cancellation is the program's (it outlives this call).
  std::shared_ptr<CancellationManager> cancel(env.cancellation,
                                              [](CancellationManager*) {});
  WorkListProgram& program = *lowering->replicas[env.replica];
  ASSIGN_OR_RETURN(WorkListRecord record,
                   program.Run(programs, inputs, std::move(cancel), env.taken));
  if (env.replica == 0) {
    PipelineReport report = MeasuredReport(*b_, *lowering->layout, program,
                                           record, lowering->memory);
    report.replicas = static_cast<int>(lowering->replicas.size());
    MutexLock l(&mu_);
    last_report_ = std::move(report);
  }
  return absl::OkStatus();
}

std::optional<PipelineReport> PipelineDeviceFrame::LastReport() const {
  MutexLock l(&mu_);
  return last_report_;
}

}  // namespace ipuflow::pipelining
