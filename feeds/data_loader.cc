// DataLoader: option checks, the per-epoch sample plan (split by process and
// leftover rotation), and the ring the async workers fill. The layout and
// the rules are stated in data_loader.h.
#include "feeds/data_loader.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace ipuflow::feeds {
namespace {

// More samples per step than this is a mistake, not a workload (and the
// products below stay far from int64 overflow).
constexpr int64_t kMaxCombined = int64_t{1} << 40;

bool IsAsync(DataLoaderMode m) { return m != DataLoaderMode::kSync; }

std::string Factors(const DataLoaderOptions& o) {
  return absl::StrCat("batch_size(", o.batch_size, ") x device_iterations(",
                      o.device_iterations, ") x (replicas(", o.replicas,
                      ") / input_group_size(", o.input_group_size,
                      ")) x gradient_accumulation(", o.gradient_accumulation,
                      ")");
}

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
  const std::string factors = absl::StrJoin(Divisors(r), ", ");
  if (k > r) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: input_group_size cannot be larger than "
        "replication_factor: input_group_size(", k, ") > replicas(", r,
        "); use input_group_size ", r, " (every replica reads the same "
        "input) or another factor of ", r, ": ", factors));
  }
  if (r % k != 0) {
    int64_t below = 1, above = r;
    for (int64_t d : Divisors(r)) {
      if (d < k) below = d;
      if (d > k && above == r) above = d;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: input_group_size must be a factor of "
        "replication_factor: replicas(", r, ") / input_group_size(", k,
        ") leaves ", r % k, "; use input_group_size ", below, " or ", above,
        " (the factors of ", r, ": ", factors, ")"));
  }
  return absl::OkStatus();
}

// Everything that does not depend on the dataset's size.
absl::Status CheckOptions(const DataLoaderOptions& o) {
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
  if (o.rebatched_worker_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: rebatched_worker_size must be >= 1, or 0 for the "
        "combined batch size; got ", o.rebatched_worker_size));
  }
  if (o.process_index < 0 || o.process_index >= o.process_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: process_index(", o.process_index,
        ") must be in [0, process_count(", o.process_count, "))"));
  }
  RETURN_IF_ERROR(CheckGrouping(o));
  int64_t c = 1;
  for (int64_t f : {o.batch_size, o.device_iterations,
                    o.replicas / o.input_group_size, o.gradient_accumulation,
                    o.process_count}) {
    if (f > kMaxCombined / c) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DataLoader: ", Factors(o), " x process_count(", o.process_count,
          ") exceeds 2^40 samples per step"));
    }
    c *= f;
  }
  c /= o.process_count;
  if (o.mode == DataLoaderMode::kAsync && !o.drop_last &&
      o.rebatched_worker_size == 0 && c > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: The 'drop_last=False' option from the DataLoader only "
        "works if 'rebatched_size' is specified too. Mode kAsync with "
        "drop_last = false and combined batch ", c, " (", Factors(o),
        "): use mode kAsyncRebatched (worker batches of ", c,
        " by default), set rebatched_worker_size (1..", c,
        "), or drop_last = true"));
  }
  if (o.rebatched_worker_size > c) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: The rebatched_worker_size (", o.rebatched_worker_size,
        ") must be <= to the combined batch size (", c, ") = ", Factors(o),
        "; use rebatched_worker_size ", c, " or a divisor of it"));
  }
  return absl::OkStatus();
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

std::string DataLoaderModeName(DataLoaderMode mode) {
  switch (mode) {
    case DataLoaderMode::kSync: return "kSync";
    case DataLoaderMode::kAsync: return "kAsync";
    case DataLoaderMode::kAsyncRebatched: return "kAsyncRebatched";
  }
  return "unknown";
}

std::string ReplicaGroupTypeName(ReplicaGroupType type) {
  return type == ReplicaGroupType::kConsecutive ? "kConsecutive"
                                                : "kOrthogonal";
}

namespace {

// The global order of each epoch and this process's block of it (the rule
// in data_loader.h). Epochs are computed in sequence: each depends on the
// previous one's leftovers. Not thread-safe.
class Planner {
 public:
  Planner(int64_t n, const DataLoaderOptions& o, int64_t per_process)
      : n_(n), o_(o), per_process_(per_process) {
    used_.resize(n);
    std::iota(used_.begin(), used_.end(), 0);
  }

