#include "core/checkpoint/training_state.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/checkpoint/crc32c.h"
#include "core/checkpoint/manifest_reading.h"
#include "core/checkpoint/process_parts.h"
#include "core/graph_collections.h"
#include "core/hash_mix.h"
#include "core/resource.h"
#include "core/status.h"

namespace ipuflow::checkpoint {
namespace {

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

// What processes compare to find the variables every replica of every
// process holds alike without sending them: the bytes' CRC32C and a 64-bit
// sum of mixed words (96 bits; the same on every process).
std::string Digest(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  const size_t n = t.TotalBytes();
  uint64_t h = Mix64(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h += Mix64(w ^ (i * kGoldenGamma));
  }
  uint64_t tail = 0;
  if (n > i) std::memcpy(&tail, p + i, n - i);
  h += Mix64(tail ^ ~uint64_t{i});
  return absl::StrCat(absl::Hex(Crc32c(p, n)), ":", absl::Hex(h));
}

// The link's tag of Capture's meeting (the same on every process).
constexpr uint64_t kCaptureTag = 0xC4EC0000;

// A random 64-bit id, never 0 (the id of files written without one).
uint64_t RandomId() {
  std::random_device random;
  const uint64_t id = (uint64_t{random()} << 32) ^ random();
  return id != 0 ? id : 1;
}

// Across processes: the checkpoint's id and the run's id (process 0's) and
// the names of the variables every process holds alike (`digests`: this
// process's locally identical ones). `local`: this process's own refusal,
// if any; a refusal on any process is every process's. Refuses processes
// that save different steps.
absl::Status AgreeAcrossProcesses(
    ProcessLink& link, const absl::Status& local, int64_t weight_updates,
    uint64_t my_run_id, const std::map<std::string, std::string>& digests,
    uint64_t* id, uint64_t* run_id, std::set<std::string>* shared) {
  std::string mine =
      absl::StrCat(RandomId(), " ", weight_updates, " ", my_run_id, "\n");
  for (const auto& [name, digest] : digests) {
    absl::StrAppend(&mine, digest, " ", name, "\n");
  }
  if (!local.ok()) mine = absl::StrCat("!", local.message());
  ASSIGN_OR_RETURN(std::vector<std::string> all,
                   link.AllGatherStrings(kCaptureTag, mine));
  RETURN_IF_ERROR(local);
  for (size_t p = 0; p < all.size(); ++p) {
    if (!all[p].empty() && all[p][0] == '!') {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint: process ", p,
                       " refused: ", absl::string_view(all[p]).substr(1)));
    }
  }
  std::vector<std::map<std::string, std::string>> held(all.size());
  for (size_t p = 0; p < all.size(); ++p) {
    std::vector<std::string> lines = absl::StrSplit(all[p], '\n');
    std::vector<std::string> head = absl::StrSplit(lines[0], ' ');
    int64_t steps = -1;
    if (head.size() != 3 || (p == 0 && !absl::SimpleAtoi(head[0], id)) ||
        !absl::SimpleAtoi(head[1], &steps) ||
        (p == 0 && !absl::SimpleAtoi(head[2], run_id))) {
      return absl::InternalError(
          absl::StrCat("checkpoint: process ", p, " sent '", lines[0], "'"));
    }
    if (steps != weight_updates) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint: process ", p, " saves weight update ",
                       steps, ", this process ", weight_updates,
                       "; every process saves the same step"));
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t space = lines[i].find(' ');
      if (space == std::string::npos) continue;
      held[p][lines[i].substr(space + 1)] = lines[i].substr(0, space);
    }
  }
  for (const auto& [name, digest] : digests) {
    bool everywhere = true;
    for (const auto& h : held) {
      auto it = h.find(name);
      everywhere = everywhere && it != h.end() && it->second == digest;
    }
    if (everywhere) shared->insert(name);
  }
  return absl::OkStatus();
}

using VariableValues = std::map<std::string, std::vector<Tensor>>;

// Every variable on the executable's IPUs, per replica. A multi-process run
// says why a read can fail there.
absl::StatusOr<VariableValues> ReadAllVariables(const DeviceProgram& exe,
                                                bool multi_process) {
  absl::StatusOr<VariableValues> read = exe.ReadVariables(".*");
  if (!read.ok() && multi_process) {
    return absl::Status(
        read.status().code(),
        absl::StrCat("checkpoint: ", read.status().message(),
                     " (optimizer state sharded over processes is not "
                     "gathered for a multi-process checkpoint)"));
  }
  return read;
}

