#include "core/ipu/broadcast_variables.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"

namespace ipuflow {
namespace {

// "name dtype shape init" per variable, one line each, in name order.
std::string Manifest(const ResourceMgr& resources) {
  std::string m;
  for (const auto& v : resources.variables()) {
    absl::StrAppend(&m, v->name(), " ", DTypeName(v->dtype()), " ",
                    v->shape().DebugString(),
                    v->initialized() ? "" : " uninitialised", "\n");
  }
  return m;
}

// The first line where `theirs` and `ours` differ, for the error.
std::string FirstDifference(const std::string& ours,
                            const std::string& theirs) {
  const std::vector<std::string> a = absl::StrSplit(ours, '\n');
  const std::vector<std::string> b = absl::StrSplit(theirs, '\n');
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "";
    const std::string y = i < b.size() ? b[i] : "";
    if (x != y) {
      return absl::StrCat("process 0 has '", x.empty() ? "nothing" : x,
                          "' where it has '", y.empty() ? "nothing" : y, "'");
    }
  }
  return "";
}

}  // namespace

absl::Status BroadcastVariables(IPUSystem& system, int replicas,
                                int ipus_per_replica, uint64_t tag) {
  ProcessLink* link = system.process_link().get();
  if (link == nullptr) return absl::OkStatus();
  if (replicas < 1 || ipus_per_replica < 1 ||
      static_cast<int64_t>(replicas) * ipus_per_replica > system.num_ipus()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BroadcastVariables: ", replicas, " replicas x ", ipus_per_replica,
        " IPUs do not fit the system's ", system.num_ipus(), " IPUs"));
  }
  // Wire tags: one per IPU for the manifests, one per variable after.
  uint64_t next = tag << 20;
  for (int k = 0; k < ipus_per_replica; ++k) {
    ResourceMgr& source = *system.device(k).resources();
    const std::string mine = Manifest(source);
    ASSIGN_OR_RETURN(const std::vector<std::string> all,
                     link->AllGatherStrings(next++, mine));
    for (size_t p = 1; p < all.size(); ++p) {
      if (all[p] == all[0]) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "BroadcastVariables: the variables of IPU ", k,
          " differ: ", FirstDifference(all[0], all[p]), " on process ", p,
          "; every process must build the same model"));
    }
    const auto never = [] { return absl::OkStatus(); };
    for (const auto& v : source.variables()) {
      if (!v->initialized()) continue;
      Tensor value(v->dtype(), v->shape());
      if (link->process_index() == 0) RETURN_IF_ERROR(v->ReadInto(value));
      RETURN_IF_ERROR(link->Broadcast(next++, /*root=*/0, value.raw_data(),
                                      value.TotalBytes(), never));
      for (int r = 0; r < replicas; ++r) {
        ResourceMgr& dst = *system.device(r * ipus_per_replica + k).resources();
        std::shared_ptr<VariableResource> d = dst.FindVariable(v->name());
        if (d == nullptr) {
          return absl::FailedPreconditionError(absl::StrCat(
              "BroadcastVariables: local replica ", r, " has no variable '",
              v->name(), "' on its IPU ", k, " (replica 0 has)"));
        }
        RETURN_IF_ERROR(d->Assign(value));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ipuflow
