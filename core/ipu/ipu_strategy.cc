#include "core/ipu/ipu_strategy.h"

#include "absl/strings/str_cat.h"
#include "core/ipu/broadcast_variables.h"

namespace ipuflow {

// Refuses new calls, cancels the runs in progress and waits for every call
// to return.
IPUStrategy::~IPUStrategy() {
  const absl::Status reason = absl::CancelledError("strategy destroyed");
  gate_.Close(reason);
  {
    MutexLock l(&mu_);
    for (auto& [key, p] : cache_) p->Cancel(reason);
  }
  gate_.AwaitEmpty();
}

int IPUStrategy::num_compiles() const {
  MutexLock l(&mu_);
  return num_compiles_;
}

absl::StatusOr<DeviceProgram*> IPUStrategy::Compile(
    const Graph& graph, const std::vector<Output>& fetches,
    const std::vector<Node*>& targets, const FeedList& feeds) {
  RETURN_IF_ERROR(gate_.status());
  MutexLock l(&mu_);
  return CompileLocked(graph, fetches, targets, feeds);
}

absl::StatusOr<DeviceProgram*> IPUStrategy::CompileLocked(
    const Graph& graph, const std::vector<Output>& fetches,
    const std::vector<Node*>& targets, const FeedList& feeds) {
  std::string signature;
  ASSIGN_OR_RETURN(ProgramSpec spec,
                   MakeProgramSpec(feeds, fetches, targets, &signature));
  const std::string key = absl::StrCat(system_->generation(), "|",
                                       graph.Fingerprint(), "|", signature);
  auto& slot = cache_[key];
  if (!slot) {
    absl::StatusOr<std::unique_ptr<DeviceProgram>> p =
        DeviceProgram::Compile(system_, graph, spec);
    if (!p.ok()) {
      cache_.erase(key);
      return p.status();
    }
    slot = *std::move(p);
    ++num_compiles_;
  }
  return slot.get();
}

absl::StatusOr<std::vector<Tensor>> IPUStrategy::Run(
    const Graph& graph, const std::vector<Output>& fetches,
    const std::vector<Node*>& targets, const FeedList& feeds) {
  ASSIGN_OR_RETURN(LifetimeGate::Pass pass, gate_.Enter());
  DeviceProgram* program;
  {
    MutexLock l(&mu_);
    absl::StatusOr<DeviceProgram*> p =
        CompileLocked(graph, fetches, targets, feeds);
    if (!p.ok()) {
      return p.status();
    }
    program = *p;
  }
  std::vector<Tensor> values;
  for (const auto& [out, value] : feeds) values.push_back(value);
  std::vector<std::vector<Tensor>> per_replica;
  const absl::Status s = program->Execute({values}, &per_replica);
  pass.Release();  // `program` is not used after this.
  RETURN_IF_ERROR(s);
  if (per_replica.size() == 1) return std::move(per_replica[0]);
  std::vector<Tensor> stacked;
  for (size_t i = 0; i < fetches.size(); ++i) {
    std::vector<Tensor> parts;
    for (const auto& r : per_replica) parts.push_back(r[i]);
    ASSIGN_OR_RETURN(Tensor t, Stack(parts));
    stacked.push_back(std::move(t));
  }
  return stacked;
}

absl::Status IPUStrategy::Initialize(const Graph& graph) {
  const auto& inits = graph.collection("initializers");
  if (inits.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(Run(graph, {}, inits).status());
  if (system_->process_link() == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(DeviceProgram * program, Compile(graph, {}, inits));
  return BroadcastVariables(*system_, program->num_replicas(),
                            program->ipus_per_replica(),
                            system_->NextProgramTag());
}

}  // namespace ipuflow
