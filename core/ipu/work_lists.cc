#include "core/ipu/work_lists.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace ipuflow {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void RunOnDevice(IPUDevice& device, const std::function<void()>& work) {
  if (IPUDevice::Current() == &device) {
    work();
    return;
  }
  Notification done;
  device.Submit([&] {
    work();
    done.Notify();
  });
  done.WaitForNotification();
}

WorkListsRun::WorkListsRun(std::shared_ptr<CancellationManager> c, int num_ipus)
    : cancel(c != nullptr ? std::move(c)
                          : std::make_shared<CancellationManager>()),
      wall0(std::chrono::steady_clock::now()),
      vclock(num_ipus, 0),
      timings(num_ipus) {}

double WorkListsRun::WallSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0)
      .count();
}

void WorkListsRun::Abort(const absl::Status& s, const std::string& who, int ipu,
                         int index) {
  {
    MutexLock l(&mu);
    if (status.ok() || (absl::IsCancelled(status) && !absl::IsCancelled(s))) {
      status = s;
      failed_ipu = absl::IsCancelled(s) ? -1 : ipu;
      failed_index = absl::IsCancelled(s) ? -1 : index;
    }
    cv.SignalAll();
  }
  // Wakes every channel, queue and collective wait of the run (every
  // replica's, when they share `cancel`), saying why.
  cancel->StartCancel(absl::IsCancelled(s) ? s
                                           : absl::CancelledError(absl::StrCat(
                                                 "run cancelled: ", who,
                                                 " failed: ", s.message())));
}

double WorkListsRun::Meet(const std::vector<double>& seconds) {
  double sync = 0, longest = 0;
  for (double c : vclock) sync = std::max(sync, c);
  for (size_t k = 0; k < vclock.size(); ++k) {
    const double more = k < seconds.size() ? seconds[k] : 0;
    vclock[k] = sync + more;
    longest = std::max(longest, more);
  }
  return longest;
}

absl::Status WorkListsRun::Status() {
  MutexLock l(&mu);
  return status;
}

WorkLists::WorkLists(std::vector<IPUDevice*> devices,
                     std::vector<std::vector<WorkListItem>> lists,
                     bool lockstep)
    : devices_(std::move(devices)),
      lists_(std::move(lists)),
      lockstep_(lockstep) {
  for (const auto& list : lists_) {
    for (const WorkListItem& it : list) {
      if (it.step >= static_cast<int>(step_sizes_.size())) {
        step_sizes_.resize(it.step + 1, 0);
      }
      ++step_sizes_[it.step];
    }
  }
}

std::map<std::string, int> WorkLists::Capacities(
    const std::vector<std::vector<WorkListItem>>& lists) {
  std::vector<const WorkListItem*> all;
  for (const auto& list : lists) {
    for (const WorkListItem& it : list) all.push_back(&it);
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const WorkListItem* a, const WorkListItem* b) {
                     return a->order < b->order;
                   });
  std::map<std::string, int> occupancy, peak;
  for (const WorkListItem* it : all) {
    for (const std::string& k : it->pops) --occupancy[k];
    for (const std::string& k : it->pushes) {
      peak[k] = std::max(peak[k], ++occupancy[k]);
    }
  }
  for (auto& [key, cap] : peak) cap = std::max(1, cap);
  return peak;
}

void WorkLists::SizeChannels() {
  channels_.clear();
  for (const auto& [key, cap] : Capacities(lists_)) {
    channels_[key] = std::make_unique<Channel>(std::max(1, cap), key);
  }
  // Once: an item's run looks no channel up by name.
  resolved_.assign(lists_.size(), {});
  for (size_t k = 0; k < lists_.size(); ++k) {
    for (const WorkListItem& it : lists_[k]) {
      ItemChannels c;
      for (const std::string& key : it.pops) c.pops.push_back(channel(key));
      for (const std::string& key : it.pushes) c.pushes.push_back(channel(key));
      resolved_[k].push_back(std::move(c));
    }
  }
}

Channel* WorkLists::channel(const std::string& key) const {
  auto it = channels_.find(key);
  IPU_CHECK(it != channels_.end());
  return it->second.get();
}

void WorkLists::ResetChannels() {
  for (auto& [key, c] : channels_) c->Reset();
}

