#include "core/distributed/process_identity.h"

#include <cstdlib>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace ipuflow::distributed {
namespace {

// The variable `name` as an int: nullopt-like -1 for unset (reported by
// the caller), an error for text that is not a non-negative int.
absl::StatusOr<int> ReadInt(const EnvReader& getenv, const char* name,
                            bool* present) {
  const char* v = getenv(name);
  *present = v != nullptr && *v != '\0';
  if (!*present) return 0;
  int value = 0;
  if (!absl::SimpleAtoi(v, &value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", v,
                     "' is not a non-negative integer"));
  }
  return value;
}

}  // namespace

std::string ProcessIdentity::DebugString() const {
  std::string s = absl::StrCat("process ", process_index, " of ", process_count,
                               " (", source, ")");
  if (total_replicas > 0) {
    absl::StrAppend(&s, ", replicas ", replica_index_offset, "..",
                    replica_index_offset + local_replicas - 1, " of ",
                    total_replicas);
  }
  return s;
}

absl::StatusOr<ProcessIdentity> ConfigureProcessId(int process_index,
                                                   int process_count) {
  if (process_count < 1 || process_count > kMaxProcesses || process_index < 0 ||
      process_index >= process_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "configureProcessId: process_index ", process_index,
        " and process_count ", process_count, " need 1 <= process_count <= ",
        kMaxProcesses, " and 0 <= process_index < process_count"));
  }
  ProcessIdentity id;
  id.process_index = process_index;
  id.process_count = process_count;
  id.source = "explicit";
  return id;
}

absl::StatusOr<ProcessIdentity> ProcessIdentityFromEnvironment(
    const EnvReader& getenv) {
  bool has_rank = false, has_size = false;
  ASSIGN_OR_RETURN(const int rank,
                   ReadInt(getenv, "OMPI_COMM_WORLD_RANK", &has_rank));
  ASSIGN_OR_RETURN(const int size,
                   ReadInt(getenv, "OMPI_COMM_WORLD_SIZE", &has_size));
  bool has_total = false, has_local = false, has_offset = false;
  ASSIGN_OR_RETURN(const int total,
                   ReadInt(getenv, "POPDIST_NUM_TOTAL_REPLICAS", &has_total));
  ASSIGN_OR_RETURN(const int local,
                   ReadInt(getenv, "POPDIST_NUM_LOCAL_REPLICAS", &has_local));
  ASSIGN_OR_RETURN(
      const int offset,
      ReadInt(getenv, "POPDIST_REPLICA_INDEX_OFFSET", &has_offset));
  if (has_rank != has_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE must be set together"
        " (RANK ",
        has_rank ? "set" : "unset", ", SIZE ", has_size ? "set" : "unset",
        ")"));
  }
  ProcessIdentity id;
  if (has_rank) {
    ASSIGN_OR_RETURN(id, ConfigureProcessId(rank, size));
    id.source = "Open MPI";
  }
  if (!has_total) return id;

  // PopRun: replicas divided evenly among the instances (PopRun User
  // Guide, "--num-instances"); the instance is the MPI rank.
  const std::string values = absl::StrCat(
      "POPDIST_NUM_TOTAL_REPLICAS=", total, ", POPDIST_NUM_LOCAL_REPLICAS=",
      has_local ? absl::StrCat(local) : "unset",
      ", POPDIST_REPLICA_INDEX_OFFSET=",
      has_offset ? absl::StrCat(offset) : "unset",
      ", OMPI_COMM_WORLD_RANK=", has_rank ? absl::StrCat(rank) : "unset",
      ", OMPI_COMM_WORLD_SIZE=", has_size ? absl::StrCat(size) : "unset");
  if (!has_local || !has_offset || total < 1 || local < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PopRun environment incomplete (needs positive total and local "
        "replica counts and an offset): ",
        values));
  }
  if (static_cast<int64_t>(local) * id.process_count != total ||
      static_cast<int64_t>(id.process_index) * local != offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PopRun environment disagrees with the MPI process (uneven replicas "
        "per instance, or an offset other than rank x local replicas): ",
        values));
  }
  id.total_replicas = total;
  id.local_replicas = local;
  id.replica_index_offset = offset;
  id.source = "PopRun";
  return id;
}

absl::StatusOr<ProcessIdentity> ProcessIdentityFromEnvironment() {
  return ProcessIdentityFromEnvironment(
      [](const char* name) { return std::getenv(name); });
}

absl::Status CheckLocalReplicas(const ProcessIdentity& id, int local_replicas) {
  const int64_t global =
      static_cast<int64_t>(local_replicas) * id.process_count;
  if (local_replicas < 1 || global > std::numeric_limits<int>::max() ||
      (id.local_replicas > 0 && local_replicas != id.local_replicas)) {
    return absl::InvalidArgumentError(
        absl::StrCat("replication_factor ", local_replicas,
                     " (this process's replicas) for ", id.DebugString(),
                     ": needs at least 1, a global count (x ", id.process_count,
                     " processes = ", global, ") that fits an int",
                     id.local_replicas > 0
                         ? absl::StrCat(", and PopRun's ", id.local_replicas,
                                        " local replicas")
                         : ""));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::distributed