  // This process's sample indices for epoch `e`. REQUIRES: e >= the last
  // epoch passed to Prune.
  std::shared_ptr<const std::vector<int64_t>> Block(int64_t e) {
    while (next_epoch_ <= e) {
      blocks_[next_epoch_] = Advance();
      ++next_epoch_;
    }
    return blocks_.at(e);
  }
  void Prune(int64_t before) {
    blocks_.erase(blocks_.begin(), blocks_.lower_bound(before));
  }

 private:
  std::shared_ptr<const std::vector<int64_t>> Advance() {
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
        order.begin() + p * per_process_,
        order.begin() + (p + 1) * per_process_);
  }
  uint64_t Seed(int64_t e) const {
    return Rng(o_.seed ^ (0x5DEECE66DULL * static_cast<uint64_t>(e + 1)))
        .Next();
  }

  const int64_t n_;
  const DataLoaderOptions o_;
  const int64_t per_process_;
  int64_t next_epoch_ = 0;
  int64_t ring_start_ = 0;
  std::vector<int64_t> used_, left_;
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> blocks_;
};

// The samples, read once and in order from the dataset as batches need
// them (a shuffled epoch may need the last one first), then kept.
// Thread-safe: reads are serialised by mu_.
class SampleStore {
 public:
  explicit SampleStore(DatasetPtr ds) : ds_(std::move(ds)) {}

  absl::StatusOr<Element> Get(int64_t i) {
    MutexLock l(&mu_);
    ReadUpTo(i);
    return samples_[i];
  }
  // Reads everything: the sample count of a dataset of unknown cardinality.
  int64_t Count() {
    MutexLock l(&mu_);
    while (!ended_) ReadUpTo(static_cast<int64_t>(samples_.size()));
    return static_cast<int64_t>(samples_.size()) - 1;  // The end marker.
  }
  void SetExpected(int64_t n) {
    MutexLock l(&mu_);
    expected_ = n;
    if (static_cast<int64_t>(samples_.size()) > n) samples_.resize(n);
  }

 private:
  void ReadUpTo(int64_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (static_cast<int64_t>(samples_.size()) <= i) {
      if (!it_) it_ = ds_->MakeIterator();
      absl::StatusOr<Element> e = ended_ ? absl::OutOfRangeError("end")
                                         : it_->GetNext();
      if (e.status().code() == absl::StatusCode::kOutOfRange) {
        ended_ = true;
        // Not OutOfRange: that would read as the end of an epoch.
        e = absl::FailedPreconditionError(absl::StrCat(
            "DataLoader: the samples dataset ", ds_->DebugString(),
            " ended after ", read_, " samples, but it reported ", expected_));
      } else {
        ++read_;
      }
      samples_.push_back(std::move(e));
    }
  }

  const DatasetPtr ds_;
  Mutex mu_;
  std::unique_ptr<Iterator> it_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::StatusOr<Element>> samples_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  int64_t read_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t expected_ ABSL_GUARDED_BY(mu_) = 0;
};

// Rows [begin, end) of `dst` = rows [from, from + end - begin) of `src`.
void CopyRows(const Element& src, int64_t from, const Element& dst,
              int64_t begin, int64_t end) {
  for (size_t c = 0; c < src.size(); ++c) {
    dst[c].Slice(begin, end).CopyFrom(src[c].Slice(from, from + end - begin));
  }
}

}  // namespace

// Units: what one worker loads at a time, numbered across epochs
// (t = epoch * units_per_epoch + u): a combined batch, or in rebatched mode a
// worker batch. Invariant: take_ <= claim_ <= take_ + capacity, and
// ring_[t % capacity] holds unit t once loaded and until taken.
class DataLoader::Impl {
 public:
  Impl(DatasetPtr samples, const DataLoaderOptions& o, int64_t n, int64_t c,
       std::unique_ptr<SampleStore> store)
      : o_(o),
        samples_(std::move(samples)),
        n_(n),
        c_(c),
        rebatched_(o.mode == DataLoaderMode::kAsyncRebatched ||
                   (o.mode == DataLoaderMode::kAsync && !o.drop_last)),
        store_(std::move(store)) {
    const int64_t p = o.process_count;
    per_process_ = o.drop_last ? n / (c * p) * c
                               : n / p + (o.process_index < n % p ? 1 : 0);
    steps_ = (per_process_ + c - 1) / c;
    unit_ = rebatched_ ? (o.rebatched_worker_size ? o.rebatched_worker_size
                                                  : c)
                       : c;
    units_per_epoch_ = (per_process_ + unit_ - 1) / unit_;
    capacity_ = o.buffer_size * ((c + unit_ - 1) / unit_);
    planner_ = std::make_unique<Planner>(n, o, o.drop_last ? per_process_ : 0);
    MutexLock l(&mu_);
    ring_.resize(capacity_);
    started_ = o.early_preload;
    epoch_limit_ = units_per_epoch_;
  }

