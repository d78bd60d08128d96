#include "core/ipu/work_list_program.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ipu/device_program.h"
#include "core/status.h"

namespace ipuflow {

namespace {

int64_t Bytes(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.valid() ? t.TotalBytes() : 0;
  return n;
}

// The replica's IPUs' counters, summed.
struct Counted {
  int64_t ipu_to_ipu = 0, host_to_device = 0, remote = 0;
};
Counted CountersOf(const WorkListProgram& p) {
  Counted c;
  for (int k = 0; k < p.num_ipus(); ++k) {
    const TransferCounters& t = p.device(k).counters();
    c.ipu_to_ipu += t.ipu_to_ipu.load(std::memory_order_relaxed);
    c.host_to_device += t.host_to_device.load(std::memory_order_relaxed);
    c.remote += t.remote_memory.load(std::memory_order_relaxed);
  }
  return c;
}

// What an item's feeds and pushes are read from while it runs.
struct ItemValues {
  const std::vector<Tensor>& inputs;
  const std::vector<ChannelMessage>& popped;
  const std::vector<Tensor>& constants;
  std::vector<Tensor> feeds, fetches;

  const Tensor& operator[](const ItemValue& v) const {
    static const Tensor kNone;
    switch (v.from) {
      case ItemValue::From::kInput:
        return inputs[v.index];
      case ItemValue::From::kPopped:
        return popped[v.message].values[v.index];
      case ItemValue::From::kConstant:
        return constants[v.index];
      case ItemValue::From::kFed:
        return feeds[v.index];
      case ItemValue::From::kFetched:
        return fetches[v.index];
      case ItemValue::From::kNone:
        break;
    }
    return kNone;
  }
};

// values->feeds: each feed's one term, or its terms' sum (the gradients of
// one output from every part reading it), zeros when none holds a value.
absl::Status LayOutFeeds(const std::vector<ItemFeed>& feeds,
                         ItemValues* values) {
  values->feeds.reserve(feeds.size());
  for (const ItemFeed& f : feeds) {
    if (f.terms.size() == 1 && !f.zeros_dtype.has_value()) {
      values->feeds.push_back((*values)[f.terms[0]]);
      continue;
    }
    // The first value as it is (feeds are read-only), a copy to add to
    // once there is a second.
    Tensor sum;
    bool own = false;
    for (const ItemValue& v : f.terms) {
      const Tensor& t = (*values)[v];
      if (!t.valid()) continue;
      if (!sum.valid()) {
        sum = t;
        continue;
      }
      if (!own) {
        sum = sum.Copy();
        own = true;
      }
      RETURN_IF_ERROR(AddInto(&sum, t));
    }
    if (!sum.valid() && f.zeros_dtype.has_value()) {
      sum = Tensor::Filled(*f.zeros_dtype, f.zeros_shape, 0);
    }
    values->feeds.push_back(std::move(sum));
  }
  return absl::OkStatus();
}

absl::Status Refused(const WorkListSpec& spec, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(spec.name, ": ", what));
}

// The lists and their channels: each list item's tag names one item, listed
// once; its push layouts match its channels and its iteration is one of the
// run's; every channel's pushers send the same number of values (returned,
// per channel), as many times per run as it is popped, so that no item
// waits for a message none sends.
absl::StatusOr<std::map<std::string, int>> CheckLists(
    const WorkListSpec& spec) {
  const int num_items = static_cast<int>(spec.items.size());
  std::vector<int> listed(num_items, 0);
  std::map<std::string, int> values, balance, pops;  // Per channel.
  for (const auto& list : spec.lists) {
    for (const WorkListItem& w : list) {
      if (w.tag < 0 || w.tag >= num_items || ++listed[w.tag] > 1) {
        return Refused(
            spec, absl::StrCat("list item tag ", w.tag, " names none of the ",
                               num_items, " items, or one listed before"));
      }
      const ItemProgram& item = spec.items[w.tag];
      const std::string at = absl::StrCat("item '", item.label, "': ");
      if (item.pushes.size() != w.pushes.size()) {
        return Refused(
            spec, absl::StrCat(at, item.pushes.size(), " push layouts for ",
                               w.pushes.size(), " channels"));
      }
      if (item.iteration < 0 || item.iteration >= spec.iterations ||
          item.completes < 0 || item.completes > spec.iterations) {
        return Refused(
            spec,
            absl::StrCat(at, "iteration ", item.iteration, " (of [0, ",
                         spec.iterations, ")) or completes ", item.completes,
                         " (of [0, ", spec.iterations, "]) out of range"));
      }
      for (const std::string& key : w.pops) {
        --balance[key];
        ++pops[key];
      }
      for (size_t j = 0; j < w.pushes.size(); ++j) {
        ++balance[w.pushes[j]];
        const int n = static_cast<int>(item.pushes[j].values.size());
        auto [it, first] = values.emplace(w.pushes[j], n);
        if (!first && it->second != n) {
          return Refused(
              spec, absl::StrCat(at, "pushes ", n, " values to '", w.pushes[j],
                                 "', another item ", it->second));
        }
      }
    }
  }
  for (int t = 0; t < num_items; ++t) {
    if (listed[t] == 0) {
      return Refused(spec, absl::StrCat("item '", spec.items[t].label,
                                        "' is on no IPU's list"));
    }
  }
  // A channel no item pops collects one run's values for the caller: with
  // more runs per Run it would fill up.
  for (const auto& [key, b] : balance) {
    const bool collects = pops.count(key) == 0 && spec.repeats <= 1;
    if ((b != 0 && !collects) || values.count(key) == 0) {
      return Refused(spec, absl::StrCat("channel '", key,
                                        "' is pushed and popped a different "
                                        "number of times per run"));
    }
  }
  return values;
}

// Every feed and push value of list item `w` refers to an input, popped
// message and value (`values`: per channel), constant, feed or IPU that
// exists; a fetch's bound is checked when the programs are bound.
absl::Status CheckValues(const WorkListSpec& spec, const WorkListItem& w,
                         const std::map<std::string, int>& values) {
  const ItemProgram& item = spec.items[w.tag];
  const int fed = static_cast<int>(item.feeds.size());
  const bool runs = !item.role.empty();
  // in_push: a push may carry the run's feeds and fetches.
  auto in_range = [&](const ItemValue& v, bool in_push) {
    switch (v.from) {
      case ItemValue::From::kNone:
        return true;
      case ItemValue::From::kInput:
        return v.index >= 0 && v.index < spec.num_inputs;
      case ItemValue::From::kPopped:
        return v.message >= 0 && v.message < static_cast<int>(w.pops.size()) &&
               v.index >= 0 && v.index < values.at(w.pops[v.message]);
      case ItemValue::From::kConstant:
        return v.index >= 0 &&
               v.index < static_cast<int>(item.constants.size());
      case ItemValue::From::kFed:
        return in_push && runs && v.index >= 0 && v.index < fed;
      case ItemValue::From::kFetched:
        return in_push && runs && v.index >= 0;
    }
    return false;
  };
  bool ok = true;
  for (const ItemFeed& f : item.feeds) {
    ok = ok && (!f.terms.empty() || f.zeros_dtype.has_value());
    for (const ItemValue& v : f.terms) ok = ok && in_range(v, false);
  }
  for (const ItemPushValues& p : item.pushes) {
    for (const ItemValue& v : p.values) ok = ok && in_range(v, true);
    ok = ok && (p.transfer == ItemPushValues::Transfer::kNone ||
                (p.counted_ipu >= 0 &&
                 p.counted_ipu < static_cast<int>(spec.lists.size())));
  }
  if (ok) return absl::OkStatus();
  return Refused(spec, absl::StrCat("item '", item.label,
                                    "': a feed or push refers to a value, "
                                    "message or IPU that does not exist"));
}

// The spec refers only to what exists, so that a run can neither index
// past a value nor wait for a message no item sends.
absl::Status CheckSpec(const WorkListSpec& spec) {
  if (spec.iterations < 1 || spec.repeats < 0 || spec.num_inputs < 0) {
    return Refused(spec,
                   absl::StrCat("iterations ", spec.iterations, ", repeats ",
                                spec.repeats, ", inputs ", spec.num_inputs,
                                ": each must be >= 0 (iterations >= 1)"));
  }
  ASSIGN_OR_RETURN(const auto values, CheckLists(spec));
  for (const auto& list : spec.lists) {
    for (const WorkListItem& w : list) {
      RETURN_IF_ERROR(CheckValues(spec, w, values));
    }
  }
  return absl::OkStatus();
}

// The largest fetch index the item's pushes read, -1 when none.
int LastFetched(const ItemProgram& item) {
  int last = -1;
  for (const ItemPushValues& p : item.pushes) {
    for (const ItemValue& v : p.values) {
      if (v.from == ItemValue::From::kFetched) last = std::max(last, v.index);
    }
  }
  return last;
}

}  // namespace

