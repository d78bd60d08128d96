#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/checkpoint/manifest_reading.h"
#include "core/checkpoint/training_state.h"
#include "core/resource.h"
#include "core/status.h"

// TrainingCheckpoint::Restore (training_state.h): every check first, on
// every process, then the assignment. The manifest is hostile input: its
// CRC guards against corruption, not against a manifest written wrong or by
// another version, so every count, index and key is checked before use.
namespace ipuflow::checkpoint {
namespace {

// The link's tag of Restore's meeting (the same on every process).
constexpr uint64_t kRestoreTag = 0xC4EC0003;

// The variables on the IPUs of each replica, by name.
std::map<std::string, std::vector<std::shared_ptr<VariableResource>>>
VariablesOf(DeviceProgram* exe) {
  std::map<std::string, std::vector<std::shared_ptr<VariableResource>>> out;
  const int s = exe->ipus_per_replica(), replicas = exe->num_replicas();
  for (int r = 0; r < replicas; ++r) {
    for (int k = r * s; k < (r + 1) * s; ++k) {
      for (auto& v : exe->system()->device(k).resources()->variables()) {
        auto& per = out[v->name()];
        per.resize(replicas);
        per[r] = v;
      }
    }
  }
  return out;
}

// Where this process's replicas stand in the checkpoint's.
struct Placement {
  int replicas = 0;        // This process's.
  int saved_replicas = 0;  // The checkpoint's, every process's.
  int first_replica = 0;   // Global index of this process's replica 0.
  bool resplit = false;    // Restoring into another replica count.
};

// The checkpoint's processes and replicas against this run's.
absl::StatusOr<Placement> CheckTopology(const Manifest& m, DeviceProgram* exe) {
  Placement at;
  at.replicas = exe->num_replicas();
  at.saved_replicas = m.topology().replicas();
  ProcessLink* link = exe->system()->process_link().get();
  const int processes = link != nullptr ? link->process_count() : 1;
  at.first_replica = link != nullptr ? link->process_index() * at.replicas : 0;
  if (m.topology().processes() != processes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore: the checkpoint was saved by ", m.topology().processes(),
        " process(es); this run has ", processes));
  }
  if (at.saved_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore: the checkpoint's topology has ",
                     at.saved_replicas, " replicas"));
  }
  if (link != nullptr) {
    if (!m.has_part() || m.part().process() != link->process_index() ||
        m.part().processes() != processes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: the contents are process ", m.part().process(), "'s of ",
          m.part().processes(), "; this is process ", link->process_index(),
          " of ", processes, " (read them with ReadCheckpoint(path, ",
          link->process_index(), ", ", processes, "))"));
    }
    if (at.saved_replicas != at.replicas * processes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: the checkpoint has ", at.saved_replicas, " replicas (",
          at.saved_replicas / processes, " per process), this run ",
          at.replicas * processes, " (", at.replicas,
          " per process); a multi-process run restores into the same "
          "replicas"));
    }
  }
  at.resplit = at.saved_replicas != at.replicas * processes;
  return at;
}

// Every manifest entry has its tensor, of the entry's dtype and shape: only
// then may an entry's index be used in `c.tensors`.
absl::Status CheckTensorsMatchEntries(const CheckpointContents& c) {
  const Manifest& m = c.manifest;
  if (static_cast<size_t>(m.tensors_size()) != c.tensors.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore: the manifest lists ", m.tensors_size(),
                     " tensors, the checkpoint holds ", c.tensors.size(),
                     ": the manifest does not describe its data"));
  }
  for (int i = 0; i < m.tensors_size(); ++i) {
    const TensorEntry& e = m.tensors(i);
    const Tensor& t = c.tensors[i];
    bool same = t.valid() && static_cast<int>(t.dtype()) == e.dtype() &&
                t.shape().dims().size() == static_cast<size_t>(e.shape_size());
    for (int d = 0; same && d < e.shape_size(); ++d) {
      same = t.shape().dims()[d] == e.shape(d);
    }
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: tensor ", i, " ('", e.name(), "', replica ", e.replica(),
          ") is ", EntryType(e), " in the manifest and ",
          t.valid() ? TypeString(t.dtype(), t.shape()) : "missing",
          " in the checkpoint's data"));
    }
  }
  return absl::OkStatus();
}

