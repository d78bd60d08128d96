// DataLoader: the ring the async workers fill, the stitching of worker
// batches and the infeed view. The samples are kept in sample_store.h, batch
// memory is reused through batch_buffers.h, the checks and the per-epoch plan
// are in data_loader_plan.cc; the rules in data_loader.h.
#include "feeds/data_loader.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "feeds/batch_buffers.h"
#include "feeds/data_loader_plan.h"
#include "feeds/dataset_internal.h"
#include "feeds/sample_store.h"

namespace ipuflow::feeds {

using internal::BufferPool;
using internal::CheckOptions;
using internal::CheckSize;
using internal::Copyable;
using internal::CopyRows;
using internal::Factors;
using internal::IsAsync;
using internal::SameLayout;
using internal::SampleOrderPlanner;
using internal::SampleStore;

// Units: what one worker loads at a time, numbered across epochs
// (t = epoch * units_per_epoch + u): a combined batch, or in rebatched mode a
// worker batch. Invariant: take_ <= claim_ <= take_ + capacity, and
// ring_[t % capacity] holds unit t once loaded and until taken.
class DataLoader::Impl : public std::enable_shared_from_this<Impl> {
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
    unit_ = rebatched_ ? (o.rebatched_worker_size ? o.rebatched_worker_size : c)
                       : c;
    units_per_epoch_ = (per_process_ + unit_ - 1) / unit_;
    capacity_ = o.buffer_size * ((c + unit_ - 1) / unit_);
    // Batches alive at once: the ring's, those being loaded, the consumer's
    // current and previous one (and, rebatched, two stitched ones).
    units_alive_ = (IsAsync(o.mode) ? capacity_ + o.num_workers : 0) + 2 +
                   (rebatched_ ? 2 : 0);
    planner_ = std::make_unique<SampleOrderPlanner>(
        n, o, o.drop_last ? per_process_ : 0);
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
      return absl::OutOfRangeError(
          absl::StrCat("DataLoader: end of epoch ", epoch_, " (", steps_,
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

  // Before the workers start: the consumer stands at step `step` of epoch
  // `epoch` (step < steps_), as if the steps before had been taken.
  void Seek(int64_t epoch, int64_t step) {
    epoch_ = epoch;
    step_ = step;
    start_epoch_ = epoch;
    start_step_ = step;
    const int64_t t = epoch * units_per_epoch_ + step * c_ / unit_;
    next_take_ = t;
    MutexLock l(&mu_);
    claim_ = take_ = t;
    epoch_limit_ = (epoch + 1) * units_per_epoch_;
    planner_->Block(epoch);
    planner_->Prune(epoch);
  }

  std::vector<int64_t> EpochSampleIndices(int64_t e) const {
    SampleOrderPlanner fresh(n_, o_, o_.drop_last ? per_process_ : 0);
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
  int64_t units_alive_;
  // Consumer state (one consumer thread at a time).
  int64_t epoch_ = 0, step_ = 0;
  int64_t start_epoch_ = 0, start_step_ = 0;  // Where CreateAt put it.
  int64_t next_take_ = 0;  // Async: the next unit the consumer takes.
  std::optional<absl::StatusOr<Element>>
      carry_;  // Rebatched: unit carry_unit_.
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

  // Samples [u * unit_, ...) of `block`, stacked: each sample's components
  // are copied straight into the rows of the output (one pass; pooled
  // buffers). A sample that does not match the first one's layout sends
  // the unit to StackUnit, which reports it as it always has.
  absl::StatusOr<Element> LoadUnit(const std::vector<int64_t>& block,
                                   int64_t u) {
    const int64_t begin = u * unit_;
    const int64_t end =
        std::min<int64_t>(begin + unit_, static_cast<int64_t>(block.size()));
    const int64_t n = end - begin;
    std::vector<const absl::StatusOr<Element>*> rows;
    store_->GetMany(absl::MakeConstSpan(block).subspan(begin, n), &rows);
    // Every read error comes before any check (they always have).
    if (!rows.back()->ok()) {
      return SampleError(block[begin + rows.size() - 1], rows.back()->status());
    }
    const Element& first = **rows[0];
    if (!Copyable(first)) return StackUnit(block, begin, end);
    pool_->KeepAtLeast(units_alive_ * first.size());
    Element out;
    std::vector<char*> dst;
    std::vector<size_t> bytes;
    for (const Tensor& t : first) {
      TensorShape shape = t.shape();
      shape.InsertDim(0, n);
      out.push_back(pool_->Get(t.dtype(), shape));
      dst.push_back(static_cast<char*>(out.back().raw_data()));
      bytes.push_back(t.TotalBytes());
    }
    // Samples are scattered over the heap (and a shuffled order visits them
    // at random): each is reached through a chain of pointers (store entry,
    // its Element's tensors, their data), fetched ahead in stages.
    constexpr int64_t kEntryAhead = 12, kTensorsAhead = 6, kDataAhead = 3;
    for (int64_t i = 0; i < n; ++i) {
      if (i + kEntryAhead < n) __builtin_prefetch(rows[i + kEntryAhead]);
      if (i + kTensorsAhead < n) {
        __builtin_prefetch((*rows[i + kTensorsAhead])->data());
      }
      if (i + kDataAhead < n) {
        for (const Tensor& t : **rows[i + kDataAhead]) {
          __builtin_prefetch(t.raw_data());
        }
      }
      const Element& s = **rows[i];
      if (i > 0 && !SameLayout(s, first)) return StackUnit(block, begin, end);
      for (size_t c = 0; c < bytes.size(); ++c) {
        if (bytes[c] == 0) continue;
        std::memcpy(dst[c] + i * bytes[c], s[c].raw_data(), bytes[c]);
      }
    }
    return out;
  }

  static absl::Status SampleError(int64_t id, const absl::Status& s) {
    return absl::Status(
        s.code(), absl::StrCat("DataLoader: sample ", id, ": ", s.message()));
  }

  // LoadUnit by Stack, column by column: the checks (and their order: every
  // sample's read error, then component counts, then each component's
  // dtypes and shapes as Stack names them) for units that fail them, and
  // samples the one-pass copy does not handle.
  absl::StatusOr<Element> StackUnit(const std::vector<int64_t>& block,
                                    int64_t begin, int64_t end) {
    std::vector<const Element*> rows;
    rows.reserve(end - begin);
    for (int64_t i = begin; i < end; ++i) {
      const absl::StatusOr<Element>& s = store_->Get(block[i]);
      if (!s.ok()) return SampleError(block[i], s.status());
      rows.push_back(&*s);
    }
    Element out;
    for (size_t c = 0; c < rows[0]->size(); ++c) {
      std::vector<Tensor> column;
      column.reserve(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i]->size() != rows[0]->size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "DataLoader: sample ", block[begin + i], " has ", rows[i]->size(),
              " components, sample ", block[begin], " has ", rows[0]->size()));
        }
        column.push_back((*rows[i])[c]);
      }
      absl::StatusOr<Tensor> stacked = Stack(column);
      if (!stacked.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DataLoader: batching samples ", block[begin], "..", block[end - 1],
            ", component ", c, ": ", stacked.status().message()));
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
            out.push_back(pool_->Get(t.dtype(), shape));
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
  const std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  mutable Mutex mu_;
  CondVar cv_;
  std::unique_ptr<SampleOrderPlanner> planner_ ABSL_PT_GUARDED_BY(mu_);
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

// The micro-batches of a loader, as a dataset that knows its loader
// (Behind). Its iterators are the generator's.
class DataLoader::InfeedDataset : public internal::UnaryDataset {
 public:
  InfeedDataset(DatasetPtr micro_batches, std::shared_ptr<Impl> impl)
      : UnaryDataset(micro_batches, micro_batches->spec()),
        impl_(std::move(impl)) {}
  int64_t Cardinality() const override { return input()->Cardinality(); }
  std::string DebugString() const override {
    return "DataLoader.ToInfeedDataset()";
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const override {
    return input()->MakeIterator(ctx);
  }
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

std::shared_ptr<const DataLoader> DataLoader::Behind(const Dataset& dataset) {
  for (const Dataset* d = &dataset; d != nullptr; d = d->ordered_input()) {
    if (auto* infeed = dynamic_cast<const InfeedDataset*>(d)) {
      return std::shared_ptr<const DataLoader>(new DataLoader(infeed->impl()));
    }
  }
  return nullptr;
}

absl::StatusOr<DatasetPtr> DataLoader::Impl::ToInfeedDataset() {
  const DataLoaderOptions& o = o_;
  if (per_process_ % c_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader::ToInfeedDataset: Invalid batch dimension: with "
        "drop_last = false the last batch of each epoch has ",
        per_process_ % c_,
        " samples, but the batch dimension must be a "
        "multiple of ",
        Factors(o), " = ", c_, " for a device program compiled for batch_size(",
        o.batch_size, "); use drop_last = true (drops ", per_process_ % c_,
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
  // The dataset shares this state: a loader destroyed before the infeed
  // that reads it leaves the workers running until the dataset goes.
  std::shared_ptr<Impl> self = shared_from_this();
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
      // The input slice is the replica's group (the collectives' rule).
      const int64_t slice =
          ReplicaGroups{self->o_.input_group_type,
                        static_cast<int>(self->o_.input_group_size)}
              .GroupIndex(static_cast<int>(replica), static_cast<int>(r));
      const int64_t b = self->o_.batch_size;
      const int64_t row = ((m / r) * g + slice) * b;
      Element micro;
      for (const Tensor& t : *state->batch)
        micro.push_back(t.Slice(row, row + b));
      return micro;
    };
  };
  return std::make_shared<InfeedDataset>(
      FromGenerator(std::move(spec), std::move(factory)), std::move(self));
}

absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(
    DatasetPtr samples, const DataLoaderOptions& options) {
  return CreateAt(std::move(samples), options, 0, 0);
}

absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::CreateAt(
    DatasetPtr samples, const DataLoaderOptions& options, int64_t epoch,
    int64_t sample) {
  if (samples == nullptr) {
    return absl::InvalidArgumentError(
        "DataLoader: the samples dataset is null");
  }
  RETURN_IF_ERROR(samples->status());
  RETURN_IF_ERROR(CheckOptions(options));
  const int64_t c = options.batch_size * options.device_iterations *
                    (options.replicas / options.input_group_size) *
                    options.gradient_accumulation;
  auto store = std::make_unique<SampleStore>(samples);
  int64_t n = samples->Cardinality();
  if (n == kInfiniteCardinality) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: the samples dataset ", samples->DebugString(),
                     " is infinite; an epoch needs a finite one (Take(n))"));
  }
  if (n == kUnknownCardinality && samples->RepeatsForever()) {
    // Counting it would read it into memory until the OOM killer (issue 22).
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: the samples dataset ", samples->DebugString(),
        " repeats forever (or is empty), its cardinality unknown; an epoch "
        "needs a finite one (Take(n))"));
  }
  if (n == kUnknownCardinality) {
    // Every sample read is kept (SampleStore): never read without a bound.
    const int64_t take = samples->CardinalityBound();
    const int64_t own = options.unknown_size_limit;
    if (take < 0 && own == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DataLoader: the samples dataset ", samples->DebugString(),
          " has an unknown size, and a DataLoader keeps every sample in "
          "memory: give it its size (FromGenerator's cardinality, a Take(n) "
          "last) or set DataLoaderOptions::unknown_size_limit to the most "
          "samples it may read"));
    }
    const int64_t limit = take < 0   ? own
                          : own == 0 ? take
                                     : std::min(take, own);
    n = store->CountUpTo(limit);
    if (n < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DataLoader: the samples dataset ", samples->DebugString(),
          " has an unknown size, more than DataLoaderOptions::"
          "unknown_size_limit = ",
          own,
          " samples; raise the limit if they fit in memory, or give the "
          "dataset its size (FromGenerator's cardinality, a Take(n) last)"));
    }
  }
  store->SetExpected(n);
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: The Dataset is empty: ", samples->DebugString()));
  }
  RETURN_IF_ERROR(CheckSize(options, c, n, samples->DebugString()));
  auto impl = std::make_shared<Impl>(samples, options, n, c, std::move(store));
  if (epoch < 0 || epoch > kMaxStartEpoch || sample < 0 ||
      sample > impl->per_process_ || sample % c != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: cannot start at sample ", sample, " of epoch ", epoch,
        ": the position must be a whole number of steps of ", Factors(options),
        " = ", c, " samples within the epoch's ", impl->per_process_,
        " samples, and the epoch in [0, ", kMaxStartEpoch, "]"));
  }
  if (sample == impl->per_process_) {
    ++epoch;  // The end of an epoch is the start of the next.
    sample = 0;
  }
  if (epoch > 0 || sample > 0) impl->Seek(epoch, sample / c);
  RETURN_IF_ERROR(impl->StartWorkers());
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(impl)));
}

DataLoader::DataLoader(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
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
int64_t DataLoader::start_epoch() const { return impl_->start_epoch_; }
int64_t DataLoader::start_sample() const {
  return impl_->start_step_ * impl_->c_;
}
DataLoaderPlanKey DataLoader::plan_key() const {
  const DataLoaderOptions& o = impl_->o_;
  return {impl_->n_,   o.seed,    o.shuffle,
          o.drop_last, impl_->c_, o.process_count};
}
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