// Only at weight-update boundaries: every accumulation counter at 0.
absl::Status CheckAtWeightUpdate(const Graph& graph,
                                 const VariableValues& values, int replicas) {
  for (const Node* n : graph.collection(kAccumulationCountersCollection)) {
    auto it = values.find(n->name());
    if (it == values.end()) continue;  // Not on this executable's IPUs.
    for (int r = 0; r < replicas; ++r) {
      const Tensor& t = it->second[r];
      if (t.valid() && t.dtype() == DType::kInt32 && t.NumElements() == 1 &&
          t.data<int32_t>()[0] != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint: gradient accumulation '", n->name(), "' is ",
            t.data<int32_t>()[0],
            " micro-batch(es) into an accumulation on replica ", r,
            "; checkpoints are taken at weight-update boundaries only (run "
            "a multiple of the accumulation's micro-batches before "
            "saving)"));
      }
    }
  }
  return absl::OkStatus();
}

// The variables this process's replicas hold alike, with their digests
// (empty on a single process, which compares nothing across processes).
// Every variable must be on every replica.
absl::StatusOr<std::map<std::string, std::string>> AlikeOnReplicas(
    const VariableValues& values, int replicas, bool multi_process) {
  std::map<std::string, std::string> digests;
  for (const auto& [name, per] : values) {
    for (int r = 0; r < replicas; ++r) {
      if (!per[r].valid()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint: variable '", name, "' is not on replica ", r));
      }
    }
    bool identical = true;
    for (int r = 1; r < replicas && identical; ++r) {
      identical = SameBytes(per[0], per[r]);
    }
    if (identical) digests[name] = multi_process ? Digest(per[0]) : "";
  }
  return digests;
}

// Adds the variables to `c`: those in `shared` once as replica -1, the others
// per replica with global indices from `first`. Returns one entry per
// variable, for the model's fingerprint.
std::vector<TensorEntry> AddVariables(const VariableValues& values,
                                      const std::set<std::string>& shared,
                                      int replicas, int first,
                                      CheckpointContents* c) {
  std::vector<TensorEntry> variables;
  for (const auto& [name, per] : values) {
    const bool identical = shared.count(name) > 0;
    for (int r = 0; r < (identical ? 1 : replicas); ++r) {
      TensorEntry* e = c->manifest.add_tensors();
      e->set_name(name);
      e->set_replica(identical ? -1 : first + r);
      e->set_dtype(static_cast<int>(per[r].dtype()));
      for (int64_t d : per[r].shape().dims()) e->add_shape(d);
      c->tensors.push_back(per[r]);
      if (r == 0) variables.push_back(*e);
    }
  }
  return variables;
}

// The random streams: the system's seed and every program's run counter on
// each replica (global indices from `first`).
void AddRandomStreams(const DeviceProgram& exe, int first, Manifest* m) {
  IPUSystem* system = exe.system();
  const uint64_t epoch = system->floating_point().seed_epoch;
  m->mutable_random()->set_seed(system->floating_point().seed);
  for (int r = 0; r < exe.num_replicas(); ++r) {
    for (const auto& [key, runs] : exe.program(r).RunCounters(epoch)) {
      ProgramRuns* p = m->mutable_random()->add_programs();
      p->set_key(ProgramKey(first + r, key));
      p->set_runs(runs);
      if (r == 0 && key.empty()) m->mutable_steps()->set_executions(runs);
    }
  }
}

}  // namespace

uint64_t TrainingCheckpoint::Fingerprint(
    const std::vector<TensorEntry>& variables) {
  std::map<std::string, std::string> sorted;
  for (const TensorEntry& e : variables) sorted[e.name()] = EntryType(e);
  uint64_t h = 0x1bd11bdaa9fc1a22ULL;
  for (const auto& [name, type] : sorted) {
    h = Mix64(h ^ HashString(name));
    h = Mix64(h ^ HashString(type));
  }
  return h;
}

TrainingCheckpoint::TrainingCheckpoint(const Graph* graph,
                                       DeviceProgram* executable)
    : graph_(graph), exe_(executable), run_id_(RandomId()) {
  if (exe_ == nullptr) return;
  for (const std::weak_ptr<HostResource>& weak : exe_->host_resources()) {
    std::shared_ptr<HostResource> r = weak.lock();
    if (auto* input = dynamic_cast<CheckpointedInput*>(r.get())) {
      inputs_.push_back({input->checkpoint_name(), weak, input});
    }
  }
}