// A variable's entries: one for every replica (-1), or one per replica
// (each >= 0, once).
absl::Status CheckEntryReplicas(const Manifest& m, const std::string& name,
                                const std::vector<int>& idx) {
  const bool every = m.tensors(idx[0]).replica() < 0;
  std::set<int> seen;
  bool ok = !every || idx.size() == 1;
  for (int i : idx) {
    const int r = m.tensors(i).replica();
    ok = ok && (every ? r == -1 : r >= 0) && seen.insert(r).second;
  }
  if (ok) return absl::OkStatus();
  std::vector<int> replicas;
  for (int i : idx) replicas.push_back(m.tensors(i).replica());
  return absl::InvalidArgumentError(absl::StrCat(
      "restore: variable '", name, "' is listed for replicas ",
      absl::StrJoin(replicas, ", "),
      "; a variable is listed once for every replica (-1) or once per "
      "replica"));
}

using ProgramVariables =
    std::map<std::string, std::vector<std::shared_ptr<VariableResource>>>;
using Entries = std::map<std::string, std::vector<int>>;  // Name -> tensors.

// The checkpoint holds exactly the program's variables: one error naming
// every missing and every extra one.
absl::Status CheckSameVariables(const Manifest& m, const ProgramVariables& vars,
                                const Entries& entries) {
  std::vector<std::string> missing, extra;
  for (const auto& [name, per] : vars) {
    if (entries.count(name) == 0) {
      missing.push_back(absl::StrCat(
          "'", name, "' (", TypeString(per[0]->dtype(), per[0]->shape()), ")"));
    }
  }
  for (const auto& [name, idx] : entries) {
    if (vars.count(name) == 0) {
      extra.push_back(
          absl::StrCat("'", name, "' (", EntryType(m.tensors(idx[0])), ")"));
    }
  }
  if (missing.empty() && extra.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "restore: the checkpoint is of another model: ",
      missing.empty()
          ? ""
          : absl::StrCat("it lacks variable(s) ", absl::StrJoin(missing, ", "),
                         " of this program"),
      !missing.empty() && !extra.empty() ? "; " : "",
      extra.empty()
          ? ""
          : absl::StrCat("it has variable(s) ", absl::StrJoin(extra, ", "),
                         " this program does not")));
}

// [name][replica] -> the tensor each replica's variable gets: dtypes,
// shapes and replicas checked, then the manifest's model fingerprint.
absl::StatusOr<std::map<std::string, std::vector<const Tensor*>>> PlanVariables(
    const CheckpointContents& c, const ProgramVariables& vars,
    const Placement& at) {
  const Manifest& m = c.manifest;
  Entries entries;
  for (int i = 0; i < m.tensors_size(); ++i) {
    entries[m.tensors(i).name()].push_back(i);
  }
  RETURN_IF_ERROR(CheckSameVariables(m, vars, entries));
  const int replicas = at.replicas;
  std::map<std::string, std::vector<const Tensor*>> plan;
  std::vector<TensorEntry> seen;
  for (const auto& [name, per] : vars) {
    const std::vector<int>& idx = entries[name];
    std::vector<const Tensor*>& to = plan[name];
    to.resize(replicas, nullptr);
    for (int r = 0; r < replicas; ++r) {
      if (per[r] == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("restore: variable '", name, "' is not on replica ", r,
                         " of this program"));
      }
    }
    RETURN_IF_ERROR(CheckEntryReplicas(m, name, idx));
    const TensorEntry& first = m.tensors(idx[0]);
    seen.push_back(first);
    for (int i : idx) {
      const TensorEntry& e = m.tensors(i);
      const DType dtype = static_cast<DType>(e.dtype());
      if (dtype != per[0]->dtype() || ShapeOf(e) != per[0]->shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "restore: variable '", name, "' is ", EntryType(e),
            " in the checkpoint and ",
            TypeString(per[0]->dtype(), per[0]->shape()), " in this program"));
      }
    }
    if (first.replica() < 0) {
      for (int r = 0; r < replicas; ++r) to[r] = &c.tensors[idx[0]];
      continue;
    }
    if (at.resplit) {
      return absl::FailedPreconditionError(absl::StrCat(
          "restore: variable '", name, "' differs between the checkpoint's ",
          at.saved_replicas, " replicas; it cannot be restored into ", replicas,
          " replicas"));
    }
    for (int i : idx) {
      // In int64: the replica is read from the file.
      const int64_t r = int64_t{m.tensors(i).replica()} - at.first_replica;
      if (r < 0 || r >= replicas) {
        return absl::InvalidArgumentError(absl::StrCat(
            "restore: variable '", name, "' of replica ", r + at.first_replica,
            " in the checkpoint of ", at.saved_replicas,
            " replicas; this process holds ", at.first_replica, " to ",
            at.first_replica + replicas - 1));
      }
      to[r] = &c.tensors[i];
    }
    for (int r = 0; r < replicas; ++r) {
      if (to[r] == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("restore: variable '", name, "' of replica ", r,
                         " is missing from the checkpoint"));
      }
    }
  }
  const uint64_t fingerprint = TrainingCheckpoint::Fingerprint(seen);
  if (fingerprint != m.model_fingerprint()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore: model fingerprint ", m.model_fingerprint(),
                     " in the checkpoint, ", fingerprint,
                     " for its variables: the manifest was altered"));
  }
  return plan;
}

