// torch.distributed.pipelining's schedules as per-IPU orders, and the
// dataflow replay that turns per-IPU orders into a ScheduleTable
// (schedule.h). The orders follow schedules.py: ScheduleGPipe,
// Schedule1F1B, ScheduleInterleaved1F1B (_get_1f1b_rank_ops) and
// ScheduleLoopedBFS, without their idle slots (the replay finds the steps).
#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "pipelining/schedule.h"
#include "pipelining/schedule_internal.h"

namespace ipuflow::pipelining {
namespace internal {
namespace {

std::string MappingText(const std::vector<int>& stage_ipu) {
  return absl::StrCat("[", absl::StrJoin(stage_ipu, ", "), "]");
}

std::string LoopedMapping(int num_stages, int num_ipus) {
  std::vector<int> looped(num_stages);
  for (int s = 0; s < num_stages; ++s) looped[s] = s % num_ipus;
  return MappingText(looped);
}

// GPipe and 1F1B: one stage per IPU.
absl::Status CheckOneStagePerIpu(PipelineSchedule schedule,
                                 const std::vector<int>& stage_ipu) {
  const int n = static_cast<int>(stage_ipu.size());
  // REQUIRES (ResolveMapping): every IPU index below kMaxPipelineIpus.
  std::vector<int> first_on(kMaxPipelineIpus, -1);
  for (int s = 0; s < n; ++s) {
    const int t = first_on[stage_ipu[s]];
    if (t < 0) {
      first_on[stage_ipu[s]] = s;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s runs one stage per IPU (torch.distributed.pipelining, "
        "Schedule%s): device_mapping %s puts stages %d and %d on IPU %d; "
        "give each stage its own IPU, e.g. %s, or use Interleaved1F1B or "
        "LoopedBFS with the looped placement (stage s on IPU s mod p)",
        PipelineScheduleName(schedule), PipelineScheduleName(schedule),
        MappingText(stage_ipu), t, s, stage_ipu[s], LoopedMapping(n, n)));
  }
  return absl::OkStatus();
}

// Interleaved1F1B and LoopedBFS: stage s on IPU s mod p, p the IPU count.
absl::Status CheckLooped(PipelineSchedule schedule,
                         const std::vector<int>& stage_ipu, int num_ipus) {
  const int n = static_cast<int>(stage_ipu.size());
  if (n % num_ipus != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s needs the looped placement of "
        "torch.distributed.pipelining (stage s on IPU s mod p, p IPUs, the "
        "same number of stages on each): device_mapping %s spreads %d stages "
        "over %d IPUs; use a stage count that is a multiple of the IPU count",
        PipelineScheduleName(schedule), MappingText(stage_ipu), n, num_ipus));
  }
  for (int s = 0; s < n; ++s) {
    if (stage_ipu[s] == s % num_ipus) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s needs the looped placement of "
        "torch.distributed.pipelining (stage s on IPU s mod p): "
        "device_mapping %s puts stage %d on IPU %d, not %d; for %d stages on "
        "%d IPUs use %s",
        PipelineScheduleName(schedule), MappingText(stage_ipu), s, stage_ipu[s],
        s % num_ipus, n, num_ipus, LoopedMapping(n, num_ipus)));
  }
  return absl::OkStatus();
}

int Rounds(int micro_batches, int num_ipus) {
  return std::max(1, micro_batches / num_ipus);
}

// torch's rule for ScheduleInterleaved1F1B, with the nearest counts that
// satisfy it.
absl::Status CheckRounds(int micro_batches, int num_ipus) {
  const int rounds = Rounds(micro_batches, num_ipus);
  if (micro_batches % rounds == 0) return absl::OkStatus();
  auto ok = [&](int m) { return m >= 1 && m % Rounds(m, num_ipus) == 0; };
  int below = micro_batches - 1, above = micro_batches + 1;
  while (!ok(below)) --below;
  while (!ok(above)) ++above;
  return absl::InvalidArgumentError(absl::StrFormat(
      "Interleaved 1F1B requires the number of micro-batches "
      "(gradient_accumulation_count) to be a multiple of the number of rounds "
      "(torch.distributed.pipelining, ScheduleInterleaved1F1B): %d "
      "micro-batches on %d IPUs make max(1, %d / %d) = %d rounds; use %d or "
      "%d",
      micro_batches, num_ipus, micro_batches, num_ipus, rounds, below, above));
}

// Schedule1F1B on one stage: min(M, N - s) forwards, then one backward and
// one forward until the forwards are done, then the remaining backwards.
std::vector<WorkItem> OneFOneBOrder(int s, int n, int m) {
  std::vector<WorkItem> order;
  const int warmup = std::min(m, n - s);
  int fwd = 0, bwd = 0;
  while (fwd < warmup) order.push_back({s, Pass::kForward, fwd++});
  while (bwd < m) {
    order.push_back({s, Pass::kBackward, bwd++});
    if (fwd < m) order.push_back({s, Pass::kForward, fwd++});
  }
  return order;
}