std::vector<std::string> TrainingCheckpoint::input_names() const {
  std::vector<std::string> names;
  for (const Input& in : inputs_) names.push_back(in.name);
  return names;
}

absl::Status TrainingCheckpoint::CheckSupported(const char* what) const {
  if (exe_ == nullptr || graph_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": no executable or graph"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::shared_ptr<HostResource>>>
TrainingCheckpoint::LiveInputs(const char* what) const {
  std::vector<std::shared_ptr<HostResource>> live;
  std::set<std::string> names;
  for (const Input& in : inputs_) {
    if (!names.insert(in.name).second) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": two inputs of the program are called '", in.name,
          "'; a checkpoint tells them apart by name (give each infeed its "
          "own: IPUInfeedQueue::Create's InfeedOptions::name)"));
    }
    std::shared_ptr<HostResource> r = in.resource.lock();
    if (r == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": input '", in.name, "' was destroyed"));
    }
    live.push_back(std::move(r));
  }
  return live;
}

absl::Status TrainingCheckpoint::AddInputPositions(int replicas,
                                                   Manifest* m) const {
  ASSIGN_OR_RETURN(auto live, LiveInputs("checkpoint"));
  for (size_t i = 0; i < live.size(); ++i) {
    const absl::Status s = inputs_[i].input->SavePosition(replicas, m);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("checkpoint: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointContents> TrainingCheckpoint::Capture(
    int64_t weight_updates) const {
  RETURN_IF_ERROR(CheckSupported("checkpoint"));
  const int replicas = exe_->num_replicas();
  ProcessLink* link = exe_->system()->process_link().get();
  const int processes = link != nullptr ? link->process_count() : 1;
  // This process's first replica's global index.
  const int first = link != nullptr ? link->process_index() * replicas : 0;
  // This process's variables and its replicas' agreement; its refusal is
  // every process's (AgreeAcrossProcesses).
  CheckpointContents c;
  Manifest& m = c.manifest;
  VariableValues values;
  std::map<std::string, std::string> digests;  // Alike on its replicas.
  const absl::Status local = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(values, ReadAllVariables(*exe_, link != nullptr));
    RETURN_IF_ERROR(CheckAtWeightUpdate(*graph_, values, replicas));
    ASSIGN_OR_RETURN(digests,
                     AlikeOnReplicas(values, replicas, link != nullptr));
    return AddInputPositions(replicas, &m);
  }();

  uint64_t id = 0, run_id = run_id_;
  std::set<std::string> shared;  // Alike on every replica of every process.
  if (link != nullptr) {
    RETURN_IF_ERROR(AgreeAcrossProcesses(*link, local, weight_updates, run_id_,
                                         digests, &id, &run_id, &shared));
  } else {
    RETURN_IF_ERROR(local);
    for (const auto& [name, digest] : digests) shared.insert(name);
  }
  m.set_model_fingerprint(
      Fingerprint(AddVariables(values, shared, replicas, first, &c)));
  m.mutable_topology()->set_replicas(replicas * processes);
  m.mutable_topology()->set_processes(processes);
  if (link != nullptr) {
    m.mutable_part()->set_process(link->process_index());
    m.mutable_part()->set_processes(processes);
    m.mutable_part()->set_checkpoint_id(id);
  }
  m.mutable_topology()->set_ipus_per_replica(exe_->ipus_per_replica());
  m.mutable_steps()->set_weight_updates(weight_updates);
  m.set_run_id(run_id);
  AddRandomStreams(*exe_, first, &m);
  return c;
}

absl::StatusOr<std::string> TrainingCheckpoint::Save(
    const std::string& dir, int64_t weight_updates, int keep_last,
    const WriteOptions& options) const {
  ASSIGN_OR_RETURN(CheckpointContents c, Capture(weight_updates));
  if (ProcessLink* link = exe_->system()->process_link().get()) {
    return WriteProcessCheckpoint(dir, weight_updates, c, keep_last, *link,
                                  options);
  }
  return WriteNumberedCheckpoint(dir, weight_updates, &c, keep_last, options);
}

}  // namespace ipuflow::checkpoint