std::vector<int> WorkLists::CancelChannelsWith(
    const std::shared_ptr<CancellationManager>& cancel) {
  std::vector<int> tokens;
  CancellationManager* cm = cancel.get();
  for (auto& [key, c] : channels_) {
    Channel* ch = c.get();
    tokens.push_back(cm->Register([ch, cm] { ch->Cancel(cm->reason()); }));
  }
  return tokens;
}

void WorkLists::RunList(WorkListsRun& run, int k, const ItemFn& fn,
                        const std::string& who) {
  const std::vector<WorkListItem>& list = lists_[k];
  for (size_t i = 0; i < list.size(); ++i) {
    const WorkListItem& it = list[i];
    double barrier = 0;
    if (lockstep_ && it.step > 0) {
      MutexLock l(&run.mu);
      run.cv.Await(&run.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run.mu) {
        return !run.status.ok() || run.step_remaining[it.step - 1] == 0;
      });
      if (!run.status.ok()) return;
      barrier = run.step_end[it.step - 1];
    }
    const ItemChannels& channels = resolved_[k][i];
    WorkItemClock clock;
    clock.virtual_ready = barrier;
    absl::Status s;
    std::vector<ChannelMessage> popped;
    popped.reserve(channels.pops.size());
    for (Channel* c : channels.pops) {
      absl::StatusOr<ChannelMessage> m = c->Pop();
      if (!m.ok()) {
        s = m.status();
        break;
      }
      clock.virtual_ready = std::max(clock.virtual_ready, m->virtual_time);
      popped.push_back(*std::move(m));
    }
    clock.wall_start = run.WallSeconds();
    std::vector<ItemPush> pushes;
    if (s.ok()) s = fn(it, popped, &pushes, &clock);
    const double vstart = std::max(run.vclock[k], clock.virtual_ready);
    if (s.ok() && pushes.size() != channels.pushes.size()) {
      s = absl::InternalError(
          absl::StrCat("the item function returned ", pushes.size(),
                       " pushes for ", channels.pushes.size(), " channels"));
    }
    for (size_t j = 0; s.ok() && j < pushes.size(); ++j) {
      s = channels.pushes[j]->Push({std::move(pushes[j].values),
                                    pushes[j].timed ? vstart + clock.cpu : 0});
    }
    if (!s.ok()) {
      if (!it.label.empty()) {
        s = absl::Status(s.code(), absl::StrCat(it.label, ": ", s.message()));
      }
      run.Abort(s, who, k, static_cast<int>(i));
      return;
    }
    run.vclock[k] = vstart + clock.cpu;
    run.timings[k].push_back({static_cast<int>(i), vstart, vstart + clock.cpu,
                              clock.wall_start, run.WallSeconds()});
    MutexLock l(&run.mu);
    run.step_end[it.step] = std::max(run.step_end[it.step], vstart + clock.cpu);
    if (--run.step_remaining[it.step] == 0) run.cv.SignalAll();
  }
}

absl::Status WorkLists::Run(WorkListsRun& run, const ItemFn& fn,
                            const std::string& who) {
  if (run.cancel->cancelled()) {
    // Already stopped (a feeding thread's error, another replica's): the
    // root cause if this run has one.
    run.Abort(run.cancel->reason(), who);
    return run.Status();
  }
  {
    MutexLock l(&run.mu);
    run.step_remaining = step_sizes_;
    run.step_end.assign(step_sizes_.size(), 0);
    run.failed_ipu = run.failed_index = -1;
  }
  Mutex done_mu;
  CondVar done_cv;
  int running = 0;  // Counted before the first task can finish.
  int inline_list = -1;
  for (int k = 0; k < num_ipus(); ++k) {
    if (lists_[k].empty()) continue;
    if (IPUDevice::Current() == devices_[k]) {
      inline_list = k;
    } else {
      ++running;
    }
  }
  for (int k = 0; k < num_ipus(); ++k) {
    if (lists_[k].empty() || k == inline_list) continue;
    devices_[k]->Submit([&, k] {
      RunList(run, k, fn, who);
      MutexLock l(&done_mu);
      --running;
      done_cv.SignalAll();
    });
  }
  // The caller is one of the IPUs (a kernel on the replica's first IPU):
  // its list runs here, its thread being busy with this call.
  if (inline_list >= 0) RunList(run, inline_list, fn, who);
  {
    MutexLock l(&done_mu);
    done_cv.Await(&done_mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(done_mu) {
      return running == 0;
    });
  }
  return run.Status();
}

}  // namespace ipuflow
