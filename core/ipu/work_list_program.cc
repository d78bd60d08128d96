#include "core/ipu/work_list_program.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

}  // namespace

namespace work_list_internal {

// Where a value is, once its name is resolved.
struct Slot {
  ItemValue::From from = ItemValue::From::kInput;
  int message = 0;  // kPopped: of the item's pops.
  int index = 0;    // In the inputs, the message, constants, feeds, fetches.
};

struct ResolvedFeed {
  std::vector<Slot> terms;
  std::optional<DType> zeros_dtype;
  TensorShape zeros_shape;
};

struct ResolvedItem {
  std::vector<ResolvedFeed> feeds;  // In its program's feed order.
  std::vector<std::vector<Slot>> pushes;
  std::vector<Tensor> constants;
};

}  // namespace work_list_internal

namespace {

using work_list_internal::ResolvedFeed;
using work_list_internal::ResolvedItem;
using work_list_internal::Slot;

// What an item's feeds and pushes are read from while it runs.
struct ItemValues {
  const std::vector<Tensor>& inputs;
  const std::vector<ChannelMessage>& popped;
  const std::vector<Tensor>& constants;
  std::vector<Tensor> feeds, fetches;

  const Tensor& operator[](const Slot& v) const {
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
        break;
    }
    return fetches[v.index];
  }
};