  ~Impl() {
    {
      MutexLock l(&mu_);
      stop_ = true;
      cv_.SignalAll();
    }
    for (std::thread& t : workers_) t.join();
  }

  absl::Status StartWorkers() {
    if (!IsAsync(o_.mode)) return absl::OkStatus();
    for (int64_t i = 0; i < o_.num_workers; ++i) {
      ASSIGN_OR_RETURN(std::thread t,
                       StartThread(absl::StrCat("DataLoader worker ", i),
                                   [this] { WorkerLoop(); }));
      workers_.push_back(std::move(t));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Element> Next() {
    if (step_ >= steps_) {
      return absl::OutOfRangeError(absl::StrCat(
          "DataLoader: end of epoch ", epoch_, " (", steps_,
          " steps); call StartNextEpoch() for the next one"));
    }
    absl::StatusOr<Element> out =
        rebatched_ ? Stitch() : GetUnit(epoch_ * units_per_epoch_ + step_);
    ++step_;
    return out;
  }

  void StartNextEpoch() {
    // Units of this epoch already claimed must be taken to free their slots.
    if (IsAsync(o_.mode)) {
      while (next_take_ < (epoch_ + 1) * units_per_epoch_) {
        (void)GetUnit(next_take_);
      }
    }
    carry_.reset();
    carry_unit_ = -1;
    ++epoch_;
    step_ = 0;
    MutexLock l(&mu_);
    epoch_limit_ = (epoch_ + 1) * units_per_epoch_;
    started_ = true;
    planner_->Prune(epoch_);
    cv_.SignalAll();
  }

  std::vector<int64_t> EpochSampleIndices(int64_t e) const {
    Planner fresh(n_, o_, o_.drop_last ? per_process_ : 0);
    return *fresh.Block(e);
  }

  absl::StatusOr<DatasetPtr> ToInfeedDataset();

  int64_t ready_units() const {
    MutexLock l(&mu_);
    int64_t ready = 0;
    for (const auto& slot : ring_) ready += slot.has_value() ? 1 : 0;
    return ready;
  }
  int waiting_workers() const {
    MutexLock l(&mu_);
    return waiting_;
  }

  const DataLoaderOptions o_;
  const DatasetPtr samples_;
  const int64_t n_, c_;
  const bool rebatched_;
  int64_t per_process_, steps_, unit_, units_per_epoch_, capacity_;
  // Consumer state (one consumer thread at a time).
  int64_t epoch_ = 0, step_ = 0;
  int64_t next_take_ = 0;  // Async: the next unit the consumer takes.
  std::optional<absl::StatusOr<Element>> carry_;  // Rebatched: unit carry_unit_.
  int64_t carry_unit_ = -1;

 private:
  bool Claimable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return started_ && claim_ < take_ + capacity_ &&
           (o_.load_indefinitely || claim_ < epoch_limit_);
  }

  void WorkerLoop() {
    for (;;) {
      int64_t t;
      std::shared_ptr<const std::vector<int64_t>> block;
      {
        MutexLock l(&mu_);
        ++waiting_;
        cv_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stop_ || Claimable();
        });
        --waiting_;
        if (stop_) return;
        t = claim_++;
        block = planner_->Block(t / units_per_epoch_);
      }
      absl::StatusOr<Element> unit = LoadUnit(*block, t % units_per_epoch_);
      MutexLock l(&mu_);
      ring_[t % capacity_] = std::move(unit);
      cv_.SignalAll();
    }
  }

  // Unit `t`: loaded here (kSync) or taken from the ring.
  absl::StatusOr<Element> GetUnit(int64_t t) {
    if (!IsAsync(o_.mode)) {
      std::shared_ptr<const std::vector<int64_t>> block;
      {
        MutexLock l(&mu_);
        block = planner_->Block(t / units_per_epoch_);
      }
      return LoadUnit(*block, t % units_per_epoch_);
    }
    MutexLock l(&mu_);
    if (!started_) {
      started_ = true;
      cv_.SignalAll();
    }
    std::optional<absl::StatusOr<Element>>& slot = ring_[t % capacity_];
    cv_.Await(&mu_, [&slot]() { return slot.has_value(); });
    absl::StatusOr<Element> unit = *std::move(slot);
    slot.reset();
    ++take_;
    next_take_ = take_;
    cv_.SignalAll();
    return unit;
  }

  // Samples [u * unit_, ...) of `block`, stacked.
  absl::StatusOr<Element> LoadUnit(const std::vector<int64_t>& block,
                                   int64_t u) {
    const int64_t begin = u * unit_;
    const int64_t end =
        std::min<int64_t>(begin + unit_, static_cast<int64_t>(block.size()));
    std::vector<Element> rows;
    rows.reserve(end - begin);
    for (int64_t i = begin; i < end; ++i) {
      absl::StatusOr<Element> s = store_->Get(block[i]);
      if (!s.ok()) {
        return absl::Status(s.status().code(),
                            absl::StrCat("DataLoader: sample ", block[i], ": ",
                                         s.status().message()));
      }
      rows.push_back(*std::move(s));
    }
    Element out;
    for (size_t c = 0; c < rows[0].size(); ++c) {
      std::vector<Tensor> column;
      column.reserve(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].size() != rows[0].size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "DataLoader: sample ", block[begin + i], " has ",
              rows[i].size(), " components, sample ", block[begin], " has ",
              rows[0].size()));
        }
        column.push_back(rows[i][c]);
      }
      absl::StatusOr<Tensor> stacked = Stack(column);
      if (!stacked.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DataLoader: batching samples ", block[begin], "..",
            block[end - 1], ", component ", c, ": ",
            stacked.status().message()));
      }
      out.push_back(*std::move(stacked));
    }
    return out;
  }

  // Rebatched: rows [step_ * C, ...) of this epoch, from the worker batches
  // that hold them; a worker batch's rows past this step stay in carry_.
  absl::StatusOr<Element> Stitch() {
    const int64_t begin = step_ * c_;
    const int64_t end = std::min(begin + c_, per_process_);
    absl::Status error;
    Element out;
    for (int64_t pos = begin; pos < end;) {
      const int64_t u = pos / unit_;
      if (carry_unit_ != u) {
        carry_ = GetUnit(epoch_ * units_per_epoch_ + u);
        carry_unit_ = u;
      }
      const int64_t unit_end = std::min((u + 1) * unit_, per_process_);
      const int64_t stop = std::min(unit_end, end);
      if (!carry_->ok()) {
        if (error.ok()) error = carry_->status();
      } else if (error.ok()) {
        const Element& src = **carry_;
        if (out.empty()) {
          for (const Tensor& t : src) {
            TensorShape shape = t.shape();
            shape.set_dim(0, end - begin);
            out.emplace_back(t.dtype(), shape);
          }
        }
        CopyRows(src, pos - u * unit_, out, pos - begin, stop - begin);
      }
      pos = stop;
    }
    if (!error.ok()) return error;
    return out;
  }

  std::unique_ptr<SampleStore> store_;
  mutable Mutex mu_;
  CondVar cv_;
  std::unique_ptr<Planner> planner_ ABSL_PT_GUARDED_BY(mu_);
  std::vector<std::optional<absl::StatusOr<Element>>> ring_
      ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  int64_t claim_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t take_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t epoch_limit_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_;
};