using RunCounters = std::vector<std::pair<std::string, uint64_t>>;

// The replica of a random-stream key "replica <r>|<program>" (ProgramKey),
// with the program in `program`; -1 when the key is not of that form.
int64_t KeyReplica(absl::string_view key, std::string* program) {
  constexpr absl::string_view kPrefix = "replica ";
  if (!absl::StartsWith(key, kPrefix)) return -1;
  const size_t bar = key.find('|', kPrefix.size());
  if (bar == absl::string_view::npos) return -1;
  const absl::string_view digits =
      key.substr(kPrefix.size(), bar - kPrefix.size());
  int64_t r = -1;
  if (digits.empty() || digits.size() > 10 ||
      !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &r)) {
    return -1;
  }
  *program = std::string(key.substr(bar + 1));
  return r;
}

// The run counters each replica of this process takes (replica r takes
// replica r % R's of the checkpoint's R), checked against its programs.
absl::StatusOr<std::vector<RunCounters>> PlanRandomStreams(
    const Manifest& m, DeviceProgram* exe, const Placement& at) {
  // By replica, only those listed: R comes from the file (no R-sized table).
  std::map<int64_t, RunCounters> saved_runs;
  std::set<std::string> keys;
  for (const ProgramRuns& p : m.random().programs()) {
    std::string program;
    const int64_t r = KeyReplica(p.key(), &program);
    if (r < 0 || r >= at.saved_replicas) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: random-stream key '", p.key(),
                       "' does not name a replica of the checkpoint's ",
                       at.saved_replicas, " (\"replica <r>|<program>\")"));
    }
    if (!keys.insert(p.key()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: random-stream key '", p.key(), "' is listed twice"));
    }
    saved_runs[r].push_back({program, p.runs()});
  }
  const uint64_t epoch_now = exe->system()->floating_point().seed_epoch;
  std::vector<RunCounters> runs;
  for (int r = 0; r < at.replicas; ++r) {
    const int from = (at.first_replica + r) % at.saved_replicas;
    absl::Status s = exe->mutable_program(r).RestoreRunCounters(
        saved_runs[from], epoch_now, /*check_only=*/true);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: the random streams of replica ", from,
                       " were saved from another program: ", s.message()));
    }
    runs.push_back(saved_runs[from]);  // R -> R' > R reuses it.
  }
  return runs;
}

}  // namespace

