#include "pipelining/pipeline_executable.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pipelining/pipeline_frame.h"
#include "pipelining/pipeline_internal.h"

namespace ipuflow::pipelining {

PipelineExecutable::~PipelineExecutable() { CloseRuns(); }

absl::StatusOr<std::unique_ptr<PipelineExecutable>> PipelineExecutable::Compile(
    const BuiltPipeline* built, PipelineFrame* frame, IPUSystem* system) {
  std::unique_ptr<PipelineExecutable> e(new PipelineExecutable());
  e->built_ = built;
  e->frame_ = frame;
  e->system_ = system;
  e->generation_ = system->generation();
  const int ipus = frame->ipus_per_replica();
  if (system->num_ipus() < ipus) {
    return absl::FailedPreconditionError(
        absl::StrCat("pipeline '", built->options.name, "' maps stages to ",
                     ipus, " IPUs but the system has ", system->num_ipus(),
                     ": configure auto_select_ipus >= ", ipus));
  }
  // The frame with its inputs fed: Execute's arguments, or what
  // ComputeInputs computed.
  ProgramSpec spec;
  for (const Output& in : built->options.inputs) {
    spec.feeds.push_back(in);
    spec.feed_shapes.push_back(in.shape());
  }
  spec.targets = {built->frame};
  ASSIGN_OR_RETURN(e->program_,
                   DeviceProgram::Compile(system, *built->graph, spec));
  return e;
}

std::optional<Tensor> PipelineExecutable::OffloadedValue(
    int replica, const std::string& name) const {
  return frame_->OffloadedValue(program_->collectives(), replica, name);
}

absl::StatusOr<std::vector<std::vector<Tensor>>>
PipelineExecutable::ComputeInputs(const FeedList& feeds) {
  if (built_->options.inputs.empty())
    return std::vector<std::vector<Tensor>>{{}};
  std::string sig;
  ASSIGN_OR_RETURN(ProgramSpec spec,
                   MakeProgramSpec(feeds, built_->options.inputs, {}, &sig));
  auto& slot = inputs_programs_[sig];
  if (slot == nullptr) {
    absl::StatusOr<std::unique_ptr<DeviceProgram>> p =
        DeviceProgram::Compile(system_, *built_->graph, spec);
    if (!p.ok()) {
      inputs_programs_.erase(sig);
      return p.status();
    }
    slot = *std::move(p);
  }
  std::vector<Tensor> fed;
  for (const auto& [out, value] : feeds) fed.push_back(value);
  std::vector<std::vector<Tensor>> values;
  RETURN_IF_ERROR(slot->Execute({fed}, &values));
  // That program replicates over every IPU it may: replica r of the
  // pipeline takes the values computed on its first IPU (r * S).
  const int replicas = num_replicas(), s = ipus_per_replica();
  if (static_cast<int>(values.size()) == replicas) return values;
  std::vector<std::vector<Tensor>> per_replica;
  for (int r = 0; r < replicas; ++r) {
    const size_t i =
        std::min<size_t>(static_cast<size_t>(r) * s, values.size() - 1);
    per_replica.push_back(values[i]);
  }
  return per_replica;
}

absl::Status PipelineExecutable::RunWith(
    const std::vector<std::vector<Tensor>>& args) {
  const std::string what =
      absl::StrCat("pipeline '", built_->options.name, "'");
  absl::StatusOr<std::shared_ptr<CancellationManager>> cancel = BeginRun(what);
  if (!cancel.ok()) return cancel.status();
  // Cancel() and the destructor reach the program's run.
  DeviceProgram* program = program_.get();
  CancellationManager* run = cancel->get();
  const int token =
      run->Register([program, run] { program->Cancel(run->reason()); });
  std::vector<std::vector<Tensor>> results;
  absl::Status s = program_->Execute(args, &results);
  run->Unregister(token);
  if (s.ok()) {
    std::optional<PipelineReport> report =
        frame_->LastReport(program_->collectives());
    if (report.has_value()) last_report_ = *std::move(report);
  }
  EndRun();
  return s;
}

absl::Status PipelineExecutable::Execute(
    const std::vector<std::vector<Tensor>>& args,
    std::vector<std::vector<Tensor>>* results) {
  results->assign(num_replicas(), {});
  const bool computed = args.empty() || (args.size() == 1 && args[0].empty() &&
                                         !built_->options.inputs.empty());
  if (!computed) return RunWith(args);
  ASSIGN_OR_RETURN(std::vector<std::vector<Tensor>> inputs, ComputeInputs({}));
  return RunWith(inputs);
}

absl::StatusOr<PipelineReport> PipelineExecutable::Run(const FeedList& feeds) {
  ASSIGN_OR_RETURN(std::vector<std::vector<Tensor>> inputs,
                   ComputeInputs(feeds));
  RETURN_IF_ERROR(RunWith(inputs));
  return last_report_;
}

}  // namespace ipuflow::pipelining