// ScheduleInterleaved1F1B on IPU r (_get_1f1b_rank_ops without its idle
// slots): warm-up forwards, then forward + backward pairs, then cool-down
// backwards; forward k of the IPU is of local stage (k / R) mod v, backward
// k of local stage v - 1 - (k / R) mod v.
std::vector<WorkItem> Interleaved1F1BOrder(int r, int p, int v, int m) {
  const int per_round = m / Rounds(m, p);
  const int total = v * m;
  const int warmup = std::min(total, (v - 1) * per_round + 2 * (p - 1 - r));
  std::vector<int> fwd_mb(v, 0), bwd_mb(v, 0);
  std::vector<WorkItem> order;
  auto forward = [&](int k) {
    const int local = (k / per_round) % v;
    order.push_back({local * p + r, Pass::kForward, fwd_mb[local]++});
  };
  auto backward = [&](int k) {
    const int local = v - 1 - (k / per_round) % v;
    order.push_back({local * p + r, Pass::kBackward, bwd_mb[local]++});
  };
  for (int k = 0; k < warmup; ++k) forward(k);
  for (int k = warmup; k < total; ++k) {
    forward(k);
    backward(k - warmup);
  }
  for (int k = total - warmup; k < total; ++k) backward(k);
  return order;
}

// ScheduleLoopedBFS on IPU r: forwards stage by stage (ascending), then
// backwards by descending stage. torch runs a stage's backwards in
// descending micro-batch order; ours ascend, as the FIFO stash needs
// (schedule.h).
std::vector<WorkItem> LoopedBfsOrder(int r, int p, int v, int m) {
  std::vector<WorkItem> order;
  for (int local = 0; local < v; ++local) {
    for (int mb = 0; mb < m; ++mb) {
      order.push_back({local * p + r, Pass::kForward, mb});
    }
  }
  for (int local = v - 1; local >= 0; --local) {
    for (int mb = 0; mb < m; ++mb) {
      order.push_back({local * p + r, Pass::kBackward, mb});
    }
  }
  return order;
}

}  // namespace

absl::Status CheckTorchSchedule(PipelineSchedule schedule,
                                const std::vector<int>& stage_ipu,
                                int micro_batches) {
  const int p = *std::max_element(stage_ipu.begin(), stage_ipu.end()) + 1;
  if (schedule == PipelineSchedule::kGPipe ||
      schedule == PipelineSchedule::k1F1B) {
    return CheckOneStagePerIpu(schedule, stage_ipu);
  }
  if (!IsLoopedSchedule(schedule)) {
    return absl::InvalidArgumentError(
        absl::StrCat(PipelineScheduleName(schedule),
                     " is not a torch.distributed.pipelining schedule"));
  }
  RETURN_IF_ERROR(CheckLooped(schedule, stage_ipu, p));
  if (schedule == PipelineSchedule::kInterleaved1F1B) {
    return CheckRounds(micro_batches, p);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<WorkItem>>> TorchIpuOrders(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& stage_ipu, int micro_batches, bool training) {
  const int n = num_stages, m = micro_batches;
  const int p = *std::max_element(stage_ipu.begin(), stage_ipu.end()) + 1;
  absl::Status checked = CheckTorchSchedule(schedule, stage_ipu, m);
  if (!checked.ok()) {
    return absl::Status(checked.code(),
                        absl::StrCat("MakeSchedule: ", checked.message()));
  }
  std::vector<std::vector<WorkItem>> orders(p);
  if (schedule == PipelineSchedule::kGPipe ||
      schedule == PipelineSchedule::k1F1B) {
    for (int s = 0; s < n; ++s) {
      std::vector<WorkItem>& order = orders[stage_ipu[s]];
      if (schedule == PipelineSchedule::k1F1B) {
        order = OneFOneBOrder(s, n, m);
        continue;
      }
      for (int mb = 0; mb < m; ++mb) order.push_back({s, Pass::kForward, mb});
      for (int mb = 0; mb < m; ++mb) order.push_back({s, Pass::kBackward, mb});
    }
  } else {
    for (int r = 0; r < p; ++r) {
      orders[r] = schedule == PipelineSchedule::kInterleaved1F1B
                      ? Interleaved1F1BOrder(r, p, n / p, m)
                      : LoopedBfsOrder(r, p, n / p, m);
    }
  }
  if (!training) {
    for (std::vector<WorkItem>& order : orders) {
      order.erase(std::remove_if(order.begin(), order.end(),
                                 [](const WorkItem& item) {
                                   return item.pass == Pass::kBackward;
                                 }),
                  order.end());
    }
  }
  return orders;
}

}  // namespace internal

namespace {

using internal::ItemIndex;

constexpr int kMaxListedStuckItems = 20;

// "IPU 1 position 3 (B s1 mb0)".
std::string Place(int ipu, int position, const WorkItem& item) {
  return absl::StrFormat("IPU %d position %d (%s)", ipu, position,
                         WorkItemName(item));
}

absl::Status OrdersError(const std::vector<std::string>& errors) {
  std::vector<std::string> listed(
      errors.begin(),
      errors.begin() + std::min<size_t>(errors.size(), kMaxListedStuckItems));
  if (errors.size() > listed.size()) {
    listed.push_back(
        absl::StrCat("... and ", errors.size() - listed.size(), " more"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "ScheduleFromIpuOrders: ", errors.size(),
      " error(s) in the per-IPU orders:\n  ", absl::StrJoin(listed, "\n  ")));
}

// Shape of the arguments: ranges (as MakeSchedule) and the mapping.
absl::Status CheckOrderArguments(PipelineSchedule kind, int num_stages,
                                 const std::vector<int>& stage_ipu,
                                 int micro_batches, bool training,
                                 size_t num_orders) {
  RETURN_IF_ERROR(internal::CheckScheduleArguments(
      "ScheduleFromIpuOrders", kind, num_stages, micro_batches, training));
  if (static_cast<int>(stage_ipu.size()) != num_stages) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ScheduleFromIpuOrders: stage_ipu has %d entries for %d stages",
        stage_ipu.size(), num_stages));
  }
  RETURN_IF_ERROR(
      internal::ResolveMapping("ScheduleFromIpuOrders", num_stages, stage_ipu)
          .status());
  if (num_orders > static_cast<size_t>(kMaxPipelineIpus)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ScheduleFromIpuOrders: %d per-IPU orders; the limit is %d IPUs",
        num_orders, kMaxPipelineIpus));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The arguments of one ScheduleFromIpuOrders call.
