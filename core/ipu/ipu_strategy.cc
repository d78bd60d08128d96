#include "core/ipu/ipu_strategy.h"

#include "absl/strings/str_cat.h"

namespace ipuflow {

absl::StatusOr<DeviceProgram*> IPUStrategy::Compile(
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
  ASSIGN_OR_RETURN(DeviceProgram * program,
                   Compile(graph, fetches, targets, feeds));
  std::vector<Tensor> values;
  for (const auto& [out, value] : feeds) values.push_back(value);
  std::vector<std::vector<Tensor>> per_replica;
  RETURN_IF_ERROR(program->Execute({values}, &per_replica));
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

absl::StatusOr<Executable*> IPUStrategy::Compile(
    const ExecutableSource& source) {
  const std::pair<uint64_t, uint64_t> key = {source.source_id(),
                                             system_->generation()};
  auto& slot = sources_[key];
  if (!slot) {
    absl::StatusOr<std::unique_ptr<Executable>> e = source.CompileFor(system_);
    if (!e.ok()) {
      sources_.erase(key);
      return e.status();
    }
    slot = *std::move(e);
    ++num_compiles_;
  }
  return slot.get();
}

absl::Status IPUStrategy::Run(const ExecutableSource& source,
                              const std::vector<Tensor>& args) {
  ASSIGN_OR_RETURN(Executable * exe, Compile(source));
  std::vector<std::vector<Tensor>> results;
  return exe->Execute({args}, &results);
}

absl::Status IPUStrategy::Initialize(const Graph& graph) {
  const auto& inits = graph.collection("initializers");
  if (inits.empty()) return absl::OkStatus();
  return Run(graph, {}, inits).status();
}

}  // namespace ipuflow
