// DataLoader's option checks and epoch planner (data_loader_plan.h).
#include "feeds/data_loader_plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/option_checks.h"
#include "core/status.h"

namespace ipuflow::feeds::internal {
namespace {

// More samples per step than this is a mistake, not a workload (and the
// products below stay far from int64 overflow).
constexpr int64_t kMaxCombined = int64_t{1} << 40;
// What one host can run: replicas (the largest IPU-POD), processes, ring
// slots (combined batches buffered), worker threads.
constexpr int64_t kMaxReplicas = 1024;
constexpr int64_t kMaxProcesses = int64_t{1} << 16;
constexpr int64_t kMaxBufferSize = 1024;
constexpr int64_t kMaxRingSlots = int64_t{1} << 20;
constexpr int64_t kMaxWorkers = 256;

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> d;
  // Bounded: an error message for an absurd replica count must stay quick.
  for (int64_t i = 1; i <= n && i <= (int64_t{1} << 16); ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

absl::Status CheckGrouping(const DataLoaderOptions& o) {
  const int64_t r = o.replicas, k = o.input_group_size;
  if (o.input_group_type == ReplicaGroupType::kAll) {
    return absl::InvalidArgumentError(
        "DataLoader: input_group_type cannot be All (replicas that all read "
        "the same input are input_group_size = replicas, kConsecutive)");
  }
  const std::string factors = absl::StrJoin(Divisors(r), ", ");
  if (k > r) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: input_group_size cannot be larger than "
                     "replication_factor: input_group_size(",
                     k, ") > replicas(", r, "); use input_group_size ", r,
                     " (every replica reads the same "
                     "input) or another factor of ",
                     r, ": ", factors));
  }
  if (r % k != 0) {
    int64_t below = 1, above = r;
    for (int64_t d : Divisors(r)) {
      if (d < k) below = d;
      if (d > k && above == r) above = d;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: input_group_size must be a factor of "
                     "replication_factor: replicas(",
                     r, ") / input_group_size(", k, ") leaves ", r % k,
                     "; use input_group_size ", below, " or ", above,
                     " (the factors of ", r, ": ", factors, ")"));
  }
  return absl::OkStatus();
}

// A splitmix64 stream: the same permutation on every process and platform
// (std::shuffle's algorithm is the standard library's choice).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  void Shuffle(std::vector<int64_t>* v) {
    for (size_t i = v->size(); i > 1; --i) {
      std::swap((*v)[i - 1], (*v)[Next() % i]);
    }
  }

 private:
  uint64_t state_;
};

}  // namespace

std::string Factors(const DataLoaderOptions& o) {
  return absl::StrCat("batch_size(", o.batch_size, ") x device_iterations(",
                      o.device_iterations, ") x (replicas(", o.replicas,
                      ") / input_group_size(", o.input_group_size,
                      ")) x gradient_accumulation(", o.gradient_accumulation,
                      ")");
}

// Upper bounds and enums (core/option_checks.h): 2^40 buffer slots aborted
// with bad_alloc and 2^61 wrapped the ring's capacity to 0 (SIGFPE); an
// out-of-range mode ran as something else (issue 22).
absl::Status CheckBounds(const DataLoaderOptions& o) {
  OptionChecker check("DataLoaderOptions");
  check.Enum("mode", "DataLoaderMode", o.mode,
             {{DataLoaderMode::kSync, "Sync"},
              {DataLoaderMode::kAsync, "Async"},
              {DataLoaderMode::kAsyncRebatched, "AsyncRebatched"}});
  check.Enum("input_group_type", "ReplicaGroupType", o.input_group_type,
             {{ReplicaGroupType::kAll, "All"},
              {ReplicaGroupType::kConsecutive, "Consecutive"},
              {ReplicaGroupType::kOrthogonal, "Orthogonal"}});
  // Lower bounds are the rules below (with their hints).
  const std::pair<const char*, std::pair<int64_t, int64_t>> bounded[] = {
      {"replicas", {o.replicas, kMaxReplicas}},
      {"input_group_size", {o.input_group_size, kMaxReplicas}},
      {"process_count", {o.process_count, kMaxProcesses}},
      {"buffer_size", {o.buffer_size, kMaxBufferSize}},
      {"num_workers", {o.num_workers, kMaxWorkers}}};
  for (const auto& [name, value_limit] : bounded) {
    if (value_limit.first > value_limit.second) {
      check.Range(name, value_limit.first, 1, value_limit.second);
    }
  }
  return check.status();
}