// values->feeds: each feed's one term, or its terms' sum (the gradients of
// one output from every part reading it), zeros when none holds a value.
absl::Status LayOutFeeds(const std::vector<ResolvedFeed>& feeds,
                         ItemValues* values) {
  values->feeds.reserve(feeds.size());
  for (const ResolvedFeed& f : feeds) {
    if (f.terms.size() == 1 && !f.zeros_dtype.has_value()) {
      values->feeds.push_back((*values)[f.terms[0]]);
      continue;
    }
    // The first value as it is (feeds are read-only), a copy to add to
    // once there is a second.
    Tensor sum;
    bool own = false;
    for (const Slot& v : f.terms) {
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

// What each channel's messages carry, by name, in order.
using ChannelValues = std::map<std::string, std::vector<std::string>>;

std::vector<std::string> NamesOf(const ItemPushValues& push) {
  std::vector<std::string> names;
  for (const ItemValue& v : push.values) names.push_back(v.name);
  return names;
}

// The lists and their channels: each list item's tag names one item, listed
// once; its push layouts match its channels and its iteration is one of the
// run's; every channel's pushers send the same values by name (returned,
// per channel), as many times per run as it is popped, so that no item
// waits for a message none sends.
absl::StatusOr<ChannelValues> CheckLists(const WorkListSpec& spec) {
  const int num_items = static_cast<int>(spec.items.size());
  std::vector<int> listed(num_items, 0);
  ChannelValues values;
  std::map<std::string, int> balance, pops;  // Per channel.
  std::map<std::string, std::string> first_pusher;
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
        const std::string& key = w.pushes[j];
        ++balance[key];
        std::vector<std::string> names = NamesOf(item.pushes[j]);
        auto [it, first] = values.emplace(key, names);
        if (first) {
          first_pusher[key] = item.label;
        } else if (it->second != names) {
          return Refused(
              spec,
              absl::StrCat(at, "pushes [", absl::StrJoin(names, ", "), "] to '",
                           key, "', item '", first_pusher[key], "' pushes [",
                           absl::StrJoin(it->second, ", "), "]"));
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

// The position of `name` in `names`, -1 when absent.
int IndexOf(const std::vector<std::string>& names, const std::string& name) {
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

std::vector<std::string> NamesOf(const std::vector<Output>& outputs) {
  std::vector<std::string> names;
  for (const Output& o : outputs) names.push_back(o.name());
  return names;
}

// List item `w`'s names resolved against the run's inputs, the channels
// it pops (`channels`: what each carries), its constants and its
// program's signature; every program feed filled, each by one item feed.
absl::StatusOr<ResolvedItem> Resolve(const WorkListSpec& spec,
                                     const WorkListItem& w,
                                     const ChannelValues& channels) {
  const ItemProgram& item = spec.items[w.tag];
  const std::string at = absl::StrCat("item '", item.label, "'");
  std::vector<std::string> feeds, fetches;
  if (!item.role.empty()) {
    auto sig = spec.programs.find(item.role);
    if (sig == spec.programs.end()) {
      return Refused(spec, absl::StrCat(at, " runs its ", item.role,
                                        " program, which the spec does not "
                                        "describe"));
    }
    feeds = NamesOf(sig->second.feeds);
    fetches = NamesOf(sig->second.fetches);
  }
  ResolvedItem r;
  std::vector<std::string> constants;
  for (const auto& [name, value] : item.constants) {
    constants.push_back(name);
    r.constants.push_back(value);
  }
  // in_push: a push may carry the run's feeds and fetches.
  auto resolve = [&](const ItemValue& v, bool in_push) -> absl::StatusOr<Slot> {
    Slot slot{v.from, 0, -1};
    std::string where;
    switch (v.from) {
      case ItemValue::From::kInput:
        slot.index = IndexOf(spec.inputs, v.name);
        where = "the run's inputs";
        break;
      case ItemValue::From::kPopped: {
        slot.message = IndexOf(w.pops, v.channel);
        where = absl::StrCat("channel '", v.channel, "'");
        if (slot.message < 0) {
          where += ", which it does not pop";
          break;
        }
        slot.index = IndexOf(channels.at(v.channel), v.name);
        break;
      }
      case ItemValue::From::kConstant:
        slot.index = IndexOf(constants, v.name);
        where = "its constants";
        break;
      case ItemValue::From::kFed:
        if (in_push) slot.index = IndexOf(feeds, v.name);
        where = absl::StrCat("its ", in_push ? "" : "own ", "program's feeds");
        break;
      case ItemValue::From::kFetched:
        if (in_push) slot.index = IndexOf(fetches, v.name);
        where =
            absl::StrCat("its ", in_push ? "" : "own ", "program's fetches");
        break;
    }
    if (slot.index >= 0) return slot;
    return Refused(spec,
                   absl::StrCat(at, ": no value '", v.name, "' in ", where));
  };
  // Each program feed from the item feed of its name.
  std::map<std::string, const ItemFeed*> by_name;
  for (const ItemFeed& f : item.feeds) {
    if (IndexOf(feeds, f.feed) < 0) {
      return Refused(spec, absl::StrCat(at, " feeds '", f.feed, "', which its ",
                                        item.role, " program does not have"));
    }
    if (!by_name.emplace(f.feed, &f).second) {
      return Refused(spec, absl::StrCat(at, " feeds '", f.feed, "' twice"));
    }
  }
  for (const std::string& name : feeds) {
    auto f = by_name.find(name);
    if (f == by_name.end() ||
        (f->second->terms.empty() && !f->second->zeros_dtype.has_value())) {
      return Refused(
          spec, absl::StrCat(at, ": its ", item.role, " program's feed '", name,
                             "' is given no value"));
    }
    ResolvedFeed feed{{}, f->second->zeros_dtype, f->second->zeros_shape};
    for (const ItemValue& v : f->second->terms) {
      ASSIGN_OR_RETURN(Slot slot, resolve(v, /*in_push=*/false));
      feed.terms.push_back(slot);
    }
    r.feeds.push_back(std::move(feed));
  }
  for (const ItemPushValues& p : item.pushes) {
    std::vector<Slot>& push = r.pushes.emplace_back();
    for (const ItemValue& v : p.values) {
      ASSIGN_OR_RETURN(Slot slot, resolve(v, /*in_push=*/true));
      push.push_back(slot);
    }
    if (p.transfer != ItemPushValues::Transfer::kNone &&
        (p.counted_ipu < 0 ||
         p.counted_ipu >= static_cast<int>(spec.lists.size()))) {
      return Refused(
          spec, absl::StrCat(at, ": its push counts on IPU ", p.counted_ipu,
                             ", of ", spec.lists.size()));
    }
  }
  return r;
}

// The spec refers only to what exists, so that a run can neither index
// past a value nor wait for a message no item sends: every item resolved,
// by tag.
absl::StatusOr<std::vector<ResolvedItem>> CheckSpec(const WorkListSpec& spec) {
  if (spec.iterations < 1 || spec.repeats < 0) {
    return Refused(spec, absl::StrCat("iterations ", spec.iterations,
                                      ", repeats ", spec.repeats,
                                      ": iterations must be >= 1, repeats "
                                      ">= 0"));
  }
  ASSIGN_OR_RETURN(const ChannelValues channels, CheckLists(spec));
  std::vector<ResolvedItem> resolved(spec.items.size());
  for (const auto& list : spec.lists) {
    for (const WorkListItem& w : list) {
      if (std::set<std::string>(w.pops.begin(), w.pops.end()).size() !=
          w.pops.size()) {
        return Refused(spec, absl::StrCat("item '", spec.items[w.tag].label,
                                          "' pops a channel twice"));
      }
      ASSIGN_OR_RETURN(resolved[w.tag], Resolve(spec, w, channels));
    }
  }
  return resolved;
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
  ASSIGN_OR_RETURN(std::vector<ResolvedItem> resolved, CheckSpec(*spec));
  std::unique_ptr<WorkListProgram> p(new WorkListProgram());
  p->resolved_ = std::move(resolved);
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
  // The roles this spec names, each compiled with the feeds and fetches
  // its names were resolved against.
  std::map<std::string, Program*> found;
  auto find = [&](const std::string& role,
                  const ItemProgramSignature* sig) -> absl::StatusOr<Program*> {
    Program* p = programs.Find(role);
    if (p == nullptr ||
        (sig != nullptr && (p->spec().feeds != sig->feeds ||
                            p->spec().fetches != sig->fetches))) {
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
      ASSIGN_OR_RETURN(p, find(item.role, &spec_->programs.at(item.role)));
    }
    rs.programs[t] = p;
  }
  rs.epilogue.clear();
  for (const std::string& role : spec_->epilogue) {
    ASSIGN_OR_RETURN(Program * p, find(role, nullptr));
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
  const ResolvedItem& resolved = resolved_[w.tag];
  Program* program = rs.programs[w.tag];
  ItemValues values{*rs.inputs, popped, resolved.constants};
  absl::Status s;
  double cpu = 0;
  if (program != nullptr) {
    s = LayOutFeeds(resolved.feeds, &values);
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
  for (size_t j = 0; j < item.pushes.size(); ++j) {
    const ItemPushValues& p = item.pushes[j];
    std::vector<Tensor> pushed;
    pushed.reserve(p.values.size());
    for (const Slot& v : resolved.pushes[j]) pushed.push_back(values[v]);
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
  if (inputs.size() != spec_->inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec_->name, ": ", inputs.size(), " argument(s) given for its ",
        spec_->inputs.size(), " inputs"));
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
