#include "core/ipu/executable.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "re2/re2.h"

namespace ipuflow {

void Executable::Cancel(absl::Status reason) {
  std::shared_ptr<CancellationManager> run;
  {
    MutexLock l(&run_mu_);
    run = run_cancel_;
  }
  if (run != nullptr) run->StartCancel(std::move(reason));
}

absl::StatusOr<std::shared_ptr<CancellationManager>> Executable::BeginRun(
    absl::string_view what) {
  RETURN_IF_ERROR(gate_.EnterRaw());
  MutexLock l(&run_mu_);
  // Checked under run_mu_: closed after EnterRaw, CloseRuns may already
  // have looked for this run's cancellation.
  absl::Status refused = gate_.status();
  if (refused.ok() && executing_) {
    refused = absl::FailedPreconditionError(absl::StrCat(
        what,
        " is already running on another thread (an executable runs "
        "one Execute at a time)"));
  }
  if (!refused.ok()) {
    gate_.Leave();
    return refused;
  }
  executing_ = true;
  run_cancel_ = std::make_shared<CancellationManager>();
  return run_cancel_;
}

void Executable::EndRun() {
  {
    MutexLock l(&run_mu_);
    executing_ = false;
    run_cancel_.reset();
  }
  gate_.Leave();
}

void Executable::CloseRuns() {
  const absl::Status reason = absl::CancelledError("executable destroyed");
  gate_.Close(reason);
  Cancel(reason);
  gate_.AwaitEmpty();
}

absl::StatusOr<std::map<std::string, std::vector<Tensor>>>
Executable::ReadVariables(const std::string& pattern) const {
  RE2 re(pattern, RE2::Quiet);
  if (!re.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReadVariables: bad pattern '", pattern, "': ", re.error()));
  }
  std::map<std::string, std::vector<Tensor>> out;
  const int s = ipus_per_replica(), replicas = num_replicas();
  for (int r = 0; r < replicas; ++r) {
    for (int k = r * s; k < (r + 1) * s; ++k) {
      for (const auto& v : system()->device(k).resources()->variables()) {
        if (!RE2::FullMatch(v->name(), re)) continue;
        absl::StatusOr<Tensor> value = v->Read();
        if (!value.ok() && !v->initialized()) {
          if (std::optional<Tensor> remote = OffloadedValue(r, v->name())) {
            value = *std::move(remote);
          }
        }
        if (!value.ok()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "ReadVariables: variable '", v->name(), "' on IPU ", k,
              " (replica ", r, "): ", value.status().message()));
        }
        std::vector<Tensor>& per_replica = out[v->name()];
        per_replica.resize(replicas);
        per_replica[r] = *std::move(value);
      }
    }
  }
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("ReadVariables: no variable matches '", pattern,
                     "' on the ", replicas, " replica(s) of this executable"));
  }
  return out;
}

absl::StatusOr<int> ReplicationFactor(const IPUSystem& system,
                                      int ipus_per_replica,
                                      const std::string& what) {
  const int k = system.num_ipus();
  if (k == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the IPU system has no IPUs (",
                     system.status().message(), "); Configure it again"));
  }
  const int s = std::max(1, ipus_per_replica);
  const int r = system.config().replication_factor();
  if (k < s) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " uses ", s, " IPUs per replica but the system has ",
                     k, ": configure auto_select_ipus >= ", s));
  }
  if (r > 0) {
    if (static_cast<int64_t>(r) * s > k) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " needs replication_factor ", r, " x ", s,
          " IPUs per replica = ", static_cast<int64_t>(r) * s,
          " IPUs but the system has ", k, ": set auto_select_ipus to ",
          static_cast<int64_t>(r) * s, " or lower replication_factor to ",
          std::max(1, k / s)));
    }
    return r;
  }
  if (k % s != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " uses ", s, " IPUs per replica but the system has ", k,
        "; the number of IPUs must be a multiple of the IPUs per replica "
        "(for example auto_select_ipus = ",
        s, " or ", 2 * s, "), or set replication_factor"));
  }
  return k / s;
}

}  // namespace ipuflow
