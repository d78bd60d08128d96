#include "core/checkpoint/training_state.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/hash_mix.h"
#include "core/resource.h"
#include "core/status.h"
#include "optimizers/gradient_accumulation.h"

namespace ipuflow::checkpoint {
namespace {

std::string TypeString(DType dtype, const TensorShape& shape) {
  return absl::StrCat(DTypeName(dtype), shape.DebugString());
}

TensorShape ShapeOf(const TensorEntry& e) {
  TensorShape s;
  for (int64_t d : e.shape()) s.AddDim(d);
  return s;
}

std::string EntryType(const TensorEntry& e) {
  return TypeString(static_cast<DType>(e.dtype()), ShapeOf(e));
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

// Key of a program's run counter in the file: "replica 1|loop:body".
std::string ProgramKey(int replica, const std::string& key) {
  return absl::StrCat("replica ", replica, "|", key);
}

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

const InfeedPosition* FindInfeed(const Manifest& m, const std::string& name) {
  for (const InfeedPosition& p : m.infeeds()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

const DataLoaderPosition* FindLoader(const Manifest& m,
                                     const std::string& name) {
  for (const DataLoaderPosition& p : m.loaders()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

std::string InfeedNames(const Manifest& m) {
  std::vector<std::string> names;
  for (const InfeedPosition& p : m.infeeds()) names.push_back(p.name());
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// Elements the replicas consumed in all; FailedPrecondition unless every
// replica consumed the same count (the round robin is then at replica 0).
absl::StatusOr<int64_t> TotalConsumed(const InfeedPosition& p) {
  int64_t total = 0;
  for (int r = 0; r < p.consumed_size(); ++r) {
    if (p.consumed(r) != p.consumed(0) || p.consumed(r) < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "infeed '", p.name(), "': its replicas consumed ",
          absl::StrJoin(p.consumed(), ", "),
          " elements; a checkpoint resumes only where every replica consumed "
          "the same count (the end of a run)"));
    }
    total += p.consumed(r);
  }
  return total;
}

// The micro-batches of one DataLoader step, and its samples.
int64_t MicroBatchesPerStep(const feeds::DataLoaderOptions& o) {
  return o.device_iterations * o.gradient_accumulation * o.replicas;
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
    : graph_(graph), exe_(executable) {}

void TrainingCheckpoint::AddInfeed(const std::string& name,
                                   feeds::IPUInfeedQueue* queue,
                                   feeds::DataLoader* loader) {
  feeds_.push_back({name, queue, loader, {}});
}

absl::Status TrainingCheckpoint::CheckSupported(const char* what) const {
  if (exe_ == nullptr || graph_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": no executable or graph"));
  }
  if (exe_->system()->process_link() != nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        what,
        ": multi-process runs are not covered yet (docs/CHECKPOINTS.md, "
        "\"Not yet covered\")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointContents> TrainingCheckpoint::Capture(
    int64_t weight_updates) const {
  RETURN_IF_ERROR(CheckSupported("checkpoint"));
  const int replicas = exe_->num_replicas();
  ASSIGN_OR_RETURN(auto values, exe_->ReadVariables(".*"));

  // Only at weight-update boundaries: every accumulation counter at 0.
  for (const Node* n : graph_->collection(optimizers::kAccumulationCounters)) {
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
            "; checkpoints are taken at weight-update boundaries only (run a "
            "multiple of the accumulation's micro-batches before saving)"));
      }
    }
  }

  CheckpointContents c;
  Manifest& m = c.manifest;
  std::vector<TensorEntry> variables;
  for (auto& [name, per] : values) {
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
    for (int r = 0; r < (identical ? 1 : replicas); ++r) {
      TensorEntry* e = m.add_tensors();
      e->set_name(name);
      e->set_replica(identical ? -1 : r);
      e->set_dtype(static_cast<int>(per[r].dtype()));
      for (int64_t d : per[r].shape().dims()) e->add_shape(d);
      c.tensors.push_back(per[r]);
      if (r == 0) variables.push_back(*e);
    }
  }
  m.set_model_fingerprint(Fingerprint(variables));
  m.mutable_topology()->set_replicas(replicas);
  m.mutable_topology()->set_processes(1);
  m.mutable_topology()->set_ipus_per_replica(exe_->ipus_per_replica());
  m.mutable_steps()->set_weight_updates(weight_updates);

  IPUSystem* system = exe_->system();
  const uint64_t epoch = system->floating_point().seed_epoch;
  m.mutable_random()->set_seed(system->floating_point().seed);
  for (int r = 0; r < replicas; ++r) {
    for (const auto& [key, runs] : exe_->program(r).RunCounters(epoch)) {
      ProgramRuns* p = m.mutable_random()->add_programs();
      p->set_key(ProgramKey(r, key));
      p->set_runs(runs);
      if (r == 0 && key.empty()) m.mutable_steps()->set_executions(runs);
    }
  }

  for (const Feed& f : feeds_) {
    std::vector<int64_t> consumed = f.queue->ConsumedPerReplica();
    consumed.resize(replicas, 0);
    int64_t since = 0;  // By this queue.
    InfeedPosition* p = m.add_infeeds();
    p->set_name(f.name);
    for (int r = 0; r < replicas; ++r) {
      since += consumed[r];
      p->add_consumed(consumed[r] +
                      (r < static_cast<int>(f.base.size()) ? f.base[r] : 0));
    }
    if (f.loader == nullptr) continue;
    const feeds::DataLoaderOptions& o = f.loader->options();
    const int64_t per_step = MicroBatchesPerStep(o);
    if (since % per_step != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint: infeed '", f.name, "': the devices consumed ", since,
          " micro-batches of its DataLoader, not a whole number of its steps ("
          "device_iterations(",
          o.device_iterations, ") x gradient_accumulation(",
          o.gradient_accumulation, ") x replicas(", o.replicas,
          ") = ", per_step, "); save after a whole step"));
    }
    const int64_t spe = f.loader->samples_per_epoch();
    const int64_t at = f.loader->start_epoch() * spe +
                       f.loader->start_sample() +
                       since / per_step * f.loader->combined_batch_size();
    const feeds::DataLoaderPlanKey key = f.loader->plan_key();
    DataLoaderPosition* l = m.add_loaders();
    l->set_name(f.name);
    l->set_num_samples(key.num_samples);
    l->set_seed(key.seed);
    l->set_shuffle(key.shuffle);
    l->set_drop_last(key.drop_last);
    l->set_combined_batch_size(key.combined_batch_size);
    l->set_process_count(key.process_count);
    l->set_samples_per_epoch(spe);
    l->set_epoch(at / spe);
    l->set_sample(at % spe);
    l->set_micro_batch_size(o.batch_size);
  }
  return c;
}