struct Orders {
  int n = 0, mb = 0;
  bool training = false;
  const std::vector<int>& stage_ipu;
  const std::vector<std::vector<WorkItem>>& lists;

  int num_lists() const { return static_cast<int>(lists.size()); }
};

// Every item once, on its stage's IPU, each stage's micro-batches in
// order; fills place[item] = {IPU, position}.
std::vector<std::string> PlacementErrors(
    const Orders& o, std::vector<std::pair<int, int>>& place) {
  const int n = o.n, mb = o.mb;
  std::vector<std::string> errors;
  std::vector<int> last_mb(2 * n, -1);  // Per stage and pass.
  for (int ipu = 0; ipu < o.num_lists(); ++ipu) {
    for (int i = 0; i < static_cast<int>(o.lists[ipu].size()); ++i) {
      const WorkItem& item = o.lists[ipu][i];
      if (!internal::ItemInRange(item, n, mb, o.training)) {
        errors.push_back(absl::StrFormat(
            "%s is not an item of a %s pipeline with %d stages and %d "
            "micro-batches",
            Place(ipu, i, item), o.training ? "training" : "inference", n, mb));
        continue;
      }
      if (o.stage_ipu[item.stage] != ipu) {
        errors.push_back(absl::StrFormat("%s: stage %d runs on IPU %d",
                                         Place(ipu, i, item), item.stage,
                                         o.stage_ipu[item.stage]));
        continue;
      }
      std::pair<int, int>& at = place[ItemIndex(item, n, mb)];
      if (at.first >= 0) {
        errors.push_back(absl::StrFormat("%s is also at position %d",
                                         Place(ipu, i, item), at.second));
        continue;
      }
      at = {ipu, i};
      int& last = last_mb[ItemIndex({item.stage, item.pass, 0}, n, 1)];
      if (item.micro_batch < last) {
        errors.push_back(absl::StrFormat(
            "%s comes after micro-batch %d of its stage and pass: a stage "
            "runs its micro-batches in ascending order (its stash and the "
            "channels between IPUs are FIFOs)",
            Place(ipu, i, item), last));
      }
      last = std::max(last, item.micro_batch);
    }
  }
  for (int m = 0; m < mb; ++m) {
    for (const WorkItem& item : internal::MicroBatchItems(n, m, o.training)) {
      if (place[ItemIndex(item, n, mb)].first >= 0) continue;
      errors.push_back(
          absl::StrFormat("%s is missing (IPU %d has no place "
                          "for it)",
                          WorkItemName(item), o.stage_ipu[item.stage]));
    }
  }
  return errors;
}