absl::StatusOr<DatasetPtr> DataLoader::Impl::ToInfeedDataset() {
  const DataLoaderOptions& o = o_;
  if (per_process_ % c_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader::ToInfeedDataset: Invalid batch dimension: with "
        "drop_last = false the last batch of each epoch has ",
        per_process_ % c_, " samples, but the batch dimension must be a "
        "multiple of ", Factors(o), " = ", c_,
        " for a device program compiled for batch_size(", o.batch_size,
        "); use drop_last = true (drops ", per_process_ % c_,
        " samples per epoch) or a dataset of a multiple of ", c_,
        " samples per process"));
  }
  ElementSpec spec = samples_->spec();
  if (!spec.known()) {
    ASSIGN_OR_RETURN(Element first, store_->Get(0));
    spec = ElementSpec::Of(first);
  }
  for (TensorShape& shape : spec.shapes) shape.InsertDim(0, o.batch_size);
  const int64_t r = o.replicas, g = o.replicas / o.input_group_size;
  const int64_t per_batch = o.device_iterations * o.gradient_accumulation * r;
  auto passes = std::make_shared<int64_t>(0);
  Impl* self = this;
  GeneratorFactory factory = [self, passes, r, g, per_batch]() {
    if ((*passes)++ > 0) self->StartNextEpoch();
    struct State {
      absl::StatusOr<Element> batch;
      int64_t m = 0;
    };
    auto state = std::make_shared<State>();
    state->m = per_batch;
    return [self, state, r, g, per_batch]() -> absl::StatusOr<Element> {
      if (state->m == per_batch) {
        state->batch = self->Next();
        if (state->batch.status().code() == absl::StatusCode::kOutOfRange) {
          return state->batch.status();
        }
        state->m = 0;
      }
      const int64_t m = state->m++;
      // A failed step fails each of its micro-batches: every replica still
      // gets its share, so the round robin stays aligned.
      if (!state->batch.ok()) return state->batch.status();
      const int64_t replica = m % r;
      const int64_t slice =
          self->o_.input_group_type == ReplicaGroupType::kConsecutive
              ? replica / self->o_.input_group_size
              : replica % g;
      const int64_t b = self->o_.batch_size;
      const int64_t row = ((m / r) * g + slice) * b;
      Element micro;
      for (const Tensor& t : *state->batch) micro.push_back(t.Slice(row, row + b));
      return micro;
    };
  };
  return FromGenerator(std::move(spec), std::move(factory));
}

absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(
    DatasetPtr samples, const DataLoaderOptions& options) {
  if (samples == nullptr) {
    return absl::InvalidArgumentError("DataLoader: the samples dataset is null");
  }
  RETURN_IF_ERROR(samples->status());
  RETURN_IF_ERROR(CheckOptions(options));
  const int64_t c = options.batch_size * options.device_iterations *
                    (options.replicas / options.input_group_size) *
                    options.gradient_accumulation;
  auto store = std::make_unique<SampleStore>(samples);
  int64_t n = samples->Cardinality();
  if (n == kInfiniteCardinality) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: the samples dataset ", samples->DebugString(),
        " is infinite; an epoch needs a finite one (Take(n))"));
  }
  if (n == kUnknownCardinality) n = store->Count();
  store->SetExpected(n);
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: The Dataset is empty: ", samples->DebugString()));
  }
  RETURN_IF_ERROR(CheckSize(options, c, n, samples->DebugString()));
  auto impl = std::make_unique<Impl>(samples, options, n, c, std::move(store));
  RETURN_IF_ERROR(impl->StartWorkers());
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(impl)));
}

DataLoader::DataLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DataLoader::~DataLoader() = default;

const DataLoaderOptions& DataLoader::options() const { return impl_->o_; }
int64_t DataLoader::combined_batch_size() const { return impl_->c_; }
int64_t DataLoader::len() const { return impl_->steps_; }
int64_t DataLoader::samples_per_epoch() const { return impl_->per_process_; }
int64_t DataLoader::unused_samples_per_epoch() const {
  return impl_->o_.drop_last
             ? impl_->n_ - impl_->per_process_ * impl_->o_.process_count
             : 0;
}
int64_t DataLoader::num_samples() const { return impl_->n_; }
int64_t DataLoader::epoch() const { return impl_->epoch_; }
absl::StatusOr<Element> DataLoader::Next() { return impl_->Next(); }
void DataLoader::StartNextEpoch() { impl_->StartNextEpoch(); }
std::vector<int64_t> DataLoader::EpochSampleIndices(int64_t e) const {
  return impl_->EpochSampleIndices(e);
}
absl::StatusOr<DatasetPtr> DataLoader::ToInfeedDataset() {
  return impl_->ToInfeedDataset();
}
int64_t DataLoader::ready_units() const { return impl_->ready_units(); }
int DataLoader::waiting_workers() const { return impl_->waiting_workers(); }

}  // namespace ipuflow::feeds