absl::StatusOr<std::string> TrainingCheckpoint::Save(
    const std::string& dir, int64_t weight_updates, int keep_last,
    const WriteOptions& options) const {
  ASSIGN_OR_RETURN(CheckpointContents c, Capture(weight_updates));
  return WriteNumberedCheckpoint(dir, weight_updates, &c, keep_last, options);
}

absl::Status TrainingCheckpoint::Restore(const CheckpointContents& c) {
  RETURN_IF_ERROR(CheckSupported("restore"));
  const Manifest& m = c.manifest;
  const int replicas = exe_->num_replicas();
  const int saved_replicas = m.topology().replicas();
  const bool resplit = saved_replicas != replicas;
  if (m.topology().processes() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "restore: the checkpoint is of ", m.topology().processes(),
        " processes; multi-process checkpoints are not covered yet"));
  }
  if (saved_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore: the checkpoint's topology has ", saved_replicas,
                     " replicas"));
  }

  // Variables: every one present, same dtype and shape, per replica.
  auto vars = VariablesOf(exe_);
  std::map<std::string, std::vector<int>> entries;  // name -> tensor indices
  for (int i = 0; i < m.tensors_size(); ++i) {
    entries[m.tensors(i).name()].push_back(i);
  }
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
  if (!missing.empty() || !extra.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore: the checkpoint is of another model: ",
        missing.empty()
            ? ""
            : absl::StrCat("it lacks variable(s) ",
                           absl::StrJoin(missing, ", "), " of this program"),
        !missing.empty() && !extra.empty() ? "; " : "",
        extra.empty()
            ? ""
            : absl::StrCat("it has variable(s) ", absl::StrJoin(extra, ", "),
                           " this program does not")));
  }
  // [name][replica] -> the tensor to assign.
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
    if (resplit) {
      return absl::FailedPreconditionError(absl::StrCat(
          "restore: variable '", name, "' differs between the checkpoint's ",
          saved_replicas, " replicas; it cannot be restored into ", replicas,
          " replicas"));
    }
    for (int i : idx) {
      const int r = m.tensors(i).replica();
      if (r >= replicas) {
        return absl::InvalidArgumentError(
            absl::StrCat("restore: variable '", name, "' of replica ", r,
                         " in a checkpoint of ", saved_replicas, " replicas"));
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
  const uint64_t fingerprint = Fingerprint(seen);
  if (fingerprint != m.model_fingerprint()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore: model fingerprint ", m.model_fingerprint(),
                     " in the checkpoint, ", fingerprint,
                     " for its variables: the manifest was altered"));
  }

  // Random streams: the same programs (replica r takes replica r % R's).
  IPUSystem* system = exe_->system();
  std::vector<std::vector<std::pair<std::string, uint64_t>>> saved_runs(
      saved_replicas);
  for (const ProgramRuns& p : m.random().programs()) {
    const size_t bar = p.key().find('|');
    int r = -1;
    if (bar == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(p.key()).substr(8, bar - 8), &r) ||
        p.key().compare(0, 8, "replica ") != 0 || r < 0 ||
        r >= saved_replicas) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: random-stream key '", p.key(),
          "' does not name a replica of the checkpoint's ", saved_replicas));
    }
    saved_runs[r].push_back({p.key().substr(bar + 1), p.runs()});
  }
  const uint64_t epoch_now = system->floating_point().seed_epoch;
  for (int r = 0; r < replicas; ++r) {
    absl::Status s = exe_->mutable_program(r).RestoreRunCounters(
        saved_runs[r % saved_replicas], epoch_now, /*check_only=*/true);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: the random streams of replica ", r % saved_replicas,
          " were saved from another program: ", s.message()));
    }
  }

  // Feeds: the same names, fresh queues, positions that re-split.
  std::vector<std::vector<int64_t>> bases(feeds_.size());
  std::set<std::string> names;
  for (size_t i = 0; i < feeds_.size(); ++i) {
    const Feed& f = feeds_[i];
    names.insert(f.name);
    const InfeedPosition* p = FindInfeed(m, f.name);
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: the checkpoint has no infeed '", f.name,
                       "' (it has: ", InfeedNames(m), ")"));
    }
    for (int64_t n : f.queue->ConsumedPerReplica()) {
      if (n != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "restore: infeed '", f.name,
            "' has already fed the devices; restore before the first run "
            "(its dataset from ResumeDataset or ResumeDataLoader)"));
      }
    }
    ASSIGN_OR_RETURN(const int64_t total, TotalConsumed(*p));
    if (total % replicas != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "restore: infeed '", f.name, "': ", total,
          " elements consumed do not split over ", replicas, " replicas"));
    }
    bases[i].assign(replicas, total / replicas);
    const DataLoaderPosition* l = FindLoader(m, f.name);
    if ((l != nullptr) != (f.loader != nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: infeed '", f.name, "' was ",
          l != nullptr ? "fed by a DataLoader" : "not fed by a DataLoader",
          " in the checkpoint and is ", f.loader != nullptr ? "" : "not ",
          "here"));
    }
    if (l != nullptr) {
      const int64_t want = l->epoch() * l->samples_per_epoch() + l->sample();
      const int64_t have =
          f.loader->start_epoch() * f.loader->samples_per_epoch() +
          f.loader->start_sample();
      if (want != have) {
        return absl::InvalidArgumentError(absl::StrCat(
            "restore: infeed '", f.name, "': its DataLoader starts at epoch ",
            f.loader->start_epoch(), " sample ", f.loader->start_sample(),
            ", the checkpoint stands at epoch ", l->epoch(), " sample ",
            l->sample(), "; make it with ResumeDataLoader"));
      }
    }
  }
  if (names.size() != feeds_.size()) {
    return absl::InvalidArgumentError("restore: two infeeds share a name");
  }
  for (const InfeedPosition& p : m.infeeds()) {
    if (names.count(p.name()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: the checkpoint has infeed '", p.name(),
                       "', which this run does not (AddInfeed)"));
    }
  }

  // Everything checked: apply.
  if (system->floating_point().seed != m.random().seed()) {
    RETURN_IF_ERROR(system->ResetSeed(m.random().seed()));
  }
  const uint64_t epoch = system->floating_point().seed_epoch;
  for (int r = 0; r < replicas; ++r) {
    RETURN_IF_ERROR(exe_->mutable_program(r).RestoreRunCounters(
        saved_runs[r % saved_replicas], epoch));
  }
  for (auto& [name, per] : vars) {
    for (int r = 0; r < replicas; ++r) {
      // A copy: the file's buffer is not kept alive by the variables.
      RETURN_IF_ERROR(per[r]->Assign(plan[name][r]->Copy()));
    }
  }
  for (size_t i = 0; i < feeds_.size(); ++i) feeds_[i].base = bases[i];
  return absl::OkStatus();
}