// The state of one Run, shared by the IPUs' threads.
struct WorkListProgram::RunState : WorkListsRun {
  RunState(std::shared_ptr<CancellationManager> c, int num_ipus)
      : WorkListsRun(std::move(c), num_ipus) {}
  std::vector<Program*> programs;  // By tag; null: none runs.
  std::vector<Program*> epilogue;
  const std::vector<Tensor>* inputs = nullptr;
  double epilogue_seconds = 0;
  // Per IPU (written by its thread only): peak occupancy of observed
  // channels, by channel.
  std::vector<std::map<const Channel*, int>> observed;
  // Per iteration of the run in progress: what its InfeedDequeue node
  // took, settled after the lists ran (SettleTaken); how many iterations
  // completed, which one failed, and whether the epilogue began.
  std::vector<std::unique_ptr<TakenElements>> taken;
  TakenElements* parent_taken = nullptr;
  std::atomic<int> completed{0};
  int failed_iteration ABSL_GUARDED_BY(mu) = -1;
  bool in_epilogue = false;
};

WorkListProgram::~WorkListProgram() = default;

IPUDevice& WorkListProgram::device(int k) const {
  return system_->device(replica_.index * num_ipus() + k);
}

absl::StatusOr<std::unique_ptr<WorkListProgram>> WorkListProgram::Create(
    std::shared_ptr<const WorkListSpec> spec, IPUSystem* system,
    Replica replica) {
  RETURN_IF_ERROR(CheckSpec(*spec));
  std::unique_ptr<WorkListProgram> p(new WorkListProgram());
  p->spec_ = std::move(spec);
  p->system_ = system;
  p->replica_ = replica;
  const int n = p->num_ipus();
  if (system->num_ipus() < (replica.index + 1) * n) {
    return absl::FailedPreconditionError(absl::StrCat(
        p->spec_->name, ": replica ", replica.index, " needs IPUs ",
        replica.index * n, " to ", (replica.index + 1) * n - 1,
        " but the system has ", system->num_ipus()));
  }
  for (int k = 0; k < n; ++k) {
    p->envs_.push_back(IpuRunEnv(*system, replica.index * n + k, replica.index,
                                 replica.count, replica.group));
  }
  // Only the epilogue spans IPUs (an item's nodes are all on its IPU: its
  // env needs no hook): each IPU runs its own shard of it, at the same
  // time as the others where its edges allow.
  p->epilogue_cpu_.assign(n, 0);
  p->epilogue_env_ = p->envs_[0];
  PostToShards(&p->envs_, &p->epilogue_cpu_, &p->epilogue_env_);
  std::vector<IPUDevice*> devices;
  for (int k = 0; k < n; ++k) devices.push_back(&p->device(k));
  p->lists_ = std::make_unique<WorkLists>(std::move(devices), p->spec_->lists,
                                          p->spec_->lockstep);
  p->lists_->SizeChannels();
  // Each observed channel with how many of the item's pushes go to it.
  p->observes_.resize(p->spec_->items.size());
  for (const auto& list : p->spec_->lists) {
    for (const WorkListItem& w : list) {
      for (const std::string& key : p->spec_->items[w.tag].observes) {
        const int pushing =
            static_cast<int>(std::count(w.pushes.begin(), w.pushes.end(), key));
        p->observes_[w.tag].push_back({p->lists_->channel(key), pushing});
      }
    }
  }
  return p;
}