// Everything that does not depend on the dataset's size.
absl::Status CheckOptions(const DataLoaderOptions& o) {
  RETURN_IF_ERROR(CheckBounds(o));
  const std::pair<const char*, int64_t> positive[] = {
      {"batch_size", o.batch_size},
      {"device_iterations", o.device_iterations},
      {"replicas", o.replicas},
      {"gradient_accumulation", o.gradient_accumulation},
      {"input_group_size", o.input_group_size},
      {"process_count", o.process_count},
      {"buffer_size", o.buffer_size}};
  for (const auto& [name, value] : positive) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DataLoader: ", name, " must be >= 1, got ", value,
          " (combined batch = ", Factors(o), "; use ", name, " = 1)"));
    }
  }
  if (IsAsync(o.mode) && o.num_workers <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: mode ", DataLoaderModeName(o.mode),
        " needs num_workers >= 1, got ", o.num_workers,
        "; use num_workers = 1, or mode kSync to load on the caller's "
        "thread"));
  }
  if (o.unknown_size_limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: unknown_size_limit must be >= 0 (0: no limit of its "
        "own; a dataset of unknown size then needs a Take), got ",
        o.unknown_size_limit));
  }
  if (o.rebatched_worker_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: rebatched_worker_size must be >= 1, or 0 for the "
        "combined batch size; got ",
        o.rebatched_worker_size));
  }
  if (o.process_index < 0 || o.process_index >= o.process_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: process_index(", o.process_index,
                     ") must be in [0, process_count(", o.process_count, "))"));
  }
  RETURN_IF_ERROR(CheckGrouping(o));
  int64_t c = 1;
  for (int64_t f :
       {o.batch_size, o.device_iterations, o.replicas / o.input_group_size,
        o.gradient_accumulation, o.process_count}) {
    if (f > kMaxCombined / c) {
      return absl::InvalidArgumentError(
          absl::StrCat("DataLoader: ", Factors(o), " x process_count(",
                       o.process_count, ") exceeds 2^40 samples per step"));
    }
    c *= f;
  }
  c /= o.process_count;
  if (o.mode == DataLoaderMode::kAsync && !o.drop_last &&
      o.rebatched_worker_size == 0 && c > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: The 'drop_last=False' option from the DataLoader only "
        "works if 'rebatched_size' is specified too. Mode kAsync with "
        "drop_last = false and combined batch ",
        c, " (", Factors(o), "): use mode kAsyncRebatched (worker batches of ",
        c, " by default), set rebatched_worker_size (1..", c,
        "), or drop_last = true"));
  }
  if (o.rebatched_worker_size > c) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: The rebatched_worker_size (", o.rebatched_worker_size,
        ") must be <= to the combined batch size (", c, ") = ", Factors(o),
        "; use rebatched_worker_size ", c, " or a divisor of it"));
  }
  // The ring: buffer_size combined batches of worker batches each.
  const bool rebatched = o.mode == DataLoaderMode::kAsyncRebatched ||
                         (o.mode == DataLoaderMode::kAsync && !o.drop_last);
  const int64_t unit =
      rebatched && o.rebatched_worker_size > 0 ? o.rebatched_worker_size : c;
  OptionChecker check("DataLoaderOptions");
  check.Product({{"buffer_size", o.buffer_size},
                 {"worker batches per combined batch", (c + unit - 1) / unit}},
                kMaxRingSlots, " ring slots");
  return check.status();
}

