#include "pipelining/pipeline_executable.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/pipeline_runtime.h"

namespace ipuflow::pipelining {

PipelineExecutable::~PipelineExecutable() { CloseRuns(); }

absl::StatusOr<std::unique_ptr<PipelineExecutable>> PipelineExecutable::Compile(
    const BuiltPipeline* built, IPUSystem* system) {
  std::unique_ptr<PipelineExecutable> e(new PipelineExecutable());
  e->built_ = built;
  e->system_ = system;
  e->generation_ = system->generation();
  int ipus = 0;
  for (const StageDef& s : built->stages) {
    for (const PartDef& p : s.parts) {
      if (p.ipu < 0 || p.ipu >= kMaxIpus) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pipeline '", built->options.name, "': ", p.name,
            " is placed on IPU ", p.ipu, "; IPUs are numbered 0 to ",
            kMaxIpus - 1));
      }
      ipus = std::max(ipus, p.ipu + 1);
    }
  }
  e->ipus_per_replica_ = ipus;
  if (system->num_ipus() < ipus) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pipeline '", built->options.name, "' maps stages to ", ipus,
        " IPUs but the system has ", system->num_ipus(),
        ": configure auto_select_ipus >= ", ipus));
  }
  ASSIGN_OR_RETURN(const int replicas,
                   ReplicationFactor(*system, ipus,
                                     absl::StrCat("pipeline '",
                                                  built->options.name, "'")));
  e->group_ = std::make_unique<CollectiveGroup>(replicas);
  for (int r = 0; r < replicas; ++r) {
    PipelineRuntime::Replica replica{r, replicas,
                                     replicas > 1 ? e->group_.get() : nullptr};
    ASSIGN_OR_RETURN(std::unique_ptr<PipelineRuntime> rt,
                     PipelineRuntime::Create(built, system, replica));
    e->replicas_.push_back(std::move(rt));
  }
  return e;
}

std::string PipelineExecutable::MemoryReport() const {
  return replicas_.empty() ? "" : replicas_[0]->MemoryReport();
}

std::optional<Tensor> PipelineExecutable::OffloadedValue(
    int replica, const std::string& name) const {
  std::optional<TensorShape> full_shape;
  std::optional<Tensor> value = replicas_[replica]->RemoteValue(name, &full_shape);
  if (!value.has_value() || !full_shape.has_value()) return value;
  Tensor full(value->dtype(), *full_shape);
  const int64_t bytes = static_cast<int64_t>(full.TotalBytes());
  int64_t offset = 0;
  for (const auto& rt : replicas_) {
    std::optional<TensorShape> unused;
    std::optional<Tensor> shard = rt->RemoteValue(name, &unused);
    if (!shard.has_value()) return std::nullopt;
    const int64_t n = std::min<int64_t>(shard->TotalBytes(), bytes - offset);
    if (n <= 0) break;
    std::memcpy(static_cast<char*>(full.raw_data()) + offset, shard->raw_data(), n);
    offset += n;
  }
  return full;
}

absl::Status PipelineExecutable::RunReplicas(
    const FeedList& feeds, const std::vector<std::vector<Tensor>>* args) {
  const int n = num_replicas();
  if (args != nullptr && args->size() != 1 &&
      static_cast<int>(args->size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Execute: ", args->size(), " argument lists for ", n,
        " replicas; pass one list (every replica) or one per replica"));
  }
  const std::string what = absl::StrCat("pipeline '", built_->options.name, "'");
  // One cancellation for the replicas of this run: an error in one wakes
  // the others' FIFOs, queues and collectives.
  absl::StatusOr<std::shared_ptr<CancellationManager>> cancel = BeginRun(what);
  if (!cancel.ok()) return cancel.status();
  absl::Status s;
  {
    absl::StatusOr<IPUSystem::RunLease> lease =
        system_->StartRun(generation_, what);
    s = lease.ok() ? RunReplicasWith(feeds, args, *cancel) : lease.status();
  }
  // Output modes that hold values until the run's end send them now.
  if (s.ok() && built_->options.outfeed_queue != nullptr) {
    s = built_->options.outfeed_queue->RunFinished();
  }
  // The run ended, not the outfeed: a monitor in Next learns why (issue 9).
  if (!s.ok() && built_->options.outfeed_queue != nullptr) {
    built_->options.outfeed_queue->RunStopped(s);
  }
  EndRun();
  return s;
}

