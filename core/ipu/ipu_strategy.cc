#include "core/ipu/ipu_strategy.h"

#include "absl/strings/str_cat.h"

namespace ipuflow {

IPUStrategy::~IPUStrategy() {
  MutexLock l(&mu_);
  destroying_ = true;
  const absl::Status reason = absl::CancelledError("strategy destroyed");
  for (auto& [key, p] : cache_) p->Cancel(reason);
  for (auto& [key, e] : sources_) e->Cancel(reason);
  idle_cv_.Await(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return active_ == 0;
  });
}

absl::Status IPUStrategy::Enter() {
  MutexLock l(&mu_);
  if (destroying_) return absl::CancelledError("strategy destroyed");
  ++active_;
  return absl::OkStatus();
}

void IPUStrategy::Leave() {
  MutexLock l(&mu_);
  if (--active_ == 0) idle_cv_.SignalAll();
}

int IPUStrategy::num_compiles() const {
  MutexLock l(&mu_);
  return num_compiles_;
}

absl::StatusOr<DeviceProgram*> IPUStrategy::Compile(
    const Graph& graph, const std::vector<Output>& fetches,
    const std::vector<Node*>& targets, const FeedList& feeds) {
  MutexLock l(&mu_);
  if (destroying_) return absl::CancelledError("strategy destroyed");
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
  RETURN_IF_ERROR(Enter());
  DeviceProgram* program;
  {
    MutexLock l(&mu_);
    absl::StatusOr<DeviceProgram*> p =
        CompileLocked(graph, fetches, targets, feeds);
    if (!p.ok()) {
      if (--active_ == 0) idle_cv_.SignalAll();
      return p.status();
    }
    program = *p;
  }
  std::vector<Tensor> values;
  for (const auto& [out, value] : feeds) values.push_back(value);
  std::vector<std::vector<Tensor>> per_replica;
  const absl::Status s = program->Execute({values}, &per_replica);
  Leave();  // `program` is not used after this.
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

absl::StatusOr<Executable*> IPUStrategy::Compile(
    const ExecutableSource& source) {
  MutexLock l(&mu_);
  if (destroying_) return absl::CancelledError("strategy destroyed");
  return CompileSourceLocked(source);
}

absl::StatusOr<Executable*> IPUStrategy::CompileSourceLocked(
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
  RETURN_IF_ERROR(Enter());
  Executable* exe;
  {
    MutexLock l(&mu_);
    absl::StatusOr<Executable*> e = CompileSourceLocked(source);
    if (!e.ok()) {
      if (--active_ == 0) idle_cv_.SignalAll();
      return e.status();
    }
    exe = *e;
  }
  std::vector<std::vector<Tensor>> results;
  const absl::Status s = exe->Execute({args}, &results);
  Leave();
  return s;
}

absl::Status IPUStrategy::Initialize(const Graph& graph) {
  const auto& inits = graph.collection("initializers");
  if (inits.empty()) return absl::OkStatus();
  return Run(graph, {}, inits).status();
}

}  // namespace ipuflow