absl::Status WorkListProgram::BindPrograms(SubPrograms& programs,
                                           RunState& rs) const {
  // The roles this spec names, each compiled for it (checked by the
  // number of feeds: what the items lay out).
  std::map<std::string, Program*> found;
  auto find = [&](const std::string& role,
                  int feeds) -> absl::StatusOr<Program*> {
    Program* p = programs.Find(role);
    if (p == nullptr ||
        (feeds >= 0 && static_cast<int>(p->spec().feeds.size()) != feeds)) {
      return absl::FailedPreconditionError(absl::StrCat(
          spec_->name, ": its ", role,
          " program was not compiled for this lowering (compile the frame "
          "with the system that runs it)"));
    }
    return p;
  };
  rs.programs.assign(spec_->items.size(), nullptr);
  for (size_t t = 0; t < spec_->items.size(); ++t) {
    const ItemProgram& item = spec_->items[t];
    if (item.role.empty()) continue;
    Program*& p = found[item.role];
    if (p == nullptr) {
      ASSIGN_OR_RETURN(p, find(item.role, static_cast<int>(item.feeds.size())));
    }
    if (LastFetched(item) >= static_cast<int>(p->spec().fetches.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat(spec_->name, ": item '", item.label, "' pushes fetch ",
                       LastFetched(item), " of its ", item.role,
                       " program, which has ", p->spec().fetches.size()));
    }
    rs.programs[t] = p;
  }
  rs.epilogue.clear();
  for (const std::string& role : spec_->epilogue) {
    ASSIGN_OR_RETURN(Program * p, find(role, -1));
    rs.epilogue.push_back(p);
  }
  return absl::OkStatus();
}