// The dataset must give every process at least one step.
absl::Status CheckSize(const DataLoaderOptions& o, int64_t c, int64_t n,
                       const std::string& dataset) {
  const int64_t p = o.process_count;
  if (!o.drop_last) {
    if (n >= p) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: the dataset ", dataset, " has ", n,
        " samples, fewer than process_count(", p, "): process ", n,
        " would get none and run 0 steps; use at most ", n, " processes"));
  }
  if (n >= c * p) return absl::OkStatus();
  // For each factor the caller may shrink, the largest value that fits.
  std::vector<std::string> nearby;
  const std::pair<const char*, int64_t> shrinkable[] = {
      {"batch_size", o.batch_size},
      {"device_iterations", o.device_iterations},
      {"gradient_accumulation", o.gradient_accumulation}};
  for (const auto& [name, value] : shrinkable) {
    const int64_t fits = n / (c / value * p);
    if (fits >= 1) nearby.push_back(absl::StrCat(name, " = ", fits));
  }
  if (n >= p) nearby.push_back("drop_last = false");
  return absl::InvalidArgumentError(absl::StrCat(
      "DataLoader: the dataset ", dataset, " has ", n,
      " samples, fewer than one combined batch per process: ", Factors(o),
      " = ", c, " samples per step x process_count(", p, ") = ", c * p,
      "; an epoch would have 0 steps. ",
      nearby.empty()
          ? "Even with those factors at 1 it is too small: use fewer "
            "replicas or processes, or a larger dataset"
          : absl::StrCat("Nearby settings with at least one step: ",
                         absl::StrJoin(nearby, ", "))));
}

SampleOrderPlanner::SampleOrderPlanner(int64_t n, const DataLoaderOptions& o,
                                       int64_t per_process)
    : n_(n), o_(o), per_process_(per_process) {
  used_.resize(n);
  std::iota(used_.begin(), used_.end(), 0);
}

std::shared_ptr<const std::vector<int64_t>> SampleOrderPlanner::Block(
    int64_t e) {
  while (next_epoch_ <= e) {
    blocks_[next_epoch_] = Advance();
    ++next_epoch_;
  }
  return blocks_.at(e);
}

void SampleOrderPlanner::Prune(int64_t before) {
  blocks_.erase(blocks_.begin(), blocks_.lower_bound(before));
}

std::shared_ptr<const std::vector<int64_t>> SampleOrderPlanner::Advance() {
  const int64_t e = next_epoch_, p = o_.process_index;
  std::vector<int64_t> order;
  if (!o_.drop_last) {
    // Every sample; process p: N / P samples, one more if p < N % P.
    order.resize(n_);
    std::iota(order.begin(), order.end(), 0);
    if (o_.shuffle) Rng(Seed(e)).Shuffle(&order);
    const int64_t q = n_ / o_.process_count, r = n_ % o_.process_count;
    const int64_t begin = p * q + std::min(p, r);
    return std::make_shared<const std::vector<int64_t>>(
        order.begin() + begin, order.begin() + begin + q + (p < r ? 1 : 0));
  }
  const int64_t used = per_process_ * o_.process_count;
  if (!o_.shuffle) {
    // A ring walk: epoch e starts where epoch e - 1 stopped.
    order.resize(used);
    for (int64_t i = 0; i < used; ++i) order[i] = (ring_start_ + i) % n_;
    ring_start_ = (ring_start_ + used) % n_;
  } else {
    // used_ / left_: epoch e - 1's used samples and leftovers (epoch -1:
    // all used, none left). The leftovers all come back now.
    Rng rng(Seed(e));
    rng.Shuffle(&used_);
    const int64_t take = used - static_cast<int64_t>(left_.size());
    order = left_;
    order.insert(order.end(), used_.begin(), used_.begin() + take);
    rng.Shuffle(&order);
    left_.assign(used_.begin() + take, used_.end());
    used_ = order;
  }
  return std::make_shared<const std::vector<int64_t>>(
      order.begin() + p * per_process_, order.begin() + (p + 1) * per_process_);
}

uint64_t SampleOrderPlanner::Seed(int64_t e) const {
  return Rng(o_.seed ^ (0x5DEECE66DULL * static_cast<uint64_t>(e + 1))).Next();
}

}  // namespace ipuflow::feeds::internal