absl::Status PipelineExecutable::RunReplicasWith(
    const FeedList& feeds, const std::vector<std::vector<Tensor>>* args,
    const std::shared_ptr<CancellationManager>& cancel) {
  const int n = num_replicas();
  group_->Reset();
  CollectiveGroup* group = group_.get();
  CancellationManager* run = cancel.get();
  const int token = run->Register([group, run] { group->Cancel(run->reason()); });
  std::vector<absl::StatusOr<PipelineReport>> reports(
      n, absl::UnknownError("not run"));
  auto run_replica = [&](int r) {
    const std::vector<Tensor>* inputs =
        args == nullptr ? nullptr : &(*args)[args->size() == 1 ? 0 : r];
    reports[r] = replicas_[r]->Run(feeds, inputs, cancel);
    if (!reports[r].ok() && !absl::IsCancelled(reports[r].status())) {
      const absl::Status& s = reports[r].status();
      run->StartCancel(absl::CancelledError(absl::StrCat(
          "run cancelled: replica ", r, " failed: ", s.message())));
      reports[r] = absl::Status(
          s.code(), absl::StrCat("replica ", r, " (IPU ", r * ipus_per_replica_,
                                 "): ", s.message()));
    }
  };
  // Each replica's Run drives its IPUs from a host thread, as the host
  // calls one engine per replica.
  std::vector<std::thread> threads;
  absl::Status started;
  for (int r = 1; r < n && started.ok(); ++r) {
    absl::StatusOr<std::thread> t = StartThread(
        absl::StrCat("replica ", r, " of pipeline '", built_->options.name, "'"),
        [&run_replica, r] { run_replica(r); });
    if (t.ok()) {
      threads.push_back(*std::move(t));
    } else {
      started = t.status();
      run->StartCancel(absl::CancelledError(
          absl::StrCat("run cancelled: ", started.message())));
    }
  }
  if (started.ok()) run_replica(0);
  for (std::thread& t : threads) t.join();
  run->Unregister(token);
  RETURN_IF_ERROR(started);
  // Collective traffic (gradient all-reduces, sharded state) in the same
  // counters as a device program's: on each replica's first IPU.
  for (int r = 0; r < n; ++r) {
    system_->device(r * ipus_per_replica_)
        .counters()
        .ipu_to_ipu.fetch_add(group_->bytes_sent(r), std::memory_order_relaxed);
  }
  // The root cause, not the cancellations it caused in other replicas.
  for (const auto& rep : reports) {
    if (!rep.ok() && !absl::IsCancelled(rep.status())) return rep.status();
  }
  for (const auto& rep : reports) RETURN_IF_ERROR(rep.status());
  last_report_ = *std::move(reports[0]);
  last_report_.replicas = n;
  return absl::OkStatus();
}

absl::Status PipelineExecutable::Execute(
    const std::vector<std::vector<Tensor>>& args,
    std::vector<std::vector<Tensor>>* results) {
  results->assign(num_replicas(), {});
  const bool computed = args.empty() || (args.size() == 1 && args[0].empty() &&
                                         !built_->options.inputs.empty());
  return RunReplicas({}, computed ? nullptr : &args);
}

absl::StatusOr<PipelineReport> PipelineExecutable::Run(const FeedList& feeds) {
  RETURN_IF_ERROR(RunReplicas(feeds, nullptr));
  return last_report_;
}

}  // namespace ipuflow::pipelining