absl::Status WorkListProgram::RunItem(RunState& rs, int repeat,
                                      const WorkListItem& w,
                                      std::vector<ChannelMessage>& popped,
                                      std::vector<ItemPush>* pushes,
                                      WorkItemClock* clock) {
  const ItemProgram& item = spec_->items[w.tag];
  Program* program = rs.programs[w.tag];
  ItemValues values{*rs.inputs, popped, item.constants};
  absl::Status s;
  double cpu = 0;
  if (program != nullptr) {
    s = LayOutFeeds(item.feeds, &values);
    if (s.ok()) {
      const double c0 = ThreadCpuSeconds();
      if (item.records_taken) {
        // Its InfeedDequeue node records the element in the iteration's
        // TakenElements (given back if the iteration does not complete).
        RunEnv env = envs_[w.ipu];
        env.taken = rs.taken[item.iteration].get();
        s = program->Run(env, values.feeds, &values.fetches);
      } else {
        s = program->Run(envs_[w.ipu], values.feeds, &values.fetches);
      }
      cpu = ThreadCpuSeconds() - c0;
    }
  }
  if (!s.ok()) {
    s = absl::Status(s.code(), absl::StrCat(item.label, " of run ", repeat,
                                            ": ", s.message()));
    MutexLock l(&rs.mu);
    // The failing iteration is not given back to the infeed.
    if ((rs.status.ok() || absl::IsCancelled(rs.status)) &&
        !absl::IsCancelled(s)) {
      rs.failed_iteration = item.iteration;
    }
    return s;
  }
  clock->cpu = item.cost >= 0 ? item.cost : cpu;
  for (const ItemPushValues& p : item.pushes) {
    std::vector<Tensor> pushed;
    pushed.reserve(p.values.size());
    for (const ItemValue& v : p.values) pushed.push_back(values[v]);
    if (p.transfer != ItemPushValues::Transfer::kNone) {
      TransferCounters& c = device(p.counted_ipu).counters();
      (p.transfer == ItemPushValues::Transfer::kIpuToIpu ? c.ipu_to_ipu
                                                         : c.host_to_device)
          .fetch_add(Bytes(pushed), std::memory_order_relaxed);
    }
    pushes->push_back({std::move(pushed), p.timed});
  }
  Completed(rs, w, item);
  return absl::OkStatus();
}

void WorkListProgram::Completed(RunState& rs, const WorkListItem& w,
                                const ItemProgram& item) const {
  if (item.completes > 0) {
    int done = rs.completed.load(std::memory_order_relaxed);
    while (done < item.completes &&
           !rs.completed.compare_exchange_weak(done, item.completes)) {
    }
  }
  // Occupancy as it is once this item's pushes are in: only this IPU's
  // items push and pop the observed channels.
  for (const auto& [channel, pushing] : observes_[w.tag]) {
    int& peak = rs.observed[w.ipu][channel];
    peak = std::max(peak, static_cast<int>(channel->size()) + pushing);
  }
}

absl::Status WorkListProgram::RunEpilogue(RunState& rs) {
  std::fill(epilogue_cpu_.begin(), epilogue_cpu_.end(), 0.0);
  absl::Status status;
  double cpu0 = 0;
  RunOnDevice(device(0), [&] {
    const double c0 = ThreadCpuSeconds();
    std::vector<Tensor> values;
    for (Program* p : rs.epilogue) {
      std::vector<Tensor> out;
      status = p->Run(epilogue_env_, values, &out);
      if (!status.ok()) break;
      values = std::move(out);
    }
    cpu0 = ThreadCpuSeconds() - c0;
  });
  RETURN_IF_ERROR(status);
  epilogue_cpu_[0] += cpu0;
  if (spec_->modelled_costs) {
    std::fill(epilogue_cpu_.begin(), epilogue_cpu_.end(), 0.0);
  }
  rs.epilogue_seconds += rs.Meet(epilogue_cpu_);
  return absl::OkStatus();
}