// The replay: each IPU runs its next item as soon as its dependencies have
// run, one step after its previous item; an IPU blocked on an item waits in
// waiters[item]. Returns every item's step (-1: never ran); `cursor` ends
// at each IPU's first item that never ran.
std::vector<int> Replay(const Orders& o, std::vector<size_t>& cursor) {
  const int n = o.n, mb = o.mb;
  std::vector<int> step_of(2 * n * mb, -1);
  cursor.assign(o.num_lists(), 0);
  std::vector<int> next_free(o.num_lists(), 0);
  absl::flat_hash_map<int, std::vector<int>> waiters;
  std::deque<int> runnable;
  for (int ipu = 0; ipu < o.num_lists(); ++ipu) runnable.push_back(ipu);
  while (!runnable.empty()) {
    const int ipu = runnable.front();
    runnable.pop_front();
    while (cursor[ipu] < o.lists[ipu].size()) {
      const WorkItem& item = o.lists[ipu][cursor[ipu]];
      int step = next_free[ipu], blocked = -1;
      for (const WorkItem& d : internal::Dependencies(item, n)) {
        const int at = step_of[ItemIndex(d, n, mb)];
        if (at < 0) {
          blocked = ItemIndex(d, n, mb);
          break;
        }
        step = std::max(step, at + 1);
      }
      if (blocked >= 0) {
        waiters[blocked].push_back(ipu);
        break;
      }
      const int index = ItemIndex(item, n, mb);
      step_of[index] = step;
      next_free[ipu] = step + 1;
      ++cursor[ipu];
      auto it = waiters.find(index);
      if (it != waiters.end()) {
        runnable.insert(runnable.end(), it->second.begin(), it->second.end());
        waiters.erase(it);
      }
    }
  }
  return step_of;
}

// One line per IPU stuck at an item, naming the dependency it waits for.
std::vector<std::string> DeadlockErrors(
    const Orders& o, const std::vector<size_t>& cursor,
    const std::vector<int>& step_of,
    const std::vector<std::pair<int, int>>& place) {
  std::vector<std::string> errors;
  for (int ipu = 0; ipu < o.num_lists(); ++ipu) {
    if (cursor[ipu] == o.lists[ipu].size()) continue;
    const int i = static_cast<int>(cursor[ipu]);
    const WorkItem& item = o.lists[ipu][i];
    for (const WorkItem& d : internal::Dependencies(item, o.n)) {
      const int index = ItemIndex(d, o.n, o.mb);
      if (step_of[index] >= 0) continue;
      errors.push_back(absl::StrFormat(
          "deadlock: %s waits for %s (IPU %d position %d, which never runs)",
          Place(ipu, i, item), WorkItemName(d), place[index].first,
          place[index].second));
      break;
    }
  }
  return errors;
}

}  // namespace

absl::StatusOr<ScheduleTable> ScheduleFromIpuOrders(
    PipelineSchedule kind, int num_stages, const std::vector<int>& stage_ipu,
    int micro_batches, bool training,
    const std::vector<std::vector<WorkItem>>& orders) {
  RETURN_IF_ERROR(CheckOrderArguments(kind, num_stages, stage_ipu,
                                      micro_batches, training, orders.size()));
  const Orders o{num_stages, micro_batches, training, stage_ipu, orders};
  const int n = num_stages, mb = micro_batches;
  std::vector<std::pair<int, int>> place(2 * n * mb, {-1, -1});
  std::vector<std::string> errors = PlacementErrors(o, place);
  if (!errors.empty()) return OrdersError(errors);
  std::vector<size_t> cursor;
  const std::vector<int> step_of = Replay(o, cursor);
  errors = DeadlockErrors(o, cursor, step_of, place);
  if (!errors.empty()) return OrdersError(errors);

  ScheduleTable table;
  table.num_stages = n;
  table.num_ipus = *std::max_element(stage_ipu.begin(), stage_ipu.end()) + 1;
  table.micro_batches = mb;
  table.training = training;
  table.kind = kind;
  table.stage_ipu = stage_ipu;
  int num_steps = 0;
  for (int at : step_of) num_steps = std::max(num_steps, at + 1);
  table.steps.resize(num_steps);
  for (const std::vector<WorkItem>& list : orders) {
    for (const WorkItem& item : list) {
      table.steps[step_of[ItemIndex(item, n, mb)]].push_back(item);
    }
  }
  for (std::vector<WorkItem>& step : table.steps) {
    std::sort(step.begin(), step.end(),
              [](const WorkItem& a, const WorkItem& b) {
                return internal::StepOrderKey(a) < internal::StepOrderKey(b);
              });
  }
  return table;
}

}  // namespace ipuflow::pipelining