absl::StatusOr<feeds::DatasetPtr> ResumeDataset(const CheckpointContents& c,
                                                const std::string& name,
                                                feeds::DatasetPtr dataset) {
  const InfeedPosition* p = FindInfeed(c.manifest, name);
  if (p == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("ResumeDataset: the checkpoint has no infeed '", name,
                     "' (it has: ", InfeedNames(c.manifest), ")"));
  }
  ASSIGN_OR_RETURN(const int64_t total, TotalConsumed(*p));
  return dataset->Skip(total);
}

absl::StatusOr<std::unique_ptr<feeds::DataLoader>> ResumeDataLoader(
    const CheckpointContents& c, const std::string& name,
    feeds::DatasetPtr samples, const feeds::DataLoaderOptions& options) {
  const DataLoaderPosition* l = FindLoader(c.manifest, name);
  if (l == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "ResumeDataLoader: the checkpoint has no DataLoader for infeed '", name,
        "' (infeeds: ", InfeedNames(c.manifest), ")"));
  }
  const std::string where = absl::StrCat("ResumeDataLoader '", name, "': ");
  // Made at the start first, to learn its sizes; then at the position.
  ASSIGN_OR_RETURN(std::unique_ptr<feeds::DataLoader> probe,
                   feeds::DataLoader::Create(samples, options));
  const feeds::DataLoaderPlanKey k = probe->plan_key();
  auto differs = [&](const char* field, auto saved, auto here) -> absl::Status {
    if (saved == here) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        where, field, " is ", saved, " in the checkpoint and ", here,
        " here: the rest of the epoch would be another order"));
  };
  RETURN_IF_ERROR(differs("num_samples", l->num_samples(), k.num_samples));
  RETURN_IF_ERROR(differs("seed", l->seed(), k.seed));
  RETURN_IF_ERROR(differs("shuffle", l->shuffle(), k.shuffle));
  RETURN_IF_ERROR(differs("drop_last", l->drop_last(), k.drop_last));
  RETURN_IF_ERROR(
      differs("process_count", l->process_count(), k.process_count));
  RETURN_IF_ERROR(differs("samples per epoch", l->samples_per_epoch(),
                          probe->samples_per_epoch()));
  const int64_t c_here = probe->combined_batch_size();
  if (l->sample() % c_here != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, "the checkpoint stands at sample ", l->sample(), " of epoch ",
        l->epoch(), ", not a whole number of this loader's steps of ", c_here,
        " samples (it saved with steps of ", l->combined_batch_size(),
        "): the data cannot be split over these replicas there; resume with a "
        "replica count whose step divides ",
        l->sample()));
  }
  probe.reset();
  return feeds::DataLoader::CreateAt(std::move(samples), options, l->epoch(),
                                     l->sample());
}

}  // namespace ipuflow::checkpoint