absl::Status WorkListProgram::RunOnce(RunState& rs, int repeat) {
  if (rs.cancel->cancelled()) return rs.cancel->reason();
  {
    MutexLock l(&rs.mu);
    rs.failed_iteration = -1;
  }
  rs.taken.clear();
  for (int m = 0; m < spec_->iterations; ++m) {
    rs.taken.push_back(std::make_unique<TakenElements>(rs.parent_taken));
  }
  rs.completed = 0;
  rs.in_epilogue = false;
  // A run starts when every IPU has finished the previous one (a pipeline
  // drains between runs; after an epilogue the IPUs already met).
  rs.Meet();
  RETURN_IF_ERROR(lists_->Run(
      rs,
      [&rs, this, repeat](const WorkListItem& item,
                          std::vector<ChannelMessage>& popped,
                          std::vector<ItemPush>* pushes, WorkItemClock* clock) {
        return RunItem(rs, repeat, item, popped, pushes, clock);
      },
      absl::StrCat("replica ", replica_.index)));
  RETURN_IF_ERROR(rs.Status());
  if (rs.epilogue.empty()) return absl::OkStatus();
  rs.in_epilogue = true;
  return RunEpilogue(rs);
}

void WorkListProgram::SettleTaken(RunState& rs, bool stopped) {
  int failed;
  {
    MutexLock l(&rs.mu);
    failed = rs.failed_iteration;
  }
  const int n = static_cast<int>(rs.taken.size());
  const int done = !stopped || rs.in_epilogue ? n : rs.completed.load();
  // Consumed, or handed to the enclosing loop iteration, oldest first.
  for (int m = 0; m < done && m < n; ++m) rs.taken[m]->Commit();
  // Back to the front of the stream, newest first: the order is kept.
  for (int m = n - 1; m >= done; --m) {
    if (m == failed) {
      rs.taken[m]->Forget();
    } else {
      rs.taken[m]->GiveBack();
    }
  }
  rs.taken.clear();
}

absl::StatusOr<WorkListRecord> WorkListProgram::Run(
    SubPrograms& programs, const std::vector<Tensor>& inputs,
    std::shared_ptr<CancellationManager> cancel_run, TakenElements* taken) {
  const int n = num_ipus();
  RunState rs(std::move(cancel_run), n);
  RETURN_IF_ERROR(BindPrograms(programs, rs));
  if (static_cast<int>(inputs.size()) != spec_->num_inputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec_->name, ": ", inputs.size(), " argument(s) given for its ",
        spec_->num_inputs, " inputs"));
  }
  rs.inputs = &inputs;
  rs.parent_taken = taken;
  rs.observed.assign(n, {});
  lists_->ResetChannels();
  const Counted before = CountersOf(*this);
  // The feed kernels' waits (infeed, outfeed) and the channels end with the
  // run (the device program's: the system's cancellation cancels it).
  for (RunEnv& env : envs_) env.cancellation = rs.cancel.get();
  epilogue_env_.cancellation = rs.cancel.get();
  std::shared_ptr<CancellationManager> cancel = rs.cancel;
  const std::vector<int> tokens = lists_->CancelChannelsWith(cancel);
  absl::Status status;
  for (int r = 0; r < spec_->repeats && status.ok(); ++r) {
    status = RunOnce(rs, r);
    SettleTaken(rs, /*stopped=*/!status.ok());
  }
  for (RunEnv& env : envs_) env.cancellation = system_->cancellation();
  epilogue_env_.cancellation = system_->cancellation();
  for (int t : tokens) cancel->Unregister(t);
  RETURN_IF_ERROR(status);
  const Counted after = CountersOf(*this);
  WorkListRecord record;
  record.timings = std::move(rs.timings);
  record.vclock = rs.vclock;
  record.wall_seconds = rs.WallSeconds();
  record.epilogue_seconds = rs.epilogue_seconds;
  record.ipu_to_ipu_bytes = after.ipu_to_ipu - before.ipu_to_ipu;
  record.host_to_device_bytes = after.host_to_device - before.host_to_device;
  record.remote_bytes = after.remote - before.remote;
  for (const auto& per_ipu : rs.observed) {
    for (const auto& [channel, peak] : per_ipu) {
      int& p = record.observed[channel->name()];
      p = std::max(p, peak);
    }
  }
  return record;
}

}  // namespace ipuflow