absl::Status TrainingCheckpoint::Restore(const CheckpointContents& c) {
  RETURN_IF_ERROR(CheckSupported("restore"));
  ProcessLink* link = exe_->system()->process_link().get();
  RestorePlan plan;
  absl::Status checked = Check(c, &plan);
  if (link != nullptr) {
    // Every process restores, or none: the first refusal on every process.
    ASSIGN_OR_RETURN(
        std::vector<std::string> all,
        link->AllGatherStrings(
            kRestoreTag, checked.ok()
                             ? absl::StrCat(c.manifest.part().checkpoint_id())
                             : absl::StrCat("!", checked.message())));
    RETURN_IF_ERROR(checked);  // This process's own refusal first.
    for (size_t p = 0; p < all.size(); ++p) {
      if (!all[p].empty() && all[p][0] == '!') {
        return absl::FailedPreconditionError(absl::StrCat(
            "restore: process ", p, " refused its part: ", all[p].substr(1)));
      }
      if (all[p] != all[0]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "restore: process ", p, " restores checkpoint id ", all[p],
            ", process 0 id ", all[0], "; every process restores the same"));
      }
    }
  }
  RETURN_IF_ERROR(checked);
  return Apply(plan);
}

absl::Status TrainingCheckpoint::Check(const CheckpointContents& c,
                                       RestorePlan* out) const {
  RETURN_IF_ERROR(CheckSupported("restore"));
  const Manifest& m = c.manifest;
  RETURN_IF_ERROR(CheckTensorsMatchEntries(c));
  ASSIGN_OR_RETURN(const Placement at, CheckTopology(m, exe_));
  ProgramVariables vars = VariablesOf(exe_);
  ASSIGN_OR_RETURN(auto plan, PlanVariables(c, vars, at));
  ASSIGN_OR_RETURN(out->runs, PlanRandomStreams(m, exe_, at));
  RETURN_IF_ERROR(CheckInputs(m, at.replicas, &out->inputs));
  out->manifest = &m;
  out->replicas = at.replicas;
  out->seed = m.random().seed();
  out->run_id = m.run_id();
  for (auto& [name, per] : vars) {
    for (int r = 0; r < at.replicas; ++r) {
      out->assign.push_back({per[r], plan[name][r]});
    }
  }
  return absl::OkStatus();
}

// Inputs: the same names, each at a position it can take.
absl::Status TrainingCheckpoint::CheckInputs(
    const Manifest& m, int replicas,
    std::vector<std::shared_ptr<HostResource>>* out) const {
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<HostResource>> live,
                   LiveInputs("restore"));
  std::set<std::string> names;
  for (size_t i = 0; i < live.size(); ++i) {
    names.insert(inputs_[i].name);
    const absl::Status s = inputs_[i].input->CheckPosition(m, replicas);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("restore: ", s.message()));
    }
  }
  std::set<std::string> listed;
  for (const InfeedPosition& p : m.infeeds()) {
    if (!listed.insert(p.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: the checkpoint lists infeed '", p.name(), "' twice"));
    }
    if (names.count(p.name()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: the checkpoint has infeed '", p.name(),
          "', which this run's program does not read (its infeeds: ",
          names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
    }
  }
  *out = std::move(live);
  return absl::OkStatus();
}

absl::Status TrainingCheckpoint::Apply(const RestorePlan& plan) {
  IPUSystem* system = exe_->system();
  if (system->floating_point().seed != plan.seed) {
    RETURN_IF_ERROR(system->ResetSeed(plan.seed));
  }
  const uint64_t epoch = system->floating_point().seed_epoch;
  for (int r = 0; r < exe_->num_replicas(); ++r) {
    RETURN_IF_ERROR(
        exe_->mutable_program(r).RestoreRunCounters(plan.runs[r], epoch));
  }
  for (const auto& [variable, value] : plan.assign) {
    // A copy: the file's buffer is not kept alive by the variables.
    RETURN_IF_ERROR(variable->Assign(value->Copy()));
  }
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    inputs_[i].input->RestorePosition(*plan.manifest, plan.replicas);
  }
  run_id_ = plan.run_id;  // The resumed run continues the saved one.
  return absl::OkStatus();
}

}  // namespace ipuflow::checkpoint
